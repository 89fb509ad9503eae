"""bench/callbacks' report: callbacks per second and CPU per callback of each hand-off × store,
next to plain proxying; the comparisons between them, the stores' processes, the aims, the
profile and the instruction counts. Each callback run is also judged by the proxy's own counters."""
import re

from render import fmt, med, ratio, spread, table

STORES = {"memory": "memory", "redis": "Redis", "sentinel": "Sentinel", "cluster": "Cluster"}
QUIET = 0.3  # cores other processes may use during a run for it to count as quiet
AIM_VS_REDIS = 0.90  # Sentinel and Cluster: no more than 10 % below single Redis (issue 12)
# Store events that must not happen during a measured run: (store, scraped counter, what it means).
STORE_EVENTS = [("sentinel", "failovers", "master changes (a failover)"), ("cluster", "redirects", "MOVED/ASK redirects")]
NOT_STORE = {"proxy", "stub", "client"}
SETUPS = {"redis": "Redis: a private `redis-server` on loopback, flushed before each of its runs",
          "sentinel": "Sentinel: a private master and its replica (`--replicaof`) and three sentinels "
                      "(`redis-server CONF --sentinel`, quorum 2, `down-after-milliseconds` 10000) on loopback, the "
                      "master flushed before each of its runs",
          "cluster": "Cluster: three private cluster-enabled primaries on loopback (no replicas), joined by "
                     "`redis-cli --cluster create … --cluster-replicas 0`, two of them given as seeds, every primary "
                     "flushed before each of its runs"}
# Frames worth naming in a callback profile: (label, exact demangled symbol, or names summed "self").
PERF_FRAMES = [
    ("`connect()` (new TCP connection to the token endpoint)", "__libc_connect"), ("`socket()`", "__socket"),
    ("`send()` (the token request, and the responses to wrk)", "__send"),
    ("`recv()` (libcurl: the token response)", "__libc_recv"),
    ("`close()` (mostly the token connection's teardown)", "__close"), ("`read()` (client connections)", "read"),
    ("`epoll_ctl()`", "epoll_ctl"), ("`epoll_wait()`", "epoll_wait"),
    ("`getsockname()` / `getpeername()` (libcurl)", "__GI___getsockname"),
    ("libcurl socket events (`CurlMulti.socketChanged`; includes the completion: token response, id_token check, answer)",
     "closure #1 in CurlMulti.socketChanged(_:_:)"),
    ("id_token check (`JWKSSource.check`: RS256 + claims)", "JWKSSource.check(_:keys:generation:waited:on:_:)"),
    ("… RSA signature (`EVP_DigestVerify`)", "EVP_DigestVerify"),
    ("JSON parsing (`JSONParser.parse`)", "specialized static JSONParser.parse(_:maximumDepth:)"),
    ("token request form (`FormEncoding.encode`)", "specialized static FormEncoding.encode(_:)"),
    ("callback query (`QueryDecoding.decode`)", "specialized static QueryDecoding.decode(_:)"),
    ("the answer page (`ClientExchange.respondLocal`)", "ClientExchange.respondLocal(_:refusal:)"),
    ("malloc + free (libc, self)", ["malloc", "_int_malloc", "cfree@GLIBC_2.2.5", "_int_free", "malloc_consolidate",
                                    "unlink_chunk.constprop.0", "__libc_calloc", "realloc", "_int_realloc"]),
    ("Swift retain/release (self)", ["swift_retain", "swift_release", "swift_bridgeObjectRelease",
                                     "swift_bridgeObjectRetain", "_swift_release_dealloc"]),
]


def store_of(kind):
    return kind.rsplit("-", 1)[1] if kind.startswith("cb-") else None


def label(kind):
    if not kind.startswith("cb-"):
        return "plain proxying" if kind == "plain" else kind
    handoff, store = kind[3:].rsplit("-", 1)
    return f"{handoff}, {STORES.get(store, store)}"


