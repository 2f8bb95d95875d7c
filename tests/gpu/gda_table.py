#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Markdown table of bench_gda results (GPU-initiated posting's device-side
cost, beside the proxy ring's submit, in the same run).

    tests/gpu/gda_table.py RESULTS.jsonl

Figures are the median over rounds, with the range."""
import json
import sys

WHAT = {
    "gda_put": "GPU posting: one put (claim, WQE, doorbell) from one thread",
    "gda_put_warp": "GPU posting: a warp's batch, one doorbell, per put",
    "proxy_submit": "proxy ring: one put handed to the host proxy from one thread",
}

STEPS = {
    "reserve": "claim",
    "wqe": "WQE",
    "dbrec": "record",
    "doorbell": "doorbell",
    "after": "after",
    "rung": "rung",
}


def main(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if r.get("bench") == "gda"]
    if not rows:
        sys.exit(f"{path}: no bench_gda results")
    print(f"Provider: {rows[0]['provider']}; device-side time per put (the kernel's clock), "
          "and the quiet that followed:\n")
    print("| what | bytes | ns per put (median, range) | quiet µs |")
    print("|---|---:|---:|---:|")
    for r in rows:
        if r["case"] == "gda_put_stages":
            continue
        print(f"| {WHAT.get(r['case'], r['case'])} | {r['bytes']} | {r['post_ns']:.0f} "
              f"({r['post_ns_min']:.0f}–{r['post_ns_max']:.0f}) | {r['quiet_us']:.1f} |")
    stages = [r for r in rows if r["case"] == "gda_put_stages"]
    if stages:
        print("\nWhere one put's time goes (one thread, 8 bytes; ns per step, median over rounds): "
              "the doorbell as mori writes it (release stores) beside a full system fence before "
              "the record, before the register and after it:\n")
        print("| doorbell | " + " | ".join(STEPS.values()) + " | put (range) |")
        print("|---|" + "---:|" * (len(STEPS) + 1))
        for r in stages:
            cells = " | ".join(f"{r[k + '_ns']:.0f}" for k in STEPS)
            print(f"| {r['ring']} | {cells} | {r['post_ns']:.0f} ({r['post_ns_min']:.0f}–{r['post_ns_max']:.0f}) |")


if __name__ == "__main__":
    main(sys.argv[1])
