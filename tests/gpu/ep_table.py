#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Markdown table of bench_ep results (MoE dispatch/combine on a GPU).

    tests/gpu/ep_table.py RESULTS.jsonl

prints docs/ep.md's performance table: per round, the device-to-device
copy rate measured in the same run, eager dispatch and combine, and
dispatch + combine replayed as one CUDA graph, each as time and as the rate
at which its bytes (read + written) move, and (where recorded) a dispatch
split into its send and receive kernels; then the summary's medians and
ranges as a fraction of the copy rate.

    tests/gpu/ep_table.py --builds RESULTS.jsonl

compares builds run in the same GPU run, interleaved: the rounds carry a
"build" key (the bench_ep binary they came from), and each build's line
gives the median and range over all its rounds of each kernel's time and
of its rate as a fraction of the copy rate of the same round."""
import json
import statistics
import sys


def main(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rounds = [r for r in rows if r.get("what") == "round"]
    summary = [r for r in rows if r.get("what") == "summary"]
    if not rounds:
        sys.exit(f"{path}: no bench_ep rounds")
    r0 = rounds[0]
    print(f"{r0['tokens']} tokens x {r0['hidden']} bf16, top-{r0['topk']} of {r0['experts']} experts, "
          f"{r0['ranks']} rank(s); {r0['rows']} rows dispatched per call:\n")
    split = all("dispatch_send_us" in r for r in rounds)
    print("| round | D2D copy GB/s | dispatch µs (GB/s) | combine µs (GB/s) | graph: dispatch + combine µs (GB/s) |"
          + (" dispatch split: send + receive µs |" if split else ""))
    print("|---:|---:|---:|---:|---:|" + ("---:|" if split else ""))
    for r in rounds:
        print(f"| {r['round']} | {r['copy_gbps']:.0f} | {r['dispatch_eager_us']:.1f} ({r['dispatch_gbps']:.0f}) | "
              f"{r['combine_eager_us']:.1f} ({r['combine_gbps']:.0f}) | "
              f"{r['graph_dispatch_combine_us']:.1f} ({r['graph_gbps']:.0f}) |"
              + (f" {r['dispatch_send_us']:.1f} + {r['dispatch_recv_us']:.1f} |" if split else ""))
    for s in summary:
        def f(key):
            m, lo, hi = s[key]
            return f"{m:.2f} ({lo:.2f}–{hi:.2f})"
        print()
        print(f"Rate as a fraction of the same run's copy rate, median (range) over {s['rounds']} rounds: "
              f"dispatch {f('dispatch_vs_copy')}, combine {f('combine_vs_copy')}, "
              f"graph-replayed dispatch + combine {f('graph_vs_copy')}.")


def spread(values, digits):
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def builds(path):
    with open(path) as f:
        rounds = [r for r in (json.loads(line) for line in f if line.strip()) if r.get("what") == "round"]
    order = []
    for r in rounds:
        if r["build"] not in order:
            order.append(r["build"])
    print("| build | rounds | dispatch µs | dispatch / copy | combine µs | combine / copy | graph µs | graph / copy |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for b in order:
        mine = [r for r in rounds if r["build"] == b]
        cells = [b, str(len(mine))]
        for us, gbps in (("dispatch_eager_us", "dispatch_gbps"), ("combine_eager_us", "combine_gbps"),
                         ("graph_dispatch_combine_us", "graph_gbps")):
            cells.append(spread([r[us] for r in mine], 2))
            cells.append(spread([r[gbps] / r["copy_gbps"] for r in mine], 3))
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if sys.argv[1] == "--builds":
        builds(sys.argv[2])
    else:
        main(sys.argv[1])
