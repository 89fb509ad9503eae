"""bench/soak's output: the samples every 10 s, each load's totals, the callbacks by outcome and
RSS at the end ÷ RSS at minute 1 (the warm-up) — whether memory settles."""
from render import table

LOADS = ["keepalive", "close", "upload", "callbacks"]


def mib(v, scale=1024 * 1024):
    return "-" if v is None else f"{v / scale:.1f}"


def render(rec):
    f, sides = rec.facts, rec.facts["sides"].split()
    cb = {s: rec.run(s, 1).get("callbacks_on") == 1 for s in sides}
    sample = lambda s, t, m: rec.run(s, t).get(m if m == "rss_kib" else f"scrape.sample.{m}")
    ok = lambda s, t: None if (v := sample(s, t, "outcome.success")) is None or not cb[s] else v - 1  # the priming one
    out = [f"Soak: {f['duration']}s of keep-alive (c50) + Connection: close (c20) + 1 MiB POST (c4) + callbacks (c2, "
           "relay, Redis store)" + (" + HTTP/2 (h2c, 4 connections × 32 streams)" if f.get("h2") == "1" else "") +
           f", 2 loops ({f.get('nproc')} cores)"]
    out += [f"- {s}: {f['label_' + s]}" + ("" if cb[s] else ", without callbacks") for s in sides]
    out += [f"- {n}" for n in rec.notes if n.startswith("The baseline")]
    out += [f"- started {f['started']}", ""]
    times = sorted(t for (sc, v, t), m in rec.values.items() if sc is None and v == sides[0] and "rss_kib" in m)
    rows = []
    for t in times:
        row = [t, mib(sample("new", t, "rss_kib"), 1024), mib(sample("new", t, "heap_in_use")),
               mib(sample("new", t, "heap_free")), "-" if (x := sample("new", t, "trims")) is None else f"{x:.0f}",
               "-" if ok("new", t) is None else f"{ok('new', t):.0f}"]
        if "base" in sides:
            row += [mib(sample("base", t, "rss_kib"), 1024), "-" if ok("base", t) is None else f"{ok('base', t):.0f}"]
        rows.append(row)
    out += table(["t (s)", "RSS (MiB)", "heap in use (MiB)", "heap free, held (MiB)", "trims", "callbacks ok"] +
                 (["baseline RSS (MiB)", "baseline callbacks ok"] if "base" in sides else []), rows)
    out += [n for n in rec.notes if n.startswith("(a load")]
    out += [f"Ended {f['ended']}"]
    for s in sides:
        out += ["", f"{s}: {f['label_' + s]}"]
        for load in LOADS:
            r = rec.run(s, 1, load)
            if not r:
                continue
            errs = rec.detail.get((load, s, 1, "errors"))
            statuses = "".join(f", status {k[7:]}: {v:.0f}" for k, v in r.items() if k.startswith("status."))
            out.append(f"  {load}: {r.get('requests', 0):.0f} requests" + (f", {errs}" if errs else ", no socket errors")
                       + statuses)
        if r := rec.run(s, 1, "http2"):
            out.append(f"  http2: {r.get('total')} requests, {r.get('requests')} succeeded, {r.get('failed')} failed, "
                       f"{r.get('errored')} errored; status " +
                       ", ".join(f"{v:.0f} {k[7:]}" for k, v in r.items() if k.startswith("status.")))
        if cb[s]:
            end = {k[len("scrape.end.outcome."):]: v for k, v in rec.run(s, 1).items() if k.startswith("scrape.end.outcome.")}
            bad = {o: v for o, v in end.items() if o != "success" and v > 0}
            out.append(f"  callbacks, as the proxy counts them: {end.get('success', 1) - 1:.0f} succeeded, "
                       f"{sum(bad.values()):.0f} did not" +
                       (" (" + ", ".join(f"{o} {v:.0f}" for o, v in bad.items()) + ")" if bad else ""))
        first, last = sample(s, 60, "rss_kib"), sample(s, times[-1], "rss_kib") if times else None
        if first and last:
            out.append(f"  RSS at the end / RSS at minute 1: {last / first:.3f} ({last / 1024:.1f} / {first / 1024:.1f} MiB)")
        out += [f"  {n[len(s) + 2:]}" for n in rec.notes if n.startswith(f"{s}: the proxy logged")]
    keys = ", ".join(f"{s} {rec.run(s, 1).get('store_keys', 0):.0f} keys" for s in sides)
    out += ["", f"Store (redis-server, outside the proxies): {keys}, used_memory {f.get('redis_used_memory')}"]
    return out, True
