# SPDX-License-Identifier: MIT
"""Generates docs/performance.md and its plots from benchmark records (the
.jsonl files bench/run.py writes). Nothing in the document is typed by
hand: every figure comes from the records.

    python3 bench/report.py docs/perf/h200x2.jsonl [more.jsonl ...] \
        --doc docs/performance.md --plots docs/perf

Each records file is one GPU run (its machine is named in the file's first
record, "machine"); files for other world sizes add sections.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
import summary  # noqa: E402
from summary import fmt_size, spread  # noqa: E402

BACKEND_ORDER = ["MORI", "MORI-static", "MORI-isolation", "default", "NVSHMEM", "NCCL-symm", "NCCL"]


def cell(values, digits=2):
    s = spread(values)
    if not s:
        return "—"
    if s[1] == s[2]:
        return f"{s[0]:.{digits}f}"
    return f"{s[0]:.{digits}f} [{s[1]:.{digits}f}–{s[2]:.{digits}f}]"


def best(table, what, size, backend, kind="gpu", label_has=None):
    """(median, label) of the fastest label of a backend for an op and size."""
    found = None
    for (w, s, b, label), row in table.items():
        if w != what or s != size or b != backend or not row[kind]:
            continue
        if label_has and label_has not in label:
            continue
        m = spread(row[kind])[0]
        if found is None or m < found[0]:
            found = (m, label, row[kind])
    return found


def op_table(table, what, kind, title):
    keys = sorted({(b, label) for (w, _, b, label), row in table.items() if w == what and row[kind]},
                  key=lambda k: (BACKEND_ORDER.index(k[0]) if k[0] in BACKEND_ORDER else 99, k[1]))
    sizes = sorted({s for (w, s, _, _), row in table.items() if w == what and row[kind]})
    if not keys:
        return ""
    lines = [f"**{title}** (µs per call; median [min–max] over rounds)", ""]
    lines.append("| size | " + " | ".join(f"{b}: {label}" for b, label in keys) + " |")
    lines.append("|---|" + "---|" * len(keys))
    for s in sizes:
        cells = [cell(table.get((what, s, b, label), {}).get(kind, [])) for b, label in keys]
        lines.append(f"| {fmt_size(s) or '—'} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def correctness_table(records):
    rows = {}
    for r in records:
        key = (r["backend"], r["what"], r.get("label", ""))
        row = rows.setdefault(key, {"checked": 0, "wrong": 0, "stale": 0, "stale_checked": 0, "errors": 0})
        if "correct" in r:
            row["checked"] += 1
            row["wrong"] += 0 if r["correct"] else 1
        if "stale_rounds" in r:
            row["stale_checked"] += 1
            row["stale"] += r["stale_rounds"]
        if "error" in r:
            row["errors"] += 1
    lines = ["| backend | op | what it does | data checks (wrong) | stale rounds | errors |", "|---|---|---|---|---|---|"]
    for (b, what, label), row in sorted(rows.items()):
        if what in ("floor", "alloc_rendezvous"):
            continue
        checks = f"{row['checked']} ({row['wrong']})" if row["checked"] else "—"
        stale = str(row["stale"]) if row["stale_checked"] else "—"
        lines.append(f"| {b} | {what} | {label} | {checks} | {stale} | {row['errors']} |")
    return "\n".join(lines) + "\n"


def alloc_table(table):
    lines = ["| backend | size | first call in process (ms) | steady, new memory each time (ms) | after free (ms) |",
             "|---|---|---|---|---|"]
    for (what, size, b, label), row in sorted(table.items(), key=lambda kv: (kv[0][1], BACKEND_ORDER.index(kv[0][2])
                                                                              if kv[0][2] in BACKEND_ORDER else 99)):
        if what != "alloc_rendezvous":
            continue
        recs = [r for r in row["records"] if "steady_ms" in r]
        if not recs:
            err = next((r["error"] for r in row["records"] if "error" in r), "")
            lines.append(f"| {b} | {fmt_size(size)} | error: {err[:60]} | | |")
            continue
        first = [r["first_ms"] for r in recs if r.get("first_in_process")] or [r["first_ms"] for r in recs]
        steady = [r["steady_ms"] for r in recs]
        reuse = [r["reuse_ms"] for r in recs]
        fmt = lambda v, d=3: f"{statistics.median(v):.{d}f} [{min(v):.{d}f}–{max(v):.{d}f}]"  # noqa: E731
        lines.append(f"| {b} | {fmt_size(size)} | {fmt(first, 1)} | {fmt(steady)} | {fmt(reuse)} |")
    return "\n".join(lines) + "\n"


def stability_table(table):
    """Per backend: how much its per-round medians moved (max/min - 1)."""
    moves = {}
    for (what, size, b, label), row in table.items():
        if len(row["gpu"]) < 2 or what == "floor":
            continue
        v = [x for _, x in row["gpu"]]
        moves.setdefault(b, []).append(max(v) / min(v) - 1)
    lines = ["| backend | figures | median spread across rounds | largest spread |", "|---|---|---|---|"]
    for b in sorted(moves, key=lambda b: BACKEND_ORDER.index(b) if b in BACKEND_ORDER else 99):
        m = moves[b]
        lines.append(f"| {b} | {len(m)} | {100 * statistics.median(m):.1f} % | {100 * max(m):.1f} % |")
    return "\n".join(lines) + "\n"


GOALS = [
    # (what, size, kind, goal_us, description)
    ("a2a", 4 << 20, "gpu", 12.5, "all-to-all 4 MiB per peer incl. synchronisation, GPU time"),
    ("a2a", 4 << 20, "eager", 15.0, "all-to-all 4 MiB per peer, eager (torch op)"),
    ("a2a", 256 << 10, "gpu", 3.5, "all-to-all 256 KiB per peer, GPU time"),
    ("all_reduce", 16 << 10, "gpu", 3.0, "all-reduce bf16 16 KiB, GPU time"),
    ("all_reduce", 16 << 20, "gpu", 52.0, "all-reduce bf16 16 MiB, GPU time"),
    ("barrier", 0, "gpu", 2.5, "barrier, GPU time"),
    ("barrier", 0, "eager", 3.5, "barrier, eager"),
]


def goals_table(table):
    lines = ["| what | goal (µs) | MORI (µs) | met | fastest other backend (µs) |", "|---|---|---|---|---|"]
    for what, size, kind, goal, desc in GOALS:
        label_has = "fused" if what in ("a2a", "all_reduce") else None
        mine = best(table, what, size, "MORI", kind, label_has)
        others = [(b, best(table, what, size, b, kind)) for b in BACKEND_ORDER if b != "MORI"]
        others = [(b, x) for b, x in others if x and "no-op" not in x[1] and "empty function" not in x[1]
                  and "push alone" not in x[1]]
        other = min(others, key=lambda bx: bx[1][0]) if others else None
        floor = best(table, "floor", 0, "MORI", "gpu")
        note = ""
        if what == "barrier" and kind == "gpu" and floor:
            goal_alt = floor[0] + 1.3
            note = f" (or launch floor {floor[0]:.2f} + 1.3 = {goal_alt:.2f})"
            met = mine and (mine[0] <= goal or mine[0] <= goal_alt)
        else:
            met = mine and mine[0] <= goal
        mtxt = cell(mine[2]) if mine else "—"
        otxt = f"{other[0]}: {cell(other[1][2])} ({other[1][1]})" if other else "—"
        lines.append(f"| {desc} | {goal}{note} | {mtxt} | {'yes' if met else 'no'} | {otxt} |")
    # Allocation + rendezvous (ms, steady state: new memory each time).
    for size in (1 << 20, 1 << 30):
        for b in ("MORI", "MORI-static"):
            row = table.get(("alloc_rendezvous", size, b, "empty + rendezvous"))
            recs = [r for r in (row or {}).get("records", []) if "steady_ms" in r]
            if not recs:
                continue
            steady = [r["steady_ms"] for r in recs]
            reuse = [r["reuse_ms"] for r in recs]
            med = statistics.median(steady)
            others = []
            for o in BACKEND_ORDER:
                orow = table.get(("alloc_rendezvous", size, o, "empty + rendezvous"))
                ov = [r["steady_ms"] for r in (orow or {}).get("records", []) if "steady_ms" in r]
                if ov and not o.startswith("MORI"):
                    others.append((statistics.median(ov), o))
            best_other = min(others) if others else None
            mode = "vmm (default)" if b == "MORI" else "static 8G"
            lines.append(f"| symm_mem.empty + rendezvous {fmt_size(size)}, steady, MORI {mode} (ms; after free: "
                         f"{statistics.median(reuse):.3f}) | 0.1 | {med:.3f} [{min(steady):.3f}–{max(steady):.3f}] | "
                         f"{'yes' if med <= 0.1 else 'no'} | "
                         f"{f'{best_other[1]}: {best_other[0]:.3f}' if best_other else '—'} |")
    return "\n".join(lines) + "\n"


def plot(table, what, kind, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    keys = sorted({(b, label) for (w, _, b, label), row in table.items() if w == what and row[kind]})
    for b, label in keys:
        pts = sorted((s, spread(row[kind])) for (w, s, bb, ll), row in table.items()
                     if w == what and bb == b and ll == label and row[kind])
        xs = [s for s, _ in pts]
        ys = [v[0] for _, v in pts]
        err = [[v[0] - v[1] for _, v in pts], [v[2] - v[0] for _, v in pts]]
        ax[0].errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=f"{b}: {label}"[:60])
        ref = {s: spread(row[kind])[0] for (w, s, bb, _), row in table.items()
               if w == what and bb == "default" and row[kind]}
        rx = [s for s in xs if s in ref]
        if b != "default" and rx:
            ax[1].plot(rx, [ys[xs.index(s)] / ref[s] for s in rx], marker="o", label=f"{b}: {label}"[:60])
    for a in ax:
        a.set_xscale("log", base=2)
        a.set_xlabel("bytes" + (" per peer" if what == "a2a" else ""))
        a.grid(True, which="both", alpha=0.3)
    ax[0].set_yscale("log")
    ax[0].set_ylabel(f"µs per call ({'GPU time, graph replay' if kind == 'gpu' else 'eager loop'})")
    ax[0].set_title(title)
    ax[1].axhline(1.0, color="gray", lw=1)
    ax[1].set_ylabel("time / torch default backend")
    ax[1].set_title("ratio to torch's default backend (lower is faster)")
    ax[0].legend(fontsize=7)
    ax[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


METHOD = """\
## How the figures are taken