def load(rec, kind, rnd, conns):
    """A run's figures and what is wrong with it (`bad`). A callback run is also checked against the
    proxy's counters: every callback wrk completed must be a `success`, none of another outcome."""
    v = rec.run(kind, rnd)
    if not v:
        return None
    r = {k: v.get(k) for k in ("rps", "p50", "p75", "p90", "p99", "requests")}
    r.update(proxy_us=v.get("cpu_us.proxy"), stub_us=v.get("cpu_us.stub"), wrk_us=v.get("cpu_us.client"),
             other_cpu_cores=v.get("other_cores"), rss_before_kib=v.get("rss_before_kib.proxy"),
             rss_after_kib=v.get("rss_kib.proxy"))
    r["proxy_per_stub"] = ratio(r["proxy_us"], r["stub_us"])
    store, n = store_of(kind), r["requests"] or 0
    procs = [m[7:] for m in v if m.startswith("cpu_us.") and m[7:] not in NOT_STORE
             and store not in (None, "memory") and (m[7:] == store or m[7:].startswith(store + "-"))]
    if procs:
        r["store_proc_us"] = {p: v[f"cpu_us.{p}"] for p in procs}
        r["store_us"] = sum(r["store_proc_us"].values())
    r["total_us"] = None if r["proxy_us"] is None else r["proxy_us"] + (r.get("store_us") or 0)
    bad = []
    if v.get("errors"):
        bad.append("errors " + rec.detail.get((None, kind, rnd, "errors"), ""))
    if r["rps"] is None:
        bad.append("no wrk result")
    if "cpu_s.proxy" not in v:
        bad.append("proxy died")
    scrape = lambda when, m: v.get(f"scrape.{when}.{m}")
    if any(m.startswith("scrape.") for m in v):
        if None in (scrape("before", "success"), scrape("after", "success")):
            bad.append("/metrics scrape failed")
        else:
            r["successes"] = scrape("after", "success") - scrape("before", "success")
            r["other_outcomes"] = (scrape("after", "total") - scrape("after", "success")) - \
                (scrape("before", "total") - scrape("before", "success"))
            if not n <= r["successes"] <= n + conns or r["other_outcomes"]:
                bad.append(f"the proxy counted {r['successes']:,.0f} successes and {r['other_outcomes']:,.0f} other "
                           f"outcomes for {n:,} callbacks wrk completed")
            r["store_events"] = {what: d for st, m, what in STORE_EVENTS
                                 if st == store and (d := scrape("after", m) - scrape("before", m))}
            if store == "cluster":
                r["refreshes"] = scrape("after", "refreshes") - scrape("before", "refreshes")
        r["keys"] = sorted((m.split(".")[0], m.split(".")[1], int(x)) for m, x in v.items()
                           if m.startswith(("keys.", "replica.")))
        if r["keys"] and scrape("after", "success") is not None:
            # Every success since the process started (the priming callback too) wrote the replay
            # guard's key, a relay callback also its relay code (no run outlives the codes' TTL).
            expected = scrape("after", "success") * (2 if "-relay-" in kind else 1)
            held = sum(x for role, _, x in r["keys"] if role == "keys")
            if held != expected:
                r["key_note"] = f"the store held {held:,} keys after the run, the successes wrote {expected:,.0f}"
    r["bad"] = bad
    return r


