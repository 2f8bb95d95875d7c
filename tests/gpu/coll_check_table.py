#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What checking collective calls costs on a GPU, from result files.

    tests/gpu/coll_check_table.py RECORDS.jsonl [--machine WORDS] [--doc docs/performance.md]

reads bench_coll's records from `tools/gpu.sh run coll_check` (the quick
sweep with every context made unchecked and then checked,
MORI_BENCH_COLL_CHECK=1, several rounds; each record carries "round") and
prints the section of docs/performance.md made from them: per call and
size, the GPU time per call (graph replay), unchecked and checked, median
and range over the rounds, and the difference of the medians. With --doc
it puts the section there in place of the one it made before."""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import doc_section  # noqa: E402 (bench/, beside the other section makers)

TITLE = "## What checking collective calls costs (`MORI_COLL_CHECK_CALLS`)"


def section(rows, path, doc_dir, machine):
    cells, order = {}, []
    for r in rows:
        if r.get("what") == "floor" or "check_calls" not in r or r["us"] < 0:
            continue
        key = (r.get("build", "bench_coll"), r["what"], r["algo"], r["bytes"])
        if key not in cells:
            cells[key] = {0: [], 1: []}
            order.append(key)
        cells[key][r["check_calls"]].append(r["us"])
    if not order:
        sys.exit(f"{path}: no bench_coll records with check_calls")
    builds = len({k[0] for k in order})
    ranks = max(r.get("ranks", 0) for r in rows)
    rounds = len({r.get("round") for r in rows})

    def cell(v):
        return f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})" if v else "–"

    diffs = [statistics.median(c[1]) - statistics.median(c[0]) for c in cells.values() if c[0] and c[1]]
    out = [TITLE, "",
           f"From `{os.path.relpath(path, doc_dir)}`{' (' + machine + ')' if machine else ''}: "
           f"`MORI_BENCH_COLL_QUICK=1 MORI_BENCH_COLL_CHECK=1 mori_launch -n {ranks} bench_coll`, {rounds} rounds; "
           "every context made twice, unchecked and then checked (`attr.check_calls`); GPU time per call (20 calls "
           "in a CUDA graph, replayed), median (range) over the rounds. A checked call first writes its signature "
           "into every other member's slot and reads theirs before any item runs.", "",
           "| " + ("build | " if builds > 1 else "") + "call | algorithm | bytes | unchecked µs | checked µs | checked − unchecked µs |",
           "|" + ("---|" if builds > 1 else "") + "---|---|---:|---:|---:|---:|"]
    for key in sorted(order, key=lambda k: k[1:]) if builds > 1 else order:  # stable: builds stay in run order
        plain, checked = cells[key][0], cells[key][1]
        diff = f"{statistics.median(checked) - statistics.median(plain):+.2f}" if plain and checked else "–"
        lead = f"| {key[0]} " if builds > 1 else ""
        out.append(f"{lead}| {key[1]} | {key[2]} | {key[3]} | {cell(plain)} | {cell(checked)} | {diff} |")
    if diffs and builds == 1:
        out += ["", f"Checking adds {min(diffs):.2f}–{max(diffs):.2f} µs per call over these calls and sizes."]
    if builds > 1:
        out.append("")
        for b in dict.fromkeys(k[0] for k in order):  # run order
            d = [statistics.median(c[1]) - statistics.median(c[0]) for k, c in cells.items() if k[0] == b and c[0] and c[1]]
            if d:
                out.append(f"- `{b}`: checking adds {min(d):+.2f} to {max(d):+.2f} µs per call over these calls and sizes.")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("records")
    p.add_argument("--machine", default="", help="where the records were taken, in words")
    p.add_argument("--doc", default="")
    a = p.parse_args()
    with open(a.records) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    doc_dir = os.path.dirname(os.path.abspath(a.doc)) if a.doc else "docs"
    text = section(rows, os.path.abspath(a.records), os.path.abspath(doc_dir), a.machine)
    if not a.doc:
        print(text, end="")
        return
    doc_section.put_section(a.doc, TITLE, text)
    print(f"coll_check_table: wrote the section to {a.doc}")


if __name__ == "__main__":
    main()
