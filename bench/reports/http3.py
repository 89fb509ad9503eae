"""bench/http3's report: per shape, each variant's medians and their ratios to Caddy over HTTP/3."""
from render import fmt, others_line, ratio, spread, table

VARIANTS = [("cp", "callback-proxy h3"), ("caddy", "Caddy h3"), ("cp-h2", "callback-proxy h2")]
SHAPES = [("1x100", "1 conn × 100 streams"), ("50x10", "50 conns × 10 streams"), ("1MiB-4x4", "1 MiB downloads, 4 conns × 4 streams")]
COLUMNS = [("rps", "requests/s", "rps"), ("p99", "p99 ms", "ms"), ("cpu_us.proxy", "CPU µs/request", "us")]


def render(rec):
    f = rec.facts
    out = ["# HTTP/3 (h3load) next to Caddy, and HTTP/2 (h2load) for comparison", "",
           f"Command: `{rec.command}` — {rec.rounds} rounds × {f.get('duration')} s per shape and variant, variants "
           "alternating; medians. Both servers have two threads (callback-proxy `--loops 2`, Caddy `GOMAXPROCS=2`), "
           "the same ECDSA P-256 certificate and the same HTTP/1.1 upstream (nginx: `return 200`, 1 KiB; a 1 MiB "
           "file). HTTP/3 load: bench/probes/h3load.c (one thread, ngtcp2 + nghttp3); HTTP/2 load: h2load. CPU per "
           f"request: the server's process tree. Versions: {f.get('versions')}."]
    out += others_line(rec)
    out.append("")
    for shape, title in SHAPES:
        rows = []
        for k, label in VARIANTS:
            row = [label]
            for metric, _, kind in COLUMNS:
                row += [fmt(rec.median(k, metric, shape), kind),
                        fmt(ratio(rec.median(k, metric, shape), rec.median("caddy", metric, shape)), "x")]
            row += [sum(x or 0 for x in rec.per_round(k, "failed", shape, clean=False)),
                    fmt(spread(rec.per_round(k, "rps", shape)), "x")]
            rows.append(row)
        header = ["variant"] + [h for _, name, _ in COLUMNS for h in (name, "× Caddy h3")] + ["failed", "spread"]
        out += [f"## {title}", ""] + table(header, rows, ["---"] + ["---:"] * (len(header) - 1))
    idle = {k: rec.run(k, 1, "idle").get("rss_kib_per_connection") for k, _ in VARIANTS[:2]}
    rows = [[label, fmt(idle[k], "kib"), fmt(ratio(idle[k], idle["caddy"]), "x")] for k, label in VARIANTS[:2]]
    out += ["## Memory an idle HTTP/3 connection holds", "",
            f"{f.get('idle', 1000)} connections, each after one request, open and quiet, on the freshly started "
            "servers (once, before the load above); the server's RSS while they are open minus before, per connection."]
    out += [""] + table(["server", "KiB per connection", "× Caddy"], rows, ["---", "---:", "---:"])
    return out, True
