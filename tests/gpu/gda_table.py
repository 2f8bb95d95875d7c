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
    "gda_put_warp_pieces": "the same, each lane's WQE stored as four 16-byte pieces, per put",
    "gda_put_warp_runs": "the same, the warp's WQEs stored as contiguous 512-byte runs (shuffled), per put",
    "proxy_submit": "proxy ring: one put handed to the host proxy from one thread",
}

FORMS = {
    "library": "mori (the claim's words read with the QP's, orderings by where the queue lives)",
    "system_scope": "system-scope claim, QP read after it",
    "fenced": "full system fences around the doorbell",
    # older result files
    "release": "system-scope claim, QP read after it",
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
        if r["case"] in ("gda_put_stages", "ordering", "claim"):
            continue
        print(f"| {WHAT.get(r['case'], r['case'])} | {r['bytes']} | {r['post_ns']:.0f} "
              f"({r['post_ns_min']:.0f}–{r['post_ns_max']:.0f}) | {r['quiet_us']:.1f} |")
    stages = [r for r in rows if r["case"] == "gda_put_stages"]
    if stages:
        print("\nWhere one put's time goes (one thread, 8 bytes; ns per step, median over rounds): "
              "the steps as mori takes them beside two earlier forms, interleaved in the same run:\n")
        print("| form | " + " | ".join(STEPS.values()) + " | put (range) |")
        print("|---|" + "---:|" * (len(STEPS) + 1))
        for r in stages:
            cells = " | ".join(f"{r[k + '_ns']:.0f}" for k in STEPS)
            print(f"| {FORMS.get(r['ring'], r['ring'])} | {cells} | {r['post_ns']:.0f} ({r['post_ns_min']:.0f}–{r['post_ns_max']:.0f}) |")
    orderings = [r for r in rows if r["case"] == "ordering"]
    if orderings:
        print("\nWhat the doorbell's orderings cost by where the queue lives (one thread, no NIC reading; a 64-byte "
              "WQE, the record, the register in host memory, then `rung` passed on; ns, median over rounds):\n")
        print("| layout | WQE | record | register | rung | round (range) |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in orderings:
            print(f"| {LAYOUTS.get(r['layout'], r['layout'])} | {r['wqe_ns']:.0f} | {r['dbrec_ns']:.0f} | "
                  f"{r['doorbell_ns']:.0f} | {r['rung_ns']:.0f} | {r['round_ns']:.0f} ({r['round_ns_min']:.0f}–{r['round_ns_max']:.0f}) |")
    claims = [r for r in rows if r["case"] == "claim"]
    if claims:
        print("\nA slot claim's forms (one thread, device-memory counters; ns per claim, median over rounds):\n")
        print("| form | ns (range) |")
        print("|---|---:|")
        for r in claims:
            print(f"| {CLAIMS.get(r['form'], r['form'])} | {r['claim_ns']:.0f} ({r['claim_ns_min']:.0f}–{r['claim_ns_max']:.0f}) |")


LAYOUTS = {
    "host_queue_sys_sys": "ring and record in host memory, system-scope releases (host queues)",
    "dev_queue_sys_sys": "ring and record in device memory, system-scope releases",
    "dev_queue_gpu_sys": "device memory; record GPU-scope, register system-scope",
    "dev_queue_gpu_gpu": "device memory; GPU-scope releases (device queues)",
    "dev_queue_gpu_plain": "device memory; record GPU-scope, register a plain store (no order)",
}

CLAIMS = {
    "check_then_load": "failure flag read, then the counters, then compare-and-swap",
    "loads_together": "the three loads together, then compare-and-swap (mori's, with the QP's loads)",
    "fetch_add": "fetch-and-add, then the room check",
}


if __name__ == "__main__":
    main(sys.argv[1])
