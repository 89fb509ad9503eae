"""bench/run's report: callback-proxy next to nginx, HAProxy and Caddy — throughput and latency with
ratios, the access log's cost, /metrics under load, the matrix, RSS per idle connection, start-up,
TLS, and the targets."""
from render import fmt, med, ratio, ratio_cell, round_cell, rounds_table, spread, table

KEYS = [("cp", "callback-proxy"), ("cp-log", "callback-proxy + access log"), ("nginx", "nginx"),
        ("nginx-log", "nginx + access log"), ("haproxy", "HAProxy"), ("caddy", "Caddy")]
LABEL = dict(KEYS)
PEERS = [("nginx", "nginx"), ("haproxy", "HAProxy"), ("caddy", "Caddy")]
MATRIX_KEYS = [("cp", "callback-proxy")] + PEERS
MATRIX_TITLES = {
    "close": "`Connection: close` on every request (accept + a new client connection per request; upstream keep-alive on)",
    "64k": "64 KiB responses",
    "1m": "1 MiB responses",
    "post": "64 KiB request bodies (POST, streamed to the upstream, which reads all of it before answering)",
}
TLS = [  # scenario, title, (callback-proxy, nginx), target ratio, name in the targets
    ("hs-ec", "New full handshakes/s, ECDSA P-256 (`openssl s_time -new -www /`, 2 clients, one request each)",
     ("cp-ec", "nginx-ec"), 0.9, "TLS handshakes (ECDSA)"),
    ("hs-rsa", "New full handshakes/s, RSA 2048 (same)", ("cp-rsa", "nginx-rsa"), 0.9, "TLS handshakes (RSA 2048)"),
    ("resume", "New connections/s with session resumption, ECDSA (`wrk -t1 -c50 -H \"Connection: close\"`)",
     ("cp-ec", "nginx-ec"), 0.9, "TLS resumed connections"),
    ("keepalive", "HTTPS keep-alive requests/s, ECDSA (`wrk -t1 -c50`)", ("cp-ec", "nginx-ec"), 1.0,
     "HTTPS keep-alive throughput"),
]


def verdict(by_medians, by_rounds, target, met="met", missed="**missed**"):
    """met / missed by the ratio of medians, or unclear when the per-round ratios say otherwise."""
    if by_medians is None:
        return "no data"
    v = met if by_medians >= target else missed
    if by_rounds is not None and (by_medians >= target) != (by_rounds >= target):
        v = (f"**unclear** ({'met' if by_medians >= target else 'missed'} by the ratio of medians, "
             f"{'met' if by_rounds >= target else 'missed'} by the per-round ratios)")
    return v


