"""The measuring module of bench/ (Python stdlib only), and the harness every driver is declared with.

Measuring: runs a load generator while accounting the CPU time of the benchmark's own processes and
of the rest of the machine (from /proc), parses wrk's, h2load's and `openssl s_time`'s output,
probes /metrics, idle connections and start-up, and appends what it measured to a records file:
one JSON object per line,

  {"bench", "scenario", "variant", "round", "metric", "value", "unit"[, "detail"]}  a measurement
  {"bench", "table", "row": [cells]}                                                  a checked fact
  {"bench", "note": text}                                                              an event
  {"bench", "command", "facts": {...}}                                                 the run itself

`round` is 1, 2, … or "warmup"/"profile"; a run's `ok` metric (1/0) says whether it counts
(a result, no socket errors, no non-2xx). bench/render.py turns a records file into a report.

The harness (`Bench`): a driver's settings, prerequisites, the proxy binary, free ports, a temp dir
whose processes are all stopped on exit, servers started until they answer, the rounds (warm-ups,
then the order rotated each round), one call per measured run, and the report at the end.
"""
import atexit
import json
import os
import re
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

import render

HZ = os.sysconf("SC_CLK_TCK")
MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0, "h": 3600000.0}
# nginx's `return 200 "…"` of a 1 KiB body (nginx turns the \n into one byte)
KIB_BODY = "x" * 1023 + "\\n"


def write(path, **rec):
    with open(path, "a") as f:
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")


class Sink:
    """Appends measurements of one (bench, scenario, variant, round) to the records file."""

    def __init__(self, path, bench, variant, rnd, scenario=None):
        self.path = path
        self.key = {"bench": bench, "scenario": scenario, "variant": variant, "round": rnd}

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
    """A zombie is not alive: the drivers' servers are this process's children, reaped only at stop."""
    try:
        return _stat(pid)[0] != "Z"
    except OSError:
        return False


def accounted(argv, raw, pids):
    """Runs argv with its output in `raw`; returns (rc, elapsed s, {name: CPU s or None if its
    root exited, "client": the load generator's}, other processes' cores, {name: [RSS before, after]})."""
    trees = {n: process_tree(p) for n, p in pids.items()}
    c0, rss0 = {n: cpu_ticks(t) for n, t in trees.items()}, {n: tree_rss_kib(p)[0] for n, p in pids.items()}
    b0, t0 = busy_ticks(), time.monotonic()
    with open(raw, "w") as f:
        child = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
        # wait4: the load generator's own CPU, whatever else this process runs meanwhile (soak's
        # loads run side by side in threads)
        _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    elapsed, b1 = time.monotonic() - t0, busy_ticks()
    cpu = {n: (cpu_ticks(t) - c0[n]) / HZ if alive(pids[n]) else None for n, t in trees.items()}
    cpu["client"] = usage.ru_utime + usage.ru_stime
    other = max(0.0, ((b1 - b0) / HZ - sum(v or 0 for v in cpu.values())) / elapsed) if elapsed > 0 else None
    return child.returncode, elapsed, cpu, other, {n: [rss0[n], tree_rss_kib(p)[0]] for n, p in pids.items()}


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


def load(put, argv, raw, pids):
    """One wrk or h2load run under CPU accounting of the processes in `pids` ({name: pid}); every
    figure to `put`. Returns the load generator's exit status."""
    rc, elapsed, cpu, other, rss = accounted(argv, raw, pids)
    text = open(raw, errors="replace").read()
    if os.path.basename(argv[0]) in ("h2load", "h3load"):  # h3load (bench/probes) prints h2load's lines
        r, errors = parse_h2load(text, argv[argv.index("--log-file") + 1] if "--log-file" in argv else None)
    else:
        r, errors = parse_wrk(text)
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


