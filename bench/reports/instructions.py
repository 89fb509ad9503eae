"""bench/instructions' report: one line, the instructions per proxied request."""


def render(rec):
    n = int(rec.facts["n"])
    base, total = (rec.run(v, None, "instructions").get("instr.total") for v in ("0", str(n)))
    return [f"instructions per proxied request: {(total - base) // n}  (N={n}; total {total}, baseline {base})"], True