def render(rec):
    f, rounds = rec.facts, rec.rounds
    out = [f"# CallbackProxy benchmark — {f.get('date')}", "",
           f"- Command: `{rec.command}` (in `{f.get('cwd')}`), took {f.get('elapsed')}",
           f"- Machine: `nproc` = {f.get('nproc')}; {f.get('uname')}; load average at start {f.get('load_start')}, "
           f"at end {f.get('load_end')} (shared machine: compare ratios, not absolute numbers)",
           f"- Versions: {f.get('cp_version')} ({f.get('cp_bin')}); {f.get('nginx_version')}; {f.get('haproxy_version')}; "
           f"{f.get('caddy_version')}; {f.get('wrk_version')}; {f.get('swift_version')}; source: {f.get('git')}",
           f"- Upstream: nginx, `worker_processes 1`, `return 200` with a {f.get('body_bytes')}-byte body, `access_log off`",
           "- Proxies: 2 workers/threads each, upstream keep-alive on, access logs off (except the \"access log on\" "
           "row: JSON lines to a file); nginx, HAProxy and Caddy also set X-Forwarded-For/-Proto/-Host and an "
           "X-Request-Id like callback-proxy does",
           f"- Load: `wrk -t1 -c50 -d{f.get('duration')}s --latency http://127.0.0.1:PORT/`, {rounds} rounds, proxies "
           f"alternating (order rotated each round), after one {f.get('warmup')}s warm-up run each", "",
           "## Sanity check (one request through each with curl)", ""]
    out += table(["target", "status", "body bytes"], rec.rows.get("sanity", []))
    keys = [k for k in KEYS if any(rec.run(k[0], r) for r in range(1, rounds + 1))]
    peers = [p for p in PEERS if p in keys]
    med_ = {}
    for metric, title, kind, better in (("rps", "Throughput (requests/s)", "rps", "higher"),
                                        ("p50", "Latency p50 (ms)", "ms", "lower"),
                                        ("p99", "Latency p99 (ms)", "ms", "lower")):
        out += [f"## {title}", ""] + rounds_table(rec, "proxy", keys, metric, kind)
        out += [f"Ratios ({better} is better for callback-proxy); per-round ratios (same round, run back to back) "
                "in brackets:", ""]
        out += table([""] + [f"÷ {label}" for _, label in peers],
                     [[LABEL[c]] + [ratio_cell(rec, c, p, metric) for p, _ in peers] for c in ("cp", "cp-log")
                      if (c, LABEL[c]) in keys])
        med_[metric] = {k: rec.median(k, metric) for k, _ in keys}
    out += access_log(rec)
    metrics_ok, section = metrics(rec)
    out += section
    out += matrix(rec)
    # Noise
    out += [f"## Machine noise: CPU used by other processes during each run (cores busy, of {f.get('nproc')})", "",
            "Busy time from /proc/stat minus the CPU time of wrk, the proxy and the upstream. Above ~0.3 the run "
            "competed with other work; ratios from such rounds are less trustworthy.", ""]
    out += table(["proxy"] + [f"round {r}" for r in range(1, rounds + 1)],
                 [[label] + [fmt(x, "cores") for x in rec.per_round(k, "other_cores", clean=False)] for k, label in keys])
    others = [x for k, _ in keys for x in rec.per_round(k, "other_cores", clean=False) if x is not None]
    noisy = bool(others) and med(others) > 0.3
    out += ["Warm-up runs (not counted): " + ", ".join(
        f"{label} {fmt(rec.run(k, 'warmup').get('rps'), 'rps') if rec.ok(k, 'warmup') else 'FAILED/errors'}"
        for k, label in keys), ""]
    rss_cp, section = rss(rec)
    out += section
    st_med, section = startup(rec)
    out += section
    tls_targets = tls(rec) if f.get("tls") == "1" else ([], [])
    out += tls_targets[1]
    # Targets
    rr, rr_round = ratio(med_["rps"].get("cp"), med_["rps"].get("nginx")), med(rec.ratios("cp", "nginx", "rps")[1])
    band = lambda x: "≥ 1.2× nginx" if x >= 1.2 else ("between 1× and 1.2× nginx" if x >= 1.0 else "below nginx")
    tv = "no data" if rr is None else ("met, including the 1.2× aim" if rr >= 1.2 else
                                       "met (≥ nginx); 1.2× aim missed" if rr >= 1.0 else "**missed**")
    if rr is not None and rr_round is not None and band(rr_round) != band(rr):
        tv = f"**unclear**: {band(rr)} by the ratio of medians, {band(rr_round)} by the per-round ratios"
    pr, pr_round = ratio(med_["p99"].get("cp"), med_["p99"].get("nginx")), med(rec.ratios("cp", "nginx", "p99")[1])
    pv = "no data" if pr is None else ("met" if pr <= 1.0 else "**missed**")
    if pr is not None and pr_round is not None and (pr <= 1.0) != (pr_round <= 1.0):
        pv = (f"**unclear**: {pv.strip('*')} by the ratio of medians, "
              f"{'met' if pr_round <= 1.0 else 'missed'} by the per-round ratios")
    rows = [["throughput ≥ nginx (aim 1.2×)", f"{fmt(rr, 'x')} nginx (ratio of medians; median of per-round ratios "
             f"{fmt(rr_round, 'x')})", tv],
            ["p99 no worse than nginx", f"{fmt(med_['p99'].get('cp'), 'ms')} ms vs {fmt(med_['p99'].get('nginx'), 'ms')} ms "
             f"({fmt(pr, 'x')}; median of per-round ratios {fmt(pr_round, 'x')})", pv],
            ["≤ 4 KiB RSS per idle connection", "—" if rss_cp is None else f"{rss_cp:.2f} KiB",
             "no data" if rss_cp is None else ("met" if rss_cp <= 4 else "**missed**")],
            ["ready in under 50 ms", f"{fmt(st_med, 'ms')} ms (exec → /healthz, median)",
             "no data" if st_med is None else ("met" if st_med < 50 else "**missed**")]]
    if metrics_ok is not None:
        rows.append(["`/metrics` scraped under load parses and counts every request", "see \"/metrics under load\"",
                     "met" if metrics_ok else "**missed**"])
    out += ["## Targets", ""] + table(["target", "measured", "verdict"], rows + tls_targets[0])
    big = [label for k, label in keys if (s := spread(rec.per_round(k, "rps"))) and s > 1.25]
    if noisy or big:
        out += ["⚠ **Noisy run**: " + "; ".join(
            ([f"other processes used a median {med(others):.2f} cores during the runs"] if noisy else []) +
            ([f"throughput varied by more than 25 % between rounds for {', '.join(big)}"] if big else [])) +
            ". The throughput and latency verdicts above may flip on a quiet machine; rerun with more, shorter rounds "
            "(e.g. `ROUNDS=9 DURATION=5`) or when the machine is idle.", ""]
    # Notes
    notes = [f"{LABEL[k]}, round {r}: {why} — excluded from the median" for k, r, why in rec.failed(LABEL)]
    notes += [f"matrix {s}, {LABEL[k]}, round {r}: {why} — excluded from the median"
              for s, _ in rec.rows.get("matrix", []) for k, r, why in rec.failed(LABEL, s)]
    notes += rec.notes
    out += ["## Notes", ""] + [f"- ⚠ {n}" for n in notes]
    if not notes:
        out.append("- No wrk run had errors (socket errors or non-2xx/3xx responses); no proxy died.")
    out += [f"- {' '.join(row)}" for row in rec.rows.get("notes", [])] + [""]
    return out, True


