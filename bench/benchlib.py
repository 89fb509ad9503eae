#!/usr/bin/env python3
"""What bench/report.py and bench/callbacks_report.py share (Python stdlib only): running one wrk
command while accounting the CPU time of the benchmark's own processes and of the rest of the
machine, parsing wrk's output, process trees from /proc, and medians and ratios.

  python3 bench/benchlib.py wrk --out FILE [--pid NAME=PID ...] -- wrk ARGS...

writes wrk's output to FILE and a JSON record to FILE.json:
  rc, elapsed_s, wrk_cpu_s, machine_busy_s, other_cpu_cores,
  cpu_s {NAME: CPU seconds of that process tree, or null if its root exited},
  rss_kib {NAME: [VmRSS before, after] summed over the tree}

  python3 bench/benchlib.py scrape --port INTERNAL_PORT --out FILE.json

fetches callback-proxy's /metrics once, checks the text format and records the samples.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")

# --------------------------------------------------------------------------------------------
# Processes, from /proc


def _stat_fields(pid):
    """The fields after `(comm)` of /proc/PID/stat (comm may hold spaces or parentheses)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def process_tree(pid):
    """pid and all its descendants (nginx: master + workers)."""
    kids = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                kids.setdefault(int(_stat_fields(name)[1]), []).append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cpu_ticks(pids):
    """utime + stime summed over these processes (all threads), in clock ticks."""
    total = 0
    for p in pids:
        try:
            rest = _stat_fields(p)
            total += int(rest[11]) + int(rest[12])  # fields 14 and 15; rest[0] is field 3
        except (OSError, IndexError, ValueError):
            pass
    return total


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def vmrss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kib(pid):
    """(VmRSS summed over the tree, number of processes)."""
    pids = process_tree(pid)
    return sum(vmrss_kib(p) for p in pids), len(pids)


def machine_busy_ticks():
    """All CPUs' busy ticks: user nice system irq softirq steal (not idle, not iowait). Tick-based
    accounting charges softirq ticks (our loopback traffic) to the interrupted process, so irq and
    softirq stay in the total that the benchmark's own process times are subtracted from."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]


# --------------------------------------------------------------------------------------------
# One measured wrk run


def run_measured(argv, out, pids):
    """Runs argv (wrk) with its output in `out`; returns (and writes to out.json) the record
    described in the module's docstring. `pids`: {name: root PID}."""
    import resource
    trees = {name: process_tree(pid) for name, pid in pids.items()}
    c0 = {name: cpu_ticks(t) for name, t in trees.items()}
    rss0 = {name: tree_rss_kib(pid)[0] for name, pid in pids.items()}
    busy0 = machine_busy_ticks()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with open(out, "w") as f:
        rc = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT)
    elapsed = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy1 = machine_busy_ticks()
    c1 = {name: cpu_ticks(t) for name, t in trees.items()}
    wrk_s = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    cpu_s = {name: (c1[name] - c0[name]) / HZ if alive(pids[name]) else None for name in pids}
    ours = sum(v or 0 for v in cpu_s.values()) + wrk_s
    rec = {
        "rc": rc,
        "elapsed_s": elapsed,
        "wrk_cpu_s": wrk_s,
        "machine_busy_s": (busy1 - busy0) / HZ,
        "cpu_s": cpu_s,
        "rss_kib": {name: [rss0[name], tree_rss_kib(pid)[0]] for name, pid in pids.items()},
    }
    rec["other_cpu_cores"] = max(0.0, (rec["machine_busy_s"] - ours) / elapsed) if elapsed > 0 else None
    with open(out + ".json", "w") as f:
        json.dump(rec, f)
    return rec


# --------------------------------------------------------------------------------------------
# wrk's output

UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0, "h": 3600000.0}
PERCENTILES = ("50", "75", "90", "99")


