#!/usr/bin/env python3
"""Turns a records file (bench/measure.py) into a bench's Markdown report (Python stdlib only).

  render.py BENCH RECORDS [--out FILE]

The report's tables are defined in bench/reports/BENCH.py (`render(rec) -> lines`), built from the
pieces here: medians over the rounds that count, ratios against a baseline as the ratio of the
medians with the per-round ratios in brackets, the spread over rounds, and one set of formatters.
Exit status 1 when the report module says the run failed."""
import argparse
import importlib
import json
import os
import statistics
import sys

# --------------------------------------------------------------------------------------------
# Numbers


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


def spread(xs):
    """max ÷ min of the values present (None with fewer than two)."""
    xs = [x for x in xs if x]
    return max(xs) / min(xs) if len(xs) > 1 else None


FORMATS = {
    "rps": lambda v: f"{v / 1000:.1f}k",
    "ms": lambda v: f"{v:.2f}" if v < 10 else f"{v:.1f}",
    "us": lambda v: f"{v:.1f}",
    "x": lambda v: f"{v:.2f}×",
    "cores": lambda v: f"{v:.2f}",
    "int": lambda v: f"{v:,.0f}",
    "kib": lambda v: f"{v:.2f}",
}


def fmt(v, kind):
    return "—" if v is None else FORMATS[kind](v)


# --------------------------------------------------------------------------------------------
# Records


class Records:
    """A records file: `facts` and `command` of the run, `rows[table]`, `notes`, and the measured
    values by (scenario, variant, round) → {metric: value}, with `detail` beside them."""

    def __init__(self, path):
        self.facts, self.command, self.rows, self.notes = {}, "?", {}, []
        self.values, self.detail, self.rounds = {}, {}, 0
        with open(path) as f:
            for rec in map(json.loads, filter(str.strip, f)):
                if "facts" in rec:
                    self.facts.update(rec["facts"])
                    self.command = rec["command"]
                elif "table" in rec:
                    self.rows.setdefault(rec["table"], []).append(rec["row"])
                elif "note" in rec:
                    self.notes.append(rec["note"])
                else:
                    key = (rec.get("scenario"), rec.get("variant"), rec.get("round"))
                    self.values.setdefault(key, {})[rec["metric"]] = rec["value"]
                    if rec.get("detail"):
                        self.detail[key + (rec["metric"],)] = rec["detail"]
                    if isinstance(rec.get("round"), int):
                        self.rounds = max(self.rounds, rec["round"])
        self.rounds = int(self.facts.get("rounds", self.rounds))

    def run(self, variant, rnd, scenario=None):
        return self.values.get((scenario, variant, rnd), {})

    def ok(self, variant, rnd, scenario=None):
        return self.run(variant, rnd, scenario).get("ok") == 1

    def why(self, variant, rnd, scenario=None):
        """What is wrong with a run that does not count."""
        if not self.run(variant, rnd, scenario):
            return "not run"
        return self.detail.get((scenario, variant, rnd, "errors")) or self.detail.get(
            (scenario, variant, rnd, "ok"), "failed")

    def per_round(self, variant, metric, scenario=None, clean=True):
        """The metric in rounds 1…N (None where the run does not count)."""
        return [self.run(variant, r, scenario).get(metric) if not clean or self.ok(variant, r, scenario) else None
                for r in range(1, self.rounds + 1)]

    def median(self, variant, metric, scenario=None):
        return med(self.per_round(variant, metric, scenario))

    def ratios(self, x, y, metric, scenario=None):
        """(ratio of the medians, [per-round ratios]) of variant x ÷ variant y."""
        return (ratio(self.median(x, metric, scenario), self.median(y, metric, scenario)),
                [ratio(a, b) for a, b in zip(self.per_round(x, metric, scenario), self.per_round(y, metric, scenario))])

    def failed(self, variants, scenario=None):
        """(variant, round, why) of every run that does not count."""
        return [(v, r, self.why(v, r, scenario)) for v in variants for r in range(1, self.rounds + 1)
                if self.run(v, r, scenario) and not self.ok(v, r, scenario)]


# --------------------------------------------------------------------------------------------
# Tables


def table(header, rows, align=None):
    """A Markdown table: header cells, rows of cells."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align or ["---"] * len(header)) + "|"]
    return out + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows] + [""]


def others_line(rec):
    """How busy the rest of the machine was over all runs, as a line (none without measurements)."""
    busy = [r.get("other_cores") for r in rec.values.values() if r.get("other_cores") is not None]
    return [f"Other processes on the machine during the runs: median {med(busy):.2f}, max {max(busy):.2f} cores."] if busy else []


def ratio_cell(rec, x, y, metric, scenario=None):
    """**ratio of the medians** [per-round ratios]"""
    rm, per = rec.ratios(x, y, metric, scenario)
    return f"**{fmt(rm, 'x')}** [{' '.join(fmt(p, 'x') for p in per)}]"


def round_cell(rec, variant, rnd, metric, kind, scenario=None):
    """A run's value, or why it does not count."""
    run = rec.run(variant, rnd, scenario)
    if run.get("rps") is None:
        return f"FAILED ({rec.why(variant, rnd, scenario)})"
    if not rec.ok(variant, rnd, scenario):
        return f"{fmt(run.get(metric), kind)} ⚠ errors: {rec.why(variant, rnd, scenario)}"
    return fmt(run.get(metric), kind)


def rounds_table(rec, first, variants, metric, kind, scenario=None, with_spread=True):
    """One row per variant: each round, the median (of the rounds that count) and max ÷ min."""
    rounds = range(1, rec.rounds + 1)
    rows = []
    for v, label in variants:
        n = sum(rec.ok(v, r, scenario) for r in rounds)
        note = "" if n == rec.rounds else f" (of {n} clean run{'s' if n != 1 else ''})"
        row = [label] + [round_cell(rec, v, r, metric, kind, scenario) for r in rounds]
        row.append(f"**{fmt(rec.median(v, metric, scenario), kind)}**{note}")
        if with_spread:
            row.append(fmt(spread(rec.per_round(v, metric, scenario)), "x"))
        rows.append(row)
    header = [first] + [f"round {r}" for r in rounds] + ["median"] + (["max ÷ min"] if with_spread else [])
    return table(header, rows)


def report(bench, records, out=None):
    """Renders bench's report from a records file to stdout (and `out`); whether the run passed."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    rec = Records(records)
    rec.out_dir = os.path.dirname(os.path.abspath(out)) if out else None  # for a report's figures
    lines, ok = importlib.import_module(f"reports.{bench}").render(rec)
    text = "\n".join(lines).rstrip("\n") + "\n"
    if out:
        with open(out, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    sys.stdout.flush()
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench")
    ap.add_argument("records")
    ap.add_argument("--out")
    a = ap.parse_args()
    sys.exit(0 if report(a.bench, a.records, a.out) else 1)


if __name__ == "__main__":
    main()