`python3 bench/run.py --rounds 3 --out <file>.jsonl` on a machine with GPUs
runs every backend in its own processes (torch fixes the symmetric-memory
backend per process), interleaved round by round — MORI (and its heap modes
as MORI-static, `MORI_SHMEM_MODE=static MORI_SHMEM_HEAP_SIZE=8G`, and
MORI-isolation, one mapping per allocation), torch's default backend,
NVSHMEM, torch's NCCL symmetric-memory backend, plain NCCL, then again —
one rank per GPU (`bench/worker.py`, `bench/harness.py`):

- **GPU time**: 20 calls captured in a CUDA graph, the graph replayed 5
  times back to back between two events; per call = elapsed / 100. Five such
  samples per process; the round's figure is their median. This is what the
  GPU spends, without the host's launch cost.
- **Eager time**: a Python loop of 100 calls between two events, after 10
  warm-up calls — what a training or inference loop sees, host launch cost
  included.
- **Launch floor**: an empty kernel measured the same two ways in every
  process.
- Tables give the median over rounds and, in brackets, the smallest and
  largest round.
- **Correctness in the same run**: every op's output is compared with the
  expected one over fresh inputs (all-to-all: every element; MORI's
  all-reduce: bit for bit against every rank's input summed in fp32 in rank
  order; other all-reduces: within bf16 tolerance), and every
  synchronisation primitive gets 30 write → sync → read rounds whose stale
  reads are counted.