def parse_wrk(text):
    """requests/s, latency percentiles (ms), request count and errors from `wrk --latency` output.
    ok: a result is there, and no socket errors, no non-2xx/3xx responses and (where the Lua
    script printed `# status CODE COUNT` lines) no status outside 2xx."""
    r = {"ok": False, "errors": {}, "statuses": {}}
    m = re.search(r"^\s*(\d+) requests in ([\d.]+)(\w+)", text, re.M)
    if m:
        r["requests"] = int(m.group(1))
        r["wrk_seconds"] = float(m.group(2)) * UNITS_MS.get(m.group(3), 1.0) / 1000.0
    for pct in PERCENTILES:
        m = re.search(rf"^\s+{pct}(?:\.0+)?%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.M)
        r[f"p{pct}"] = float(m.group(1)) * UNITS_MS[m.group(2)] if m else None
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        for k, v in zip(("connect", "read", "write", "timeout"), map(int, m.groups())):
            if v:
                r["errors"][k] = v
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m and int(m.group(1)):
        r["errors"]["non-2xx/3xx"] = int(m.group(1))
    for code, n in re.findall(r"^# status (\d+) (\d+)", text, re.M):
        r["statuses"][int(code)] = int(n)
        if not 200 <= int(code) < 300:
            r["errors"][f"status {code}"] = int(n)
    m = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
    if not m:
        r["error"] = "no Requests/sec in wrk output"
        return r
    r["rps"] = float(m.group(1))
    r["ok"] = not r["errors"]
    return r


def load_run(path):
    """parse_wrk of a wrk output file merged with its JSON record (if any); None if not run."""
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        r = parse_wrk(f.read())
    try:
        with open(path + ".json") as f:
            r["cpu"] = json.load(f)
    except (OSError, ValueError):
        r["cpu"] = None
    return r


# --------------------------------------------------------------------------------------------
# callback-proxy's /metrics: one fetch, checked against the exposition format

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def check_exposition(text):
    """(samples {(name, frozenset(labels)): value}, problems): the Prometheus text format 0.0.4 as
    callback-proxy writes it: # HELP/# TYPE before a family's samples, no duplicate series,
    histogram buckets cumulative and ending in +Inf = _count."""
    samples, problems, declared = {}, [], {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                problems.append(f"line {n}: bad TYPE line {line!r}")
            else:
                declared[parts[2]] = parts[3]
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            problems.append(f"line {n}: not an exposition line {line[:120]!r}")
            continue
        name, labels, value = m.groups()
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in declared and base not in declared:
            problems.append(f"line {n}: sample without # TYPE {name}")
        try:
            v = float(value)
        except ValueError:
            problems.append(f"line {n}: value {value!r} is not a number")
            continue
        key = (name, frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels or "")))
        if key in samples:
            problems.append(f"line {n}: duplicate series {line[:120]!r}")
        samples[key] = v
    for fam, kind in declared.items():
        if kind != "histogram":
            continue
        series = {}
        for (name, labels), v in samples.items():
            if name == fam + "_bucket":
                rest = frozenset(x for x in labels if x[0] != "le")
                le = dict(labels)["le"]
                series.setdefault(rest, []).append((float("inf") if le == "+Inf" else float(le), v))
        for rest, buckets in series.items():
            buckets.sort()
            counts = [c for _, c in buckets]
            if counts != sorted(counts) or buckets[-1][0] != float("inf"):
                problems.append(f"{fam}: buckets not cumulative or no +Inf")
            elif samples.get((fam + "_count", rest)) != counts[-1]:
                problems.append(f"{fam}: _count differs from the +Inf bucket")
    return samples, problems


def scrape(port, out):
    """Fetches /metrics from the internal listener on `port`; writes (and returns) a record: ok,
    problems, status, ms, bytes, series, samples [[name, {labels}, value]] (histogram buckets left
    out)."""
    import socket
    t0 = time.monotonic()
    rec = {"ok": False}
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        buf = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
        s.close()
        head, _, body = buf.partition(b"\r\n\r\n")
        rec["status"] = int(head.split()[1])
    except (OSError, ValueError, IndexError) as e:
        rec["problems"] = [f"fetch failed: {e}"]
    else:
        rec["ms"] = (time.monotonic() - t0) * 1000
        rec["bytes"] = len(body)
        samples, problems = check_exposition(body.decode("utf-8", "replace"))
        if rec["status"] != 200:
            problems.insert(0, f"status {rec['status']}")
        rec["problems"] = problems
        rec["series"] = len(samples)
        rec["samples"] = [[n, dict(l), v] for (n, l), v in samples.items() if not n.endswith("_bucket")]
        rec["ok"] = not problems
    with open(out, "w") as f:
        json.dump(rec, f)
    return rec


def metric_sum(rec, name, **labels):
    """The sum of a scrape's samples called `name` whose labels include `labels`; None if the
    scrape failed."""
    if not rec or "samples" not in rec:
        return None
    return sum(v for n, l, v in rec["samples"] if n == name and all(l.get(k) == x for k, x in labels.items()))


# --------------------------------------------------------------------------------------------
# Statistics


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


def spread(xs):
    """max ÷ min of the values present (None with fewer than two)."""
    xs = [x for x in xs if x]
    return max(xs) / min(xs) if len(xs) > 1 else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("wrk")
    p.add_argument("--out", required=True)
    p.add_argument("--pid", action="append", default=[], metavar="NAME=PID")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p = sub.add_parser("scrape")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.cmd == "scrape":
        sys.exit(0 if scrape(a.port, a.out)["ok"] else 1)
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    pids = {}
    for spec in a.pid:
        name, _, pid = spec.partition("=")
        pids[name] = int(pid)
    sys.exit(run_measured(argv, a.out, pids)["rc"])


if __name__ == "__main__":
    main()
