#!/usr/bin/env python3
"""bench/http2's runs and report (stdlib + bench/benchlib.py): for each round, each shape and each
server (in an order that rotates every round), one `h2load -D` run measured with benchlib's CPU
accounting; then a Markdown table of medians: requests/s, p99 latency (h2load's per-request log),
CPU microseconds per request (the server's process tree), each with its ratio to nginx."""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import med, ratio, run_measured, spread  # noqa: E402

SHAPES = [("1 conn × 100 streams", 1, 100), ("50 conns × 10 streams", 50, 10)]


def p99_ms(log_path):
    durations = []
    with open(log_path) as f:
        for line in f:
            parts = line.split("\t")
            if len(parts) >= 3:
                durations.append(int(parts[2]))
    if not durations:
        return None
    durations.sort()
    return durations[min(len(durations) - 1, int(len(durations) * 0.99))] / 1000.0


def one_run(tmp, name, port, pid, conns, streams, duration, tag):
    out = os.path.join(tmp, f"h2load-{name}-{conns}x{streams}-{tag}.txt")
    log = out + ".log"
    argv = ["h2load", "-D", str(duration), "--warm-up-time", "1", "-c", str(conns), "-m", str(streams),
            "-t", "1", "--log-file", log, f"https://localhost:{port}/"]
    rec = run_measured(argv, out, {name: pid})
    text = open(out).read()
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed", text)
    rps = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", text)
    done = int(m.group(4)) if m else 0
    failed = int(m.group(5)) if m else None
    cpu = rec["cpu_s"].get(name)
    return {
        "rps": float(rps.group(1)) if rps else None,
        "p99": p99_ms(log) if os.path.exists(log) else None,
        "cpu_us": cpu / done * 1e6 if cpu and done else None,
        "failed": failed,
        "other": rec.get("other_cpu_cores"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--server", action="append", required=True, metavar="NAME=PORT=PID")
    ap.add_argument("--command", required=True)
    ap.add_argument("--versions", default="")
    a = ap.parse_args()
    servers = [(n, int(p), int(pid)) for n, p, pid in (s.split("=") for s in a.server)]
    results = {(s[0], shape[0]): [] for s in servers for shape in SHAPES}
    noise = []
    for r in range(a.rounds):
        order = servers[r % len(servers):] + servers[:r % len(servers)]
        for label, conns, streams in SHAPES:
            for name, port, pid in order:
                print(f"== round {r + 1} {label} {name}", file=sys.stderr)
                res = one_run(a.tmp, name, port, pid, conns, streams, a.duration, f"r{r}")
                results[(name, label)].append(res)
                noise.append(res["other"])
    print("# HTTP/2 over TLS (h2load)\n")
    print(f"Command: `{a.command}` — {a.rounds} rounds × {a.duration} s per shape and server, servers")
    print("alternating; medians. Each server has two threads/workers, the same ECDSA P-256 certificate and")
    print("the same HTTP/1.1 upstream (nginx `return 200`, 1 KiB). CPU per request: the server's process")
    print(f"tree. Versions: {a.versions}.")
    busy = [x for x in noise if x is not None]
    if busy:
        print(f"Other processes on the machine during the runs: median {med(busy):.2f}, max {max(busy):.2f} cores.\n")
    for label, _, _ in SHAPES:
        base = results[("nginx", label)]
        b_rps, b_p99, b_cpu = (med([x[k] for x in base]) for k in ("rps", "p99", "cpu_us"))
        print(f"## {label}\n")
        print("| server | requests/s | × nginx | p99 ms | × nginx | CPU µs/request | × nginx | failed | spread |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, _, _ in servers:
            rs = results[(name, label)]
            rps, p99, cpu = (med([x[k] for x in rs]) for k in ("rps", "p99", "cpu_us"))
            failed = sum(x["failed"] or 0 for x in rs)

            def f(v, fmt):
                return format(v, fmt) if v is not None else "–"
            print(f"| {name} | {f(rps, ',.0f')} | {f(ratio(rps, b_rps), '.2f')} | {f(p99, '.2f')} | "
                  f"{f(ratio(p99, b_p99), '.2f')} | {f(cpu, '.1f')} | {f(ratio(cpu, b_cpu), '.2f')} | {failed} | "
                  f"{f(spread([x['rps'] for x in rs]), '.2f')} |")
        print()


if __name__ == "__main__":
    main()
