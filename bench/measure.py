#!/usr/bin/env python3
"""The measuring side of bench/ (Python stdlib only): runs a load generator while accounting the
CPU time of the benchmark's own processes and of the rest of the machine (from /proc), parses
wrk's, h2load's and `openssl s_time`'s output, probes /metrics, idle connections and start-up,
and appends what it measured to a records file: one JSON object per line,

  {"bench", "scenario", "variant", "round", "metric", "value", "unit"[, "detail"]}  a measurement
  {"bench", "table", "row": [cells]}                                                  a checked fact
  {"bench", "note": text}                                                              an event
  {"bench", "command", "facts": {...}}                                                 the run itself

`round` is 1, 2, … or "warmup"/"profile"; a run's `ok` metric (1/0) says whether it counts
(a result, no socket errors, no non-2xx). bench/render.py turns a records file into a report.

  measure.py load --records F --bench B --variant V --round R [--scenario S] --raw OUT
                  [--pid NAME=PID ...] -- wrk|h2load ARGS...
  measure.py stime --records F ... --raw OUT --port P --seconds S       (2 s_time clients)
  measure.py scrape --records F ... --port INTERNAL --when before|during|after [--sum K=NAME[,L=V] ...]
  measure.py idle-conns --records F ... --port P --pid PID --n N
  measure.py startup --records F ... --bin BIN --port P --internal-port P --upstream URL
  measure.py note --records F --bench B TEXT | row --records F --bench B --table T CELL...
  measure.py facts --records F --bench B --command C [--fact K=V ...]
  measure.py put --records F ... METRIC=NUMBER ...          (a figure the driver measured itself)
  measure.py metric --port INTERNAL NAME [LABEL=VALUE ...] [--show LABEL]   (prints a summed sample)
"""
import argparse
import json
import os
import re
import resource
import selectors
import signal
import socket
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0, "h": 3600000.0}


def write(path, **rec):
    with open(path, "a") as f:
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")


class Sink:
    """Appends measurements of one (bench, scenario, variant, round) to the records file."""

    def __init__(self, a):
        self.path = a.records
        self.key = {"bench": a.bench, "scenario": a.scenario, "variant": a.variant,
                    "round": int(a.round) if str(a.round).isdigit() else a.round}

    def __call__(self, metric, value, unit="", detail=None):
        if value is not None:
            write(self.path, **self.key, metric=metric, value=value, unit=unit,
                  **({"detail": detail} if detail else {}))


# --------------------------------------------------------------------------------------------
# Processes, from /proc


def _stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()  # comm may hold spaces or parentheses


def process_tree(pid):
    """pid and all its descendants (nginx: master + workers)."""
    kids = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            kids.setdefault(int(_stat(name)[1]), []).append(int(name))
        except (OSError, IndexError, ValueError):
            pass
    out, todo = [], [pid]
    while todo:
        out.append(todo.pop())
        todo.extend(kids.get(out[-1], []))
    return out


def cpu_ticks(pids):
    """utime + stime over these processes (all threads), in clock ticks."""
    total = 0
    for p in pids:
        try:
            rest = _stat(p)
            total += int(rest[11]) + int(rest[12])
        except (OSError, IndexError, ValueError):
            pass
    return total


def tree_rss_kib(pid):
    """(VmRSS summed over the tree, number of processes)."""
    pids, total = process_tree(pid), 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(l.split()[1]) for l in f if l.startswith("VmRSS:")), 0)
        except OSError:
            pass
    return total, len(pids)


