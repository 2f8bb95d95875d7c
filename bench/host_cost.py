# SPDX-License-Identifier: MIT
"""Host cost per call of the symmetric-memory ops, one rank per process on
one GPU: what an eager Python loop pays on the CPU before the GPU does
anything. With one rank a barrier or a signal to oneself finishes on the GPU
in about a microsecond, so a loop of them is bound by the host, and the
figures compare MORI's host path with torch's default backend's (the
dispatcher, pybind and the launch are the same for both).

    python3 bench/host_cost.py --rounds 3 --out host_cost.jsonl

Backends run in their own processes (torch fixes the backend per process),
interleaved round by round. Per op two figures: "issue" is host wall time
per call of a loop that never waits for the GPU; "eager" is the GPU time
between events around the same loop (the harness's eager figure)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

BACKENDS = ["MORI", "default", "MORI-static"]
ITERS = 2000


def worker(backend, round_, out_path):
    if backend == "MORI-static":
        os.environ.update(MORI_SHMEM_MODE="static", MORI_SHMEM_HEAP_SIZE="2G")
    import torch
    import torch.distributed as dist

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("gloo")
    gname = dist.group.WORLD.group_name
    import torch.distributed._symmetric_memory as symm_mem

    if backend.startswith("MORI"):
        import mori.allocator  # noqa: F401
        import mori.ops  # noqa: F401

        symm_mem.set_backend("MORI")
    machine = torch.cuda.get_device_name(dev)

    def record(what, **fields):
        with open(out_path, "a") as f:
            f.write(json.dumps(dict(backend=backend, round=round_, what=what, machine=machine, **fields)) + "\n")

    def timed(what, fn, iters=ITERS):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        issue, eager = [], []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            t1 = time.perf_counter()
            b.record()
            b.synchronize()
            issue.append((t1 - t0) * 1e6 / iters)
            eager.append(a.elapsed_time(b) * 1e3 / iters)
        record(what, issue_us=round(statistics.median(issue), 3), issue_us_min=round(min(issue), 3),
               eager_us=round(statistics.median(eager), 3), eager_us_min=round(min(eager), 3))

    one = torch.zeros(1, device=dev)
    timed("torch add_ on one element (reference)", lambda: one.add_(1))
    buf = symm_mem.empty(1 << 16, dtype=torch.int32, device=dev)
    hdl = symm_mem.rendezvous(buf, gname)
    timed("hdl.barrier()", lambda: hdl.barrier())

    def signal_pair():
        hdl.put_signal(0)
        hdl.wait_signal(0)

    timed("hdl.put_signal(self) + hdl.wait_signal(self)", signal_pair, iters=ITERS // 2)
    if backend.startswith("MORI"):
        x = symm_mem.empty(8192, dtype=torch.bfloat16, device=dev)
        symm_mem.rendezvous(x, gname)
        out = torch.empty_like(x)
        try:
            timed("torch.ops.mori.all_reduce bf16 16 KiB (1 rank)", lambda: torch.ops.mori.all_reduce(x, out, "sum", gname))
        except Exception as e:  # noqa: BLE001
            record("torch.ops.mori.all_reduce bf16 16 KiB (1 rank)", error=f"{type(e).__name__}: {str(e)[:200]}")

    # symm_mem.empty + rendezvous of 1 MiB, kept alive (new memory each time),
    # host wall time until the device is idle.
    live, walls = [], []
    for k in range(24):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        t = symm_mem.empty(1 << 20, dtype=torch.uint8, device=dev)
        live.append((t, symm_mem.rendezvous(t, gname)))
        torch.cuda.synchronize()
        if k >= 4:
            walls.append((time.perf_counter() - t0) * 1e6)
    record("symm_mem.empty + rendezvous 1 MiB, kept alive", wall_us=round(statistics.median(walls), 3),
           wall_us_min=round(min(walls), 3), wall_us_max=round(max(walls), 3))
    if backend.startswith("MORI"):
        # Where mori's part of one more went (mori/profile.h); the rest of
        # the wall time is torch, Python and the final synchronisation.
        import ctypes

        from mori import _lib

        class Entry(ctypes.Structure):
            _fields_ = [("name", ctypes.c_char_p), ("calls", ctypes.c_uint64), ("total_ns", ctypes.c_uint64),
                        ("max_ns", ctypes.c_uint64)]

        _lib.lib.mori_profile_reset()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        t = symm_mem.empty(1 << 20, dtype=torch.uint8, device=dev)
        live.append((t, symm_mem.rendezvous(t, gname)))
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e6
        entries = (Entry * 16)()
        n = _lib.lib.mori_profile_read(entries, 16)
        record("symm_mem.empty + rendezvous 1 MiB: mori's part", wall_us=round(wall, 3),
               mori_us_by_kind={entries[i].name.decode(): [entries[i].calls, round(entries[i].total_ns / 1e3, 3)]
                                for i in range(n)})
    live.clear()
    dist.destroy_process_group()


def summarize(path):
    rows = {}
    for line in open(path):
        r = json.loads(line)
        if "error" in r:
            print(f"{r['backend']:12s} {r['what']}: {r['error']}")
            continue
        for key in ("issue_us", "eager_us", "wall_us"):
            if key in r:
                rows.setdefault((r["what"], key), {}).setdefault(r["backend"], []).append(r[key])
    print(f"{'op':55s} {'figure':9s} " + " ".join(f"{b:>22s}" for b in BACKENDS))
    for (what, key), per in rows.items():
        cells = []
        for b in BACKENDS:
            v = per.get(b)
            cells.append(f"{statistics.median(v):8.2f} [{min(v):.2f}-{max(v):.2f}]" if v else "—")
        print(f"{what[:55]:55s} {key:9s} " + " ".join(f"{c:>22s}" for c in cells))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", required=True)
    p.add_argument("--worker", nargs=2, metavar=("BACKEND", "ROUND"))
    a = p.parse_args()
    if a.worker:
        worker(a.worker[0], int(a.worker[1]), a.out)
        return
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    for r in range(a.rounds):
        for b in BACKENDS:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
                   os.path.abspath(__file__), "--out", a.out, "--worker", b, str(r)]
            t0 = time.time()
            rc = subprocess.run(cmd, env=env, timeout=300).returncode
            print(f"host_cost: round {r} {b}: exit {rc} in {time.time() - t0:.0f} s", flush=True)
    summarize(a.out)


if __name__ == "__main__":
    main()