def render(rec):
    f, rounds = rec.facts, rec.rounds
    aim, conns, ncores = float(f.get("aim", 5000)), int(f.get("conns", 50)), int(f.get("nproc", 2))
    kinds = f.get("kinds", "").split()
    cbk = [k for k in kinds if k.startswith("cb-")]
    runs = {k: [load(rec, k, r, conns) for r in range(1, rounds + 1)] for k in kinds}
    warm = {k: load(rec, k, "warmup", conns) for k in kinds}
    prof = {k: load(rec, k, "profile", conns) for k in cbk[:1]}
    ok = lambda r: r is not None and not r["bad"]
    good = {k: [r for r in runs[k] if ok(r)] for k in kinds}
    m = lambda k, field: med([r.get(field) for r in good[k]])
    failed = [(label(k), str(i + 1), r) for k in kinds for i, r in enumerate(runs[k]) if r and r["bad"]]
    failed += [(label(k), tag, r) for tag, group in (("warm-up", warm), ("profile", prof))
               for k, r in group.items() if r and r["bad"]]
    stores = [s for s in STORES if any(store_of(k) == s for k in cbk)]
    out = [f"### Callback throughput — {f.get('date', '?')}", ""]
    if failed:
        out += ["> **FAILED: some runs had errors, non-2xx responses or outcomes other than success** (every callback "
                "must end verified; a 400 usually means a replayed code or a contract mismatch, a 502 or 503 an IdP, "
                "stub or store problem). They are excluded from the medians and listed under Notes.", ""]
    config = lambda k: (f.get("config_" + k) or "? ?").split()
    setup = "; ".join(SETUPS[s] for s in stores if s in SETUPS)
    out += [f"- Command: `{rec.command}` (in `{f.get('cwd')}`), took {f.get('elapsed')}",
            f"- Machine: `nproc` = {f.get('nproc')}; {f.get('uname')}; load average at start {f.get('load_start')}, at "
            "end {} (shared machine: compare ratios and CPU per request, not absolute requests/s)".format(f.get('load_end')),
            f"- Versions: {f.get('cp_version')} ({f.get('cp_bin')}); {f.get('nginx_version')}; wrk {f.get('wrk_version')}; "
            f"{f.get('swift_version')}; {f.get('curl_version')}; {f.get('openssl_version')}"
            + (f"; {f['redis_version']}" if f.get("redis_version") else "") + f"; source: {f.get('git')}",
            "- Stub IdP and upstream: one nginx, `worker_processes 1`, on loopback `http://`: `POST /token` → fixed JSON "
            f"with a real RS256 id_token ({f.get('id_token_bytes')} bytes, 2048-bit key), `GET /jwks` "
            "(`Cache-Control: max-age=3600`), `GET /` and the relay hand-off's app callback → 200 with a 1024-byte body",
            "- Proxy: provider `google` (`kind: google`, native iOS client), `--loops 2 --access-log off`, log level "
            "warn. Variants as run: " + "; ".join(f"**{label(k)}**: `handoff: {config(k)[1]}`, `store: "
                                                  f"{config(k)[0].strip(chr(34))}`" for k in cbk) +
            ". Plain proxying runs on the first variant's configuration. `verify` answers with the proxy's own page; "
            "`relay` (the default hand-off) also writes a relay code to the store and forwards the app's callback to "
            "the upstream. " + (f"{setup}; every `redis-server` with `--save \"\" --appendonly no`. " if setup else "")
            + "A fresh proxy process for every run, primed with one callback (JWKS fetch)",
            f"- Load: `wrk -t1 -c{conns} -d{f.get('duration')}s --latency`, callbacks with `-s bench/callbacks.lua` (a "
            f"unique code per request), plain with `GET /`; {rounds} rounds, all {len(kinds)} alternating (order rotated "
            f"each round), after one {f.get('warmup')}s warm-up run each. Every callback run is also checked against the "
            "proxy's `/metrics`: the `success` outcomes it counted must match the callbacks wrk completed",
            "- CPU: utime+stime of the proxy process (all threads), the stub nginx (master+worker), every redis-server "
            "process and wrk from `/proc` before and after each run, ÷ requests wrk completed (CPU time: the wait for "
            "the IdP is not in it). A run's store CPU is the sum over its own store's processes (Sentinel: master, "
            "replica and sentinels; Cluster: the three primaries); the other stores' idle processes are measured too, "
            "so they are not counted as other processes", ""]
    if rec.rows.get("sanity"):
        out += ["#### Sanity check (curl; the proxy's counters from `/metrics`)", ""]
        out += table(["request", "expected", "got"], rec.rows["sanity"])
    out += ["#### Summary (medians over rounds)", ""]
    out += table(["variant", "requests/s", "spread (max ÷ min)", "p50 / p75 / p90 / p99 (ms)", "proxy CPU µs / req",
                  "store (redis-server processes) CPU µs / req", "stub nginx CPU µs / req", "other processes, cores"],
                 [[label(k), f"**{fmt(m(k, 'rps'), 'rps')}**", fmt(spread([r["rps"] for r in good[k]]), "x"),
                   " / ".join(fmt(m(k, p), "ms") for p in ("p50", "p75", "p90", "p99")), fmt(m(k, "proxy_us"), "us"),
                   fmt(m(k, "store_us"), "us"), fmt(m(k, "stub_us"), "us"), fmt(m(k, "other_cpu_cores"), "cores")]
                  for k in kinds])

    def compare(title, pairs, yardstick=False):
        """`yardstick`: the proxy's CPU per callback in units of the stub's, which does the same work per
        callback in both variants: it factors out how fast the shared machine was."""
        pairs = [(x, y) for x, y in pairs if x in kinds and y in kinds]
        if not pairs:
            return []
        fields = ("rps", "p50", "p99", "proxy_us", "total_us") + (("proxy_per_stub",) if yardstick else ())
        rows = []
        for x, y in pairs:
            both = [(rx, ry) for rx, ry in zip(runs[x], runs[y]) if ok(rx) and ok(ry)]
            row = [f"{label(x)} ÷ {label(y)}"]
            for fld in fields:
                per = [ratio(rx.get(fld), ry.get(fld)) for rx, ry in both]
                row.append(f"**{fmt(ratio(m(x, fld), m(y, fld)), 'x')}** [{' '.join(fmt(p, 'x') for p in per)}]")
                if fld == "rps":
                    quiet = [ratio(rx["rps"], ry["rps"]) for rx, ry in both
                             if max(rx.get("other_cpu_cores") or 0, ry.get("other_cpu_cores") or 0) < QUIET]
                    row.append(f"{fmt(med(quiet), 'x')} ({len(quiet)})" if quiet else "none")
            rows.append(row)
        return [f"#### {title}", "",
                "Ratio of the medians, and in brackets the per-round ratios (runs of the same round; the order rotates, "
                "so they ran close together). Quiet rounds: the median throughput ratio over the rounds in which both "
                f"runs had other processes under {QUIET} cores, and how many there were." +
                (" Proxy ÷ stub CPU: the proxy's CPU per callback divided by the stub nginx's in the same run; the stub "
                 "does the same work per callback whatever the store, so this ratio factors out how fast the shared "
                 "machine was during each run (the CPU per callback of every process moves with it)." if yardstick else ""),
                ""] + table(["", "throughput", "quiet rounds", "p50", "p99", "proxy CPU / request",
                             "proxy + store CPU / request"] + (["proxy ÷ stub CPU"] if yardstick else []), rows)

    out += compare("Redis ÷ in-memory store", [(f"cb-{h}-redis", f"cb-{h}-memory") for h in ("relay", "verify")], True)
    out += compare("Sentinel and Cluster ÷ single Redis",
                   [(f"cb-{h}-{s}", f"cb-{h}-redis") for s in ("sentinel", "cluster") for h in ("relay", "verify")], True)
    out += compare("relay ÷ verify hand-off", [(f"cb-relay-{s}", f"cb-verify-{s}") for s in STORES])
    skinds = [k for k in cbk if store_of(k) != "memory" and good[k]]
    if skinds:
        rows = []
        for k in skinds:
            names = sorted({p for r in good[k] for p in r.get("store_proc_us") or {}})
            servers = [(role, port) for role, port, _ in good[k][0].get("keys") or []]
            keys = [(role, port, med([next((x for ro, po, x in r.get("keys") or [] if (ro, po) == (role, port)), None)
                                      for r in good[k]])) for role, port in servers]
            rows.append([label(k), ", ".join(f"{p} {fmt(med([(r.get('store_proc_us') or {}).get(p) for r in good[k]]), 'us')}"
                                             for p in names),
                         " ".join(f"({fmt(x, 'int')})" if role == "replica" else f":{port} {fmt(x, 'int')}"
                                  for role, port, x in keys),
                         " ".join(f"{r['refreshes']:.0f}" for r in good[k] if r.get("refreshes") is not None) or "–"])
        out += ["#### The store's processes (medians over rounds)", "",
                "CPU per callback of each process of the run's store, and the keys each server held after the run "
                "(every success since the proxy started wrote 1 key, a relay callback 2; Sentinel's replica in brackets: "
                "what it had received by then). Cluster: the slot-map fetches (`CLUSTER SLOTS`) the proxy started during "
                "the run (`callback_proxy_store_cluster_refreshes_total`; each of its 2 loops fetches its own map on its "
                "first command, the priming callback's loop before the run).", ""]
        out += table(["variant", "CPU µs / callback, each process", "keys after the run, each server",
                      "slot-map fetches during the run"], rows)
    out += compare("Callbacks ÷ plain proxying", [(k, "plain") for k in cbk])
    out += ["#### Per round (requests/s; other processes' cores in brackets)", ""]
    cell = lambda r: "not run" if r is None else (lambda c: c if ok(r) else f"~~{c}~~ (error)")(
        f"{fmt(r.get('rps'), 'rps')} ({fmt(r.get('other_cpu_cores'), 'cores')})")
    out += table(["round"] + [label(k) for k in kinds], [[i + 1] + [cell(runs[k][i]) for k in kinds]
                                                         for i in range(rounds)])
    if any(warm.values()):
        out += ["Warm-up runs (not counted): " + ", ".join(f"{label(k)} {fmt((warm[k] or {}).get('rps'), 'rps')}/s"
                                                           for k in kinds) + ".", ""]
    out += ceilings(cbk, good, m, ncores, label)
    others = [r.get("other_cpu_cores") for k in kinds for r in good[k] if r.get("other_cpu_cores") is not None]
    if others:
        quiet = [x for x in others if x < QUIET]
        out += [f"Machine noise: other processes used {min(others):.2f}–{max(others):.2f} cores during the runs "
                f"(median {med(others):.2f} of {ncores}); {len(quiet)} of {len(others)} runs were quiet (< {QUIET} "
                "cores). " + ("The absolute rates are lower than this machine gives when idle; the ratios of runs close "
                              "together and the CPU per request are what to compare." if len(quiet) < len(others) else ""),
                ""]
    out += aims(rec, kinds, cbk, runs, good, m, ok, aim, ncores)
    out += memory(rec, cbk, good)
    if rec.rows.get("profile-dso"):
        out += [f"Profile and instruction counts below: the **{label(cbk[0])}** variant.", ""] + profile(rec)
    out += instructions(rec)
    notes = []
    if not failed:
        total = sum(r.get("requests") or 0 for k in cbk for r in runs[k] + [warm[k], prof.get(k)] if r)
        notes.append(f"No run had socket errors or non-2xx responses, and the proxy's `/metrics` counted a `success` "
                     f"for each of the {total:,} callbacks wrk completed (and no other outcome).")
    notes += [f"{k} run {i}: " + "; ".join(r["bad"]) for k, i, r in failed]
    for k in cbk:
        for tag, r in [(str(i + 1), r) for i, r in enumerate(runs[k])] + [("warm-up", warm[k])]:
            if r and r.get("store_events"):
                notes.append(f"{label(k)} run {tag}: the proxy counted " + ", ".join(
                    f"{x:,.0f} {what}" for what, x in r["store_events"].items()) +
                    " during the run (the store's topology moved; nothing should have)")
            if r and r.get("key_note"):
                notes.append(f"{label(k)} run {tag}: {r['key_note']}")
    checked = [r for k in cbk for r in runs[k] + [warm[k]] if r and r.get("keys")]
    if checked and not any(r.get("key_note") for r in checked):
        notes.append(f"In all {len(checked)} runs with a Redis store, the keys it held afterwards were exactly those "
                     "the proxy's successes wrote (1 per callback, 2 per relay callback, summed over the servers).")
    notes += rec.notes
    if notes:
        out += ["#### Notes", ""] + [f"- {n}" for n in notes] + [""]
    return out, not failed and any(good[k] for k in cbk)