def stime(put, port, seconds, raw, pid=None):
    """Two `openssl s_time -new` clients in parallel: new full handshakes/s, each with `GET /`.
    With the server's `pid`: its CPU a handshake (all its processes), and the clients' CPU."""
    argv = ["openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-new", "-www", "/", "-time", str(seconds)]
    tree = process_tree(pid) if pid else []
    c0, t0 = cpu_ticks(tree), time.monotonic()
    procs = [subprocess.Popen(argv, stdout=open(f"{raw}.{i}", "w"), stderr=subprocess.STDOUT) for i in (1, 2)]
    rc, client = 0, 0.0
    for p in procs:
        _, status, usage = os.wait4(p.pid, 0)
        rc = max(rc, os.waitstatus_to_exitcode(status))
        client += usage.ru_utime + usage.ru_stime
    elapsed, server = time.monotonic() - t0, (cpu_ticks(tree) - c0) / HZ
    total, handshakes = 0.0, 0
    for i in (1, 2):
        m = re.search(r"(\d+) connections in ([\d.]+) real seconds", open(f"{raw}.{i}").read())
        if m:
            total += int(m.group(1)) / float(m.group(2))
            handshakes += int(m.group(1))
    put("rps", total, "handshakes/s")
    if pid and handshakes:
        put("cpu_us.proxy", server / handshakes * 1e6, "µs/handshake")
        put("cpu_s.client", client, "s")
        put("elapsed_s", elapsed, "s")
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


def scrape(put, port, when, sums=(), by=()):
    """GET /metrics, checked; `sums` "KEY=NAME[,LABEL=VALUE...]" record a summed sample each, `by`
    "KEY=NAME,LABEL" a sum per value of LABEL. Whether the scrape parsed."""
    try:
        status, body, ms = fetch(port, "/metrics")
    except (OSError, ValueError, IndexError) as e:
        put(f"scrape.{when}.ok", 0, "", f"fetch failed: {e}")
        return False
    samples, problems = check_exposition(body.decode("utf-8", "replace"))
    if status != 200:
        problems.insert(0, f"status {status}")
    put(f"scrape.{when}.ok", 0 if problems else 1, "", "; ".join(problems[:3]) or None)
    put(f"scrape.{when}.ms", ms, "ms")
    put(f"scrape.{when}.bytes", len(body), "bytes")
    put(f"scrape.{when}.series", len(samples), "series")
    for key, name, labels in map(parse_sum, sums):  # a family the binary does not have stays absent
        if any(n == name for n, _ in samples):
            put(f"scrape.{when}.{key}", metric_sum(samples, name, labels), "")
    for spec in by:
        key, _, rest = spec.partition("=")
        name, label = rest.split(",")
        for value in sorted({dict(l).get(label) for n, l in samples if n == name} - {None}):
            put(f"scrape.{when}.{key}.{value}", metric_sum(samples, name, frozenset([(label, value)])), "")
    return not problems


def metric(port, name, *labels, show=None, strict=True):
    """A sample of /metrics summed over the series with these LABEL=VALUE labels ("none" if the
    family is absent), or with `show`, an info gauge's LABEL values where it is 1. `strict`: raises
    ValueError when the exposition does not parse."""
    samples, problems = check_exposition(fetch(port, "/metrics")[1].decode("utf-8", "replace"))
    if problems and strict:
        raise ValueError(f"/metrics: {'; '.join(problems[:3])}")
    if show:
        return " ".join(dict(l)[show] for (n, l), v in samples.items() if n == name and v == 1) or "none"
    wanted = frozenset(tuple(x.split("=", 1)) for x in labels)
    found = any(n == name and wanted <= l for n, l in samples)
    return f"{metric_sum(samples, name, wanted):.0f}" if found else "none"


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


