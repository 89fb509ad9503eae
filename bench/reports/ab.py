"""bench/ab's report: each round of both builds, the medians and this build ÷ baseline."""
from render import fmt, table

SHAPES = [("h1", "h1 c50"), ("h2-50x10", "h2 50x10"), ("h2-1x100", "h2 1x100")]


def render(rec):
    f = rec.facts
    out = [f"Before and after: this build ({f.get('this')}) ÷ baseline ({f.get('baseline')}), requests/s; "
           f"`{rec.command}`; load {f.get('load_start')} at the start, {f.get('load_end')} at the end", ""]
    rows = [[r, side] + [fmt(rec.run(side, r, s).get("rps"), "rps") for s, _ in SHAPES]
            for r in range(1, rec.rounds + 1) for side in ("baseline", "this")]
    rows += [["median", side] + [fmt(rec.median(side, "rps", s), "rps") for s, _ in SHAPES] for side in ("baseline", "this")]
    rows.append(["ratio", "this ÷ baseline"] + [fmt(rec.ratios("this", "baseline", "rps", s)[0], "x") for s, _ in SHAPES])
    return out + table(["round", "binary"] + [label for _, label in SHAPES], rows), True