def ceilings(cbk, good, m, ncores, label):
    lines = []
    for k in cbk:
        if us := med([r["total_us"] for r in good[k]]):
            whole = us + (m(k, "stub_us") or 0) + (m(k, "wrk_us") or 0)
            lines.append(f"- {label(k)}: {us:.1f} µs of proxy (+ store) CPU per callback → **{fmt(ncores * 1e6 / us, 'rps')}"
                         f"/s** on {ncores} free cores; with the stub and wrk on the same cores ({whole:.1f} µs) ≈ "
                         f"{fmt(ncores * 1e6 / whole, 'rps')}/s")
    return [f"CPU-bound ceilings on this {ncores}-core machine, from the medians:", ""] + lines + [""] if lines else []


def aims(rec, kinds, cbk, runs, good, m, ok, aim, ncores):
    rows = []
    for k in cbk:
        rps, us = m(k, "rps"), med([r["total_us"] for r in good[k]])
        if rps is None:
            rows.append([f"≥ {aim:,.0f} callbacks/s", label(k), "no valid run", "**not measured**"])
            continue
        qr = med([r["rps"] for r in good[k] if (r.get("other_cpu_cores") or 0) < QUIET])
        ceiling = ncores * 1e6 / us if us else None
        note = f"; quiet rounds: {fmt(qr, 'rps')}/s" if qr else ""
        if rps < aim and ceiling:
            note += f"; the CPU cost would allow {fmt(ceiling, 'rps')}/s on {ncores} free cores"
        rows.append([f"≥ {aim:,.0f} callbacks/s ({rec.facts.get('duration')} s runs, fresh proxy)", label(k),
                     f"{fmt(rps, 'rps')}/s median{note}",
                     "met" if rps >= aim else "**met in quiet rounds only**" if qr and qr >= aim else "**missed**"])
    for k in cbk:
        y = k[:-len(store_of(k))] + "redis"  # the same hand-off with single Redis
        if store_of(k) not in ("sentinel", "cluster") or y not in kinds:
            continue
        per = [ratio(rx.get("rps"), ry.get("rps")) for rx, ry in zip(runs[k], runs[y]) if ok(rx) and ok(ry)]
        both = ratio(m(k, "rps"), m(y, "rps"))
        if not per or both is None:
            rows.append([f"≥ {AIM_VS_REDIS:.2f}× single Redis's callbacks/s", label(k), "no valid pair of runs",
                         "**not measured**"])
            continue
        cpu = ratio(med([r["total_us"] for r in good[k]]), med([r["total_us"] for r in good[y]]))
        v = "met" if min(med(per), both) >= AIM_VS_REDIS else "**missed**" if max(med(per), both) < AIM_VS_REDIS \
            else "**unclear** (the two ratios disagree)"
        rows.append([f"≥ {AIM_VS_REDIS:.2f}× single Redis's callbacks/s (issue 12)", label(k),
                     f"{fmt(both, 'x')} (ratio of medians), {fmt(med(per), 'x')} (median of the per-round ratios "
                     f"[{' '.join(fmt(x, 'x') for x in per)}]); proxy + store CPU per callback {fmt(cpu, 'x')}", v])
    cap, window = int(rec.facts.get("store_max_entries") or 0), int(rec.facts.get("replay_window_s") or 0)
    if cap and window and any(k.endswith("-memory") for k in cbk):
        rows.append([f"≥ {aim:,.0f} callbacks/s sustained", "in-memory store, default replay window",
                     f"at most {cap / window:,.0f}/s: the store holds {cap:,} codes for {window // 60} min",
                     "met" if cap / window >= aim else "**missed** (store capacity)"])
    return ["#### Aim", ""] + table(["aim", "variant", "measured", "verdict"], rows)