def access_log(rec):
    """What the JSON access log costs each server: on ÷ off, by the medians and per round."""
    pairs = [(on, off) for on, off in (("cp-log", "cp"), ("nginx-log", "nginx")) if rec.run(on, 1) and rec.run(off, 1)]
    if not pairs:
        return []
    out = ["## Cost of the access log (JSON lines to a file)", "",
           "Log on ÷ off: ratio of the medians, per-round ratios in brackets. The server's own CPU time per request "
           "(all its processes, from `/proc`, ÷ requests wrk completed) is the figure least moved by other work on "
           "the machine.", ""]
    rows = [[LABEL[off]] + [ratio_cell(rec, on, off, m) for m in ("rps", "p50", "p99", "cpu_us.proxy")] +
            [" → ".join(fmt(rec.median(k, "cpu_us.proxy"), "us") for k in (off, on))] for on, off in pairs]
    out += table(["server", "throughput", "p50", "p99", "CPU per request", "CPU µs / request, off → on"], rows)
    if len(pairs) == 2:
        out += [f"Both logging: callback-proxy + access log ÷ nginx + access log = "
                f"**{fmt(ratio(rec.median('cp-log', 'rps'), rec.median('nginx-log', 'rps')), 'x')}** (throughput, "
                "ratio of medians).", ""]
    return out


