"""bench/static's report: callback-proxy's static files next to nginx's (sendfile, gzip_static), per file size."""
from render import fmt, ratio_cell, table

SIZES = [("1k", "1 KiB"), ("64k", "64 KiB"), ("1m", "1 MiB"), ("64k-gz", "64 KiB, its .gz")]


def render(rec):
    f = rec.facts
    out = [f"### Static files — {f.get('date')}", "",
           f"- Command: `{rec.command}`, took {f.get('elapsed')}; source {f.get('git')}; load at end {f.get('load_end')}",
           "- The same files (the project's docs as CSS, each with a `gzip -9` sibling) from callback-proxy "
           "(`--loops 2`, `static: { root }`) and nginx (2 workers, `sendfile on; gzip_static on;`); "
           f"`wrk -t1 -c{f.get('conns')}` keep-alive, the variants alternating. {f.get('versions')}", ""]
    wire = {row[0]: row for row in rec.rows.get("bytes", [])}
    rows = []
    for key, label in SIZES:
        for server, name in (("cp", "callback-proxy"), ("nginx", "nginx")):
            k = f"{server}-{key}"
            w = wire.get(k)
            rows.append([f"{name}, {label}", fmt(rec.median(k, "rps"), "rps"), fmt(rec.median(k, "p99"), "ms"),
                         fmt(rec.median(k, "cpu_us.proxy"), "us"), w[2] if w else "?"])
    out += table(["variant", "requests/s (median)", "p99 ms", "server CPU µs / response", "body bytes"], rows)
    out += ["callback-proxy ÷ nginx (medians; per round in brackets):", ""]
    out += table(["file", "throughput", "CPU per response"],
                 [[label, ratio_cell(rec, f"cp-{key}", f"nginx-{key}", "rps"),
                   ratio_cell(rec, f"cp-{key}", f"nginx-{key}", "cpu_us.proxy")] for key, label in SIZES])
    bad = [f"{k} r{r}" for k, r, _ in rec.failed([f"{s}-{key}" for key, _ in SIZES for s in ("cp", "nginx")])]
    out.append(f"Runs with errors (left out of the medians): {', '.join(bad)}" if bad else "No run had errors.")
    return out, True
