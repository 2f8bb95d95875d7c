#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Markdown tables of scale_bench results, from one set of runs to the next.

    tests/scale/scale_table.py FIRST.jsonl SECOND.jsonl [THIRD.jsonl ...]

prints, per step and rank count, the busiest rank's CPU time and the slowest
rank's wall time (milliseconds), as "first → second → ..." — the tables of
docs/multinode.md's section "Scale". A file may hold several runs (scale_bench
appended to it again): each figure is then the median over its runs.

    tests/scale/scale_table.py --sum FIRST.jsonl SECOND.jsonl ...

adds a table of the CPU time of all ranks together (what a machine with fewer
cores than ranks has to get through), and

    tests/scale/scale_table.py --startup FIRST.jsonl SECOND.jsonl ...

prints only the start-up, with the busiest rank's CPU, all ranks' CPU and
the slowest rank's wall time side by side."""
import json
import statistics
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
KEYS = ["cpu_us_max", "wall_us_max", "cpu_us_sum"]


def load(path):
    runs = {}
    with open(path) as f:
        for r in map(json.loads, filter(str.strip, f)):
            runs.setdefault((r["step"], r["ranks"]), []).append(r)
    return {k: {key: statistics.median(r[key] for r in rs) for key in KEYS} | {"runs": len(rs)} for k, rs in runs.items()}


def cell(value_us):
    ms = value_us / 1000.0
    return "%.3f" % ms if ms < 0.1 else "%.2f" % ms if ms < 10 else "%.1f" % ms if ms < 100 else "%.0f" % ms


def table(sets, key, steps=STEPS):
    ranks = sorted(set.intersection(*({n for (_, n) in s} for s in sets)))
    lines = ["| ranks | " + " | ".join(TITLES[s] for s in steps) + " |", "|---:|" + "---:|" * len(steps)]
    for n in ranks:
        cells = []
        for s in steps:
            got = [d.get((s, n)) for d in sets]
            cells.append(" → ".join(cell(g[key]) for g in got) if all(got) else "")
        lines.append("| %d | %s |" % (n, " | ".join(cells)))
    return "\n".join(lines)


def startup_table(sets):
    ranks = sorted(set.intersection(*({n for (_, n) in s} for s in sets)))
    lines = ["| ranks | busiest rank's CPU | all ranks' CPU | slowest rank's wall |", "|---:|---:|---:|---:|"]
    for n in ranks:
        got = [d.get(("bootstrap_init", n)) for d in sets]
        if not all(got):
            continue
        lines.append("| %d | %s |" % (n, " | ".join(" → ".join(cell(g[k]) for g in got) for k in KEYS[:1] + KEYS[2:] + KEYS[1:2])))
    return "\n".join(lines)


def main():
    args = sys.argv[1:]
    with_sum = "--sum" in args
    startup = "--startup" in args
    paths = [a for a in args if a not in ("--sum", "--startup")]
    if len(paths) < 2:
        sys.exit(__doc__)
    sets = [load(p) for p in paths]
    order = " → ".join(p.rsplit("/", 1)[-1].replace("scale_", "").replace(".jsonl", "") for p in paths)
    runs = ", ".join("%s: %d" % (p.rsplit("/", 1)[-1], max(v["runs"] for v in s.values())) for p, s in zip(paths, sets))
    print("Runs per file (medians over them): %s.\n" % runs)
    if startup:
        print("Start-up (ms), %s:\n" % order)
        print(startup_table(sets))
        return
    print("Busiest rank's CPU time per step (ms), %s:\n" % order)
    print(table(sets, "cpu_us_max"))
    print("\nSlowest rank's wall time per step (ms), %s:\n" % order)
    print(table(sets, "wall_us_max"))
    if with_sum:
        print("\nCPU time of all ranks together per step (ms), %s:\n" % order)
        print(table(sets, "cpu_us_sum"))


if __name__ == "__main__":
    main()