def metrics(rec):
    """The /metrics scrapes around and during each callback-proxy run: (all good or None, lines)."""
    rows, verdicts = [], []
    for k in ("cp", "cp-log"):
        for r in range(1, rec.rounds + 1):
            run = rec.run(k, r)
            if not any(f"scrape.{w}.ok" in run for w in ("before", "during", "after")):
                continue
            get = lambda w, m: run.get(f"scrape.{w}.{m}")
            parse_ok = all(get(w, "ok") == 1 for w in ("before", "during", "after"))
            problems = [rec.detail.get((None, k, r, f"scrape.{w}.ok")) for w in ("before", "during", "after")]
            b, m, a = (get(w, "proxied") for w in ("before", "during", "after"))
            mid = None not in (b, m, a) and b < m < a
            n = run.get("requests")
            delta = a - b if None not in (a, b) else None
            dup = get("after", "upstream") - get("before", "upstream") if None not in (
                get("after", "upstream"), get("before", "upstream")) else None
            diff = delta - n if delta is not None and n is not None else None
            verdicts.append(parse_ok and mid and diff is not None and 0 <= diff <= 60)
            load = (f"{get('during', 'ms'):.1f} ms, {get('during', 'bytes'):,} B, {get('during', 'series')}"
                    if get("during", "ms") is not None else "—")
            rows.append([LABEL[k], r, "yes" if parse_ok else "NO: " + "; ".join(p for p in problems if p),
                         load, "yes" if mid else "no", "—" if n is None else n,
                         "—" if delta is None else f"{delta:,.0f}", "—" if diff is None else f"{diff:+,.0f}",
                         "—" if dup is None else f"{dup:,.0f}"])
    if not rows:
        return None, []
    out = ["## /metrics under load (callback-proxy)", "",
           "`GET /metrics` on the internal listener before each measured run, half-way through it (under load) and "
           "0.2 s after it. Each scrape is checked against the text format (TYPE before samples, no duplicate series, "
           "histogram buckets cumulative with `+Inf` = `_count`). Δ = after − before of "
           "`callback_proxy_requests_total{route=\"proxied\"}` (all status classes) and of "
           "`callback_proxy_upstream_response_seconds_count`, next to the requests wrk counted: Δ may exceed wrk's "
           "count by up to the 50 requests in flight when wrk stops (wrk does not count them).", ""]
    out += table(["proxy", "round", "scrapes parse", "scrape under load (ms, bytes, series)",
                  "mid-run counter between before and after", "wrk requests", "Δ requests_total (proxied)",
                  "Δ − wrk", "Δ upstream histogram count"], rows)
    ok = all(verdicts)
    out += [f"Verdict: **{'every scrape parsed and the counter matched wrk' if ok else 'CHECK FAILED (see the rows)'}**.", ""]
    return ok, out


def client_cores(rec, k, scenario):
    """Per round, the cores the load generator (wrk; for handshakes, two s_time processes) used
    while loading `k`."""
    return [c / e for c, e in zip(rec.per_round(k, "cpu_s.client", scenario), rec.per_round(k, "elapsed_s", scenario))
            if c and e]