- **Allocation**: `symm_mem.empty` + `rendezvous`, host wall time until the
  device is idle, every rank starting together: the first call of the
  process, then four more with all of them kept alive (new memory each time,
  so no pool can hand one back), then again after freeing them.

Each label says what the op really does. In torch 2.11 the NVSHMEM backend's
`hdl.barrier()` is an empty function: its "Triton push + hdl.barrier" is a
push alone, and its synchronised all-to-all is `nvshmem_all_to_all`.
"""


def section(records, plots_dir, doc_dir, keep_plots=False):
    table = summary.rows(records)
    world = records[0]["world"]
    machine = next((r.get("machine") for r in records if r.get("machine")), f"{world} GPUs")
    rounds = len({r["round"] for r in records})
    tag = f"w{world}"
    out = [f"## {machine}: {world} ranks, {rounds} rounds", ""]
    out += ["### Against the goals", "", goals_table(table)]
    for what, title in [("a2a", "All-to-all"),
                        ("a2a_vdev", "All-to-all with sizes on the device (MoE rows of 7168 bf16; size: average per peer)"),
                        ("a2a_vdev_2d", "MoE dispatch, 8 experts per rank (all_to_all_vdev_2d; size: average per peer)"),
                        ("all_reduce", "All-reduce, bf16"), ("barrier", "Barrier"), ("floor", "Launch floor")]:
        tables = [op_table(table, what, kind, f"{title}: {name}")
                  for kind, name in [("gpu", "GPU time (graph replay)"), ("eager", "Eager time (Python loop)")]]
        if not any(tables):
            continue  # this run did not measure it
        out += [f"### {title}", ""]
        for t in tables:
            if t:
                out += [t, ""]
        if what in ("a2a", "all_reduce") and plots_dir:
            png = os.path.join(plots_dir, f"{what}_{tag}.png")
            if not keep_plots:
                plot(table, what, "gpu", png, f"{title}, GPU time, {world} ranks")
            elif not os.path.exists(png):
                raise SystemExit(f"report: --keep-plots, but {png} does not exist")
            out += [f"![{title}]({os.path.relpath(png, doc_dir)})", ""]
    out += ["### Allocation + rendezvous", "", alloc_table(table), ""]
    out += ["### Correctness checks of this run", "", correctness_table(records), ""]
    out += ["### Stability across rounds", "",
            "How far each backend's per-round GPU-time medians moved (largest / smallest − 1), over all its figures.", "",
            stability_table(table), ""]
    return "\n".join(out)


def records_table(recs, whats, header, row, lead=()):
    """A Markdown table of the records whose "what" is one of whats: the lead
    lines, the header, one row a record (row(r) gives its cells), then a blank
    line; nothing at all when no record is of those kinds."""
    rows = [r for r in recs if r.get("what") in whats]
    if not rows:
        return []
    return (list(lead) + ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(row(r)) + " |" for r in rows] + [""])


def device_api_section(recs, path, doc_dir):
    """The C device API's own figures (tests/gpu/bench_p2p): barrier rounds
    inside one kernel, block-scope puts, copy engines."""
    out = ["## Device API (C, `tests/gpu/bench_p2p`)", "",
           f"From `{os.path.relpath(path, doc_dir)}`: `mori_launch -n <gpus> bench_p2p`; best of a sweep of grid shapes "
           "per size; one put per launch unless said.", ""]
    out += records_table(recs, ("lsa_barrier",), ["barrier inside one kernel (10 000 rounds)", "µs per round"],
                         lambda r: [f"{r['protocol']} ({r['ranks']} ranks)", f"{r['us']:.3f}"])
    out += records_table(recs, ("put_block", "sdma_put"),
                         ["op", "directions", "addressing", "bytes", "µs", "GB/s per direction"],
                         lambda r: [r["what"], str(r["directions"]), str(r.get("addressing", "—")), fmt_size(r["bytes"]),
                                    f"{r['us']:.2f}", f"{r['GBps_per_direction']:.1f}"])
    return "\n".join(out)


def heap_init_cells(r):
    """What a heap_init or growth record did and how many bytes it mapped."""
    b = r.get("mapped_bytes", r.get("chunk_bytes", 0))
    what = "heap initialisation" if r["what"] == "heap_init" else "one growth step (a new chunk, local)"
    return [what, fmt_size(b) if b else "—"]


def heap_section(recs, path, doc_dir):
    """The symmetric heap's own figures (tests/gpu/bench_heap), per mode."""
    out = ["## Symmetric heap (C, `tests/gpu/bench_heap`)", "",
           f"From `{os.path.relpath(path, doc_dir)}`: `MORI_SHMEM_MODE=<mode> mori_launch -n <gpus> bench_heap` "
           "(static: `MORI_SHMEM_HEAP_SIZE=8G`; vmm: 1 GiB chunks). Host wall time; alloc + window is the slowest "
           "rank's time between two barriers (the window's node-local exchange included), window destroy and free "
           "untimed.", ""]
    out += records_table(recs, ("heap_init", "growth"), ["mode", "what", "bytes mapped", "ms"],
                         lambda r: [r["mode"]] + heap_init_cells(r) + [f"{r['ms']:.3f}"])
    out += records_table(recs, ("carve",),
                         ["mode", "alloc + free of 1 MiB (local)", "µs median [min–max]",
                          "device waits (reclaims) in 2000"],
                         lambda r: [r["mode"], fmt_size(r["bytes"]),
                                    f"{r['us']:.2f} [{r['us_min']:.2f}–{r['us_max']:.1f}]", str(r["reclaims"])])
    out += records_table(recs, ("alloc_window",),
                         ["mode", "bytes", "alloc + window, first (µs)", "steady (µs) median [min–max]", "repetitions"],
                         lambda r: [r["mode"], fmt_size(r["bytes"]), f"{r['first_us']:.1f}",
                                    f"{r['us']:.1f} [{r['us_min']:.1f}–{r['us_max']:.1f}]", str(r["reps"])])
    out += records_table(recs, ("no_device_stall",),
                         ["mode", "kernel spin (ms)", "cycles", "µs per cycle", "kernel still running on every rank"],
                         lambda r: [r["mode"], f"{r['spin_ms']:.0f}", str(r["cycles"]), f"{r['us_per_cycle']:.1f}",
                                    "yes" if r["kernel_still_running_on_every_rank"] else "no"],
                         lead=["No device stall: a one-thread kernel spins on the default stream; meanwhile each rank "
                               "runs alloc + window + destroy + free; afterwards each rank asks whether the kernel is "
                               "still running (a device or context synchronisation anywhere on the path would have "
                               "waited for it).", ""])
    return "\n".join(out)