def memory(rec, cbk, good):
    out = []
    grown = [r for k in cbk if k.endswith("-memory") for r in good[k]
             if r.get("rss_before_kib") and r.get("rss_after_kib") and r.get("requests")]
    if grown:
        big = max(grown, key=lambda r: r["requests"])
        per = (big["rss_after_kib"] - big["rss_before_kib"]) * 1024 / big["requests"]
        out += [f"Proxy RSS during the largest in-memory callback run: {big['rss_before_kib'] / 1024:.1f} → "
                f"{big['rss_after_kib'] / 1024:.1f} MiB over {big['requests']:,} callbacks (≈ {per:.0f} bytes per "
                "callback: the replay store keeps each code's hash for the replay window; relay codes too, for their "
                "TTL).", ""]
    cap, window = int(rec.facts.get("store_max_entries") or 0), int(rec.facts.get("replay_window_s") or 0)
    if cap and window:
        out += [f"**In-memory store capacity.** It holds at most {cap:,} live entries; every callback keeps one for the "
                f"replay window ({window // 60} min by default), a relay callback a second one for the relay code's TTL. "
                f"So one instance sustains at most {cap:,} ÷ {window} s ≈ **{cap / window:,.0f} callbacks/s** over a "
                "whole window, after which callbacks get 503 (`store_unavailable`) until entries expire. Redis has no "
                "such limit in the proxy (its own `maxmemory` applies).", ""]
    return out


