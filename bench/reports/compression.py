"""bench/compression's report: callback-proxy's gzip and Brotli next to nginx's gzip, and both uncompressed."""
from render import fmt, ratio_cell, table

KINDS = [("cp-gzip", "callback-proxy, gzip"), ("nginx-gzip", "nginx, gzip"), ("cp-br", "callback-proxy, Brotli"),
         ("cp-identity", "callback-proxy, uncompressed"), ("nginx-identity", "nginx, uncompressed")]


def render(rec):
    f = rec.facts
    out = [f"### Response compression — {f.get('date')}", "",
           f"- Command: `{rec.command}`, took {f.get('elapsed')}; source {f.get('git')}; load at end {f.get('load_end')}",
           f"- One HTML page of {f.get('page_bytes')} bytes (the project's docs as paragraphs) from an nginx upstream; "
           f"callback-proxy (`--loops 2`, gzip level {f.get('level')}, Brotli quality {f.get('brotli', 4)}) and nginx (2 workers, "
           f"`gzip_comp_level {f.get('level')}`) in front; `wrk -t1 -c50` with the Accept-Encoding of each variant, "
           f"the variants alternating. {f.get('versions')}", ""]
    wire = {row[0]: row for row in rec.rows.get("bytes", [])}
    rows = []
    for k, label in KINDS:
        w = wire.get(k)
        rows.append([label, fmt(rec.median(k, "rps"), "rps"), fmt(rec.median(k, "p99"), "ms"),
                     fmt(rec.median(k, "cpu_us.proxy"), "us"), w[2] if w else "?", w[3] if w else "?"])
    out += table(["variant", "requests/s (median)", "p99 ms", "proxy CPU µs / response", "bytes on the wire",
                  "÷ page"], rows)
    out += ["Ratios (medians; per round in brackets):", ""]
    out += table(["", "throughput", "CPU per response"],
                 [["callback-proxy gzip ÷ nginx gzip", ratio_cell(rec, "cp-gzip", "nginx-gzip", "rps"),
                   ratio_cell(rec, "cp-gzip", "nginx-gzip", "cpu_us.proxy")],
                  ["callback-proxy Brotli ÷ nginx gzip", ratio_cell(rec, "cp-br", "nginx-gzip", "rps"),
                   ratio_cell(rec, "cp-br", "nginx-gzip", "cpu_us.proxy")],
                  ["callback-proxy uncompressed ÷ nginx uncompressed", ratio_cell(rec, "cp-identity", "nginx-identity", "rps"),
                   ratio_cell(rec, "cp-identity", "nginx-identity", "cpu_us.proxy")]])
    bad = [f"{k} r{r}" for k, r, _ in rec.failed([k for k, _ in KINDS])]
    out.append(f"Runs with errors (left out of the medians): {', '.join(bad)}" if bad else "No run had errors.")
    return out, True
