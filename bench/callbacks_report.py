#!/usr/bin/env python3
"""Helper for bench/callbacks (Python stdlib only).

Subcommands:
  wrk      run one wrk command and record the CPU time the proxy, the stub nginx, wrk and the
           rest of the machine used meanwhile (from /proc), next to wrk's output
  instr    drive N callbacks (or N plain requests) through a proxy on one keep-alive
           connection, for the callgrind instruction count
  objects  per-object instruction totals of a callgrind output file (via callgrind_annotate)
  perfsel  selected inclusive frames from `perf report --children --sort symbol` (demangled)
  cgsel    selected inclusive functions per callback from two callgrind files (warm-up, warm-up + N)
  report   parse a bench/callbacks temp dir and print the Markdown report
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse

HZ = os.sysconf("SC_CLK_TCK")

# --------------------------------------------------------------------------------------------
# CPU time from /proc


def proc_ticks(pid):
    """utime + stime of one process (all its threads), in clock ticks; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # rest[0] is field 3 (state); utime and stime are fields 14 and 15.
    return int(rest[11]) + int(rest[12])


def children(pid):
    kids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def tree_ticks(pids):
    return sum(proc_ticks(p) or 0 for p in pids)


def machine_busy_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal: busy = all but idle and iowait.
    return sum(v[:8]) - v[3] - v[4]


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cmd_wrk(a):
    import resource
    stub = [a.stub] + children(a.stub)  # nginx master + worker
    p0, s0, b0 = proc_ticks(a.proxy), tree_ticks(stub), machine_busy_ticks()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss0 = rss_kib(a.proxy)
    t0 = time.monotonic()
    with open(a.out, "w") as f:
        argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
        rc = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT)
    elapsed = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p1, s1, b1 = proc_ticks(a.proxy), tree_ticks(stub), machine_busy_ticks()
    wrk_s = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    rec = {
        "rc": rc,
        "elapsed_s": elapsed,
        "proxy_alive": p1 is not None,
        "proxy_cpu_s": None if p1 is None else (p1 - p0) / HZ,
        "stub_cpu_s": (s1 - s0) / HZ,
        "wrk_cpu_s": wrk_s,
        "machine_busy_s": (b1 - b0) / HZ,
        "rss_before_kib": rss0,
        "rss_after_kib": rss_kib(a.proxy),
    }
    ours = (rec["proxy_cpu_s"] or 0) + rec["stub_cpu_s"] + wrk_s
    rec["other_cpu_cores"] = max(0.0, (rec["machine_busy_s"] - ours) / elapsed)
    with open(a.out + ".json", "w") as f:
        json.dump(rec, f)
    sys.exit(rc)


# --------------------------------------------------------------------------------------------
# instr: sequential requests on one keep-alive connection


