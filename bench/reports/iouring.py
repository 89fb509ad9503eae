"""bench/iouring's report: the minimal server on io_uring next to the same on epoll, per shape."""
from render import fmt, others_line, ratio_cell, table

VARIANTS = [("epoll", "epoll"), ("uring", "io_uring"), ("uring-fixed", "io_uring, registered descriptors")]
SHAPES = [("close", "`Connection: close`, 50 connections (`wrk -t1 -c50`)"),
          ("ka1000", "1,000 keep-alive connections (`wrk -t2 -c1000`)"),
          ("ka50", "50 keep-alive connections (`wrk -t1 -c50`)")]


def render(rec):
    f = rec.facts
    out = [f"### io_uring or epoll (bench/probes/iouring.c) — {f.get('date')}", "",
           f"- Command: `{rec.command}`, took {f.get('elapsed')}; source {f.get('git')}; {f.get('uname')}, "
           f"{f.get('nproc')} cores; load at start {f.get('load_start')}, at end {f.get('load_end')}; {f.get('versions')}",
           f"- The same minimal HTTP/1.1 server ({f.get('threads')} threads, a SO_REUSEPORT listener each, a fixed 1 KiB "
           "response) on epoll and on io_uring (multishot accept, multishot recv into provided buffers, send and close "
           "on the ring, `SINGLE_ISSUER | DEFER_TASKRUN`; and with registered descriptors), alternating; CPU per request: the server process."]
    out += others_line(rec)
    out.append("")
    rows = []
    for shape, title in SHAPES:
        for k, label in VARIANTS:
            rows.append([title if k == "epoll" else "", label, fmt(rec.median(k, "rps", shape), "rps"),
                         fmt(rec.median(k, "p99", shape), "ms"), fmt(rec.median(k, "cpu_us.server", shape), "us"),
                         fmt(rec.median(k, "cpu_us.client", shape), "us")])
    out += table(["shape", "I/O", "requests/s", "p99 ms", "server CPU µs / request", "wrk CPU µs / request"], rows)
    out += ["÷ epoll (medians; per round in brackets):", ""]
    out += table(["shape", "io_uring: requests/s", "CPU per request", "registered: requests/s", "CPU per request"],
                 [[title] + [cell for k in ("uring", "uring-fixed") for cell in
                             (ratio_cell(rec, k, "epoll", "rps", shape), ratio_cell(rec, k, "epoll", "cpu_us.server", shape))]
                  for shape, title in SHAPES])
    bad = [f"{k} {s} r{r}" for s, _ in SHAPES for k, r, _ in rec.failed([k for k, _ in VARIANTS], s)]
    out.append(f"Runs with errors (left out of the medians): {', '.join(bad)}" if bad else "No run had errors.")
    return out, True
