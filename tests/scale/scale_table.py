#!/usr/bin/env python3
"""Markdown tables of scale_bench results, before against after.

    tests/scale/scale_table.py BEFORE.jsonl AFTER.jsonl

prints, per step and rank count, the busiest rank's CPU time and the slowest
rank's wall time (milliseconds), as "before → after" — the tables of
docs/multinode.md's section "Scale"."""
import json
import sys

STEPS = ["bootstrap_init", "allgather", "barrier", "bcast", "comm_create", "window", "teams"]
TITLES = {
    "bootstrap_init": "start-up",
    "allgather": "allgather",
    "barrier": "barrier",
    "bcast": "bcast",
    "comm_create": "comm",
    "window": "window",
    "teams": "teams",
}


def load(path):
    with open(path) as f:
        return {(r["step"], r["ranks"]): r for r in map(json.loads, filter(str.strip, f))}


def cell(value_us):
    ms = value_us / 1000.0
    return "%.3f" % ms if ms < 0.1 else "%.2f" % ms if ms < 10 else "%.1f" % ms if ms < 100 else "%.0f" % ms


def table(before, after, key):
    ranks = sorted({n for (_, n) in before} & {n for (_, n) in after})
    lines = ["| ranks | " + " | ".join(TITLES[s] for s in STEPS) + " |", "|---:|" + "---:|" * len(STEPS)]
    for n in ranks:
        cells = []
        for s in STEPS:
            b, a = before.get((s, n)), after.get((s, n))
            cells.append("%s → %s" % (cell(b[key]), cell(a[key])) if b and a else "")
        lines.append("| %d | %s |" % (n, " | ".join(cells)))
    return "\n".join(lines)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    before, after = load(sys.argv[1]), load(sys.argv[2])
    print("Busiest rank's CPU time per step (ms), before → after:\n")
    print(table(before, after, "cpu_us_max"))
    print("\nSlowest rank's wall time per step (ms), before → after:\n")
    print(table(before, after, "wall_us_max"))


if __name__ == "__main__":
    main()