def kinds_cell(by_kind, top=4):
    """The largest kinds of a mori/profile.h breakdown: "kind ×calls µs"."""
    items = sorted(by_kind.items(), key=lambda kv: -kv[1][1])[:top]
    return "; ".join(f"{k} ×{c} {ms * 1e3:.1f}" for k, (c, ms) in items) or "—"


def heap_breakdown_section(recs, path, doc_dir, machine=""):
    """Where an allocation's time goes, from bench_heap's per-kind records
    (mori/profile.h), for runs at one or more ranks (which may share a GPU)."""
    out = ["## Where allocation time goes (`mori/profile.h`)", "",
           f"From `{os.path.relpath(path, doc_dir)}`: `bench_heap`, with every memory, handle, exchange and table "
           "call counted and timed per kind on rank 0 (`mori_profile_read`). The last column lists the largest "
           "kinds as `kind ×calls µs`; the rest of a figure is mori's own bookkeeping and waiting for the slowest "
           "rank. A heap window's device tables are copied at its first device use: \"+ first device view\" adds "
           "the first `mori_window_device_view`, which queues that copy (`table_upload`) and waits for it "
           "(`table_wait`): what a caller pays before its first kernel on the window.", ""]
    if machine:
        out += [f"Machine: {machine}.", ""]
    out += ["| mode | ranks | what | bytes | slowest rank (µs) | + first device view (µs) | rank 0 by kind (µs) |",
            "|---|---|---|---|---|---|---|"]
    for r in recs:
        mode, ranks = r.get("mode", ""), r.get("ranks", 1)
        if r.get("what") == "growth_window" and r.get("rank0_ms_by_kind") is not None:
            out.append(f"| {mode} | {ranks} | a new chunk + window (mapped by every peer) | {fmt_size(r['chunk_bytes'])} | "
                       f"{r['ms'] * 1e3:.1f} | | {kinds_cell(r['rank0_ms_by_kind'])} |")
        elif r.get("what") == "alloc_window" and r.get("last_rank0_ms_by_kind") is not None:
            view = f"{r['with_view_us']:.1f}" if "with_view_us" in r else ""
            out.append(f"| {mode} | {ranks} | alloc + window, steady (median) | {fmt_size(r['bytes'])} | {r['us']:.1f} | "
                       f"{view} | {kinds_cell(r['last_rank0_ms_by_kind'])} |")
    out.append("")
    return "\n".join(out)


