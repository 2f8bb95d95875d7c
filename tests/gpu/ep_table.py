#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Markdown table of bench_ep results (MoE dispatch/combine on a GPU).

    tests/gpu/ep_table.py RESULTS.jsonl

prints docs/ep.md's performance table: per round, the device-to-device
copy rate measured in the same run, eager dispatch and combine, and
dispatch + combine replayed as one CUDA graph, each as time and as the rate
at which its bytes (read + written) move, and (where recorded) a dispatch
split into its send and receive kernels; then the summary's medians and
ranges as a fraction of the copy rate."""
import json
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


if __name__ == "__main__":
    main(sys.argv[1])
