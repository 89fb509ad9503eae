"""bench/reloads' report: the requests a client that does not retry would lose to reloads."""
from render import table


def render(rec):
    f, n = rec.facts, int(rec.facts.get("reloads", 0))
    out = [f"Reloads under load: wrk -t2 -c50 -d{f.get('duration')}s, {n} changed-configuration reloads each "
           f"({f.get('nproc')} cores, load {f.get('load_start')})", ""]
    rows = [[s, n] + [("?" if (v := rec.run(s, 1).get(m)) is None else f"{v:.0f}")
                      for m in ("requests", "socket_errors", "non_2xx")] for s in ("callback-proxy", "nginx")]
    out += table(["server", "reloads", "requests", "socket errors", "non-2xx"], rows)
    applied = rec.run("callback-proxy", 1).get("applied")
    out.append(f"callback-proxy applied {applied or 0:.0f} of {n} reloads (its log: \"configuration reloaded\").")
    return out, True
