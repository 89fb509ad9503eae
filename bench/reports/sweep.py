"""bench/sweep's report and plot: per connection count, each proxy's medians, and each
callback-proxy ÷ the nginx with as many workers as it has loops."""
import os
import subprocess

from render import fmt, others_line, ratio, spread, table

PROXIES = [("cp1", "callback-proxy, 1 loop"), ("cp2", "callback-proxy, 2 loops"),
           ("nginx1", "nginx, 1 worker"), ("nginx2", "nginx, 2 workers")]
PAIRS = [("cp1", "nginx1"), ("cp2", "nginx2")]
METRICS = [("rps", "rps"), ("p99", "ms"), ("cpu_us.proxy", "us")]
LABEL = dict(PROXIES)


def render(rec):
    f, points = rec.facts, f.get("points", "").split() if (f := rec.facts) else []
    out = ["# Cost as work grows (`bench/sweep`)", "",
           f"Command: `{rec.command}`: {rec.rounds} rounds × {f.get('duration')} s per point and proxy, the four "
           "alternating (order rotated each round), one warm-up run each per point; medians of the rounds without "
           "socket errors. Keep-alive `GET /` through each proxy to nginx `return 200` (1 KiB); CPU per request is "
           f"the proxy's process tree. wrk has one thread and shares the {f.get('nproc')} cores with the proxy and the "
           f"upstream. Versions: {f.get('versions')}."]
    out += others_line(rec)
    out += ["", "![requests/s, p99 and CPU per request against connections](sweep.png)", ""]
    rows = [[f"{int(c):,}", label] + [fmt(rec.median(k, m, c), kind) for m, kind in METRICS]
            + [fmt(spread(rec.per_round(k, "rps", c, clean=False)), "x"),
               "; ".join(f"round {r}: {why}" for _, r, why in rec.failed([k], c))]
            for c in points for k, label in PROXIES]
    out += table(["connections", "proxy", "requests/s", "p99 ms", "CPU µs/request", "spread (max ÷ min)",
                  "runs with errors"], rows, ["---:", "---", "---:", "---:", "---:", "---:", "---"])
    out += ["callback-proxy ÷ nginx with as many workers as it has loops (ratio of medians):", ""]
    rows = [[f"{int(c):,}"] + [" / ".join(fmt(ratio(rec.median(o, m, c), rec.median(t, m, c)), "x") for m, _ in METRICS)
                               for o, t in PAIRS] for c in points]
    out += table(["connections"] + [f"{LABEL[o]} ÷ {LABEL[t]}: req/s, p99, CPU/request" for o, t in PAIRS], rows,
                 ["---:"] + ["---"] * len(PAIRS))
    if rec.out_dir:
        plot(rec, points)
    return out, True


def plot(rec, points):
    """sweep.png: requests/s, p99 and CPU per request against connections (gnuplot)."""
    data, script = os.path.join(rec.out_dir, ".sweep.dat"), os.path.join(rec.out_dir, ".sweep.gp")
    with open(data, "w") as f:
        for k, label in PROXIES:
            f.write(f"# {label}\n")
            for c in points:
                f.write(f"{c} " + " ".join("NaN" if (v := rec.median(k, m, c)) is None else f"{v:.3f}"
                                          for m, _ in METRICS) + "\n")
            f.write("\n\n")
    styles = ["lc rgb '#1f77b4' lw 2 pt 7", "lc rgb '#1f77b4' lw 2 pt 5 dt 2",
              "lc rgb '#d62728' lw 2 pt 7", "lc rgb '#d62728' lw 2 pt 5 dt 2"]

    def panel(col, ylabel, title, logy=False):
        series = ", ".join(f"'{data}' index {i} using 1:{col} with linespoints {styles[i]} title '{label}'"
                           for i, (_, label) in enumerate(PROXIES))
        return f"{'' if logy else 'un'}set logscale y\nset ylabel '{ylabel}'\nset title '{title}'\nplot {series}\n"
    xs = [int(c) for c in points]
    with open(script, "w") as f:
        f.write(f"set terminal pngcairo size 1500,480 font 'sans,10'\nset output '{rec.out_dir}/sweep.png'\n"
                "set multiplot layout 1,3 title 'keep-alive GET through each proxy, 2 cores shared with wrk and the "
                f"upstream'\nset logscale x\nset xrange [{min(xs) * 0.7}:{max(xs) * 1.4}]\n"
                f"set xtics ({', '.join(f'{chr(39)}{c:,}{chr(39)} {c}' for c in xs)})\n"
                "set xlabel 'client connections'\nset grid\nset key box opaque\nset key bottom left\nset yrange [0:*]\n"
                + panel(2, "requests/s", "throughput") + "set key top left\nset yrange [*:*]\n"
                + panel(3, "ms", "p99 latency (log scale)", logy=True) + "set yrange [0:*]\n"
                + panel(4, "µs", "CPU per request (the proxy process)") + "unset multiplot\n")
    subprocess.run(["gnuplot", script], check=True)
    os.remove(data)
    os.remove(script)