def host_cost_section(recs, path, doc_dir):
    """Host cost per call at one rank (bench/host_cost.py): MORI against
    torch's default backend, interleaved rounds, median [min–max] of the
    rounds' medians."""
    backends = [b for b in ("MORI", "MORI-static", "default") if any(r.get("backend") == b for r in recs)]
    out = ["## Host cost per call (one rank, `bench/host_cost.py`)", "",
           f"From `{os.path.relpath(path, doc_dir)}`: one process per backend and round, rounds interleaved. "
           "*issue* is the host time per call of a Python loop (what an eager loop pays before the GPU runs); "
           "*eager* is the GPU-event time per call of the same loop. The first row is a one-element torch "
           "`add_`: the floor of any op called from Python on this host.", ""]
    rows = {}
    for r in recs:
        if "error" in r or r.get("backend") not in backends:
            continue
        for key in ("issue_us", "eager_us", "wall_us"):
            if key in r and "mori's part" not in r["what"]:
                rows.setdefault((r["what"], key), {}).setdefault(r["backend"], []).append((r.get("round", 0), r[key]))
    out += ["| op | figure (µs) | " + " | ".join(backends) + " |", "|---|---|" + "---|" * len(backends)]
    for (what, key), per in rows.items():
        out.append(f"| {what} | {key[:-3]} | " + " | ".join(cell(per.get(b, [])) for b in backends) + " |")
    parts = [r for r in recs if "mori's part" in r.get("what", "") and r.get("backend") == "MORI"]
    if parts:
        last = parts[-1]
        out += ["", f"mori's part of one more MORI `symm_mem.empty` + `rendezvous` (1 MiB; wall {last['wall_us']:.1f} µs): "
                + "; ".join(f"{k} ×{c} {us:.1f} µs" for k, (c, us) in
                            sorted(last["mori_us_by_kind"].items(), key=lambda kv: -kv[1][1])) + "."]
    out.append("")
    return "\n".join(out)


