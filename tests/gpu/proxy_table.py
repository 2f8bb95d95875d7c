#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Markdown tables of bench_proxy results (the proxy ring on a GPU).

    tests/gpu/proxy_table.py RESULTS.jsonl

prints the throughput table (requests per second and bandwidth per put size)
and the latency table (microseconds per put + signal, completion seen by
the kernel) of docs/multinode.md's section "The proxy and its providers".
Figures are the median over rounds, with the range."""
import json
import sys


def main(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    tput = [r for r in rows if r["what"] == "proxy_throughput"]
    lat = [r for r in rows if r["what"] == "proxy_latency"]
    if tput:
        r0 = tput[0]
        print(f"Throughput ({r0['executor']} executor, {r0['ranks']} ranks on {r0['gpus']} GPU(s); "
              f"{r0['requests_per_launch']} puts per launch from one block, one quiet):\n")
        print("| put size | µs per request (median, range) | requests per second | GB/s |")
        print("|---:|---:|---:|---:|")
        for r in tput:
            print(f"| {r['bytes']} B | {r['us_per_request']:.2f} ({r['us_min']:.2f}–{r['us_max']:.2f}) | "
                  f"{r['requests_per_s']:,.0f} | {r['GBps']:.1f} |")
        print()
    if lat:
        print("Latency (one thread: put + signal set, then a quiet that sees both complete):\n")
        print("| put size | µs per put + signal (median, range) |")
        print("|---:|---:|")
        for r in lat:
            print(f"| {r['bytes']} B | {r['us_per_put_signal']:.1f} ({r['us_min']:.1f}–{r['us_max']:.1f}) |")


if __name__ == "__main__":
    main(sys.argv[1])