def profile(rec):
    """perf's listings as the driver recorded them, with the selected inclusive frames."""
    incl, self_ = {}, {}
    for line in rec.rows["profile-children"][0][0].splitlines():
        if mt := re.match(r"^\s+([\d.]+)%\s+([\d.]+)%\s+\[[.k]\]\s+(.+?)\s*$", line):
            incl.setdefault(mt.group(3), float(mt.group(1)))
            self_.setdefault(mt.group(3), float(mt.group(2)))
    rows = []
    for name, sym in PERF_FRAMES:
        if isinstance(sym, list):
            v = sum(self_.get(n, 0.0) for n in sym)
        else:
            v = incl.get(sym)
            if v is None and (alt := [k for k in incl if k.endswith(sym) or k in ("__" + sym, "__libc_" + sym)]):
                v = incl[alt[0]]
        if v is not None:
            rows.append([name, f"{v:.1f} %"])
    return ["#### Profile of the proxy during a callback run (perf, not counted above)", "",
            f"`perf record -F 499 -g -p PID` for {rec.facts.get('duration')}s of callbacks, then `perf report "
            "--no-children`. Samples of the proxy's threads only (kernel work done on their behalf included).", "",
            "By object (`--sort dso`):", "", "```", rec.rows["profile-dso"][0][0], "```", "",
            "Selected frames, inclusive (`--children`): a share of the proxy's samples spent in that call and below it, "
            "kernel included. Frame-pointer call chains are cut inside libraries built without frame pointers (libcurl, "
            "libcrypto), so the user-space rows are lower bounds; the syscall rows are reliable.", ""] + \
        table(["frame", "share of the proxy's CPU samples"], rows) + \
        ["Hottest symbols (`--sort dso,symbol`, ≥ 0.5 %, Swift names demangled):", "", "```",
         rec.rows["profile-sym"][0][0], "```", ""]