COLL_VARIANTS = {"default": "defaults", "share": "MORI_COLL_BLOCK_SHARE=1"}

# Each record of bench_coll names its operation in "what"; every one is filed
# under its own row label (a record of an operation not listed here is an
# error, never another operation's figure).
COLL_OPS = {
    "coll_a2a": "all-to-all",
    "coll_a2a_window": "all-to-all into a window",
    "coll_all_reduce": "all-reduce",
}


def coll_op(record):
    what = record.get("what")
    if what not in COLL_OPS:
        raise ValueError(f"bench_coll record of an unknown operation {what!r} (known: {', '.join(COLL_OPS)}): {record}")
    return COLL_OPS[what]


def fastest(times):
    """The fastest successful run (bench_coll writes us = -1 for a failed
    call), "failed" when none succeeded, "—" when there was none."""
    if not times:
        return "—"
    ok = [t for t in times if t >= 0]
    return f"{min(ok):.2f}" if ok else "failed"


def coll_section(recs, path, doc_dir):
    """The fused collectives in C (tests/gpu/bench_coll, graph replay), per
    size and algorithm, for each variant the file holds."""
    out = ["## Fused collectives in C (`tests/gpu/bench_coll`)", "",
           f"From `{os.path.relpath(path, doc_dir)}`: `MORI_BENCH_COLL_QUICK=1 mori_launch -n <gpus> bench_coll`, "
           "GPU time per call (20 calls in a CUDA graph, replayed), the fastest of the runs in the file; `auto` "
           "is what mori picks, the others are forced with `MORI_ALLREDUCE_ALGO`. bf16 all-reduce; all-to-all "
           "bytes are per member; *all-to-all into a window* is `mori_all_to_all_window`, straight into a "
           "symmetric output (the algorithm is implied by the call).", ""]
    cells = {}
    for r in recs:
        if r.get("what") == "floor":
            continue
        v = COLL_VARIANTS.get(r.get("bin", "default"), r.get("bin", "default"))
        cells.setdefault((coll_op(r), r["bytes"], r["algo"]), {}).setdefault(v, []).append(r["us"])
    variants = sorted({v for c in cells.values() for v in c}, key=lambda v: v != "defaults")
    out += ["| op | bytes | algorithm | " + " | ".join(variants) + " |", "|---|---|---|" + "---|" * len(variants)]
    for (op, b, algo) in sorted(cells, key=lambda k: (k[0], k[1], k[2] != "auto", k[2])):
        c = cells[(op, b, algo)]
        out.append(f"| {op} | {fmt_size(b)} | {algo} | " + " | ".join(fastest(c.get(v)) for v in variants) + " |")
    floors = [r["us"] for r in recs if r.get("what") == "floor"]
    if floors:
        out += ["", f"Launch floor (an empty kernel, same measurement): {min(floors):.2f} µs."]
    out.append("")
    return "\n".join(out)


