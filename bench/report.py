#!/usr/bin/env python3
"""Helper for bench/run (Python stdlib only).

Subcommands:
  idle-conns  open N keep-alive connections to a proxy, one GET each, measure the proxy's RSS
  startup     time callback-proxy from exec to /healthz answering (and its own startup_ms)
  report      parse the raw wrk outputs and JSON results in a directory and print Markdown
"""
import argparse
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time

from benchlib import load_run, med, metric_sum, parse_wrk, ratio, tree_rss_kib

# --------------------------------------------------------------------------------------------
# idle-conns


def _response_complete(buf):
    """Returns (status, done) for an HTTP/1.1 response in buf."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None, False
    head = bytes(buf[:end]).decode("latin-1")
    lines = head.split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return -1, True
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    body = len(buf) - end - 4
    if "content-length" in headers:
        return status, body >= int(headers["content-length"])
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return status, buf.endswith(b"0\r\n\r\n")
    return status, False  # close-delimited: not keep-alive; treated as a failure by the caller


def cmd_idle_conns(a):
    addr = ("127.0.0.1", a.port)
    req = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{a.port}\r\nUser-Agent: bench-idle\r\n\r\n".encode()
    sel = selectors.DefaultSelector()
    idle, failures, statuses = [], {}, {}

    def fail(s, why):
        failures[why] = failures.get(why, 0) + 1
        try:
            sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()

    time.sleep(0.5)
    before, nprocs = tree_rss_kib(a.pid)
    t0 = time.monotonic()
    for start in range(0, a.n, a.batch):
        pending = 0
        for _ in range(min(a.batch, a.n - start)):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            err = s.connect_ex(addr)
            if err not in (0, 115):  # EINPROGRESS
                failures[f"connect errno {err}"] = failures.get(f"connect errno {err}", 0) + 1
                s.close()
                continue
            sel.register(s, selectors.EVENT_WRITE, {"phase": "connect", "buf": bytearray()})
            pending += 1
        deadline = time.monotonic() + a.timeout
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(1.0):
                s, st = key.fileobj, key.data
                if st["phase"] == "connect":
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        fail(s, f"connect errno {err}")
                        pending -= 1
                        continue
                    s.send(req)
                    st["phase"] = "read"
                    sel.modify(s, selectors.EVENT_READ, st)
                    continue
                try:
                    data = s.recv(65536)
                except OSError as e:
                    fail(s, f"recv {e.__class__.__name__}")
                    pending -= 1
                    continue
                if not data:
                    fail(s, "closed before full response")
                    pending -= 1
                    continue
                st["buf"] += data
                status, done = _response_complete(st["buf"])
                if done:
                    statuses[status] = statuses.get(status, 0) + 1
                    sel.unregister(s)
                    idle.append(s)
                    pending -= 1
        if pending:
            for key in list(sel.get_map().values()):
                fail(key.fileobj, "timeout")
    opened_s = time.monotonic() - t0
    time.sleep(a.settle)
    after, nprocs_after = tree_rss_kib(a.pid)
    # Are they still open? A readable idle socket means the proxy closed it (or sent garbage).
    still_open = 0
    for s in idle:
        try:
            data = s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            if data:
                still_open += 1  # unexpected bytes, but the connection is open
        except BlockingIOError:
            still_open += 1
        except OSError:
            pass
    for s in idle:
        s.close()
    n_ok = len(idle)
    print(json.dumps({
        "requested": a.n, "ok": n_ok, "still_open": still_open, "statuses": statuses,
        "failures": failures, "rss_before_kib": before, "rss_after_kib": after,
        "processes": nprocs_after, "open_seconds": round(opened_s, 2),
        "kib_per_conn": round((after - before) / n_ok, 3) if n_ok else None,
    }))


# --------------------------------------------------------------------------------------------
# startup


def _healthz(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=1)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        buf = b""
        while b"\r\n" not in buf:
            d = s.recv(4096)
            if not d:
                break
            buf += d
        return int(buf.split()[1]) if buf else None
    finally:
        s.close()


def cmd_startup(a):
    runs = []
    for i in range(a.runs):
        argv = [a.bin, "--listen", f"127.0.0.1:{a.port}", "--upstream", a.upstream,
                "--internal-listen", f"127.0.0.1:{a.internal_port}", "--loops", str(a.loops),
                "--access-log", "off"]
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            ready = None
            deadline = t0 + 10
            while time.monotonic() < deadline:
                try:
                    if _healthz(a.internal_port) == 200:
                        ready = (time.monotonic() - t0) * 1000
                        break
                except (ConnectionRefusedError, ConnectionResetError, socket.timeout):
                    pass
                if p.poll() is not None:
                    break
                time.sleep(0.0002)
            t1 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=35)
            stop_ms = (time.monotonic() - t1) * 1000
        except BaseException:
            p.kill()
            p.wait()
            raise
        reported = None
        for line in err.decode(errors="replace").splitlines():
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("msg") == "ready":
                reported = float(j.get("startup_ms"))
        runs.append({"exec_to_healthz_ms": round(ready, 2) if ready is not None else None,
                     "startup_ms": reported, "exit_code": p.returncode,
                     "sigterm_to_exit_ms": round(stop_ms, 2)})
        time.sleep(0.2)
    print(json.dumps({"runs": runs}))


# --------------------------------------------------------------------------------------------
# /metrics and the access log in the report


def metrics_section(d, keys, rounds, w):
    """The /metrics scrapes around and during each callback-proxy run."""
    rows = []
    for key, label in keys:
        for r in range(1, rounds + 1):
            base = os.path.join(d, f"wrk-{key}-r{r}.txt")
            scr = {}
            for when in ("before", "during", "after"):
                try:
                    scr[when] = json.load(open(f"{base}.metrics-{when}.json"))
                except (OSError, ValueError):
                    scr[when] = None
            if not any(scr.values()):
                continue
            rows.append((label, r, load(base), scr))
    if not rows:
        return None
    w("## /metrics under load (callback-proxy)")
    w("")
    w("`GET /metrics` on the internal listener before each measured run, half-way through it (under load) and "
      "0.2 s after it. Each scrape is checked against the text format (TYPE before samples, no duplicate series, "
      "histogram buckets cumulative with `+Inf` = `_count`). Δ = after − before of "
      "`callback_proxy_requests_total{route=\"proxied\"}` (all status classes) and of "
      "`callback_proxy_upstream_response_seconds_count`, next to the requests wrk counted: Δ may exceed wrk's "
      "count by up to the 50 requests in flight when wrk stops (wrk does not count them).")
    w("")
    w("| proxy | round | scrapes parse | scrape under load (ms, bytes, series) | mid-run counter between before and after "
      "| wrk requests | Δ requests_total (proxied) | Δ − wrk | Δ upstream histogram count |")
    w("|---|---|---|---|---|---|---|---|---|")
    verdicts = []
    for label, r, run, scr in rows:
        b, m, a_ = scr["before"], scr["during"], scr["after"]
        parse_ok = all(x and x["ok"] for x in (b, m, a_))
        problems = [p for x in (b, m, a_) if x for p in x.get("problems", [])]
        proxied = lambda x: metric_sum(x, "callback_proxy_requests_total", route="proxied")
        upstream = lambda x: metric_sum(x, "callback_proxy_upstream_response_seconds_count")
        mid = None not in (proxied(b), proxied(m), proxied(a_)) and proxied(b) < proxied(m) < proxied(a_)
        n = run.get("requests")
        delta = proxied(a_) - proxied(b) if None not in (proxied(a_), proxied(b)) else None
        dup = upstream(a_) - upstream(b) if None not in (upstream(a_), upstream(b)) else None
        diff = delta - n if delta is not None and n is not None else None
        good = parse_ok and mid and diff is not None and 0 <= diff <= 60
        verdicts.append(good)
        load_cell = f"{m['ms']:.1f} ms, {m['bytes']:,} B, {m['series']}" if m and m.get("ms") is not None else "—"
        w(f"| {label} | {r} | {'yes' if parse_ok else 'NO: ' + '; '.join(problems[:3])} | {load_cell} "
          f"| {'yes' if mid else 'no'} | {n if n is not None else '—'} "
          f"| {'—' if delta is None else f'{delta:,.0f}'} | {'—' if diff is None else f'{diff:+,.0f}'} "
          f"| {'—' if dup is None else f'{dup:,.0f}'} |")
    w("")
    ok = all(verdicts)
    w(f"Verdict: **{'every scrape parsed and the counter matched wrk' if ok else 'CHECK FAILED (see the rows)'}**.")
    w("")
    return ok


def access_log_section(rps, runs, rounds, w):
    """What the JSON access log costs each server: on ÷ off, by the medians and per round."""
    pairs = [(on, off) for on, off in (("cp-log", "cp"), ("nginx-log", "nginx")) if on in rps and off in rps]
    if not pairs:
        return
    names = {"cp": "callback-proxy", "nginx": "nginx"}
    w("## Cost of the access log (JSON lines to a file)")
    w("")
    w("Log on ÷ off: ratio of the medians, per-round ratios in brackets. The server's own CPU time per request "
      "(all its processes, from `/proc`, ÷ requests wrk completed) is the figure least moved by other work on "
      "the machine.")
    w("")
    w("| server | throughput | p50 | p99 | CPU per request | CPU µs / request, off → on |")
    w("|---|---|---|---|---|---|")
    for on, off in pairs:
        cells = []
        for field in ("rps", "p50", "p99", "proxy_us"):
            per = [ratio(runs[on][i].get(field), runs[off][i].get(field))
                   if runs[on][i]["ok"] and runs[off][i]["ok"] else None for i in range(rounds)]
            m_on = med([p.get(field) if p["ok"] else None for p in runs[on]])
            m_off = med([p.get(field) if p["ok"] else None for p in runs[off]])
            cells.append(f"**{fmt_ratio(ratio(m_on, m_off))}** [{' '.join(fmt_ratio(x) for x in per)}]")
        us = [med([p.get("proxy_us") if p["ok"] else None for p in runs[k]]) for k in (off, on)]
        cells.append(" → ".join("—" if u is None else f"{u:.1f}" for u in us))
        w(f"| {names[off]} | " + " | ".join(cells) + " |")
    if ("cp-log", "cp") in pairs and ("nginx-log", "nginx") in pairs:
        w("")
        w(f"Both logging: callback-proxy + access log ÷ nginx + access log = "
          f"**{fmt_ratio(ratio(rps.get('cp-log'), rps.get('nginx-log')))}** (throughput, ratio of medians).")
    w("")


# --------------------------------------------------------------------------------------------
# the matrix (MATRIX=1)


MATRIX_TITLES = {
    "close": "`Connection: close` on every request (accept + a new client connection per request; upstream keep-alive on)",
    "64k": "64 KiB responses",
    "1m": "1 MiB responses",
    "post": "64 KiB request bodies (POST, streamed to the upstream, which reads all of it before answering)",
}
MATRIX_KEYS = (("cp", "callback-proxy"), ("nginx", "nginx"), ("haproxy", "HAProxy"), ("caddy", "Caddy"))


def matrix_section(d, rounds, w):
    """One table per matrix scenario (bench/run with MATRIX=1): requests/s, p99 and CPU per request
    of each proxy, and callback-proxy's ratios to each peer (median of the rounds, per-round ratios
    in brackets). Returns (summary rows, notes about failed runs)."""
    path = os.path.join(d, "matrix.txt")
    if not os.path.exists(path):
        return [], []
    scenarios = [line.rstrip("\n").split("\t", 1) for line in open(path) if line.strip()]
    w("## Matrix: other shapes of traffic")
    w("")
    w("The same proxies and upstream as above (access logs off), one scenario at a time, the proxies alternating "
      "inside each round (order rotated), one warm-up run each. CPU per request = the proxy's CPU time (all its "
      "processes and threads, from `/proc`) ÷ requests wrk completed: the figure least moved by other work on the "
      "machine. Ratios are callback-proxy ÷ peer: higher is better for requests/s, lower for p99 and CPU.")
    w("")
    summary, notes = [], []
    fields = (("rps", "requests/s", fmt_rps), ("p99", "p99 (ms)", fmt_ms),
              ("proxy_us", "CPU µs / request", lambda v: "—" if v is None else f"{v:.1f}"))
    for name, cmd in scenarios:
        if name.startswith("conns"):
            title = f"{int(name[5:]):,} keep-alive connections (GET /, 1 KiB)"
        else:
            title = MATRIX_TITLES.get(name, name)
        runs = {k: [load(os.path.join(d, f"mx-{name}-{k}-r{r}.txt")) for r in range(1, rounds + 1)]
                for k, _ in MATRIX_KEYS}
        w(f"### {title}")
        w("")
        w(f"`{cmd}`")
        w("")
        w("| proxy | requests/s per round | requests/s | p99 (ms) | CPU µs / request | other processes (cores) per round |")
        w("|---|---|---|---|---|---|")
        medians = {}
        for k, label in MATRIX_KEYS:
            for f, _, _ in fields:
                medians[(k, f)] = med([p.get(f) if p["ok"] else None for p in runs[k]])
            cells = []
            for i, p in enumerate(runs[k], 1):
                if p.get("error"):
                    cells.append(f"FAILED ({p['error']})")
                    notes.append(f"matrix {name}, {label}, round {i}: {p['error']}")
                elif not p["ok"]:
                    errs = ", ".join(f"{a} {b}" for a, b in p["errors"].items())
                    cells.append(f"{fmt_rps(p.get('rps'))} ⚠ {errs}")
                    notes.append(f"matrix {name}, {label}, round {i}: errors {errs} — excluded from the median")
                else:
                    cells.append(fmt_rps(p.get("rps")))
            other = " ".join("—" if p.get("other") is None else f"{p['other']:.2f}" for p in runs[k])
            w(f"| {label} | {' / '.join(cells)} | **{fmt_rps(medians[(k, 'rps')])}** | "
              f"{fmt_ms(medians[(k, 'p99')])} | {fields[2][2](medians[(k, 'proxy_us')])} | {other} |")
        w("")
        w("| callback-proxy ÷ | " + " | ".join(h for _, h, _ in fields) + " |")
        w("|---|---|---|---|")
        row = {}
        for pk, plabel in MATRIX_KEYS[1:]:
            cells = []
            for f, _, _ in fields:
                rm = ratio(medians[("cp", f)], medians[(pk, f)])
                per = [ratio(a.get(f), b.get(f)) if a["ok"] and b["ok"] else None
                       for a, b in zip(runs["cp"], runs[pk])]
                row[(pk, f)] = rm
                cells.append(f"**{fmt_ratio(rm)}** [{' '.join(fmt_ratio(x) for x in per)}]")
            w(f"| {plabel} | " + " | ".join(cells) + " |")
        w("")
        summary.append((title, row))
    w("### Matrix summary (callback-proxy ÷ peer, ratio of medians)")
    w("")
    w("Aim (issue 15): ≥ 1.2× nginx's requests/s in every row, p99 ≤ nginx's.")
    w("")
    w("| scenario | requests/s ÷ nginx | ÷ HAProxy | ÷ Caddy | p99 ÷ nginx | CPU / request ÷ nginx | vs the aim |")
    w("|---|---|---|---|---|---|---|")
    for title, row in summary:
        t, p = row.get(("nginx", "rps")), row.get(("nginx", "p99"))
        if t is None:
            verdict = "no data"
        else:
            verdict = ("met" if t >= 1.2 else ("≥ nginx, below 1.2×" if t >= 1.0 else "**behind nginx**"))
            if p is not None and p > 1.0:
                verdict += "; **p99 above nginx's**"
        w(f"| {title} | {fmt_ratio(t)} | {fmt_ratio(row.get(('haproxy', 'rps')))} | "
          f"{fmt_ratio(row.get(('caddy', 'rps')))} | {fmt_ratio(p)} | {fmt_ratio(row.get(('nginx', 'proxy_us')))} | "
          f"{verdict} |")
    w("")
    return summary, notes


# --------------------------------------------------------------------------------------------
# report


def load(path):
    """A wrk run (benchlib.load_run), with `other`: cores the rest of the machine used meanwhile."""
    r = load_run(path)
    if r is None:
        return {"ok": False, "error": "not run", "errors": {}}
    cpu = r["cpu"] or {}
    r["other"] = cpu.get("other_cpu_cores")
    proxy_s = (cpu.get("cpu_s") or {}).get("proxy")
    r["proxy_us"] = proxy_s / r["requests"] * 1e6 if proxy_s is not None and r.get("requests") else None
    return r


def fmt_rps(v):
    return f"{v / 1000:.1f}k" if v is not None else "—"


def fmt_ms(v):
    if v is None:
        return "—"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"


def fmt_ratio(v):
    return f"{v:.2f}×" if v is not None else "—"


def cmd_report(a):
    d = a.dir
    meta = {}
    for line in open(os.path.join(d, "meta.txt")):
        k, _, v = line.rstrip("\n").partition("=")
        meta[k] = v
    meta["sanity"] = []
    if os.path.exists(os.path.join(d, "sanity.tsv")):
        for line in open(os.path.join(d, "sanity.tsv")):
            label, status, nbytes = line.rstrip("\n").split("\t")
            meta["sanity"].append({"label": label, "status": status, "bytes": nbytes})
    keys = [k.split(":", 1) for k in meta["proxies"].split(";")]  # key:label;...
    rounds = int(meta["rounds"])
    out = []
    w = out.append

    runs = {}  # key -> list of parsed per round (None if not run)
    warm = {}
    for key, _ in keys:
        runs[key] = []
        for r in range(1, rounds + 1):
            runs[key].append(load(os.path.join(d, f"wrk-{key}-r{r}.txt")))
        wp = os.path.join(d, f"wrk-{key}-warmup.txt")
        warm[key] = load(wp) if os.path.exists(wp) else None

    def clean(key, field):
        return [p.get(field) if p["ok"] else None for p in runs[key]]

    def cell(p, field, fmt):
        if p.get("error"):
            return f"FAILED ({p['error']})"
        v = fmt(p.get(field))
        if not p["ok"]:
            errs = ", ".join(f"{k} {v2}" for k, v2 in p["errors"].items())
            return f"{v} ⚠ errors: {errs}"
        return v

    labels = dict((k, l) for k, l in keys)
    w(f"# CallbackProxy benchmark — {meta['date']}")
    w("")
    w(f"- Command: `{meta['command']}` (in `{meta['cwd']}`), took {meta.get('elapsed', '?')}")
    w(f"- Machine: `nproc` = {meta['nproc']}; {meta['uname']}; load average at start {meta['load_start']}, "
      f"at end {meta.get('load_end', '?')} (shared machine: compare ratios, not absolute numbers)")
    w(f"- Versions: {meta['cp_version']} ({meta['cp_bin']}); {meta['nginx_version']}; "
      f"{meta['haproxy_version']}; {meta.get('caddy_version', 'Caddy not run')}; {meta['wrk_version']}; "
      f"{meta['swift_version']}; source: {meta.get('git', '?')}")
    w(f"- Upstream: nginx, `worker_processes 1`, `return 200` with a {meta['body_bytes']}-byte body, "
      f"`access_log off`")
    w(f"- Proxies: 2 workers/threads each, upstream keep-alive on, access logs off (except the "
      f"\"access log on\" row: JSON lines to a file); nginx, HAProxy and Caddy also set X-Forwarded-For/-Proto/-Host "
      f"and an X-Request-Id like callback-proxy does")
    w(f"- Load: `wrk -t1 -c50 -d{meta['duration']}s --latency http://127.0.0.1:PORT/`, {rounds} rounds, "
      f"proxies alternating (order rotated each round), after one {meta['warmup']}s warm-up run each")
    w("")

    # Sanity
    w("## Sanity check (one request through each with curl)")
    w("")
    w("| target | status | body bytes |")
    w("|---|---|---|")
    for s in meta.get("sanity", []):
        w(f"| {s['label']} | {s['status']} | {s['bytes']} |")
    w("")

    base = "cp"
    peers = [(k, l) for k, l in (("nginx", "nginx"), ("haproxy", "HAProxy"), ("caddy", "Caddy")) if k in labels]
    cp_rows = [k for k, _ in keys if k.startswith("cp")]

    def table(title, field, fmt, better):
        w(f"## {title}")
        w("")
        hdr = "| proxy | " + " | ".join(f"round {i}" for i in range(1, rounds + 1)) + " | median | max ÷ min |"
        w(hdr)
        w("|---" * (rounds + 3) + "|")
        medians = {}
        for key, label in keys:
            medians[key] = med(clean(key, field))
            nclean = sum(1 for p in runs[key] if p["ok"])
            note = "" if nclean == rounds else f" (of {nclean} clean run{'s' if nclean != 1 else ''})"
            vals = [v for v in clean(key, field) if v]
            spread[field][key] = max(vals) / min(vals) if len(vals) > 1 else None
            w(f"| {label} | " + " | ".join(cell(p, field, fmt) for p in runs[key]) +
              f" | **{fmt(medians[key])}**{note} | {fmt_ratio(spread[field][key])} |")
        w("")
        w(f"Ratios ({better}); per-round ratios (same round, run back to back) in brackets:")
        w("")
        w("| | " + " | ".join(f"÷ {pl}" for _, pl in peers) + " |")
        w("|---" * (len(peers) + 1) + "|")
        for ck in cp_rows:
            cells = []
            for pk, _ in peers:
                rm = ratio(medians[ck], medians[pk])
                per = []
                for r in range(rounds):
                    a1, b1 = runs[ck][r], runs[pk][r]
                    pr = ratio(a1.get(field), b1.get(field)) if a1["ok"] and b1["ok"] else None
                    per.append(pr)
                per_round[(field, ck, pk)] = med(per)
                cells.append(f"**{fmt_ratio(rm)}** [{' '.join(fmt_ratio(x) for x in per)}]")
            w(f"| {labels[ck]} | " + " | ".join(cells) + " |")
        w("")
        return medians

    spread = {"rps": {}, "p50": {}, "p99": {}}
    per_round = {}
    rps = table("Throughput (requests/s)", "rps", fmt_rps, "higher is better for callback-proxy")
    p50 = table("Latency p50 (ms)", "p50", fmt_ms, "lower is better for callback-proxy")
    p99 = table("Latency p99 (ms)", "p99", fmt_ms, "lower is better for callback-proxy")
    access_log_section(rps, runs, rounds, w)
    metrics_ok = metrics_section(d, keys, rounds, w)
    _, matrix_notes = matrix_section(d, rounds, w)

    # Noise
    w(f"## Machine noise: CPU used by other processes during each run (cores busy, of {meta['nproc']})")
    w("")
    w("Busy time from /proc/stat minus the CPU time of wrk, the proxy and the upstream. Above ~0.3 the run "
      "competed with other work; ratios from such rounds are less trustworthy.")
    w("")
    w("| proxy | " + " | ".join(f"round {i}" for i in range(1, rounds + 1)) + " |")
    w("|---" * (rounds + 1) + "|")
    others = []
    for key, label in keys:
        vals = [p.get("other") for p in runs[key]]
        others += [v for v in vals if v is not None]
        w(f"| {label} | " + " | ".join("—" if v is None else f"{v:.2f}" for v in vals) + " |")
    noisy = bool(others) and med(others) > 0.3
    w("")

    # Warm-ups
    w("Warm-up runs (not counted): " + ", ".join(
        f"{labels[k]} {fmt_rps(warm[k].get('rps')) if warm[k] and warm[k]['ok'] else 'FAILED/errors'}"
        for k, _ in keys))
    w("")

    # RSS
    w(f"## RSS per idle keep-alive connection ({meta['idle_conns']} connections)")
    w("")
    w("Each connection sends one `GET /`, reads the full response, then stays open and idle. "
      "RSS = sum of VmRSS over the proxy's processes (user-space memory only; kernel socket buffers "
      "are not in it), measured before and 1 s after all are open; fresh proxy instances.")
    w("")
    w("| proxy | processes | RSS before (KiB) | RSS after (KiB) | connections OK / still open | KiB per connection |")
    w("|---|---|---|---|---|---|")
    rss = {}
    for key, label in (("cp", "callback-proxy"), ("nginx", "nginx")):
        path = os.path.join(d, f"rss-{key}.json")
        if not os.path.exists(path):
            w(f"| {label} | — | — | — | not run | — |")
            continue
        try:
            j = json.load(open(path))
        except ValueError:
            w(f"| {label} | — | — | — | FAILED (see logs) | — |")
            continue
        rss[key] = j
        extra = ""
        if j["failures"]:
            extra = " ⚠ " + ", ".join(f"{k}: {v}" for k, v in j["failures"].items())
        bad = {s: c for s, c in j["statuses"].items() if str(s) != "200"}
        if bad:
            extra += " ⚠ statuses " + ", ".join(f"{s}: {c}" for s, c in bad.items())
        kpc = j["kib_per_conn"]
        w(f"| {label} | {j['processes']} | {j['rss_before_kib']} | {j['rss_after_kib']} | "
          f"{j['ok']} / {j['still_open']}{extra} | **{kpc:.2f}** |" if kpc is not None else
          f"| {label} | {j['processes']} | {j['rss_before_kib']} | {j['rss_after_kib']} | 0{extra} | — |")
    if "cp" in rss and "nginx" in rss:
        w("")
        w(f"callback-proxy ÷ nginx: **{fmt_ratio(ratio(rss['cp']['kib_per_conn'], rss['nginx']['kib_per_conn']))}** "
          f"(nginx pre-allocates its connection table at start, so its marginal cost here excludes "
          f"~0.4 KiB/connection of structures already in \"before\")")
    w("")

    # Startup
    w("## Start-up (callback-proxy, `--loops 2`)")
    w("")
    st = None
    path = os.path.join(d, "startup.json")
    if os.path.exists(path):
        try:
            st = json.load(open(path))
        except ValueError:
            st = None
    if st:
        w("| run | exec → `/healthz` 200 (ms) | reported `startup_ms` | SIGTERM → exit (ms) | exit code |")
        w("|---|---|---|---|---|")
        for i, r in enumerate(st["runs"], 1):
            w(f"| {i} | {fmt_ms(r['exec_to_healthz_ms'])} | {r['startup_ms']} | "
              f"{fmt_ms(r['sigterm_to_exit_ms'])} | {r['exit_code']} |")
        st_med = med([r["exec_to_healthz_ms"] for r in st["runs"]])
        st_rep = med([r["startup_ms"] for r in st["runs"]])
        w(f"| **median** | **{fmt_ms(st_med)}** | **{st_rep}** | "
          f"{fmt_ms(med([r['sigterm_to_exit_ms'] for r in st['runs']]))} | |")
    else:
        st_med = None
        w("Not run or failed (see logs).")
    w("")

    tls_targets = tls_section(d, meta, rounds, w)

    # Targets
    w("## Targets")
    w("")
    w("| target | measured | verdict |")
    w("|---|---|---|")
    rr = ratio(rps.get("cp"), rps.get("nginx"))
    rr_round = per_round.get(("rps", "cp", "nginx"))

    def tput_verdict(x):
        if x is None:
            return "no data"
        if x >= 1.2:
            return "met, including the 1.2× aim"
        return "met (≥ nginx); 1.2× aim missed" if x >= 1.0 else "**missed**"
    def tput_band(x):
        return "≥ 1.2× nginx" if x >= 1.2 else ("between 1× and 1.2× nginx" if x >= 1.0 else "below nginx")
    verdict = tput_verdict(rr)
    if rr is not None and rr_round is not None and tput_band(rr_round) != tput_band(rr):
        verdict = (f"**unclear**: {tput_band(rr)} by the ratio of medians, "
                   f"{tput_band(rr_round)} by the per-round ratios")
    w(f"| throughput ≥ nginx (aim 1.2×) | {fmt_ratio(rr)} nginx (ratio of medians; median of per-round "
      f"ratios {fmt_ratio(per_round.get(('rps', 'cp', 'nginx')))}) | {verdict} |")
    pr = ratio(p99.get("cp"), p99.get("nginx"))
    pr_round = per_round.get(("p99", "cp", "nginx"))
    pv = "no data" if pr is None else ("met" if pr <= 1.0 else "**missed**")
    if pr is not None and pr_round is not None and (pr <= 1.0) != (pr_round <= 1.0):
        pv = (f"**unclear**: {pv.strip('*')} by the ratio of medians, "
              f"{'met' if pr_round <= 1.0 else 'missed'} by the per-round ratios")
    w(f"| p99 no worse than nginx | {fmt_ms(p99.get('cp'))} ms vs {fmt_ms(p99.get('nginx'))} ms "
      f"({fmt_ratio(pr)}; median of per-round ratios {fmt_ratio(pr_round)}) | {pv} |")
    k = rss.get("cp", {}).get("kib_per_conn")
    w(f"| ≤ 4 KiB RSS per idle connection | {'—' if k is None else f'{k:.2f} KiB'} | "
      f"{'no data' if k is None else ('met' if k <= 4 else '**missed**')} |")
    w(f"| ready in under 50 ms | {fmt_ms(st_med)} ms (exec → /healthz, median) | "
      f"{'no data' if st_med is None else ('met' if st_med < 50 else '**missed**')} |")
    if metrics_ok is not None:
        w(f"| `/metrics` scraped under load parses and counts every request | see \"/metrics under load\" | "
          f"{'met' if metrics_ok else '**missed**'} |")
    for row in tls_targets:
        w(row)
    w("")
    big = [labels[k] for k, v in spread["rps"].items() if v and v > 1.25]
    if noisy or big:
        w("⚠ **Noisy run**: " + (f"other processes used a median {med(others):.2f} cores during the runs"
                                 if noisy else "") +
          ("; " if noisy and big else "") +
          (f"throughput varied by more than 25 % between rounds for {', '.join(big)}" if big else "") +
          ". The throughput and latency verdicts above may flip on a quiet machine; rerun with more, "
          "shorter rounds (e.g. `ROUNDS=9 DURATION=5`) or when the machine is idle.")
        w("")

    # Anomalies
    notes = []
    for key, label in keys:
        for i, p in enumerate(runs[key], 1):
            if not p["ok"]:
                notes.append(f"{label}, round {i}: " + (p.get("error") or
                             "errors " + ", ".join(f"{k2} {v}" for k2, v in p["errors"].items())) +
                             " — excluded from the median")
    notes += matrix_notes
    if os.path.exists(os.path.join(d, "events.log")):
        notes += [l.strip() for l in open(os.path.join(d, "events.log")) if l.strip()]
    w("## Notes")
    w("")
    if notes:
        for n in notes:
            w(f"- ⚠ {n}")
    else:
        w("- No wrk run had errors (socket errors or non-2xx/3xx responses); no proxy died.")
    if os.path.exists(os.path.join(d, "notes.txt")):
        notes_info = [l.strip() for l in open(os.path.join(d, "notes.txt")) if l.strip()]
        for n in notes_info:
            w(f"- {n}")
    w("")
    text = "\n".join(out)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


TLS_SCENARIOS = [
    ("hs-ec", "New full handshakes/s, ECDSA P-256 (`openssl s_time -new -www /`, 2 clients, one request each)",
     ("cp-ec", "nginx-ec"), 0.9),
    ("hs-rsa", "New full handshakes/s, RSA 2048 (same)", ("cp-rsa", "nginx-rsa"), 0.9),
    ("resume", "New connections/s with session resumption, ECDSA (`wrk -t1 -c50 -H \"Connection: close\"`)",
     ("cp-ec", "nginx-ec"), 0.9),
    ("keepalive", "HTTPS keep-alive requests/s, ECDSA (`wrk -t1 -c50`)", ("cp-ec", "nginx-ec"), 1.0),
]


def tls_section(d, meta, rounds, w):
    """The TLS tables (when bench/run ran its TLS section); returns rows for the Targets table."""
    if meta.get("tls") != "1":
        return []
    w("## TLS (callback-proxy vs nginx, same certificate and key, 2 workers each)")
    w("")
    w(f"OpenSSL: {meta.get('openssl_version', '?')} (both servers link the system library). wrk resumes its TLS "
      "session on every reconnect (checked with nginx's `$ssl_session_reused`), so its `Connection: close` run "
      "measures resumed handshakes; `openssl s_time -new` makes full ones.")
    w("")
    sanity = os.path.join(d, "tls-sanity.tsv")
    if os.path.exists(sanity):
        w("| server | sanity (status, body bytes) | certificate SHA-256 |")
        w("|---|---|---|")
        for line in open(sanity):
            k, out, fp = line.rstrip("\n").split("\t")
            w(f"| {k} | {out} | `{fp[:23]}…` |")
        w("")
    rows = []
    labels = {"cp-ec": "callback-proxy", "cp-rsa": "callback-proxy", "nginx-ec": "nginx", "nginx-rsa": "nginx"}
    for scenario, title, (cp, ngx), target in TLS_SCENARIOS:
        runs = {}
        for k in (cp, ngx):
            runs[k] = []
            for r in range(1, rounds + 1):
                runs[k].append(load(os.path.join(d, f"tls-{scenario}-{k}-r{r}.txt")))
        w(f"### {title}")
        w("")
        w("| server | " + " | ".join(f"round {i}" for i in range(1, rounds + 1)) + " | median |")
        w("|---" * (rounds + 2) + "|")
        medians = {}
        for k in (cp, ngx):
            vals = [p.get("rps") if p["ok"] else None for p in runs[k]]
            medians[k] = med(vals)
            cells = [fmt_rps(p.get("rps")) if p["ok"] else ("FAILED" if p.get("error") else
                     f"{fmt_rps(p.get('rps'))} ⚠ " + ", ".join(f"{a} {b}" for a, b in p["errors"].items()))
                     for p in runs[k]]
            w(f"| {labels[k]} | " + " | ".join(cells) + f" | **{fmt_rps(medians[k])}** |")
        per = [ratio(a.get("rps"), b.get("rps")) if a["ok"] and b["ok"] else None for a, b in zip(runs[cp], runs[ngx])]
        rm = ratio(medians[cp], medians[ngx])
        w("")
        w(f"callback-proxy ÷ nginx: **{fmt_ratio(rm)}** (per round: {' '.join(fmt_ratio(x) for x in per)})")
        w("")
        verdict = "no data" if rm is None else ("met" if rm >= target else "**missed**")
        pr = med(per)
        if rm is not None and pr is not None and (rm >= target) != (pr >= target):
            verdict = f"**unclear** ({'met' if rm >= target else 'missed'} by the ratio of medians, " \
                      f"{'met' if pr >= target else 'missed'} by the per-round ratios)"
        name = {"hs-ec": "TLS handshakes (ECDSA)", "hs-rsa": "TLS handshakes (RSA 2048)",
                "resume": "TLS resumed connections", "keepalive": "HTTPS keep-alive throughput"}[scenario]
        rows.append(f"| {name} ≥ {target:g}× nginx | {fmt_ratio(rm)} (median of per-round ratios {fmt_ratio(pr)}) | {verdict} |")
    return rows


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("idle-conns")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--n", type=int, default=10000)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--timeout", type=float, default=20)
    p.add_argument("--settle", type=float, default=1.0)
    p = sub.add_parser("startup")
    p.add_argument("--bin", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--internal-port", type=int, required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--loops", type=int, default=2)
    p.add_argument("--runs", type=int, default=5)
    p = sub.add_parser("report")
    p.add_argument("--dir", required=True)
    p.add_argument("--out")
    p = sub.add_parser("parse-wrk")
    p.add_argument("file")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if a.cmd == "idle-conns":
        cmd_idle_conns(a)
    elif a.cmd == "startup":
        cmd_startup(a)
    elif a.cmd == "report":
        cmd_report(a)
    elif a.cmd == "parse-wrk":
        print(json.dumps(parse_wrk(open(a.file, errors="replace").read())))


if __name__ == "__main__":
    main()
