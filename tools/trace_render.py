#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Draws a trace (a mori trace, or one merged by tools/trace_merge.py) as a
PNG timeline: one row per thread or GPU stream, one bar per complete ("X")
event, mori's events in one colour and labelled, torch's CPU ops and GPU
kernels in others. Needs matplotlib; without it, says so and exits 3 (the
trace itself is still there to open in Perfetto).

Usage:
  tools/trace_render.py merged.json timeline.png [--window mori|all] [--max-rows N]
"""
import argparse
import json
import sys


def kind_of(e):
    cat = str(e.get("cat", ""))
    if cat == "mori":
        return "mori"
    if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
        return "gpu"
    return "cpu"


COLOURS = {"mori": "#d95f02", "gpu": "#1b9e77", "cpu": "#7570b3"}


def rows_of(doc):
    """(label, events) per track, mori tracks first, then GPU, then CPU."""
    names = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e.get("pid"), e.get("tid"))] = e.get("args", {}).get("name", "")
    tracks = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and "ts" in e:
            tracks.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    order = {"mori": 0, "gpu": 1, "cpu": 2}
    rows = []
    for key, events in tracks.items():
        kinds = {kind_of(e) for e in events}
        kind = min(kinds, key=order.get)
        label = names.get(key) or f"pid {key[0]} tid {key[1]}"
        rows.append((order[kind], str(label), events))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(label, events) for _, label, events in rows]


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("png")
    p.add_argument("--window", choices=["mori", "all"], default="mori",
                   help="the time shown: around mori's events (default) or everything")
    p.add_argument("--max-rows", type=int, default=16)
    args = p.parse_args(argv)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("trace_render: matplotlib is not installed; open the trace in Perfetto instead", file=sys.stderr)
        return 3
    with open(args.trace, encoding="utf-8") as f:
        doc = json.load(f)
    rows = rows_of(doc)[: args.max_rows]
    if not rows:
        print(f"trace_render: {args.trace} has no complete events", file=sys.stderr)
        return 1
    spans = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for _, evs in rows for e in evs
             if args.window == "all" or kind_of(e) == "mori"]
    if not spans:
        spans = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for _, evs in rows for e in evs]
    t0, t1 = min(s for s, _ in spans), max(e for _, e in spans)
    margin = max((t1 - t0) * 0.05, 1.0)
    t0, t1 = t0 - margin, t1 + margin
    fig, ax = plt.subplots(figsize=(16, 1.0 + 0.6 * len(rows)))
    for y, (label, events) in enumerate(rows):
        for e in events:
            s, d = float(e["ts"]), float(e.get("dur", 0))
            if s + d < t0 or s > t1:
                continue
            k = kind_of(e)
            ax.broken_barh([(s - t0, max(d, (t1 - t0) * 0.0005))], (y - 0.4, 0.8), color=COLOURS[k],
                           edgecolor="black", linewidth=0.2)
            if k == "mori" and d > (t1 - t0) * 0.04:
                ax.text(s - t0 + d / 2, y, str(e.get("name", "")), ha="center", va="center", fontsize=7, clip_on=True)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label[:40] for label, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, t1 - t0)
    ax.set_xlabel("microseconds")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, ["mori (MORI_TRACE)", "GPU kernels", "CPU (torch)"], loc="upper right", fontsize=8)
    ax.set_title(args.trace.split("/")[-1])
    fig.tight_layout()
    fig.savefig(args.png, dpi=130)
    print(f"wrote {args.png}: {len(rows)} rows, {t1 - t0:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
