#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Markdown table of bench_gda_msgrate results (GPU posting's message rate
beside the proxy's, in the same run), and of the GPU-posting stress's
receiver-side check when the file holds its records
(tools/rdma_vm_test.sh with MORI_VM_BENCH_OUT writes both).

    tests/gda/msgrate_table.py RESULTS.jsonl

Rates are the median over rounds, with the range and the spread
(max / min)."""
import json
import sys

PATH = {
    "gda": "GPU posting (the rank writes WQEs, rings the doorbell)",
    "proxy": "proxy (the rank hands each put to the proxy thread)",
}


def main(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rates = [r for r in rows if r.get("bench") == "gda_msgrate"]
    stress = [r for r in rows if r.get("test") == "gda_swcx_stress"]
    if not rates and not stress:
        sys.exit(f"{path}: no bench_gda_msgrate or stress records")
    if rates:
        first = rates[0]
        print(f"Provider: {first['provider']}; {first['ranks']} {first['platform']}-platform ranks; "
              f"{first['ops']} puts per path, size and round, then one quiet; {first['rounds']} rounds "
              "after a warm-up, the paths alternating which goes first:\n")
        print("| path | bytes | messages/s (median) | range | spread |")
        print("|---|---:|---:|---:|---:|")
        for r in rates:
            spread = r["msgs_per_s_max"] / r["msgs_per_s_min"] if r["msgs_per_s_min"] else float("inf")
            print(f"| {PATH.get(r['path'], r['path'])} | {r['bytes']} | {r['msgs_per_s']:,.0f} | "
                  f"{r['msgs_per_s_min']:,.0f}–{r['msgs_per_s_max']:,.0f} | {spread:.1f}× |")
    if stress:
        if rates:
            print()
        print("Random put-then-signal stress (GPU posting; sizes 1–511 bytes at random offsets; while the "
              "stream runs, the receiver checks each put's data as soon as it sees a signal that covers it, "
              "and every put again at the end):\n")
        print("| ranks | put + signal pairs per rank | signal values seen | puts checked after their signal "
              "| mismatches | pairs/s (rank 0) |")
        print("|---:|---:|---:|---:|---:|---:|")
        for r in stress:
            print(f"| {r['ranks']} | {r['ops_per_rank']:,} | {r['signals_seen']:,} | "
                  f"{r['ops_checked_after_their_signal']:,} | {r['mismatches']} | {r['ops_per_s']:,.0f} |")


if __name__ == "__main__":
    main(sys.argv[1])
