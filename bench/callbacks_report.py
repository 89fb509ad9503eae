#!/usr/bin/env python3
"""Helper for bench/callbacks (Python stdlib only).

Subcommands (wrk runs and their CPU accounting: bench/benchlib.py):
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
import subprocess
import sys
import time
import urllib.parse

from benchlib import PERCENTILES, load_run, med, metric_sum, ratio, spread

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

STORES = {"memory": "memory", "redis": "Redis", "sentinel": "Sentinel", "cluster": "Cluster"}
QUIET = 0.3  # cores other processes may use during a run for it to count as quiet
OUTCOMES = ("refused", "denied", "idp_error", "replay", "store_unavailable", "error")
AIM_VS_REDIS = 0.90  # Sentinel and Cluster: no more than 10 % below single Redis (issue 12)
# Store events that must not happen during a measured run: (store, metric, what it means). Slot-map
# refreshes are not among them: each loop fetches its map on its first command, so most of them
# fall inside the run (counted in `refreshes`, shown in the store table).
STORE_EVENTS = [("sentinel", "callback_proxy_store_failovers_total", "master changes (a failover)"),
                ("cluster", "callback_proxy_store_redirects_total", "MOVED/ASK redirects")]


def store_of(kind):
    """memory, redis, sentinel or cluster; None for plain proxying."""
    return kind.rsplit("-", 1)[1] if kind.startswith("cb-") else None


def label(kind):
    if not kind.startswith("cb-"):
        return "plain proxying" if kind == "plain" else kind
    handoff, store = kind[3:].rsplit("-", 1)
    return f"{handoff}, {STORES.get(store, store)}"


def store_procs(store, names):
    """The processes (as bench/callbacks names them) of one store: `redis`, `sentinel-*`, `cluster-*`."""
    return [n for n in names if n == store or n.startswith(store + "-")] if store and store != "memory" else []


def load(d, tag, conns, store=None):
    """A run: wrk's figures, CPU per request of each process, and what is wrong with it (`bad`).
    A callback run is also checked against the proxy's own counters (scraped before and after):
    every callback wrk completed must be a `success`, none of another outcome. `store_us`: the CPU
    per request of the run's own store processes together (`store_proc_us` each); `keys`: what
    the store held after the run, against what the successes wrote (`key_note` if they differ)."""
    r = load_run(os.path.join(d, f"wrk-{tag}.txt"))
    if r is None:
        return None
    cpu = r["cpu"] or {}
    n = r.get("requests") or 0
    elapsed = cpu.get("elapsed_s")
    for name, v in list((cpu.get("cpu_s") or {}).items()) + [("wrk", cpu.get("wrk_cpu_s"))]:
        if v is not None and n:
            r[f"{name}_us"] = v / n * 1e6
        if v is not None and elapsed:
            r[f"{name}_cores"] = v / elapsed
    r["other_cpu_cores"] = cpu.get("other_cpu_cores")
    if r.get("proxy_us") and r.get("stub_us"):
        r["proxy_per_stub"] = r["proxy_us"] / r["stub_us"]
    procs = store_procs(store, (cpu.get("cpu_s") or {}).keys())
    if procs and n:
        r["store_proc_us"] = {p: (cpu["cpu_s"][p] or 0) / n * 1e6 for p in procs}
        r["store_us"] = sum(r["store_proc_us"].values())
    r["rss_before_kib"], r["rss_after_kib"] = ((cpu.get("rss_kib") or {}).get("proxy") or [None, None])
    bad = []
    if r["errors"]:
        bad.append("errors " + ", ".join(f"{k} {v}" for k, v in r["errors"].items()))
    if "rps" not in r:
        bad.append("no wrk result")
    if "proxy" in (cpu.get("cpu_s") or {}) and cpu["cpu_s"]["proxy"] is None:
        bad.append("proxy died")
    before, after = (_json(os.path.join(d, f"wrk-{tag}.txt.metrics-{w}.json")) for w in ("before", "after"))
    if before is not None or after is not None:
        ok_ = [metric_sum(x, "callback_proxy_callbacks_total", outcome="success") for x in (before, after)]
        other = [sum(metric_sum(x, "callback_proxy_callbacks_total", outcome=o) or 0 for o in OUTCOMES)
                 for x in (before, after)]
        if None in ok_:
            bad.append("/metrics scrape failed")
        else:
            r["successes"] = ok_[1] - ok_[0]
            r["other_outcomes"] = other[1] - other[0]
            if not n <= r["successes"] <= n + conns or r["other_outcomes"]:
                bad.append(f"the proxy counted {r['successes']:,.0f} successes and {r['other_outcomes']:,.0f} other "
                           f"outcomes for {n:,} callbacks wrk completed")
        r["store_events"] = {}
        for st, name, what in STORE_EVENTS:
            got = [metric_sum(x, name) for x in (before, after)]
            if st == store and None not in got and got[1] - got[0]:
                r["store_events"][what] = got[1] - got[0]
        if store == "cluster":
            got = [metric_sum(x, "callback_proxy_store_cluster_refreshes_total") for x in (before, after)]
            r["refreshes"] = None if None in got else got[1] - got[0]
        keys = _keys(os.path.join(d, f"wrk-{tag}.txt.keys"))
        total = metric_sum(after, "callback_proxy_callbacks_total", outcome="success")
        if keys and total is not None:
            # Every success since the process started (the priming callback too) wrote the replay
            # guard's key, a relay callback also its relay code (no run outlives the codes' TTL).
            r["keys"] = keys
            expected = total * (2 if "-relay-" in tag else 1)
            held = sum(v for role, _, v in keys if role == "keys")
            if held != expected:
                r["key_note"] = f"the store held {held:,} keys after the run, the successes wrote {expected:,.0f}"
    r["bad"] = bad
    return r


def _keys(path):
    """[(role, port, keys)] from a run's `.keys` file (role: `keys` for a server holding the store's
    keys, `replica` for Sentinel's replica)."""
    try:
        with open(path) as f:
            return [(a, b, int(c)) for a, b, c in (line.split() for line in f if line.strip())]
    except (OSError, ValueError):
        return None


