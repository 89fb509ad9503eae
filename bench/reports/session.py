"""bench/session's report: plain proxying next to session mode without and with a cookie."""
from render import fmt, ratio_cell, table

KINDS = [("plain", "plain proxying"), ("session-anonymous", "session mode, no cookie, `GET /`"),
         ("session-cookie", "session mode, session cookie, `GET /private/page`")]


def render(rec):
    f = rec.facts
    out = [f"### Session mode — {f.get('date')}", "",
           f"- Command: `{rec.command}`, took {f.get('elapsed')}; source {f.get('git')}; load at end {f.get('load_end')}",
           f"- The session cookie: {f.get('cookie_bytes')} bytes (a web sign-in's, id_token claims, no access token)",
           "- Two callback-proxy processes (`--loops 2`, access log off) in front of one nginx `return 200` "
           "(1 KiB); `wrk -t1 -c50`, the three variants alternating", ""]
    rows = [[label, fmt(rec.median(k, "rps"), "rps"), fmt(rec.median(k, "p50"), "ms"), fmt(rec.median(k, "p99"), "ms"),
             fmt(rec.median(k, "cpu_us.proxy"), "us"),
             " ".join(fmt(x, "cores") for x in rec.per_round(k, "other_cores", clean=False))] for k, label in KINDS]
    out += table(["variant", "requests/s (median)", "p50 ms", "p99 ms", "proxy CPU µs / request",
                  "other processes, cores"], rows)
    out += ["Ratios to plain proxying (medians; per round in brackets):", ""]
    out += table(["variant", "throughput", "CPU per request"],
                 [[label, ratio_cell(rec, k, "plain", "rps"), ratio_cell(rec, k, "plain", "cpu_us.proxy")]
                  for k, label in KINDS[1:]])
    bad = [f"{k} r{r}" for k, r, _ in rec.failed([k for k, _ in KINDS])]
    out.append(f"Runs with errors (left out of the medians): {', '.join(bad)}" if bad else "No run had errors.")
    return out, True
