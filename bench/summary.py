# SPDX-License-Identifier: MIT
"""Reads benchmark records and reduces them: one row per (what, size,
label, backend) with the median, min and max over rounds of the per-round
medians, and per round the ratio to torch's default backend on the same op
and size."""
import json
import statistics
from collections import defaultdict


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def rows(records):
    """{(what, size, backend, label): {"gpu": [...], "eager": [...], "records": [...]}}"""
    out = defaultdict(lambda: {"gpu": [], "eager": [], "records": []})
    for r in records:
        key = (r["what"], r.get("size", 0), r["backend"], r.get("label", ""))
        out[key]["records"].append(r)
        if "gpu_us" in r:
            out[key]["gpu"].append((r["round"], r["gpu_us"]))
        if "eager_us" in r:
            out[key]["eager"].append((r["round"], r["eager_us"]))
    return out


def spread(values):
    v = [x for _, x in values]
    return (statistics.median(v), min(v), max(v)) if v else None


def default_for(table, what, size, kind):
    """The default backend's per-round values of the first label it has."""
    for (w, s, b, _), row in table.items():
        if w == what and s == size and b == "default" and row[kind]:
            return dict(row[kind])
    return {}


def fmt_size(n):
    if n >= 1 << 30:
        return f"{n >> 30} GiB"
    if n >= 1 << 20:
        return f"{n >> 20} MiB"
    if n >= 1 << 10:
        return f"{n >> 10} KiB"
    return f"{n} B" if n else ""


def outcome(recs):
    bad = [r for r in recs if r.get("correct") is False or r.get("stale_rounds", 0)]
    errs = [r for r in recs if "error" in r]
    if errs:
        return "error: " + errs[0]["error"][:60]
    if bad:
        stale = sum(r.get("stale_rounds", 0) for r in recs)
        return f"WRONG ({stale} stale rounds)" if stale else "WRONG"
    if any("correct" in r or "stale_rounds" in r for r in recs):
        return "ok"
    return ""


def print_summary(path):
    table = rows(load(path))
    print(f"{'op':<18}{'size':>9}  {'backend':<10}{'GPU us med [min-max]':>24}{'eager us med':>14}"
          f"{'x default':>10}  check   label")
    for (what, size, backend, label), row in sorted(table.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        if what in ("alloc_rendezvous", "step_failed"):
            continue
        g, e = spread(row["gpu"]), spread(row["eager"])
        ref = default_for(table, what, size, "gpu")
        ratios = [v / ref[r] for r, v in row["gpu"] if r in ref and ref[r]]
        gtxt = f"{g[0]:.2f} [{g[1]:.2f}-{g[2]:.2f}]" if g else "-"
        etxt = f"{e[0]:.2f}" if e else "-"
        rtxt = f"{statistics.median(ratios):.2f}" if ratios and backend != "default" else ""
        print(f"{what:<18}{fmt_size(size):>9}  {backend:<10}{gtxt:>24}{etxt:>14}{rtxt:>10}  {outcome(row['records']):<7} {label[:40]}")
    for (what, size, backend, label), row in sorted(table.items()):
        if what == "alloc_rendezvous":
            r = row["records"]
            st = [x["steady_ms"] for x in r if "steady_ms" in x]
            fi = [x["first_ms"] for x in r if "first_ms" in x]
            ru = [x["reuse_ms"] for x in r if "reuse_ms" in x]
            if st:
                print(f"alloc+rendezvous {fmt_size(size):>7} {backend:<10} steady {statistics.median(st):.3f} ms "
                      f"[{min(st):.3f}-{max(st):.3f}], first {statistics.median(fi):.1f} ms, reuse {statistics.median(ru):.3f} ms")
            else:
                print(f"alloc+rendezvous {fmt_size(size):>7} {backend:<10} {outcome(r)}")
        if what == "step_failed":
            print(f"FAILED STEP {backend} {label}: {row['records'][0].get('error', '')[:100]}")