def matrix(rec):
    """One table per matrix scenario (MATRIX=1), then the summary."""
    scenarios = rec.rows.get("matrix", [])
    if not scenarios:
        return []
    out = ["## Matrix: other shapes of traffic", "",
           "The same proxies and upstream as above (access logs off), one scenario at a time, the proxies alternating "
           "inside each round (order rotated), one warm-up run each. CPU per request = the proxy's CPU time (all its "
           "processes and threads, from `/proc`) ÷ requests wrk completed: the figure least moved by other work on the "
           "machine. Ratios are callback-proxy ÷ peer: higher is better for requests/s, lower for p99 and CPU. "
           "wrk has one thread: where it used ≥ 0.9 of its core, requests/s measured the client, and only CPU per "
           "request compares the proxies (\"client-bound\" in the summary).", ""]
    fields = (("rps", "requests/s", "rps"), ("p99", "p99 (ms)", "ms"), ("cpu_us.proxy", "CPU µs / request", "us"))
    summary = []
    for name, cmd in scenarios:
        title = f"{int(name[5:]):,} keep-alive connections (GET /, 1 KiB)" if name.startswith("conns") else \
            MATRIX_TITLES.get(name, name)
        rows = [[label, " / ".join(round_cell(rec, k, r, "rps", "rps", name) for r in range(1, rec.rounds + 1))] +
                [("**{}**" if m == "rps" else "{}").format(fmt(rec.median(k, m, name), kind)) for m, _, kind in fields] +
                [" ".join(fmt(x, "cores") for x in client_cores(rec, k, name))] +
                [" ".join(fmt(x, "cores") for x in rec.per_round(k, "other_cores", name, clean=False))]
                for k, label in MATRIX_KEYS]
        out += [f"### {title}", "", f"`{cmd}`", ""]
        out += table(["proxy", "requests/s per round", "requests/s", "p99 (ms)", "CPU µs / request",
                      "wrk (cores) per round", "other processes (cores) per round"], rows)
        out += table(["callback-proxy ÷"] + [h for _, h, _ in fields],
                     [[label] + [ratio_cell(rec, "cp", k, m, name) for m, _, _ in fields] for k, label in PEERS])
        summary.append((title, {(k, m): rec.ratios("cp", k, m, name)[0] for k, _ in PEERS for m, _, _ in fields},
                        max(client_cores(rec, "cp", name), default=None)))
    rows = []
    for title, row, client in summary:
        t, p = row[("nginx", "rps")], row[("nginx", "p99")]
        v = "no data" if t is None else ("met" if t >= 1.2 else "≥ nginx, below 1.2×" if t >= 1.0 else "**behind nginx**")
        if t is not None and p is not None and p > 1.0:
            v += "; **p99 above nginx's**"
        if client is not None and client >= 0.9:
            v += f"; client-bound (wrk at {fmt(client, 'cores')})"
        rows.append([title, fmt(t, "x"), fmt(row[("haproxy", "rps")], "x"), fmt(row[("caddy", "rps")], "x"),
                     fmt(p, "x"), fmt(row[("nginx", "cpu_us.proxy")], "x"), v])
    out += ["### Matrix summary (callback-proxy ÷ peer, ratio of medians)", "",
            "Aim (issue 15): ≥ 1.2× nginx's requests/s in every row, p99 ≤ nginx's.", ""]
    return out + table(["scenario", "requests/s ÷ nginx", "÷ HAProxy", "÷ Caddy", "p99 ÷ nginx", "CPU / request ÷ nginx",
                        "vs the aim"], rows)


def rss(rec):
    """RSS per idle keep-alive connection: (callback-proxy's KiB per connection, lines)."""
    out = [f"## RSS per idle keep-alive connection ({rec.facts.get('idle_conns')} connections)", "",
           "Each connection sends one `GET /`, reads the full response, then stays open and idle. RSS = sum of VmRSS "
           "over the proxy's processes (user-space memory only; kernel socket buffers are not in it), measured before "
           "and 1 s after all are open; fresh proxy instances.", ""]
    rows, kpc = [], {}
    for k, label in (("cp", "callback-proxy"), ("nginx", "nginx")):
        j = rec.run(k, None, "rss")
        if not j:
            rows.append([label, "—", "—", "—", "not run", "—"])
            continue
        kpc[k] = j.get("kib_per_conn")
        extra = f" ⚠ {w}" if (w := rec.detail.get(("rss", k, None, "ok"))) else ""
        rows.append([label, j.get("processes"), j.get("rss_before_kib"), j.get("rss_after_kib"),
                     f"{j.get('connections_ok')} / {j.get('still_open')}{extra}",
                     "—" if kpc[k] is None else f"**{kpc[k]:.2f}**"])
    out += table(["proxy", "processes", "RSS before (KiB)", "RSS after (KiB)", "connections OK / still open",
                  "KiB per connection"], rows)[:-1]
    if kpc.get("cp") and kpc.get("nginx"):
        out += ["", f"callback-proxy ÷ nginx: **{fmt(ratio(kpc['cp'], kpc['nginx']), 'x')}** (nginx pre-allocates its "
                "connection table at start, so its marginal cost here excludes ~0.4 KiB/connection of structures "
                "already in \"before\")"]
    return kpc.get("cp"), out + [""]


