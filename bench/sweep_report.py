#!/usr/bin/env python3
"""bench/sweep's runs, report and plot (stdlib + bench/benchlib.py + gnuplot).

For each connection count: one unmeasured warm-up run per proxy, then ROUNDS rounds in which
the proxies alternate (the order rotates every round), each a `wrk -t1 -cN --latency` run
measured with benchlib's CPU accounting. Writes RESULTS/sweep.md (medians over rounds, the
ratios of each callback-proxy to the nginx with as many workers as it has loops) and
RESULTS/sweep.png (requests/s, p99 and CPU per request against connections)."""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import load_run, med, ratio, run_measured, spread  # noqa: E402

WARMUP_S = 2


def wrk_argv(port, conns, duration):
    # --timeout: at 9,500 connections a request waits ~0.2 s in the queue; wrk's default 2 s
    # timeout would count the slow tail as errors instead of as latency.
    return ["wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--latency", "--timeout", "10s",
            f"http://127.0.0.1:{port}/"]


def one_run(tmp, name, port, pid, conns, duration, tag, upstream_pid):
    out = os.path.join(tmp, f"wrk-{slug(name)}-c{conns}-{tag}.txt")
    # The upstream is measured too, so that "other processes" is only what else ran.
    run_measured(wrk_argv(port, conns, duration), out, {name: pid, "upstream": upstream_pid})
    r = load_run(out)
    cpu = (r.get("cpu") or {}).get("cpu_s", {}).get(name)
    n = r.get("requests")
    return {
        "ok": r["ok"], "errors": r["errors"], "rps": r.get("rps"), "p99": r.get("p99"),
        "cpu_us": cpu / n * 1e6 if cpu and n else None,
        "other": (r.get("cpu") or {}).get("other_cpu_cores"),
    }


def slug(name):
    return "".join(ch if ch.isalnum() else "-" for ch in name).strip("-")