def _read_response(s, buf):
    while True:
        i = buf.find(b"\r\n\r\n")
        if i >= 0:
            head = buf[:i].decode("latin-1").split("\r\n")
            status = int(head[0].split()[1])
            cl = 0
            for line in head[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    cl = int(v)
            if len(buf) >= i + 4 + cl:
                return status, buf[i + 4 + cl:]
        data = s.recv(65536)
        if not data:
            raise RuntimeError("connection closed by the proxy")
        buf += data


def callback_path(code, client_id, redirect_uri):
    q = urllib.parse.urlencode([
        ("provider", "google"), ("platform", "ios"), ("client_id", client_id), ("redirect_uri", redirect_uri),
        ("state", "s"), ("code_verifier", "bench-verifier-0123456789abcdefghijklmnopqrstuvwxyz_ABCDEFGHIJ.~"),
        ("code", code)], safe="")
    return "/_oauth_callback?" + q


def cmd_instr(a):
    for _ in range(600):  # the proxy starts slowly under valgrind
        try:
            socket.create_connection(("127.0.0.1", a.internal_port)).close()
            break
        except OSError:
            time.sleep(0.05)
    s = socket.create_connection(("127.0.0.1", a.port))
    buf = b""
    statuses = {}
    plan = [("callback", f"{a.prefix}-warm"), ("plain", None)]  # JWKS fetch, curl multi, pools
    plan += [(a.kind, f"{a.prefix}-{i}") for i in range(a.n)] if a.kind else []
    for kind, code in plan:
        path = callback_path(code, a.client_id, a.redirect_uri) if kind == "callback" else "/"
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n".encode())
        status, buf = _read_response(s, buf)
        statuses[status] = statuses.get(status, 0) + 1
    s.close()
    print(json.dumps(statuses))
    if set(statuses) != {200}:
        sys.exit(f"instr: unexpected statuses {statuses}")


def cmd_objects(a):
    """Ir per object from `callgrind_annotate --threshold=100` lines `N  file:fn [object]`."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", "--auto=no",
                          os.path.abspath(a.file)], capture_output=True, text=True, check=True, cwd="/").stdout
    total, objs = None, {}
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?PROGRAM TOTALS", line)
        if m:
            total = int(m.group(1).replace(",", ""))
            continue
        m = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?\S.*\[(.+)\]\s*$", line)
        if m:
            obj = os.path.basename(m.group(2))
            objs[obj] = objs.get(obj, 0) + int(m.group(1).replace(",", ""))
    print(json.dumps({"total": total, "objects": objs}))


# Frames worth naming in a callback profile, in the order shown: (label, exact demangled symbol).
PERF_FRAMES = [
    ("`connect()` (new TCP connection to the token endpoint)", "__libc_connect"),
    ("`socket()`", "__socket"),
    ("`send()` (the token request, and the responses to wrk)", "__send"),
    ("`recv()` (libcurl: the token response)", "__libc_recv"),
    ("`close()` (mostly the token connection's teardown)", "__close"),
    ("`read()` (client connections)", "read"),
    ("`epoll_ctl()`", "epoll_ctl"),
    ("`epoll_wait()`", "epoll_wait"),
    ("`getsockname()` / `getpeername()` (libcurl)", "__GI___getsockname"),
    ("libcurl socket events (`CurlMulti.socketChanged`; includes the completion: token response, id_token check, answer)",
     "closure #1 in CurlMulti.socketChanged(_:_:)"),
    ("id_token check (`JWKSSource.check`: RS256 + claims)", "JWKSSource.check(_:keys:generation:waited:on:_:)"),
    ("… RSA signature (`EVP_DigestVerify`)", "EVP_DigestVerify"),
    ("JSON parsing (`JSONParser.parse`)", "specialized static JSONParser.parse(_:maximumDepth:)"),
    ("token request form (`FormEncoding.encode`)", "specialized static FormEncoding.encode(_:)"),
    ("callback query (`QueryDecoding.decode`)", "specialized static QueryDecoding.decode(_:)"),
    ("the answer page (`ClientConnection.respondLocal`)", "ClientConnection.respondLocal(_:)"),
    ("malloc + free (libc, self)", None),
    ("Swift retain/release (self)", None),
]


def cmd_perfsel(a):
    """Markdown rows `| label | inclusive % |` from a demangled `perf report --children` listing."""
    incl, self_ = {}, {}
    for line in open(a.file, errors="replace"):
        m = re.match(r"^\s+([\d.]+)%\s+([\d.]+)%\s+\[[.k]\]\s+(.+?)\s*$", line)
        if m:
            incl.setdefault(m.group(3), float(m.group(1)))
            self_.setdefault(m.group(3), float(m.group(2)))
    for label, sym in PERF_FRAMES:
        if sym is None:
            names = (["malloc", "_int_malloc", "cfree@GLIBC_2.2.5", "_int_free", "malloc_consolidate",
                      "unlink_chunk.constprop.0", "__libc_calloc", "realloc", "_int_realloc"]
                     if label.startswith("malloc") else ["swift_retain", "swift_release", "swift_bridgeObjectRelease",
                                                         "swift_bridgeObjectRetain", "_swift_release_dealloc"])
            v = sum(self_.get(n, 0.0) for n in names)
        else:
            v = incl.get(sym)
            if v is None:
                alt = [k for k in incl if k.endswith(sym) or k == "__" + sym or k == "__libc_" + sym]
                v = incl[alt[0]] if alt else None
        if v is not None:
            print(f"| {label} | {v:.1f} % |")


# Functions worth naming in a callback's instruction count: (label, exact C name or a substring of
# the mangled Swift name). Inclusive counts, so rows overlap (a row includes what it calls).
CG_FUNCTIONS = [
    ("callback query parsing (`QueryDecoding.decode`)", "13QueryDecodingO6decode"),
    ("client pinning (`ClientPinning.pin`)", "13ClientPinningV3pin"),
    ("replay guard key: SHA-256 of the code (`ReplayGuard.key`)", "11ReplayGuardV3key"),
    ("replay guard write (`MemoryStore.setIfAbsent`)", "11MemoryStoreC11setIfAbsent"),
    ("token request form (`FormEncoding.encode`)", "12FormEncodingO6encode"),
    ("libcurl handle set-up (`CurlTransfer.init`: `curl_easy_init`, options)", "12CurlTransferC_7options3now10completion"),
    ("libcurl I/O (`curl_multi_socket_action`: connect, send, receive, parse)", "=curl_multi_socket_action"),
    ("libcurl handle clean-up (`curl_easy_cleanup`)", "=curl_easy_cleanup"),
    ("token response JSON (`TokenResponseParsing.jsonObject`)", "20TokenResponseParsingO10jsonObject"),
    ("id_token parsing (`JWT.init(compact:)`: base64url + JSON)", "3JWTV7compact"),
    ("id_token check (`JWKSSource.check`: signature + claims)", "10JWKSSourceC5check"),
    ("… RS256 signature (`EVP_DigestVerify`)", "=EVP_DigestVerify"),
    ("… per-verify set-up (`EVP_DigestVerifyInit`: algorithm fetch, context)", "=EVP_DigestVerifyInit"),
    ("… claims (`JWTVerifier.checkClaims`)", "11JWTVerifierV11checkClaims"),
    ("the answer page (`ClientConnection.respondLocal`)", "16ClientConnectionC12respondLocal"),
]


def _cg_inclusive(path):
    # A function appears once per source file its code came from (inlining); the entries overlap, so
    # the largest is the function's inclusive cost. From "/", so no path is shown relative to the cwd
    # (which splits the entries differently).
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", "--auto=no",
                          os.path.abspath(path)], capture_output=True, text=True, check=True, cwd="/").stdout
    fns = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\([^)]*\)\s+(.*?):(\S.*?)(?:\s+\[(.+)\])?\s*$", line)
        if m and "PROGRAM TOTALS" not in line:
            name, v = m.group(3).strip(), int(m.group(1).replace(",", ""))
            fns[name] = max(fns.get(name, 0), v)
    return fns


def cmd_cgsel(a):
    base, meas = _cg_inclusive(a.base), _cg_inclusive(a.measured)
    rows = []
    for label, pat in CG_FUNCTIONS:
        if pat.startswith("="):
            names = [pat[1:]] if pat[1:] in meas else []
        else:
            names = [k for k in meas if pat in k]
        if not names:
            continue
        name = max(names, key=lambda k: meas[k])
        rows.append({"label": label, "per_request": (meas[name] - base.get(name, 0)) / a.n})
    print(json.dumps(rows))


# --------------------------------------------------------------------------------------------
# report

UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0, "h": 3600000.0}


def parse_wrk(text):
    r = {"errors": None, "non2xx": 0, "statuses": {}}
    m = re.search(r"^\s*(\d+) requests in ([\d.]+)(\w+)", text, re.M)
    if m:
        r["requests"] = int(m.group(1))
        r["wrk_seconds"] = float(m.group(2)) * UNITS.get(m.group(3), 1.0) / 1000.0
    m = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
    if m:
        r["rps"] = float(m.group(1))
    for pct in ("50", "99"):
        m = re.search(rf"^\s+{pct}(?:\.0+)?%\s+([\d.]+)(\w+)", text, re.M)
        if m:
            r[f"p{pct}"] = float(m.group(1)) * UNITS[m.group(2)]
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        r["errors"] = dict(zip(("connect", "read", "write", "timeout"), map(int, m.groups())))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        r["non2xx"] = int(m.group(1))
    for code, n in re.findall(r"^# status (\d+) (\d+)", text, re.M):
        r["statuses"][int(code)] = int(n)
    return r


def load_run(d, tag):
    path = os.path.join(d, f"wrk-{tag}.txt")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        r = parse_wrk(f.read())
    try:
        with open(path + ".json") as f:
            r.update(json.load(f))
    except OSError:
        pass
    n = r.get("requests") or 0
    if n and r.get("proxy_cpu_s") is not None:
        r["proxy_us"] = r["proxy_cpu_s"] / n * 1e6
        r["stub_us"] = r["stub_cpu_s"] / n * 1e6
        r["wrk_us"] = r["wrk_cpu_s"] / n * 1e6
    if r.get("elapsed_s"):
        r["proxy_cores"] = (r.get("proxy_cpu_s") or 0) / r["elapsed_s"]
        r["stub_cores"] = r.get("stub_cpu_s", 0) / r["elapsed_s"]
        r["wrk_cores"] = r.get("wrk_cpu_s", 0) / r["elapsed_s"]
    bad = []
    if r.get("errors") and any(r["errors"].values()):
        bad.append("socket errors " + ", ".join(f"{k} {v}" for k, v in r["errors"].items() if v))
    if r.get("non2xx"):
        bad.append(f"{r['non2xx']} non-2xx/3xx responses")
    non200 = {c: k for c, k in r["statuses"].items() if not 200 <= c < 300}
    if non200:
        bad.append("statuses " + ", ".join(f"{c}×{k}" for c, k in sorted(non200.items())))
    if "rps" not in r:
        bad.append("no wrk result")
    if r.get("proxy_alive") is False:
        bad.append("proxy died")
    r["bad"] = bad
    return r


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fk(v):
    if v is None:
        return "–"
    return f"{v / 1000:.2f}k" if v >= 1000 else f"{v:.0f}"


def f1(v, suffix=""):
    return "–" if v is None else f"{v:.1f}{suffix}"


def f2(v, suffix=""):
    return "–" if v is None else f"{v:.2f}{suffix}"


def ratio(a, b):
    return a / b if a is not None and b else None


def read_kv(path):
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                out[k] = v
    return out


def cmd_report(a):
    d = a.dir
    meta = read_kv(os.path.join(d, "meta.txt"))
    rounds = int(meta.get("rounds", 0))
    aim = float(meta.get("aim", 5000))
    cb = [load_run(d, f"callbacks-r{r}") for r in range(1, rounds + 1)]
    pl = [load_run(d, f"plain-r{r}") for r in range(1, rounds + 1)]
    warm_cb, warm_pl = load_run(d, "callbacks-warmup"), load_run(d, "plain-warmup")
    prof_cb = load_run(d, "callbacks-profile")
    ok = lambda r: r is not None and not r["bad"]
    out = []
    w = out.append

    failed = [(k, i + 1, r) for k, runs in (("callbacks", cb), ("plain", pl)) for i, r in enumerate(runs)
              if r is not None and r["bad"]]
    failed += [(k, tag, r) for k, tag, r in (("callbacks", "warm-up", warm_cb), ("plain", "warm-up", warm_pl),
                                             ("callbacks", "profile", prof_cb)) if r is not None and r["bad"]]

    w(f"### Callback throughput — {meta.get('date', '?')}")
    w("")
    if failed:
        w("> **FAILED: some runs had errors or non-2xx responses** (every callback must be answered 200; "
          "a 400 usually means a replayed code or a contract mismatch, a 502 an IdP/stub problem). "
          "They are excluded from the medians and listed under Notes.")
        w("")
    w(f"- Command: `{meta.get('command', '?')}` (in `{meta.get('cwd', '?')}`), took {meta.get('elapsed', '?')}")
    w(f"- Machine: `nproc` = {meta.get('nproc', '?')}; {meta.get('uname', '?')}; load average at start "
      f"{meta.get('load_start', '?')}, at end {meta.get('load_end', '?')} (shared machine: compare ratios and CPU per "
      "request, not absolute requests/s)")
    w(f"- Versions: {meta.get('cp_version', '?')} ({meta.get('cp_bin', '?')}); {meta.get('nginx_version', '?')}; "
      f"wrk {meta.get('wrk_version', '?')}; {meta.get('swift_version', '?')}; {meta.get('curl_version', '?')}; "
      f"{meta.get('openssl_version', '?')}; source: {meta.get('git', '?')}")
    w(f"- Stub IdP and upstream: one nginx, `worker_processes 1`, on loopback `http://`: `POST /token` → fixed JSON "
      f"with a real RS256 id_token ({meta.get('id_token_bytes', '?')} bytes, 2048-bit key), `GET /jwks` "
      "(`Cache-Control: max-age=3600`), `GET /` → 200 with a 1024-byte body (the plain-proxying upstream)")
    w("- Proxy: provider `google` (`kind: google`, `handoff: session`, native iOS client), "
      "`--loops 2 --access-log off`, log level warn, in-memory store; a fresh proxy process for the warm-up, "
      "for each round and for the profile (see \"Replay store capacity\" below), primed with one callback "
      "(JWKS fetch) before its runs")
    w(f"- Load: `wrk -t1 -c{meta.get('conns', '?')} -d{meta.get('duration', '?')}s --latency`, callbacks with "
      "`-s bench/callbacks.lua` (a unique code per request), plain with `GET /`; "
      f"{rounds} rounds, callbacks and plain alternating (order swapped each round), after one "
      f"{meta.get('warmup', '?')}s warm-up run each")
    w("- CPU: utime+stime of the proxy process (all threads) from `/proc/PID/stat` before and after each run, "
      "÷ requests wrk completed. That is CPU time, so the wait for the IdP is excluded by construction. "
      "The stub nginx (master+worker) and wrk are measured the same way")
    w("")

    # Sanity
    sanity = os.path.join(d, "sanity.tsv")
    if os.path.exists(sanity):
        w("#### Sanity check (curl)")
        w("")
        w("| request | expected | got |")
        w("|---|---|---|")
        with open(sanity) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 3:
                    w(f"| {parts[0]} | {parts[1]} | {parts[2]} |")
        w("")

    # Per round
    w("#### Per round")
    w("")
    w("| round | callbacks/s | plain req/s | callbacks ÷ plain | proxy CPU µs / callback | proxy CPU µs / plain req "
      "| CPU ratio | stub nginx cores (cb / plain) | wrk cores (cb / plain) | other processes, cores (cb / plain) |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    per_round_ratio, per_round_cpu_ratio = [], []
    for i in range(rounds):
        c, p = cb[i], pl[i]
        cv = lambda r, k: (r or {}).get(k) if ok(r) else None
        rr = ratio(cv(c, "rps"), cv(p, "rps"))
        cr = ratio(cv(c, "proxy_us"), cv(p, "proxy_us"))
        per_round_ratio.append(rr)
        per_round_cpu_ratio.append(cr)
        mark = lambda r, s: s if ok(r) else f"~~{s}~~ (error)"
        w(f"| {i + 1} | {mark(c, fk((c or {}).get('rps')))} | {mark(p, fk((p or {}).get('rps')))} | {f2(rr, '×')} "
          f"| {f1((c or {}).get('proxy_us'))} | {f1((p or {}).get('proxy_us'))} | {f1(cr, '×')} "
          f"| {f2((c or {}).get('stub_cores'))} / {f2((p or {}).get('stub_cores'))} "
          f"| {f2((c or {}).get('wrk_cores'))} / {f2((p or {}).get('wrk_cores'))} "
          f"| {f2((c or {}).get('other_cpu_cores'))} / {f2((p or {}).get('other_cpu_cores'))} |")
    w("")
    if warm_cb or warm_pl:
        w(f"Warm-up runs (not counted): callbacks {fk((warm_cb or {}).get('rps'))}/s, "
          f"plain {fk((warm_pl or {}).get('rps'))}/s.")
        w("")

    good_cb = [r for r in cb if ok(r)]
    good_pl = [r for r in pl if ok(r)]
    m = lambda runs, k: med([r.get(k) for r in runs])
    cb_rps, pl_rps = m(good_cb, "rps"), m(good_pl, "rps")
    cb_us, pl_us = m(good_cb, "proxy_us"), m(good_pl, "proxy_us")
    cb_stub_us, pl_stub_us = m(good_cb, "stub_us"), m(good_pl, "stub_us")
    cb_wrk_us, pl_wrk_us = m(good_cb, "wrk_us"), m(good_pl, "wrk_us")
    spread = lambda runs, k: (max(r[k] for r in runs) / min(r[k] for r in runs)) if runs and min(r[k] for r in runs) else None

    w("#### Summary (medians over rounds)")
    w("")
    w("| | callbacks | plain proxying | callbacks ÷ plain |")
    w("|---|---|---|---|")
    w(f"| throughput (req/s) | **{fk(cb_rps)}** | {fk(pl_rps)} | **{f2(ratio(cb_rps, pl_rps), '×')}** "
      f"(median of per-round ratios {f2(med(per_round_ratio), '×')}) |")
    w(f"| spread over rounds (max ÷ min) | {f2(spread(good_cb, 'rps'), '×')} | {f2(spread(good_pl, 'rps'), '×')} | |")
    w(f"| proxy CPU per request (µs) | **{f1(cb_us)}** | {f1(pl_us)} | **{f1(ratio(cb_us, pl_us), '×')}** "
      f"(median of per-round ratios {f1(med(per_round_cpu_ratio), '×')}) |")
    w(f"| spread of proxy CPU/request (max ÷ min) | {f2(spread(good_cb, 'proxy_us'), '×')} "
      f"| {f2(spread(good_pl, 'proxy_us'), '×')} | |")
    w(f"| stub/upstream nginx CPU per request (µs) | {f1(cb_stub_us)} | {f1(pl_stub_us)} | |")
    w(f"| wrk CPU per request (µs) | {f1(cb_wrk_us)} | {f1(pl_wrk_us)} | |")
    w(f"| latency p50 / p99 (ms) | {f2(m(good_cb, 'p50'))} / {f2(m(good_cb, 'p99'))} "
      f"| {f2(m(good_pl, 'p50'))} / {f2(m(good_pl, 'p99'))} | |")
    w(f"| proxy cores busy during the run | {f2(m(good_cb, 'proxy_cores'))} | {f2(m(good_pl, 'proxy_cores'))} | |")
    w(f"| stub nginx cores busy during the run | {f2(m(good_cb, 'stub_cores'))} | {f2(m(good_pl, 'stub_cores'))} | |")
    w("")
    ncores = int(meta.get("nproc", 2) or 2)
    if cb_us:
        whole = cb_us + (cb_stub_us or 0) + (cb_wrk_us or 0)
        w(f"CPU-bound ceilings on this {ncores}-core machine, from the medians: the proxy alone could complete "
          f"**{fk(ncores * 1e6 / cb_us)} callbacks/s** if it had all {ncores} cores ({f1(cb_us)} µs each); "
          f"with the stub IdP and wrk on the same cores (proxy + stub + wrk = {f1(whole)} µs per callback) "
          f"the whole loopback set-up tops out near {fk(ncores * 1e6 / whole)}/s, before other processes take "
          "their share.")
        w("")

    # Quiet rounds: other processes used under QUIET cores during the callback run.
    QUIET = 0.3
    quiet = [(i + 1, r) for i, r in enumerate(cb) if ok(r) and r.get("other_cpu_cores") is not None
             and r["other_cpu_cores"] < QUIET]
    quiet_rps = med([r["rps"] for _, r in quiet])
    others = med([r.get("other_cpu_cores") for r in good_cb])
    if good_cb:
        if quiet:
            w(f"Quiet rounds (other processes used under {QUIET} cores during the callback run): "
              f"{len(quiet)} of {len(good_cb)} (round {', '.join(str(i) for i, _ in quiet)}): "
              + ", ".join(f"{fk(r['rps'])} callbacks/s at {f1(r.get('proxy_us'))} µs" for _, r in quiet)
              + (f"; median {fk(quiet_rps)}/s." if len(quiet) > 1 else "."))
        else:
            w(f"No quiet round: other processes used {QUIET} cores or more during every callback run "
              f"(median {f2(others)} of {ncores}), so the throughput figures are lower than this machine gives "
              "when idle. CPU per callback is much less affected (see its spread).")
        w("")

    # Aim
    w("#### Aim")
    w("")
    w("| aim | measured | verdict |")
    w("|---|---|---|")
    if cb_rps is None:
        w(f"| ≥ {aim:,.0f} callbacks/s | no valid run | **not measured** |")
    else:
        ceiling = ncores * 1e6 / cb_us if cb_us else None
        if cb_rps >= aim:
            verdict = "met"
        elif quiet_rps is not None and quiet_rps >= aim:
            verdict = "**met in quiet rounds only**"
        else:
            verdict = "**missed**"
        note = ""
        if quiet_rps is not None:
            note += f"; quiet rounds: {fk(quiet_rps)}/s"
        if cb_rps < aim and ceiling and ceiling >= aim:
            note += (f"; the proxy's own CPU cost would allow {fk(ceiling)}/s on {ncores} free cores (the wrk "
                     "figures share the cores with the stub, wrk and other processes)")
        elif cb_rps < aim and ceiling:
            note += f"; even with {ncores} free cores the proxy's CPU cost caps it near {fk(ceiling)}/s"
        w(f"| ≥ {aim:,.0f} callbacks/s ({meta.get('duration', '?')} s runs, fresh proxy) | {fk(cb_rps)}/s median of all rounds{note} "
          f"| {verdict} |")
        cap_ = int(meta.get("store_max_entries") or 0)
        window_ = int(meta.get("replay_window_s") or 0)
        if cap_ and window_:
            sustained = cap_ / window_
            w(f"| ≥ {aim:,.0f} callbacks/s sustained (in-memory store, default replay window) | at most "
              f"{sustained:,.0f}/s: the store holds {cap_:,} codes for {window_ // 60} min (see below) "
              f"| {'met' if sustained >= aim else '**missed** (store capacity)'} |")
    w("")

    # Memory and the replay store
    grown = [r for r in cb if ok(r) and r.get("rss_before_kib") and r.get("rss_after_kib")]
    if grown:
        big = max(grown, key=lambda r: r.get("requests", 0))
        per = (big["rss_after_kib"] - big["rss_before_kib"]) * 1024 / big["requests"]
        w(f"Proxy RSS during the largest callback run: {big['rss_before_kib'] / 1024:.1f} → "
          f"{big['rss_after_kib'] / 1024:.1f} MiB over {big['requests']:,} callbacks (≈ {per:.0f} bytes per callback, "
          "mostly the replay store's entries: each code's hash is kept for the replay window).")
        w("")
    cap = int(meta.get("store_max_entries") or 0)
    window = int(meta.get("replay_window_s") or 0)
    if cap and window:
        w(f"**Replay store capacity.** The in-memory store holds at most {cap:,} live entries, and every callback "
          f"keeps one for the replay window ({window // 60} min by default). So the proxy can sustain at most "
          f"{cap:,} ÷ {window} s ≈ **{cap / window:,.0f} callbacks/s** over a whole window"
          + (f"; at the measured {fk(cb_rps)}/s it is full after {cap / cb_rps:,.0f} s" if cb_rps else "")
          + ", and from then on every callback is refused with 503 (`store_unavailable`, `capacity_exceeded`) until "
          "entries expire. This bench therefore starts a fresh proxy for the warm-up, each round and the profile.")
        w("")

    # Profile
    prof = os.path.join(d, "profile.md")
    if os.path.exists(prof):
        with open(prof) as f:
            out.append(f.read().rstrip("\n"))
        w("")

    # Instructions
    ins = os.path.join(d, "instr.json")
    if os.path.exists(ins):
        with open(ins) as f:
            ij = json.load(f)
        n = ij["n"]
        base, cbr, plr = ij["base"], ij["callbacks"], ij["plain"]
        cb_i = (cbr["total"] - base["total"]) / n
        pl_i = (plr["total"] - base["total"]) / n
        w(f"#### Instructions per request (callgrind, `--loops 1`, N = {n}, one keep-alive connection)")
        w("")
        w("(instructions(warm-up + N) − instructions(warm-up)) ÷ N; the warm-up is one callback and one plain "
          "request (JWKS fetch, libcurl multi handle, upstream pool). Deterministic, unlike the wall clock.")
        w("")
        w(f"| | callbacks | plain proxying | ratio |")
        w("|---|---|---|---|")
        w(f"| instructions per request | **{cb_i:,.0f}** | {pl_i:,.0f} | **{ratio(cb_i, pl_i):.1f}×** |")
        objs = sorted(set(cbr["objects"]) | set(plr["objects"]) | set(base["objects"]),
                      key=lambda o: -(cbr["objects"].get(o, 0) - base["objects"].get(o, 0)))
        for o in objs:
            c_o = (cbr["objects"].get(o, 0) - base["objects"].get(o, 0)) / n
            p_o = (plr["objects"].get(o, 0) - base["objects"].get(o, 0)) / n
            if abs(c_o) < 0.01 * cb_i and abs(p_o) < 0.01 * pl_i:
                continue
            w(f"| … in `{o}` | {c_o:,.0f} ({100 * c_o / cb_i:.0f} %) | {p_o:,.0f} ({100 * p_o / pl_i:.0f} %) | |")
        w("")
        w("User-space instructions only (the kernel's share, large for the per-exchange TCP connection, is not in "
          "these counts). Objects under 1 % in both columns are left out. Valgrind hides AVX-512 from the program, "
          "so OpenSSL may take a slower code path for the RSA arithmetic than it does natively"
          + (f" (natively, `openssl speed rsa2048` verifies in {meta['rsa2048_verify_us']} µs on this machine)"
             if meta.get("rsa2048_verify_us") else "") + ".")
        w("")
        sel = ij.get("callback_functions") or []
        if sel:
            w("Where a callback's instructions go (inclusive: a row includes what it calls, so rows overlap; "
              "per callback, callbacks − warm-up):")
            w("")
            w("| function | instructions per callback | share |")
            w("|---|---|---|")
            for row in sel:
                w(f"| {row['label']} | {row['per_request']:,.0f} | {100 * row['per_request'] / cb_i:.0f} % |")
            w("")

    # Notes
    notes = []
    if not failed:
        total = sum(r.get("requests", 0) for r in cb + [warm_cb, prof_cb] if r)
        notes.append(f"No run had socket errors or non-2xx responses: all {total:,} callbacks wrk counted were "
                     "answered 200 (the Lua script counts statuses; a replayed code would get 400).")
    for k, i, r in failed:
        notes.append(f"{k} run {i}: " + "; ".join(r["bad"]))
    for path in ("notes.txt", "events.log"):
        p = os.path.join(d, path)
        if os.path.exists(p):
            with open(p) as f:
                notes += [line.rstrip("\n") for line in f if line.strip()]
    if notes:
        w("#### Notes")
        w("")
        for n_ in notes:
            w(f"- {n_}")
        w("")

    text = "\n".join(out).rstrip("\n") + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    sys.exit(1 if failed or cb_rps is None else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("wrk")
    p.add_argument("--out", required=True)
    p.add_argument("--proxy", type=int, required=True)
    p.add_argument("--stub", type=int, required=True)
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(fn=cmd_wrk)
    p = sub.add_parser("instr")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--internal-port", type=int, required=True)
    p.add_argument("--kind", choices=["callback", "plain"], default=None)
    p.add_argument("--n", type=int, default=0)
    p.add_argument("--prefix", required=True)
    p.add_argument("--client-id", default="123-ios.apps.googleusercontent.com")
    p.add_argument("--redirect-uri", default="com.googleusercontent.apps.123-ios:/oauth2redirect")
    p.set_defaults(fn=cmd_instr)
    p = sub.add_parser("objects")
    p.add_argument("file")
    p.set_defaults(fn=cmd_objects)
    p = sub.add_parser("cgsel")
    p.add_argument("base")
    p.add_argument("measured")
    p.add_argument("--n", type=int, required=True)
    p.set_defaults(fn=cmd_cgsel)
    p = sub.add_parser("perfsel")
    p.add_argument("file")
    p.set_defaults(fn=cmd_perfsel)
    p = sub.add_parser("report")
    p.add_argument("--dir", required=True)
    p.add_argument("--out")
    p.set_defaults(fn=cmd_report)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
