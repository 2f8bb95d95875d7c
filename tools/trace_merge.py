#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Puts mori's per-rank traces (MORI_TRACE=file:PATH) on the timeline of
torch.profiler's Chrome traces, in one JSON file that Perfetto and
chrome://tracing open.

mori's events are timed with CLOCK_MONOTONIC (microseconds); each mori file
also records CLOCK_REALTIME - CLOCK_MONOTONIC when tracing began
(otherData.realtime_minus_monotonic_us). torch.profiler's events are in
microseconds since baseTimeNanoseconds (Unix time; 0 or absent in older
torch: the times are Unix time themselves). A mori file is aligned, in this
order of preference:

 1. by a sync marker: an event in a torch trace named
    "mori_clock_sync monotonic_ns=N", recorded by the same process (its pid
    is the mori file's otherData.os_pid), N being time.monotonic_ns() taken
    just before the marker began (Python's time.monotonic is
    CLOCK_MONOTONIC on Linux). tools/trace_demo.py records one. Error: the
    few microseconds between reading the clock and the marker's start.
 2. by the wall clock: both sides converted to Unix time. Error: how far
    CLOCK_REALTIME moved (NTP) between the two records, usually small.

Each rank's mori events go to the process of its torch trace (pid = the
rank's OS pid, when a torch trace of that process is given) on threads of
their own named "mori (thread T)", so that mori's ranges sit next to torch's
CPU ops and the GPU kernels they launched. Without torch traces the mori
files are simply combined, one process per rank.

Usage:
  tools/trace_merge.py -o merged.json [--torch T.json ...] MORI.json ...
"""
import argparse
import json
import re
import sys

SYNC = re.compile(r"^mori_clock_sync monotonic_ns=(\d+)$")
MORI_TID_BASE = 1 << 30  # mori's threads, apart from torch's thread ids


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if isinstance(doc, list):  # the JSON Array Format
        doc = {"traceEvents": doc}
    if not isinstance(doc.get("traceEvents"), list):
        raise ValueError(f"{path}: no traceEvents array")
    return doc


def torch_base_us(doc):
    return int(doc.get("baseTimeNanoseconds", 0) or 0) / 1000.0


def sync_offsets(torch_docs):
    """os pid -> (torch trace index, torch_ts - monotonic_us) from sync markers."""
    found = {}
    for i, doc in enumerate(torch_docs):
        for e in doc["traceEvents"]:
            m = SYNC.match(str(e.get("name", "")))
            if m and e.get("ph") == "X" and isinstance(e.get("pid"), int):
                found[e["pid"]] = (i, float(e["ts"]) - int(m.group(1)) / 1000.0)
    return found


def torch_pids(doc):
    return {e["pid"] for e in doc["traceEvents"] if e.get("ph") == "X" and isinstance(e.get("pid"), int)}


def merge(torch_docs, mori_docs):
    """Returns (merged trace, one line per mori file saying how it was aligned)."""
    notes = []
    if torch_docs:
        bases = [torch_base_us(d) for d in torch_docs]
        base = min(bases)
        out = {k: v for k, v in torch_docs[0].items() if k != "traceEvents"}
        out["baseTimeNanoseconds"] = int(base * 1000)
        events = []
        for doc, b in zip(torch_docs, bases):
            for e in doc["traceEvents"]:
                if "ts" in e and b != base:
                    e = dict(e, ts=float(e["ts"]) + (b - base))
                events.append(e)
    else:
        base = None
        out = {"displayTimeUnit": "ns"}
        events = []
    syncs = sync_offsets(torch_docs)
    pids_of = [torch_pids(d) for d in torch_docs]
    for path, doc in mori_docs:
        other = doc.get("otherData", {})
        rank, os_pid = other.get("rank", -1), other.get("os_pid")
        if base is None:
            shift, how, pid = 0.0, "times kept (CLOCK_MONOTONIC)", None
        elif os_pid in syncs:
            i, offset = syncs[os_pid]
            shift, how = offset + (torch_base_us(torch_docs[i]) - base), "aligned by its sync marker"
            pid = os_pid
        else:
            if "realtime_minus_monotonic_us" not in other:
                raise ValueError(f"{path}: no otherData.realtime_minus_monotonic_us (not a mori trace?)")
            shift = float(other["realtime_minus_monotonic_us"]) - base
            how = "aligned by the wall clock"
            pid = os_pid if any(os_pid in p for p in pids_of) else None
        notes.append(f"{path}: rank {rank}, {how}, shift {shift:+.3f} us")
        threads = set()
        for e in doc["traceEvents"]:
            if e.get("ph") == "M":
                if pid is None:
                    events.append(e)
                continue
            e = dict(e)
            if "ts" in e:
                e["ts"] = round(float(e["ts"]) + shift, 3)
            if pid is not None:
                e["pid"] = pid
                e["tid"] = MORI_TID_BASE + int(e.get("tid", 0))
                threads.add(e["tid"])
            events.append(e)
        for tid in sorted(threads):
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name": f"mori rank {rank} (thread {tid - MORI_TID_BASE})"}})
    out["traceEvents"] = events
    return out, notes


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--out", required=True, help="the merged trace (JSON)")
    p.add_argument("--torch", action="append", default=[], help="a torch.profiler Chrome trace (repeatable)")
    p.add_argument("mori", nargs="+", help="mori trace files (MORI_TRACE=file:...)")
    args = p.parse_args(argv)
    try:
        torch_docs = [load(t) for t in args.torch]
        mori_docs = [(m, load(m)) for m in args.mori]
        merged, notes = merge(torch_docs, mori_docs)
    except (OSError, ValueError) as e:
        print(f"trace_merge: {e}", file=sys.stderr)
        return 1
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(merged, f)
    for n in notes:
        print(n)
    print(f"wrote {args.out}: {len(merged['traceEvents'])} events")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