def fmt(v, spec):
    return format(v, spec) if v is not None else "–"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--conns", required=True, help="space-separated connection counts")
    ap.add_argument("--proxy", action="append", required=True, metavar="NAME=PORT=PID",
                    help="callback-proxy with 1 and 2 loops, then nginx with 1 and 2 workers")
    ap.add_argument("--upstream-pid", type=int, required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--versions", default="")
    a = ap.parse_args()
    proxies = [(n, int(p), int(pid)) for n, p, pid in (s.rsplit("=", 2) for s in a.proxy)]
    points = [int(c) for c in a.conns.split()]
    runs = {(p[0], c): [] for p in proxies for c in points}
    noise = []
    for c in points:
        for name, port, pid in proxies:
            print(f"== {c} connections: warm-up {name}", file=sys.stderr)
            subprocess.call(wrk_argv(port, c, WARMUP_S), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for r in range(a.rounds):
            order = proxies[r % len(proxies):] + proxies[:r % len(proxies)]
            for name, port, pid in order:
                print(f"== {c} connections, round {r + 1}: {name}", file=sys.stderr)
                res = one_run(a.tmp, name, port, pid, c, a.duration, f"r{r}", a.upstream_pid)
                runs[(name, c)].append(res)
                noise.append(res["other"])

    def medians(name, c):
        good = [x for x in runs[(name, c)] if x["ok"]]
        return {k: med([x[k] for x in good if x[k] is not None]) if good else None
                for k in ("rps", "p99", "cpu_us")}

    table = {(p[0], c): medians(p[0], c) for p in proxies for c in points}
    pairs = [(proxies[0][0], proxies[2][0]), (proxies[1][0], proxies[3][0])]

    os.makedirs(a.results, exist_ok=True)
    lines = ["# Cost as work grows (`bench/sweep`)", ""]
    lines.append(f"Command: `{a.command}`: {a.rounds} rounds × {a.duration} s per point and proxy, the four")
    lines.append("alternating (order rotated each round), one warm-up run each per point; medians of the")
    lines.append("rounds without socket errors. Keep-alive `GET /` through each proxy to nginx `return 200`")
    lines.append("(1 KiB); CPU per request is the proxy's process tree. wrk has one thread and shares the 2")
    lines.append(f"cores with the proxy and the upstream. Versions: {a.versions}.")
    busy = [x for x in noise if x is not None]
    if busy:
        lines.append(f"Other processes on the machine during the runs: median {med(busy):.2f}, max {max(busy):.2f} cores.")
    lines += ["", "![requests/s, p99 and CPU per request against connections](sweep.png)", ""]
    lines.append("| connections | proxy | requests/s | p99 ms | CPU µs/request | spread (max ÷ min) | runs with errors |")
    lines.append("|---:|---|---:|---:|---:|---:|---|")
    for c in points:
        for name, _, _ in proxies:
            m = table[(name, c)]
            rs = runs[(name, c)]
            bad = [x["errors"] for x in rs if not x["ok"]]
            lines.append(f"| {c:,} | {name} | {fmt(m['rps'], ',.0f')} | {fmt(m['p99'], '.2f')} | "
                         f"{fmt(m['cpu_us'], '.1f')} | {fmt(spread([x['rps'] for x in rs if x['rps']]), '.2f')} | "
                         f"{'; '.join(map(str, bad)) if bad else ''} |")
    lines += ["", "callback-proxy ÷ nginx with as many workers as it has loops (ratio of medians):", ""]
    lines.append("| connections | " + " | ".join(f"{o} ÷ {n}: req/s, p99, CPU/request" for o, n in pairs) + " |")
    lines.append("|---:|" + "---|" * len(pairs))
    for c in points:
        cells = []
        for ours, theirs in pairs:
            o, t = table[(ours, c)], table[(theirs, c)]
            cells.append(" / ".join(fmt(ratio(o[k], t[k]), ".2f") for k in ("rps", "p99", "cpu_us")))
        lines.append(f"| {c:,} | " + " | ".join(cells) + " |")
    with open(os.path.join(a.results, "sweep.md"), "w") as f:
        f.write("\n".join(lines) + "\n")

    data = os.path.join(a.tmp, "sweep.dat")
    with open(data, "w") as f:
        for name, _, _ in proxies:
            f.write(f"# {name}\n")
            for c in points:
                m = table[(name, c)]
                f.write(f"{c} {fmt(m['rps'], '.0f')} {fmt(m['p99'], '.3f')} {fmt(m['cpu_us'], '.2f')}\n".replace("–", "NaN"))
            f.write("\n\n")
    plot(a, proxies, data, points)


def plot(a, proxies, data, points):
    styles = ["lc rgb '#1f77b4' lw 2 pt 7", "lc rgb '#1f77b4' lw 2 pt 5 dt 2",
              "lc rgb '#d62728' lw 2 pt 7", "lc rgb '#d62728' lw 2 pt 5 dt 2"]
    xtics = ", ".join(f"'{c:,}' {c}" for c in points)

    def panel(col, ylabel, title, logy=False):
        series = ", ".join(f"'{data}' index {i} using 1:{col} with linespoints {styles[i]} title '{name}'"
                           for i, (name, _, _) in enumerate(proxies))
        return (("set logscale y\n" if logy else "unset logscale y\n") +
                f"set ylabel '{ylabel}'\nset title '{title}'\nplot {series}\n")
    script = (f"set terminal pngcairo size 1500,480 font 'sans,10'\n"
              f"set output '{os.path.join(a.results, 'sweep.png')}'\n"
              "set multiplot layout 1,3 title 'keep-alive GET through each proxy, 2 cores shared with wrk and the upstream'\n"
              f"set logscale x\nset xrange [{min(points) * 0.7}:{max(points) * 1.4}]\nset xtics ({xtics})\n"
              "set xlabel 'client connections'\nset grid\nset key box opaque\n"
              "set key bottom left\nset yrange [0:*]\n" + panel(2, "requests/s", "throughput") +
              "set key top left\nset yrange [*:*]\n" + panel(3, "ms", "p99 latency (log scale)", logy=True) +
              "set yrange [0:*]\n" + panel(4, "µs", "CPU per request (the proxy process)") + "unset multiplot\n")
    with open(os.path.join(a.tmp, "sweep.gp"), "w") as f:
        f.write(script)
    subprocess.run(["gnuplot", os.path.join(a.tmp, "sweep.gp")], check=True)


if __name__ == "__main__":
    main()