def heap_churn_section(recs, path, doc_dir):
    """Cost per window over many alloc + window + destroy + free cycles
    (bench_heap's alloc_window_churn), by build where the file compares two."""
    out = ["## Cost per window in a long-running process", "",
           f"From `{os.path.relpath(path, doc_dir)}`: `bench_heap`'s churn step — 1 MiB allocations, each with its "
           "window, made and dropped back to back, as a framework that allocates per step does. Released signal "
           "slots, carves and control blocks wait for a reclaim, so a cost that grew with their number would show "
           "in the last tenth of the cycles.", "",
           "| build | mode | ranks | cycles | median (µs) | p99 (µs) | max (µs) | mean of the last tenth (µs) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in recs:
        if r.get("what") != "alloc_window_churn":
            continue
        out.append(f"| {r.get('build', '')} | {r['mode']} | {r['ranks']} | {r['cycles']} | {r['us']:.1f} | "
                   f"{r['us_p99']:.1f} | {r['us_max']:.1f} | {r['last_tenth_mean_us']:.1f} |")
    out.append("")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("results", nargs="+")
    p.add_argument("--doc", default="docs/performance.md")
    p.add_argument("--plots", default="docs/perf")
    p.add_argument("--keep-plots", action="store_true",
                   help="reference the plots already in --plots instead of drawing them (no matplotlib needed)")
    p.add_argument("--preamble", default="", help="a markdown file placed before the generated sections")
    p.add_argument("--device-api", default="", help="records of tests/gpu/bench_p2p (JSON lines)")
    p.add_argument("--heap", default="", help="records of tests/gpu/bench_heap (JSON lines)")
    p.add_argument("--coll", default="", help="records of tests/gpu/bench_coll (JSON lines)")
    p.add_argument("--heap-breakdown", default="",
                   help="records of tests/gpu/bench_heap with per-kind breakdowns (e.g. at 2 ranks)")
    p.add_argument("--heap-breakdown-machine", default="", help="where the --heap-breakdown run ran, in words")
    p.add_argument("--host-cost", default="", help="records of bench/host_cost.py (JSON lines)")
    p.add_argument("--heap-churn", default="", help="records of tests/gpu/bench_heap's churn step (JSON lines)")
    a = p.parse_args()
    os.makedirs(a.plots, exist_ok=True)
    doc_dir = os.path.dirname(os.path.abspath(a.doc))
    parts = ["# Performance", "",
             "Generated by `bench/report.py` from " +
             ", ".join(f"`{os.path.relpath(r, os.path.dirname(a.doc) or '.')}`"
                       for r in list(a.results) + [x for x in (a.coll, a.heap, a.heap_breakdown, a.heap_churn, a.host_cost, a.device_api) if x]) +
             ": every figure below comes from those records.", ""]
    if a.preamble:
        with open(a.preamble) as f:
            parts += [f.read(), ""]
    parts += [METHOD, ""]
    for path in a.results:
        parts.append(section(summary.load(path), os.path.abspath(a.plots), doc_dir, a.keep_plots))
    if a.coll:
        parts.append(coll_section(summary.load(a.coll), a.coll, os.path.dirname(a.doc) or "."))
    if a.heap:
        parts.append(heap_section(summary.load(a.heap), a.heap, os.path.dirname(a.doc) or "."))
    if a.heap_breakdown:
        parts.append(heap_breakdown_section(summary.load(a.heap_breakdown), a.heap_breakdown,
                                            os.path.dirname(a.doc) or ".", a.heap_breakdown_machine))
    if a.heap_churn:
        parts.append(heap_churn_section(summary.load(a.heap_churn), a.heap_churn, os.path.dirname(a.doc) or "."))
    if a.host_cost:
        parts.append(host_cost_section(summary.load(a.host_cost), a.host_cost, os.path.dirname(a.doc) or "."))
    if a.device_api:
        parts.append(device_api_section(summary.load(a.device_api), a.device_api, os.path.dirname(a.doc) or "."))
    with open(a.doc, "w") as f:
        f.write("\n".join(parts).rstrip() + "\n")
    print(f"report: wrote {a.doc}")


if __name__ == "__main__":
    main()