def startup(rec):
    """Start-up runs: (median exec → /healthz, lines)."""
    runs = [rec.run("cp", i, "startup") for i in range(1, 6)]
    runs = [r for r in runs if r]
    out = ["## Start-up (callback-proxy, `--loops 2`)", ""]
    if not runs:
        return None, out + ["Not run or failed (see logs).", ""]
    rows = [[i, fmt(r.get("exec_to_healthz_ms"), "ms"), r.get("startup_ms"), fmt(r.get("sigterm_to_exit_ms"), "ms"),
             r.get("exit_code")] for i, r in enumerate(runs, 1)]
    st = med([r.get("exec_to_healthz_ms") for r in runs])
    rows.append(["**median**", f"**{fmt(st, 'ms')}**", f"**{med([r.get('startup_ms') for r in runs])}**",
                 fmt(med([r.get("sigterm_to_exit_ms") for r in runs]), "ms"), ""])
    return st, out + table(["run", "exec → `/healthz` 200 (ms)", "reported `startup_ms`", "SIGTERM → exit (ms)",
                            "exit code"], rows)


def tls(rec):
    """The TLS tables: (rows for the targets, lines)."""
    out = ["## TLS (callback-proxy vs nginx, same certificate and key, 2 workers each)", "",
           f"OpenSSL: {rec.facts.get('openssl_version', '?')} (both servers link the system library). wrk resumes its "
           "TLS session on every reconnect (checked with nginx's `$ssl_session_reused`), so its `Connection: close` run "
           "measures resumed handshakes; `openssl s_time -new` makes full ones.", ""]
    if rec.rows.get("tls-sanity"):
        out += table(["server", "sanity (status, body bytes)", "certificate SHA-256"], rec.rows["tls-sanity"])
    targets = []
    for scenario, title, (cp, ngx), target, name in TLS:
        s = f"tls-{scenario}"
        out += [f"### {title}", ""]
        out += rounds_table(rec, "server", [(cp, "callback-proxy"), (ngx, "nginx")], "rps", "rps", s, with_spread=False)
        rm, per = rec.ratios(cp, ngx, "rps", s)
        out += [f"callback-proxy ÷ nginx: **{fmt(rm, 'x')}** (per round: {' '.join(fmt(x, 'x') for x in per)})", ""]
        bound = ""
        cpu = [rec.median(k, "cpu_us.proxy", s) for k in (cp, ngx)]
        client = max(client_cores(rec, cp, s) + client_cores(rec, ngx, s), default=None)
        if scenario.startswith("hs-"):
            # Two s_time processes: with the server, more than the machine's two cores to share.
            out += [f"CPU µs a handshake and its request (all of a server's processes): callback-proxy "
                    f"{fmt(cpu[0], 'us')}, nginx {fmt(cpu[1], 'us')} ({fmt(ratio(cpu[0], cpu[1]), 'x')}); the two "
                    f"clients used up to {fmt(client, 'cores')} cores.", ""]
        else:
            # wrk has one thread: when it is the bottleneck, requests/s says how fast the client
            # is, and only CPU per request compares the servers.
            out += [f"CPU µs a request (all of a server's processes): callback-proxy {fmt(cpu[0], 'us')}, nginx "
                    f"{fmt(cpu[1], 'us')} ({fmt(ratio(cpu[0], cpu[1]), 'x')}); the client (wrk, one thread) used up to "
                    f"{fmt(client, 'cores')} of a core.", ""]
            if client is not None and client >= 0.9:
                bound = f" — client-bound (wrk at {fmt(client, 'cores')} of its one core; CPU a request {fmt(ratio(cpu[0], cpu[1]), 'x')} nginx's)"
        targets.append([f"{name} ≥ {target:g}× nginx", f"{fmt(rm, 'x')} (median of per-round ratios {fmt(med(per), 'x')})",
                        verdict(rm, med(per), target) + bound])
    return targets, out