def idle_conns(put, port, pid, n):
    """N connections (100 at a time), each one `GET /` read in full, then left idle; VmRSS of the
    proxy's processes before and 1 s after."""
    req = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: bench-idle\r\n\r\n".encode()
    sel, idle, failures, statuses = selectors.DefaultSelector(), [], {}, {}

    def fail(s, why):
        failures[why] = failures.get(why, 0) + 1
        try:
            sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()

    time.sleep(0.5)
    before, _ = tree_rss_kib(pid)
    for start in range(0, n, 100):
        pending = 0
        for _ in range(min(100, n - start)):
            s = socket.socket()
            s.setblocking(False)
            if (err := s.connect_ex(("127.0.0.1", port))) not in (0, 115):  # EINPROGRESS
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
    after, procs = tree_rss_kib(pid)
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
    for name, value, unit in (("processes", procs, ""), ("rss_before_kib", before, "KiB"),
                                ("rss_after_kib", after, "KiB"), ("connections_ok", len(idle), "connections"),
                                ("still_open", still_open, "connections")):
        put(name, value, unit)
    put("kib_per_conn", round((after - before) / len(idle), 3) if idle else None, "KiB", ", ".join(bad) or None)
    put("ok", 1 if idle else 0, "", ", ".join(bad) or None)
    print(f"{len(idle)} idle connections, RSS {before} → {after} KiB ({procs} processes)", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Start-up: exec → /healthz 200


def startup(sink, bin, port, internal_port, upstream, runs=5):
    """exec → /healthz 200, the startup_ms it logs, SIGTERM → exit and the exit status; sink(run) -> put."""
    for i in range(1, runs + 1):
        argv = [bin, "--listen", f"127.0.0.1:{port}", "--upstream", upstream, "--internal-listen",
                f"127.0.0.1:{internal_port}", "--loops", "2", "--access-log", "off"]
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            ready = None
            while ready is None and time.monotonic() < t0 + 10 and p.poll() is None:
                try:
                    if fetch(internal_port, "/healthz")[0] == 200:
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
        put = sink(i)
        put("exec_to_healthz_ms", ready, "ms")
        put("sigterm_to_exit_ms", (time.monotonic() - t1) * 1000, "ms")
        put("exit_code", p.returncode, "")
        for line in err.decode(errors="replace").splitlines():
            if line.startswith("{") and (j := json.loads(line)).get("msg") == "ready":
                put("startup_ms", float(j["startup_ms"]), "ms")
        time.sleep(0.2)



# --------------------------------------------------------------------------------------------
# The harness: a driver declares its servers, variants and load with these


def sh(cmd):
    """A shell command's output, without its trailing newlines (as the shell's $(...))."""
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.rstrip("\n")


# The native client of bench/callbacks and bench/soak's callbacks: Google's iOS client and the
# redirect it derives from the id.
CLIENT_ID = "123-ios.apps.googleusercontent.com"
REDIRECT_URI = "com.googleusercontent.apps.123-ios:/oauth2redirect"
VERIFIER = "bench-verifier-0123456789abcdefghijklmnopqrstuvwxyz_ABCDEFGHIJ.~"


def callback_path(code, client_id=CLIENT_ID, redirect_uri=REDIRECT_URI):
    """A complete native callback (callbacks.lua builds the same)."""
    return "/_oauth_callback?" + urllib.parse.urlencode([
        ("provider", "google"), ("platform", "ios"), ("client_id", client_id), ("redirect_uri", redirect_uri),
        ("state", "s"), ("code_verifier", VERIFIER), ("code", code)], safe="")


def rotated(keys, rnd):
    """The order of round `rnd` (1…): every variant first once every len(keys) rounds."""
    return [keys[(i + rnd - 1) % len(keys)] for i in range(len(keys))]


class Bench:
    """One run of bench/NAME. Every process it starts is stopped on exit, failure or Ctrl-C; the temp
    dir (configs, logs, raw output, records) is removed unless the run failed or KEEP_TMP=1."""

    def __init__(self, name):
        self.name, self.started = name, time.time()
        self.command, self.args, self.procs, self.T, self.failed = [], [], [], None, False
        self.dir = os.path.dirname(os.path.abspath(__file__))
        self.repo = os.path.dirname(self.dir)
        self.results = os.environ.get("RESULTS_DIR") or os.path.join(self.repo, "bench", "results")
        self.nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
        self.haproxy_bin = shutil.which("haproxy") or "/usr/sbin/haproxy"
        self.caddy_bin = shutil.which("caddy") or "/usr/bin/caddy"
        self.venv_py = os.path.join(self.repo, ".venv", "bin", "python")
        for sig, rc in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
            signal.signal(sig, lambda *_, rc=rc: self.exit(rc))
        self.excepthook, sys.excepthook = sys.excepthook, self.crashed
        atexit.register(self.cleanup)

    def setting(self, name, default, always=False):
        """NAME from the environment, or the default (as its type). Every report starts with the command
        that made it: the settings that differ from the default (or `always`), then bench/NAME."""
        value = os.environ.get(name) or str(default)
        if value != str(default) or always:
            self.command.append(f'{name}="{value}"' if " " in value else f"{name}={value}")
        return type(default)(value)

    def command_line(self):
        return " ".join(self.command + [f"bench/{self.name}"] + self.args)

    def log(self, text):
        print(f"== {text}", file=sys.stderr, flush=True)

    def die(self, text):
        print(f"bench/{self.name}: {text}", file=sys.stderr, flush=True)
        self.exit(1)

    def crashed(self, *exc):
        self.failed = True
        self.excepthook(*exc)

    def exit(self, rc):
        self.failed = self.failed or rc != 0
        sys.exit(rc)

    # ----------------------------------------------------------------------------------------
    # Prerequisites, the binary, ports, the temp dir

    def prepare(self, packages, ports, scratch="/tmp/callback-proxy-bench-build", venv=False, proxy=True):
        """The packages (installed if missing), the project's .venv (mint_token.py), the proxy binary
        (unless `proxy` is False), the ports free, then the temp dir."""
        self.need_packages(*packages)
        if venv and subprocess.call([self.venv_py, "-c", "import jwt, cryptography"], stderr=subprocess.DEVNULL):
            if subprocess.call([os.path.join(self.repo, "scripts", "setup")], stdout=sys.stderr):
                self.die("scripts/setup failed")
        self.bin = self.build_proxy(scratch) if proxy else None
        self.ports_free(*ports)
        self.T = tempfile.mkdtemp(prefix=f"bench-{self.name}.", dir="/tmp")
        os.chmod(self.T, 0o755)  # nginx workers may run as nobody
        os.mkdir(self.path("ngx-tmp"))
        self.records = self.path("records.jsonl")
        self.load_start = " ".join(open("/proc/loadavg").read().split()[:3])

    def need_packages(self, *packages):
        missing = [p for p in packages if subprocess.call(["dpkg", "-s", p], stdout=subprocess.DEVNULL,
                                                          stderr=subprocess.DEVNULL)]
        if not missing:
            return
        if os.getuid() != 0:
            self.die(f"missing packages ({' '.join(missing)}); run as root to install them")
        self.log(f"installing {' '.join(missing)}")
        # Debian's server packages start their system services; the benchmarks never use or touch them.
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL,
                 "env": dict(os.environ, DEBIAN_FRONTEND="noninteractive")}
        if subprocess.call(["apt-get", "install", "-y", *missing], **quiet):
            subprocess.check_call(["apt-get", "update"], stdout=subprocess.DEVNULL)
            subprocess.check_call(["apt-get", "install", "-y", *missing], stdout=subprocess.DEVNULL, env=quiet["env"])

    def build_proxy(self, scratch):
        """$CALLBACK_PROXY_BIN, or a release build kept apart from other builds."""
        binary = os.environ.get("CALLBACK_PROXY_BIN")
        if not binary:
            self.log(f"building callback-proxy (release, scratch path {scratch})")
            argv = ["swift", "build", "-c", "release", "--product", "callback-proxy", "--scratch-path", scratch]
            for attempt in range(1, 6):
                out = subprocess.run(argv, cwd=self.repo, capture_output=True, text=True)
                text = out.stdout + out.stderr
                if out.returncode == 0:
                    print("\n".join(text.strip().splitlines()[-1:]), file=sys.stderr)
                    break
                # Others edit the tree concurrently: "modified during the build" is retried.
                if attempt == 5 or "was modified during the build" not in text:
                    print("\n".join(sorted({l for l in text.splitlines() if "error:" in l})[:20]), file=sys.stderr)
                    self.die("build failed (the tree may be mid-edit; CALLBACK_PROXY_BIN=... runs a binary you built)")
                self.log(f"a source file changed during the build (attempt {attempt}); retrying in 5 s")
                time.sleep(5)
            binary = os.path.join(scratch, "release", "callback-proxy")
        if not os.access(binary, os.X_OK):
            self.die(f"no executable at {binary}")
        return binary

    def ports_free(self, *ports):
        for p in ports:
            with socket.socket() as s:
                taken = s.connect_ex(("127.0.0.1", p)) == 0
            if taken or sh(f"ss -Htln 'sport = :{p}'"):
                self.die(f"port {p} is in use (set PORT_BASE to move the whole range)")

    def open_files(self, want):
        """ulimit -n: `want` descriptors, or as many as the hard limit allows; what it is now."""
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
        except (ValueError, OSError):
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return resource.getrlimit(resource.RLIMIT_NOFILE)[0]

    def path(self, name):
        return os.path.join(self.T, name)

    def cleanup(self):
        for p in self.procs:
            p.terminate()
        for p in list(self.procs):
            self.stop(p, grace=5)
        if self.T and (self.failed or os.environ.get("KEEP_TMP") == "1"):
            print(f"bench/{self.name}: configs, logs and raw output kept in {self.T}", file=sys.stderr)
        elif self.T:
            shutil.rmtree(self.T, ignore_errors=True)

    # ----------------------------------------------------------------------------------------
    # Servers

    def start(self, name, url, argv, env=None):
        """argv in the background (output in T/NAME.out, .err), until url answers 200 (None: no wait)."""
        with open(self.path(f"{name}.out"), "w") as out, open(self.path(f"{name}.err"), "w") as err:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 env=dict(os.environ, **env) if env else None)
        self.procs.append(p)
        for _ in range(200):
            if url is None or self.curl(url, "-k", "--max-time", "1", fmt="%{http_code}") == "200":
                return p
            if p.poll() is not None:
                self.die(f"{name} exited during start-up (logs in {self.T})")
            time.sleep(0.05)
        self.die(f"{name} did not answer {url} within 10 s (logs in {self.T})")

    def stop(self, p, grace=10):
        """SIGTERM, up to `grace` seconds, SIGKILL."""
        p.terminate()
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def nginx(self, name, workers, connections, http, main="", check=True):
        """T/NAME.conf (checked) with `http` as its http block, temp files under T; its command line."""
        t, conf = self.T, self.path(f"{name}.conf")
        with open(conf, "w") as f:
            f.write(f"worker_processes {workers}; {main} daemon off; pid {t}/{name}.pid; "
                    f"error_log {t}/{name}-error.log warn;\nevents {{ worker_connections {connections}; }}\n"
                    f"http {{ client_body_temp_path {t}/ngx-tmp/{name}-b; proxy_temp_path {t}/ngx-tmp/{name}-p; "
                    f"fastcgi_temp_path {t}/ngx-tmp/{name}-f;\n       uwsgi_temp_path {t}/ngx-tmp/{name}-u; "
                    f"scgi_temp_path {t}/ngx-tmp/{name}-s;\n       {http} }}\n")
        argv = [self.nginx_bin, "-p", t, "-e", f"{t}/{name}-error.log", "-c", conf]
        if check and subprocess.call(argv[:-2] + ["-t", "-q", "-c", conf]):
            self.die(f"nginx rejects {conf}")
        return argv

    def haproxy(self, url, config):
        """HAProxy from this config (checked), until url answers."""
        with open(self.path("haproxy.cfg"), "w") as f:
            f.write(config)
        if subprocess.call([self.haproxy_bin, "-c", "-q", "-f", self.path("haproxy.cfg")], stdout=subprocess.DEVNULL):
            self.die(f"haproxy rejects its config ({self.T}/haproxy.cfg)")
        return self.start("haproxy", url, [self.haproxy_bin, "-db", "-f", self.path("haproxy.cfg")])

    def caddy(self, url, caddyfile):
        """Caddy from this Caddyfile (checked), until url answers. Two OS threads run Go code
        (GOMAXPROCS=2), like the others' two workers; its state directories go to the temp dir, never $HOME."""
        with open(self.path("Caddyfile"), "w") as f:
            f.write(caddyfile)
        env = {"GOMAXPROCS": "2", "XDG_DATA_HOME": self.path("caddy-data"),
               "XDG_CONFIG_HOME": self.path("caddy-config"), "HOME": self.T}
        config = ["--config", self.path("Caddyfile"), "--adapter", "caddyfile"]
        if subprocess.call([self.caddy_bin, "validate", *config], env=dict(os.environ, **env),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
            self.die(f"caddy rejects its config ({self.T}/Caddyfile)")
        return self.start("caddy", url, [self.caddy_bin, "run", *config], env)

    def proxy(self, name, port, internal, upstream, *flags, loops=2, access_log="off"):
        """callback-proxy on :port in front of http://127.0.0.1:upstream, until its /healthz answers.
        Without a per-client connection cap: every load comes from one address here (the RSS row
        holds 9,500 connections from 127.0.0.1, past the default cap of half the budget), and the
        peers have no such cap by default either."""
        argv = [self.bin, "--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{upstream}",
                "--internal-listen", f"127.0.0.1:{internal}", "--loops", str(loops), "--access-log", access_log, *flags]
        return self.start(name, f"http://127.0.0.1:{internal}/healthz", argv,
                          env={"CALLBACK_PROXY_LIMITS__MAX_CONNECTIONS_PER_CLIENT": "0"})

    def cert(self, name, kind="ec", host="localhost"):
        """A self-signed certificate for host and 127.0.0.1 (ECDSA P-256 or RSA 2048): (cert, key)."""
        alg = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"] if kind == "ec" else ["-newkey", "rsa:2048"]
        pem, key = self.path(f"{name}.pem"), self.path(f"{name}.key")
        if subprocess.call(["openssl", "req", "-x509", *alg, "-nodes", "-keyout", key, "-out", pem, "-days", "2",
                            "-subj", f"/CN={host}", "-addext", f"subjectAltName=DNS:{host},IP:127.0.0.1"],
                           stderr=subprocess.DEVNULL):
            self.die(f"openssl could not make the {kind} test certificate")
        return pem, key

    def stub_idp(self, port, aud, nonce=None, log=False):
        """The stub IdP (one nginx): `POST /token` answers a real RS256 id_token minted now for `aud`
        (mint_token.py; `return` answers any method, the form is discarded), `GET /jwks` its key
        (cacheable), `GET /` 1 KiB (the upstream). Returns (process, the id_token's length)."""
        issuer = f"http://127.0.0.1:{port}"
        argv = [self.venv_py, os.path.join(self.dir, "mint_token.py"), "--issuer", issuer, "--aud", aud, "--out-dir", self.T]
        minted = subprocess.run(argv + (["--nonce", nonce] if nonce else []), capture_output=True, text=True)
        if minted.returncode:
            self.die(f"mint_token.py failed: {minted.stderr.strip()[-300:]}")
        if log:
            self.log(minted.stdout.strip())
        token, jwks = (open(self.path(f)).read() for f in ("token.json", "jwks.json"))
        conf = self.nginx("stub", 1, 8192, f"""access_log off; keepalive_requests 1000000000; keepalive_timeout 300s;
    server {{ listen 127.0.0.1:{port} backlog=4096;
        location = /token {{ default_type application/json; add_header Cache-Control no-store always;
                            add_header Pragma no-cache always; return 200 '{token}'; }}
        location = /jwks {{ default_type application/json; add_header Cache-Control "public, max-age=3600" always;
                           return 200 '{jwks}'; }}
        location / {{ default_type text/plain; return 200 "{KIB_BODY}"; }} }}""")
        return self.start("stub", f"{issuer}/", conf), len(json.loads(token)["id_token"])

    def redis(self, name, port, *args, data=True):
        """A private redis-server (with `data`: on port, no persistence, in T/NAME), until it answers PING."""
        os.makedirs(self.path(name), exist_ok=True)
        if data:
            args = ("--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize",
                    "no", "--logfile", self.path(f"{name}/redis.log"), "--dir", self.path(name), *args)
        p = self.start(name, None, ["redis-server", *args])
        for _ in range(100):
            if sh(f"redis-cli -p {port} ping 2>/dev/null") == "PONG":
                return p
            if p.poll() is not None:
                self.die(f"{name} (redis-server) exited during start-up (log: {self.T}/{name}/redis.log)")
            time.sleep(0.05)
        self.die(f"{name} (redis-server) did not answer on :{port}")

    def check(self, label, expected, got, exact=True):
        """A sanity check: a row of the report's table, and the run stops when `got` is not as expected."""
        self.row("sanity", label, expected, got)
        if got != expected if exact else not got.startswith(expected):
            self.die(f"sanity: {label}: expected '{expected}', got '{got}'")

    def curl(self, url, *args, out="/dev/null", fmt="%{http_code} %{size_download}"):
        """What curl writes with -w fmt (status and body bytes by default)."""
        return subprocess.run(["curl", "-s", "-o", out, "-w", fmt, *args, url], capture_output=True, text=True).stdout

    # ----------------------------------------------------------------------------------------
    # The rounds and the records

    def alternate(self, run, keys, rounds, duration, warmup):
        """run(key, "warmup", warmup) for each key, then `rounds` rounds of run(key, round, duration), the
        order rotated each round: every variant measured side by side, none always first."""
        for k in keys:
            run(k, "warmup", warmup)
        for r in range(1, rounds + 1):
            for k in rotated(keys, r):
                run(k, r, duration)

    def sink(self, variant, rnd, scenario=None):
        return Sink(self.records, self.name, variant, rnd, scenario)

    def load(self, variant, rnd, argv, pids, scenario=None, raw=None):
        """One measured run of a load generator (wrk, h2load), CPU accounted for `pids` ({name: process});
        its output in T/raw. Returns its exit status."""
        raw = self.path(raw or "-".join(map(str, filter(None, ["wrk", scenario, variant, rnd]))) + ".txt")
        self.log(f"{os.path.basename(argv[0])} {scenario or ''} {variant} ({rnd})")
        rc = load(self.sink(variant, rnd, scenario), argv, raw, {n: p.pid for n, p in pids.items()})
        with open(raw, errors="replace") as f:
            summary = re.findall(r"^.*(?:Requests/sec|Non-2xx|Socket errors|# status|req/s|succeeded).*$", f.read(), re.M)
        print("\n".join("   " + line.strip() for line in summary), file=sys.stderr)
        return rc

    def scrape(self, variant, rnd, port, when, sums=(), by=()):
        return scrape(self.sink(variant, rnd), port, when, sums, by)

    def put(self, variant, rnd, scenario=None, **values):
        """Figures the driver measured itself."""
        for metric_name, value in values.items():
            self.sink(variant, rnd, scenario)(metric_name, value)

    def note(self, text):
        write(self.records, bench=self.name, note=text)
        self.log(text)

    def row(self, table, *cells):
        write(self.records, bench=self.name, table=table, row=list(cells))

    def finish(self, report, **facts):
        """The run's facts, then the report from the records: RESULTS_DIR/report, or stdout ("-").
        Whether the report says the run passed."""
        elapsed = int(time.time() - self.started)
        git = sh(f"cd {self.repo} && git rev-parse --short HEAD 2>/dev/null") or "no commit yet"
        # GIT_OPTIONAL_LOCKS=0: no index refresh, so no index.lock in the way of someone committing meanwhile
        if sh(f"cd {self.repo} && GIT_OPTIONAL_LOCKS=0 git status --porcelain 2>/dev/null | head -1"):
            git += ", working tree not clean"
        facts = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cwd": self.repo, "nproc": os.cpu_count(),
                 "uname": " ".join(os.uname()[i] for i in (0, 2)), "load_start": self.load_start,
                 "load_end": open("/proc/loadavg").read()[:14].strip(), "git": git,
                 "wrk_version": sh("wrk -v 2>&1 | head -1 | sed 's/ Copyright.*//'"),
                 "elapsed": f"{elapsed // 60} min {elapsed % 60} s", **facts}
        write(self.records, bench=self.name, command=self.command_line(), facts={k: str(v) for k, v in facts.items()})
        out = None
        if report != "-":
            os.makedirs(self.results, exist_ok=True)
            out = os.path.join(self.results, report)
        ok = render.report(self.name, self.records, out)
        if out:
            self.log(f"report written to {out} ({elapsed}s)")
        return ok