def busy_ticks():
    """All CPUs' busy ticks (user nice system irq softirq steal). Tick accounting charges softirq
    (our loopback traffic) to the interrupted process, so irq and softirq stay in the total."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def accounted(argv, raw, pids):
    """Runs argv with its output in `raw`; returns (rc, elapsed s, {name: CPU s or None if its
    root exited, "client": the load generator's}, other processes' cores, {name: [RSS before, after]})."""
    trees = {n: process_tree(p) for n, p in pids.items()}
    c0, rss0 = {n: cpu_ticks(t) for n, t in trees.items()}, {n: tree_rss_kib(p)[0] for n, p in pids.items()}
    b0, ru0, t0 = busy_ticks(), resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    with open(raw, "w") as f:
        rc = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT)
    elapsed, ru1, b1 = time.monotonic() - t0, resource.getrusage(resource.RUSAGE_CHILDREN), busy_ticks()
    cpu = {n: (cpu_ticks(t) - c0[n]) / HZ if alive(pids[n]) else None for n, t in trees.items()}
    cpu["client"] = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
    other = max(0.0, ((b1 - b0) / HZ - sum(v or 0 for v in cpu.values())) / elapsed) if elapsed > 0 else None
    return rc, elapsed, cpu, other, {n: [rss0[n], tree_rss_kib(p)[0]] for n, p in pids.items()}


# --------------------------------------------------------------------------------------------
# Load generators' output


def parse_wrk(text):
    """requests/s, requests, latency percentiles (ms) and errors of `wrk --latency`; a Lua script's
    `# status CODE COUNT` lines count as errors outside 2xx."""
    r, errors = {}, {}
    m = re.search(r"^\s*(\d+) requests in", text, re.M)
    r["requests"] = int(m.group(1)) if m else None
    for pct in ("50", "75", "90", "99"):
        m = re.search(rf"^\s+{pct}(?:\.0+)?%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.M)
        r[f"p{pct}"] = float(m.group(1)) * MS[m.group(2)] if m else None
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    for k, v in zip(("connect", "read", "write", "timeout"), map(int, m.groups()) if m else ()):
        if v:
            errors[k] = v
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m and int(m.group(1)):
        errors["non-2xx/3xx"] = int(m.group(1))
    for code, n in re.findall(r"^# status (\d+) (\d+)", text, re.M):
        if not 200 <= int(code) < 300:
            errors[f"status {code}"] = int(n)
    r.update({f"status.{code}": int(n) for code, n in re.findall(r"^# status (\d+) (\d+)", text, re.M)})
    m = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
    r["rps"] = float(m.group(1)) if m else None
    return r, errors


def parse_h2load(text, log):
    """requests/s, succeeded requests, failed, and p99 (ms) from h2load's per-request log."""
    m = re.search(r"requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored", text)
    rps = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", text)
    durations = []
    if log and os.path.exists(log):
        with open(log) as f:
            durations = sorted(int(p[2]) for p in (l.split("\t") for l in f) if len(p) >= 3)
    p99 = durations[min(len(durations) - 1, int(len(durations) * 0.99))] / 1000.0 if durations else None
    r = dict(zip(("total", "requests", "failed", "errored"), map(int, m.groups()) if m else (None, 0, None, None)))
    r.update(rps=float(rps.group(1)) if rps else None, p99=p99)
    r.update({f"status.{c}": int(n) for n, c in re.findall(r"(\d+) (\dxx)", text.partition("status codes:")[2][:80])})
    return r, {}


UNITS = {"rps": "req/s", "p50": "ms", "p75": "ms", "p90": "ms", "p99": "ms"}


def cmd_load(a):
    pids = {n: int(p) for n, _, p in (s.partition("=") for s in a.pid)}
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    rc, elapsed, cpu, other, rss = accounted(argv, a.raw, pids)
    text = open(a.raw, errors="replace").read()
    if os.path.basename(argv[0]) == "h2load":
        r, errors = parse_h2load(text, argv[argv.index("--log-file") + 1] if "--log-file" in argv else None)
    else:
        r, errors = parse_wrk(text)
    put = Sink(a)
    for k, v in r.items():
        put(k, v, UNITS.get(k, "requests"))
    n = r.get("requests")
    for name, s in cpu.items():
        put(f"cpu_s.{name}", s, "s")
        if s is not None and n:
            put(f"cpu_us.{name}", s / n * 1e6, "µs/req")
    for name, (before, after) in rss.items():
        put(f"rss_kib.{name}", after, "KiB", detail=f"before {before}")
        put(f"rss_before_kib.{name}", before, "KiB")
    put("elapsed_s", elapsed, "s")
    put("other_cores", other, "cores")
    put("errors", sum(errors.values()), "count", ", ".join(f"{k} {v}" for k, v in errors.items()))
    put("socket_errors", sum(v for k, v in errors.items() if k in ("connect", "read", "write", "timeout")), "count")
    put("non_2xx", errors.get("non-2xx/3xx", 0), "count")
    why = "no result" if r.get("rps") is None else "" if not errors else "errors"
    put("ok", 0 if why else 1, "", why or None)
    return rc


def cmd_stime(a):
    """Two `openssl s_time -new` clients in parallel: new full handshakes/s, each with `GET /`."""
    argv = ["openssl", "s_time", "-connect", f"127.0.0.1:{a.port}", "-new", "-www", "/", "-time", str(a.seconds)]
    procs = [subprocess.Popen(argv, stdout=open(f"{a.raw}.{i}", "w"), stderr=subprocess.STDOUT) for i in (1, 2)]
    rc, total = max(p.wait() for p in procs), 0.0
    for i in (1, 2):
        m = re.search(r"(\d+) connections in ([\d.]+) real seconds", open(f"{a.raw}.{i}").read())
        total += int(m.group(1)) / float(m.group(2)) if m else 0.0
    put = Sink(a)
    put("rps", total, "handshakes/s")
    put("ok", 1 if total else 0, "", None if total else "no result")
    return rc


# --------------------------------------------------------------------------------------------
# callback-proxy's /metrics, checked against the exposition format

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def check_exposition(text):
    """(samples {(name, frozenset(labels)): value}, problems): # TYPE before a family's samples, no
    duplicate series, histogram buckets cumulative and ending in +Inf = _count."""
    samples, problems, declared = {}, [], {}
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or parts[3] not in ("counter", "gauge", "histogram", "summary", "untyped"):
                problems.append(f"line {n}: bad TYPE line {line!r}")
            else:
                declared[parts[2]] = parts[3]
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            problems.append(f"line {n}: not an exposition line {line[:120]!r}")
            continue
        name, labels, value = m.groups()
        if name not in declared and re.sub(r"_(bucket|sum|count)$", "", name) not in declared:
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
    for fam in (f for f, kind in declared.items() if kind == "histogram"):
        series = {}
        for (name, labels), v in samples.items():
            if name == fam + "_bucket":
                le = dict(labels)["le"]
                series.setdefault(frozenset(x for x in labels if x[0] != "le"), []).append(
                    (float("inf") if le == "+Inf" else float(le), v))
        for rest, buckets in series.items():
            counts = [c for _, c in sorted(buckets)]
            if counts != sorted(counts) or max(buckets)[0] != float("inf"):
                problems.append(f"{fam}: buckets not cumulative or no +Inf")
            elif samples.get((fam + "_count", rest)) != counts[-1]:
                problems.append(f"{fam}: _count differs from the +Inf bucket")
    return samples, problems


def fetch(port, path):
    """(status, body, ms) of GET path on 127.0.0.1:port."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        buf = b""
        while d := s.recv(65536):
            buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    return int(head.split()[1]), body, (time.monotonic() - t0) * 1000


def metric_sum(samples, name, labels):
    return sum(v for (n, l), v in samples.items() if n == name and labels <= l)


def parse_sum(spec):
    """"KEY=NAME[,LABEL=VALUE...]" -> (KEY, NAME, frozenset of label pairs)."""
    key, _, rest = spec.partition("=")
    name, *labels = rest.split(",")
    return key, name, frozenset(tuple(x.split("=", 1)) for x in labels)


def cmd_scrape(a):
    put = Sink(a)
    try:
        status, body, ms = fetch(a.port, "/metrics")
    except (OSError, ValueError, IndexError) as e:
        put(f"scrape.{a.when}.ok", 0, "", f"fetch failed: {e}")
        return 1
    samples, problems = check_exposition(body.decode("utf-8", "replace"))
    if status != 200:
        problems.insert(0, f"status {status}")
    put(f"scrape.{a.when}.ok", 0 if problems else 1, "", "; ".join(problems[:3]) or None)
    put(f"scrape.{a.when}.ms", ms, "ms")
    put(f"scrape.{a.when}.bytes", len(body), "bytes")
    put(f"scrape.{a.when}.series", len(samples), "series")
    for key, name, labels in map(parse_sum, a.sum):  # a family the binary does not have stays absent
        if any(n == name for n, _ in samples):
            put(f"scrape.{a.when}.{key}", metric_sum(samples, name, labels), "")
    for spec in a.by:  # KEY=NAME,LABEL: a sum per value of LABEL
        key, _, rest = spec.partition("=")
        name, label = rest.split(",")
        for value in sorted({dict(l).get(label) for n, l in samples if n == name} - {None}):
            put(f"scrape.{a.when}.{key}.{value}", metric_sum(samples, name, frozenset([(label, value)])), "")
    return 1 if problems else 0


def cmd_put(a):
    put = Sink(a)
    for metric, _, value in (kv.partition("=") for kv in a.values):
        put(metric, float(value))


def cmd_metric(a):
    samples, problems = check_exposition(fetch(a.port, "/metrics")[1].decode("utf-8", "replace"))
    labels = frozenset(tuple(x.split("=", 1)) for x in a.labels)
    if a.show:  # an info gauge: the label's values where it is 1
        print(" ".join(dict(l)[a.show] for (n, l), v in samples.items() if n == a.name and v == 1) or "none")
    else:
        found = any(n == a.name and labels <= l for n, l in samples)
        print(f"{metric_sum(samples, a.name, labels):.0f}" if found else "none")
    if problems:
        print(f"/metrics: {'; '.join(problems[:3])}", file=sys.stderr)
    return 1 if problems else 0


# --------------------------------------------------------------------------------------------
# Idle keep-alive connections: the proxy's RSS per connection


def _complete(buf):
    """(status, done) for an HTTP/1.1 response in buf (close-delimited counts as never done)."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None, False
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return -1, True
    h = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    if "content-length" in h:
        return status, len(buf) - end - 4 >= int(h["content-length"])
    return status, "chunked" in h.get("transfer-encoding", "").lower() and buf.endswith(b"0\r\n\r\n")


def cmd_idle_conns(a):
    """N connections (100 at a time), each one `GET /` read in full, then left idle; VmRSS of the
    proxy's processes before and 1 s after."""
    req = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{a.port}\r\nUser-Agent: bench-idle\r\n\r\n".encode()
    sel, idle, failures, statuses = selectors.DefaultSelector(), [], {}, {}

    def fail(s, why):
        failures[why] = failures.get(why, 0) + 1
        try:
            sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()

    time.sleep(0.5)
    before, _ = tree_rss_kib(a.pid)
    for start in range(0, a.n, 100):
        pending = 0
        for _ in range(min(100, a.n - start)):
            s = socket.socket()
            s.setblocking(False)
            if (err := s.connect_ex(("127.0.0.1", a.port))) not in (0, 115):  # EINPROGRESS
                fail(s, f"connect errno {err}")
                continue
            sel.register(s, selectors.EVENT_WRITE, bytearray())
            pending += 1
        deadline = time.monotonic() + 20
        while pending and time.monotonic() < deadline:
            for key, ev in sel.select(1.0):
                s, buf = key.fileobj, key.data
                if ev & selectors.EVENT_WRITE:
                    if err := s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        fail(s, f"connect errno {err}")
                        pending -= 1
                    else:
                        s.send(req)
                        sel.modify(s, selectors.EVENT_READ, buf)
                    continue
                try:
                    data = s.recv(65536)
                except OSError as e:
                    data, why = None, f"recv {e.__class__.__name__}"
                if not data:
                    fail(s, why if data is None else "closed before full response")
                    pending -= 1
                    continue
                buf += data
                status, done = _complete(buf)
                if done:
                    statuses[status] = statuses.get(status, 0) + 1
                    sel.unregister(s)
                    idle.append(s)
                    pending -= 1
        for key in list(sel.get_map().values()):
            fail(key.fileobj, "timeout")
    time.sleep(1.0)
    after, procs = tree_rss_kib(a.pid)
    still_open = 0  # a readable idle socket means the proxy closed it (or sent bytes)
    for s in idle:
        try:
            still_open += bool(s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except BlockingIOError:
            still_open += 1
        except OSError:
            pass
        s.close()
    bad = [f"{k}: {v}" for k, v in failures.items()] + [f"status {s}: {c}" for s, c in statuses.items() if s != 200]
    put = Sink(a)
    for metric, value, unit in (("processes", procs, ""), ("rss_before_kib", before, "KiB"),
                                ("rss_after_kib", after, "KiB"), ("connections_ok", len(idle), "connections"),
                                ("still_open", still_open, "connections")):
        put(metric, value, unit)
    put("kib_per_conn", round((after - before) / len(idle), 3) if idle else None, "KiB", ", ".join(bad) or None)
    put("ok", 1 if idle else 0, "", ", ".join(bad) or None)
    print(f"{len(idle)} idle connections, RSS {before} → {after} KiB ({procs} processes)", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Start-up: exec → /healthz 200


def cmd_startup(a):
    for i in range(1, a.runs + 1):
        argv = [a.bin, "--listen", f"127.0.0.1:{a.port}", "--upstream", a.upstream, "--internal-listen",
                f"127.0.0.1:{a.internal_port}", "--loops", "2", "--access-log", "off"]
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            ready = None
            while ready is None and time.monotonic() < t0 + 10 and p.poll() is None:
                try:
                    if fetch(a.internal_port, "/healthz")[0] == 200:
                        ready = (time.monotonic() - t0) * 1000
                except (OSError, IndexError, ValueError):
                    time.sleep(0.0002)  # not listening yet
            t1 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=35)
        except BaseException:
            p.kill()
            p.wait()
            raise
        a.round = i
        put = Sink(a)
        put("exec_to_healthz_ms", ready, "ms")
        put("sigterm_to_exit_ms", (time.monotonic() - t1) * 1000, "ms")
        put("exit_code", p.returncode, "")
        for line in err.decode(errors="replace").splitlines():
            if line.startswith("{") and (j := json.loads(line)).get("msg") == "ready":
                put("startup_ms", float(j["startup_ms"]), "ms")
        time.sleep(0.2)


# --------------------------------------------------------------------------------------------
# The run's facts, checked facts and events


def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def cmd_facts(a):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    git = sh(f"cd {repo} && git rev-parse --short HEAD 2>/dev/null") or "no commit yet"
    if sh(f"cd {repo} && git status --porcelain 2>/dev/null | head -1"):
        git += ", working tree not clean"
    facts = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cwd": repo, "nproc": os.cpu_count(),
             "uname": " ".join(os.uname()[i] for i in (0, 2)), "load_end": open("/proc/loadavg").read()[:14].strip(),
             "git": git, "wrk_version": sh("wrk -v 2>&1 | head -1 | sed 's/ Copyright.*//'")}
    facts.update(dict(f.split("=", 1) for f in a.fact))
    write(a.records, bench=a.bench, command=a.command, facts=facts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def command(name, fn, run=True):
        p = sub.add_parser(name)
        p.set_defaults(fn=fn)
        if name != "metric":
            p.add_argument("--records", required=True)
            p.add_argument("--bench", required=True)
        if run:
            for flag in ("--variant", "--round", "--scenario"):
                p.add_argument(flag, default=None)
        return p

    p = command("load", cmd_load)
    p.add_argument("--raw", required=True)
    p.add_argument("--pid", action="append", default=[], metavar="NAME=PID")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p = command("stime", cmd_stime)
    p.add_argument("--raw", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=int, required=True)
    p = command("scrape", cmd_scrape)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--when", required=True)
    p.add_argument("--sum", action="append", default=[], metavar="KEY=NAME[,LABEL=VALUE...]")
    p.add_argument("--by", action="append", default=[], metavar="KEY=NAME,LABEL", help="a sum per value of LABEL")
    p = command("idle-conns", cmd_idle_conns)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--n", type=int, default=10000)
    p = command("startup", cmd_startup)
    for flag in ("--bin", "--upstream"):
        p.add_argument(flag, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--internal-port", type=int, required=True)
    p.add_argument("--runs", type=int, default=5)
    p = command("note", lambda a: write(a.records, bench=a.bench, note=a.text), run=False)
    p.add_argument("text")
    p = command("row", lambda a: write(a.records, bench=a.bench, table=a.table, row=a.cells), run=False)
    p.add_argument("--table", required=True)
    p.add_argument("cells", nargs="*")
    p = command("facts", cmd_facts, run=False)
    p.add_argument("--command", required=True)
    p.add_argument("--fact", action="append", default=[], metavar="KEY=VALUE")
    p = command("metric", cmd_metric, run=False)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--show", metavar="LABEL")
    p.add_argument("name")
    p.add_argument("labels", nargs="*")
    p = command("put", cmd_put)
    p.add_argument("values", nargs="+", metavar="METRIC=NUMBER")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(a.fn(a) or 0)


if __name__ == "__main__":
    main()