def _json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fk(v):
    if v is None:
        return "–"
    return f"{v / 1000:.2f}k" if v >= 1000 else f"{v:.0f}"


def f1(v, suffix=""):
    return "–" if v is None else f"{v:.1f}{suffix}"


def f2(v, suffix=""):
    return "–" if v is None else f"{v:.2f}{suffix}"


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
    conns = int(meta.get("conns", 50) or 50)
    ncores = int(meta.get("nproc", 2) or 2)
    kinds = meta.get("kinds", "").split()
    cbk = [k for k in kinds if k.startswith("cb-")]
    runs = {k: [load(d, f"{k}-r{r}", conns, store_of(k)) for r in range(1, rounds + 1)] for k in kinds}
    warm = {k: load(d, f"{k}-warmup", conns, store_of(k)) for k in kinds}
    prof = {k: load(d, f"{k}-profile", conns, store_of(k)) for k in cbk[:1]}
    stores = [s_ for s_ in STORES if any(store_of(k) == s_ for k in cbk)]
    ok = lambda r: r is not None and not r["bad"]
    good = {k: [r for r in runs[k] if ok(r)] for k in kinds}
    m = lambda k, f: med([r.get(f) for r in good[k]])
    out = []
    w = out.append

    failed = [(label(k), str(i + 1), r) for k in kinds for i, r in enumerate(runs[k]) if r is not None and r["bad"]]
    failed += [(label(k), tag, r) for tag, group in (("warm-up", warm), ("profile", prof))
               for k, r in group.items() if r is not None and r["bad"]]

    w(f"### Callback throughput — {meta.get('date', '?')}")
    w("")
    if failed:
        w("> **FAILED: some runs had errors, non-2xx responses or outcomes other than success** (every callback must "
          "end verified; a 400 usually means a replayed code or a contract mismatch, a 502 or 503 an IdP, stub or "
          "store problem). They are excluded from the medians and listed under Notes.")
        w("")
    w(f"- Command: `{meta.get('command', '?')}` (in `{meta.get('cwd', '?')}`), took {meta.get('elapsed', '?')}")
    w(f"- Machine: `nproc` = {meta.get('nproc', '?')}; {meta.get('uname', '?')}; load average at start "
      f"{meta.get('load_start', '?')}, at end {meta.get('load_end', '?')} (shared machine: compare ratios and CPU per "
      "request, not absolute requests/s)")
    w(f"- Versions: {meta.get('cp_version', '?')} ({meta.get('cp_bin', '?')}); {meta.get('nginx_version', '?')}; "
      f"wrk {meta.get('wrk_version', '?')}; {meta.get('swift_version', '?')}; {meta.get('curl_version', '?')}; "
      f"{meta.get('openssl_version', '?')}"
      + (f"; {meta['redis_version']}" if meta.get("redis_version") else "") + f"; source: {meta.get('git', '?')}")
    w(f"- Stub IdP and upstream: one nginx, `worker_processes 1`, on loopback `http://`: `POST /token` → fixed JSON "
      f"with a real RS256 id_token ({meta.get('id_token_bytes', '?')} bytes, 2048-bit key), `GET /jwks` "
      "(`Cache-Control: max-age=3600`), `GET /` and the relay hand-off's app callback → 200 with a 1024-byte body")
    variants = "; ".join(f"**{label(k)}**: `handoff: {meta.get('config_' + k, '? ?').split()[1]}`, "
                         f"`store: {meta.get('config_' + k, '? ?').split()[0].strip(chr(34))}`" for k in cbk)
    setups = {"redis": "Redis: a private `redis-server` on loopback, flushed before each of its runs",
              "sentinel": "Sentinel: a private master and its replica (`--replicaof`) and three sentinels "
                          "(`redis-server CONF --sentinel`, quorum 2, `down-after-milliseconds` 10000) on loopback, the "
                          "master flushed before each of its runs",
              "cluster": "Cluster: three private cluster-enabled primaries on loopback (no replicas), joined by "
                         "`redis-cli --cluster create … --cluster-replicas 0`, two of them given as seeds, every "
                         "primary flushed before each of its runs"}
    setup = "; ".join(setups[s_] for s_ in stores if s_ in setups)
    w(f"- Proxy: provider `google` (`kind: google`, native iOS client), `--loops 2 --access-log off`, log level "
      f"warn. Variants as run: {variants}. Plain proxying runs on the first variant's configuration. "
      "`verify` answers with the proxy's own page; `relay` (the default hand-off) also writes a relay code to the "
      "store and forwards the app's callback to the upstream. "
      + (f"{setup}; every `redis-server` with `--save \"\" --appendonly no`. " if setup else "")
      + "A fresh proxy process for every run, primed with one callback (JWKS fetch)")
    w(f"- Load: `wrk -t1 -c{conns} -d{meta.get('duration', '?')}s --latency`, callbacks with "
      "`-s bench/callbacks.lua` (a unique code per request), plain with `GET /`; "
      f"{rounds} rounds, all {len(kinds)} alternating (order rotated each round), after one "
      f"{meta.get('warmup', '?')}s warm-up run each. Every callback run is also checked against the proxy's "
      "`/metrics`: the `success` outcomes it counted must match the callbacks wrk completed")
    w("- CPU: utime+stime of the proxy process (all threads), the stub nginx (master+worker), every redis-server "
      "process and wrk from `/proc` before and after each run, ÷ requests wrk completed (CPU time: the wait for "
      "the IdP is not in it). A run's store CPU is the sum over its own store's processes (Sentinel: master, "
      "replica and sentinels; Cluster: the three primaries); the other stores' idle processes are measured too, "
      "so they are not counted as other processes")
    w("")

    sanity = os.path.join(d, "sanity.tsv")
    if os.path.exists(sanity):
        w("#### Sanity check (curl; the proxy's counters from `/metrics`)")
        w("")
        w("| request | expected | got |")
        w("|---|---|---|")
        with open(sanity) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 3:
                    w(f"| {parts[0]} | {parts[1]} | {parts[2]} |")
        w("")

    # Summary
    w("#### Summary (medians over rounds)")
    w("")
    w("| variant | requests/s | spread (max ÷ min) | p50 / p75 / p90 / p99 (ms) | proxy CPU µs / req | "
      "store (redis-server processes) CPU µs / req | stub nginx CPU µs / req | other processes, cores |")
    w("|---|---|---|---|---|---|---|---|")
    for k in kinds:
        lat = " / ".join(f2(m(k, f"p{p}")) for p in PERCENTILES)
        w(f"| {label(k)} | **{fk(m(k, 'rps'))}** | {f2(spread([r.get('rps') for r in good[k]]), '×')} | {lat} "
          f"| {f1(m(k, 'proxy_us'))} | {f1(m(k, 'store_us'))} | {f1(m(k, 'stub_us'))} "
          f"| {f2(m(k, 'other_cpu_cores'))} |")
    w("")

    def compare(title, pairs, yardstick=False):
        """`yardstick`: also the proxy's CPU per callback in units of the stub's, which does the same work
        per callback in both variants (same hand-off): it factors out how fast the shared machine was."""
        pairs = [(x, y) for x, y in pairs if x in kinds and y in kinds]
        if not pairs:
            return
        w(f"#### {title}")
        w("")
        w("Ratio of the medians, and in brackets the per-round ratios (runs of the same round; the order rotates, "
          f"so they ran close together). Quiet rounds: the median throughput ratio over the rounds in which both "
          f"runs had other processes under {QUIET} cores, and how many there were."
          + (" Proxy ÷ stub CPU: the proxy's CPU per callback divided by the stub nginx's in the same run; the stub "
             "does the same work per callback whatever the store, so this ratio factors out how fast the shared "
             "machine was during each run (the CPU per callback of every process moves with it)." if yardstick else ""))
        w("")
        w("| | throughput | quiet rounds | p50 | p99 | proxy CPU / request | proxy + store CPU / request |"
          + (" proxy ÷ stub CPU |" if yardstick else ""))
        w("|---|---|---|---|---|---|---|" + ("---|" if yardstick else ""))
        for x, y in pairs:
            cells = []
            for f in ("rps", "p50", "p99", "proxy_us", "total_us") + (("proxy_per_stub",) if yardstick else ()):
                per = []
                for rx, ry in zip(runs[x], runs[y]):
                    if ok(rx) and ok(ry):
                        per.append(ratio(_total(rx) if f == "total_us" else rx.get(f),
                                         _total(ry) if f == "total_us" else ry.get(f)))
                mx = med([_total(r) for r in good[x]]) if f == "total_us" else m(x, f)
                my = med([_total(r) for r in good[y]]) if f == "total_us" else m(y, f)
                cells.append(f"**{f2(ratio(mx, my), '×')}** [{' '.join(f2(p) for p in per)}]")
                if f == "rps":
                    quiet_ = [ratio(rx["rps"], ry["rps"]) for rx, ry in zip(runs[x], runs[y]) if ok(rx) and ok(ry)
                              and max(rx.get("other_cpu_cores") or 0, ry.get("other_cpu_cores") or 0) < QUIET]
                    cells.append(f"{f2(med(quiet_), '×')} ({len(quiet_)})" if quiet_ else "none")
            w(f"| {label(x)} ÷ {label(y)} | " + " | ".join(cells) + " |")
        w("")

    compare("Redis ÷ in-memory store", [(f"cb-{h}-redis", f"cb-{h}-memory") for h in ("relay", "verify")], True)
    compare("Sentinel and Cluster ÷ single Redis", [(f"cb-{h}-{s_}", f"cb-{h}-redis")
                                                     for s_ in ("sentinel", "cluster") for h in ("relay", "verify")], True)
    compare("relay ÷ verify hand-off", [(f"cb-relay-{s_}", f"cb-verify-{s_}") for s_ in STORES])

    # The stores' own processes
    skinds = [k for k in cbk if store_of(k) != "memory" and good[k]]
    if skinds:
        w("#### The store's processes (medians over rounds)")
        w("")
        w("CPU per callback of each process of the run's store, and the keys each server held after the run "
          "(every success since the proxy started wrote 1 key, a relay callback 2; Sentinel's replica in brackets: "
          "what it had received by then). Cluster: the slot-map fetches (`CLUSTER SLOTS`) the proxy started during "
          "the run (`callback_proxy_store_cluster_refreshes_total`; each of its 2 loops fetches its own map on its "
          "first command, the priming callback's loop before the run).")
        w("")
        w("| variant | CPU µs / callback, each process | keys after the run, each server | slot-map fetches during the run |")
        w("|---|---|---|---|")
        for k in skinds:
            names = sorted({p for r in good[k] for p in r.get("store_proc_us") or {}})
            cpu_ = ", ".join(f"{p} {f1(med([(r.get('store_proc_us') or {}).get(p) for r in good[k]]))}" for p in names)
            servers = [(role, port) for role, port, _ in (good[k][0].get("keys") or [])]
            keys_ = []
            for role, port in servers:
                v = med([next((n for ro, po, n in r.get("keys") or [] if (ro, po) == (role, port)), None)
                         for r in good[k]])
                keys_.append(f"({fk(v)})" if role == "replica" else f":{port} {fk(v)}")
            fetches = " ".join(f"{r['refreshes']:.0f}" for r in good[k] if r.get("refreshes") is not None)
            w(f"| {label(k)} | {cpu_} | {' '.join(keys_)} | {fetches or '–'} |")
        w("")
    compare("Callbacks ÷ plain proxying", [(k, "plain") for k in cbk])

    # Per round
    w("#### Per round (requests/s; other processes' cores in brackets)")
    w("")
    w("| round | " + " | ".join(label(k) for k in kinds) + " |")
    w("|---" * (len(kinds) + 1) + "|")
    for i in range(rounds):
        cells = []
        for k in kinds:
            r = runs[k][i]
            if r is None:
                cells.append("not run")
                continue
            c = f"{fk(r.get('rps'))} ({f2(r.get('other_cpu_cores'))})"
            cells.append(c if ok(r) else f"~~{c}~~ (error)")
        w(f"| {i + 1} | " + " | ".join(cells) + " |")
    w("")
    if any(warm.values()):
        w("Warm-up runs (not counted): " + ", ".join(f"{label(k)} {fk((warm[k] or {}).get('rps'))}/s" for k in kinds)
          + ".")
        w("")

    # Ceilings, quiet rounds
    lines = []
    for k in cbk:
        us = med([_total(r) for r in good[k]])
        if us:
            whole = us + (m(k, "stub_us") or 0) + (m(k, "wrk_us") or 0)
            lines.append(f"{label(k)}: {f1(us)} µs of proxy (+ store) CPU per callback → "
                         f"**{fk(ncores * 1e6 / us)}/s** on {ncores} free cores; with the stub and wrk on the same "
                         f"cores ({f1(whole)} µs) ≈ {fk(ncores * 1e6 / whole)}/s")
    if lines:
        w(f"CPU-bound ceilings on this {ncores}-core machine, from the medians:")
        w("")
        for line in lines:
            w(f"- {line}")
        w("")
    others = [r.get("other_cpu_cores") for k in kinds for r in good[k]]
    quiet = [x for x in others if x is not None and x < QUIET]
    if others:
        w(f"Machine noise: other processes used {f2(min(x for x in others if x is not None))}–"
          f"{f2(max(x for x in others if x is not None))} cores during the runs (median {f2(med(others))} of "
          f"{ncores}); {len(quiet)} of {len(others)} runs were quiet (< {QUIET} cores). "
          + ("The absolute rates are lower than this machine gives when idle; the ratios of runs close together "
             "and the CPU per request are what to compare." if len(quiet) < len(others) else ""))
        w("")

    # Aim
    w("#### Aim")
    w("")
    w("| aim | variant | measured | verdict |")
    w("|---|---|---|---|")
    for k in cbk:
        rps, us = m(k, "rps"), med([_total(r) for r in good[k]])
        if rps is None:
            w(f"| ≥ {aim:,.0f} callbacks/s | {label(k)} | no valid run | **not measured** |")
            continue
        qr = med([r["rps"] for r in good[k] if (r.get("other_cpu_cores") or 0) < QUIET])
        ceiling = ncores * 1e6 / us if us else None
        verdict = "met" if rps >= aim else ("**met in quiet rounds only**" if qr and qr >= aim else "**missed**")
        note = f"; quiet rounds: {fk(qr)}/s" if qr else ""
        if rps < aim and ceiling:
            note += f"; the CPU cost would allow {fk(ceiling)}/s on {ncores} free cores"
        w(f"| ≥ {aim:,.0f} callbacks/s ({meta.get('duration', '?')} s runs, fresh proxy) | {label(k)} "
          f"| {fk(rps)}/s median{note} | {verdict} |")
    for k in cbk:
        y = k[:-len(store_of(k))] + "redis"  # the same hand-off with single Redis
        if store_of(k) not in ("sentinel", "cluster") or y not in kinds:
            continue
        per = [ratio(rx.get("rps"), ry.get("rps")) for rx, ry in zip(runs[k], runs[y]) if ok(rx) and ok(ry)]
        both = ratio(m(k, "rps"), m(y, "rps"))
        if not per or both is None:
            w(f"| ≥ {AIM_VS_REDIS:.2f}× single Redis's callbacks/s | {label(k)} | no valid pair of runs "
              "| **not measured** |")
            continue
        cpu_ = ratio(med([_total(r) for r in good[k]]), med([_total(r) for r in good[y]]))
        verdict = ("met" if min(med(per), both) >= AIM_VS_REDIS else
                   "**missed**" if max(med(per), both) < AIM_VS_REDIS else "**unclear** (the two ratios disagree)")
        w(f"| ≥ {AIM_VS_REDIS:.2f}× single Redis's callbacks/s (issue 12) | {label(k)} | {f2(both, '×')} (ratio of "
          f"medians), {f2(med(per), '×')} (median of the per-round ratios [{' '.join(f2(x) for x in per)}]); "
          f"proxy + store CPU per callback {f2(cpu_, '×')} | {verdict} |")
    cap, window = int(meta.get("store_max_entries") or 0), int(meta.get("replay_window_s") or 0)
    if cap and window and any(k.endswith("-memory") for k in cbk):
        w(f"| ≥ {aim:,.0f} callbacks/s sustained | in-memory store, default replay window | at most "
          f"{cap / window:,.0f}/s: the store holds {cap:,} codes for {window // 60} min "
          f"| {'met' if cap / window >= aim else '**missed** (store capacity)'} |")
    w("")

    # Memory
    grown = [r for k in cbk if k.endswith("-memory") for r in good[k]
             if r.get("rss_before_kib") and r.get("rss_after_kib") and r.get("requests")]
    if grown:
        big = max(grown, key=lambda r: r["requests"])
        per = (big["rss_after_kib"] - big["rss_before_kib"]) * 1024 / big["requests"]
        w(f"Proxy RSS during the largest in-memory callback run: {big['rss_before_kib'] / 1024:.1f} → "
          f"{big['rss_after_kib'] / 1024:.1f} MiB over {big['requests']:,} callbacks (≈ {per:.0f} bytes per callback: "
          "the replay store keeps each code's hash for the replay window; relay codes too, for their TTL).")
        w("")
    if cap and window:
        w(f"**In-memory store capacity.** It holds at most {cap:,} live entries; every callback keeps one for the "
          f"replay window ({window // 60} min by default), a relay callback a second one for the relay code's TTL. "
          f"So one instance sustains at most {cap:,} ÷ {window} s ≈ **{cap / window:,.0f} callbacks/s** over a "
          "whole window, after which callbacks get 503 (`store_unavailable`) until entries expire. Redis has no such "
          "limit in the proxy (its own `maxmemory` applies).")
        w("")

    # Profile
    profile = os.path.join(d, "profile.md")
    if os.path.exists(profile):
        w(f"Profile and instruction counts below: the **{label(cbk[0])}** variant.")
        w("")
        with open(profile) as f:
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
        total = sum(r.get("requests", 0) for k in cbk for r in runs[k] + [warm[k], prof.get(k)] if r)
        notes.append(f"No run had socket errors or non-2xx responses, and the proxy's `/metrics` counted a `success` "
                     f"for each of the {total:,} callbacks wrk completed (and no other outcome).")
    for k, i, r in failed:
        notes.append(f"{k} run {i}: " + "; ".join(r["bad"]))
    for k in cbk:
        for tag, r in [(str(i + 1), r) for i, r in enumerate(runs[k])] + [("warm-up", warm[k])]:
            if r is None:
                continue
            if r.get("store_events"):
                notes.append(f"{label(k)} run {tag}: the proxy counted " +
                             ", ".join(f"{v:,.0f} {what}" for what, v in r["store_events"].items()) +
                             " during the run (the store's topology moved; nothing should have)")
            if r.get("key_note"):
                notes.append(f"{label(k)} run {tag}: {r['key_note']}")
    checked = [r for k in cbk for r in runs[k] + [warm[k]] if r and r.get("keys")]
    if checked and not any(r.get("key_note") for r in checked):
        notes.append(f"In all {len(checked)} runs with a Redis store, the keys it held afterwards were exactly those "
                     "the proxy's successes wrote (1 per callback, 2 per relay callback, summed over the servers).")
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
    sys.exit(1 if failed or not any(good[k] for k in cbk) else 0)


def _total(r):
    """Proxy + store CPU per request (µs): what the proxy's side of a callback costs."""
    return None if r.get("proxy_us") is None else r["proxy_us"] + (r.get("store_us") or 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
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