def instructions(rec):
    """callgrind: (warm-up + N) − (warm-up) instructions ÷ N, by object and selected function."""
    get = lambda v: rec.run(v, None, "instructions")
    n = get("callbacks").get("instr.n")
    if not n or not all(get(v).get("instr.total") for v in ("base", "callbacks", "plain")):
        return []
    base, cbr, plr = get("base"), get("callbacks"), get("plain")
    per = lambda run, key: (run.get(key, 0) - base.get(key, 0)) / n
    cb_i, pl_i = per(cbr, "instr.total"), per(plr, "instr.total")
    rows = [["instructions per request", f"**{cb_i:,.0f}**", f"{pl_i:,.0f}", f"**{ratio(cb_i, pl_i):.1f}×**"]]
    objs = sorted({k for run in (base, cbr, plr) for k in run if k.startswith("instr.obj.")}, key=lambda o: -per(cbr, o))
    for o in objs:
        c, p = per(cbr, o), per(plr, o)
        if abs(c) >= 0.01 * cb_i or abs(p) >= 0.01 * pl_i:
            rows.append([f"… in `{o[10:]}`", f"{c:,.0f} ({100 * c / cb_i:.0f} %)", f"{p:,.0f} ({100 * p / pl_i:.0f} %)", ""])
    verify = rec.facts.get("rsa2048_verify_us")
    out = [f"#### Instructions per request (callgrind, `--loops 1`, N = {n:.0f}, one keep-alive connection)", "",
           "(instructions(warm-up + N) − instructions(warm-up)) ÷ N; the warm-up is one callback and one plain request "
           "(JWKS fetch, libcurl multi handle, upstream pool). Deterministic, unlike the wall clock.", ""]
    out += table(["", "callbacks", "plain proxying", "ratio"], rows)
    out += ["User-space instructions only (the kernel's share, large for the per-exchange TCP connection, is not in "
            "these counts). Objects under 1 % in both columns are left out. Valgrind hides AVX-512 from the program, so "
            "OpenSSL may take a slower code path for the RSA arithmetic than it does natively" +
            (f" (natively, `openssl speed rsa2048` verifies in {verify} µs on this machine)" if verify else "") + ".", ""]
    if fns := rec.rows.get("instr-functions"):
        out += ["Where a callback's instructions go (inclusive: a row includes what it calls, so rows overlap; per "
                "callback, callbacks − warm-up):", ""]
        out += table(["function", "instructions per callback", "share"],
                     [[lbl, f"{x:,.0f}", f"{100 * x / cb_i:.0f} %"] for lbl, x in fns])
    return out
