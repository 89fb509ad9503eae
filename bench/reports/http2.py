"""bench/http2's report: per shape, each server's medians and their ratios to nginx."""
from render import fmt, others_line, ratio, spread, table

SERVERS = [("cp", "callback-proxy"), ("nginx", "nginx"), ("haproxy", "HAProxy"), ("caddy", "Caddy")]
SHAPES = [("1x100", "1 conn × 100 streams"), ("50x10", "50 conns × 10 streams")]
COLUMNS = [("rps", "requests/s", "rps"), ("p99", "p99 ms", "ms"), ("cpu_us.proxy", "CPU µs/request", "us")]


def render(rec):
    f = rec.facts
    out = ["# HTTP/2 over TLS (h2load)", "",
           f"Command: `{rec.command}` — {rec.rounds} rounds × {f.get('duration')} s per shape and server, servers "
           "alternating; medians. Each server has two threads/workers, the same ECDSA P-256 certificate and the "
           "same HTTP/1.1 upstream (nginx `return 200`, 1 KiB). CPU per request: the server's process tree. "
           f"Versions: {f.get('versions')}."]
    out += others_line(rec)
    out.append("")
    for shape, title in SHAPES:
        rows = []
        for k, label in SERVERS:
            row = [label]
            for metric, _, kind in COLUMNS:
                row += [fmt(rec.median(k, metric, shape), kind),
                        fmt(ratio(rec.median(k, metric, shape), rec.median("nginx", metric, shape)), "x")]
            row += [sum(x or 0 for x in rec.per_round(k, "failed", shape, clean=False)),
                    fmt(spread(rec.per_round(k, "rps", shape)), "x")]
            rows.append(row)
        header = ["server"] + [h for _, name, _ in COLUMNS for h in (name, "× nginx")] + ["failed", "spread"]
        out += [f"## {title}", ""] + table(header, rows, ["---"] + ["---:"] * (len(header) - 1))
    return out, True
