# SPDX-License-Identifier: MIT
"""Benchmarks of torch symmetric memory on one backend (MORI, default or
NVSHMEM), by the method of the project's anchors: SM-driven one-shot
all-to-all (Triton and a run-time-compiled CUDA kernel) over
buffer_ptrs_dev followed by hdl.barrier(), 50 timed iterations after 10
warm-ups; one_shot_all_reduce; barrier latency; alloc + rendezvous.
    torchrun --nproc_per_node=2 bench_torch.py MORI
Rank 0 prints one "RESULT {json}" line per measurement."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import a2a_common  # noqa: E402
import a2a_cuda  # noqa: E402
import a2a_triton  # noqa: E402

backend = sys.argv[1] if len(sys.argv) > 1 else "MORI"
if backend == "MORI-kernel":  # MORI with every hdl.barrier as a pad-protocol kernel
    os.environ["MORI_TORCH_BARRIER"] = "kernel"  # env-check: ignore (nothing reads it now; mori warns it is unknown)
rank, world, symm_mem, gname = a2a_common.setup(backend)
dev = torch.device("cuda", rank)


def out(**kw):
    if rank == 0:
        print("RESULT " + json.dumps(dict(backend=backend, ranks=world, **kw)), flush=True)


def time_us(fn, iters=100, warm=20, repeats=3):
    """Microseconds per call: the best of `repeats` timed loops (CUDA events),
    each after a warm-up, every rank starting together."""
    best = float("inf")
    for _ in range(repeats):
        for _ in range(warm):
            fn()
        torch.cuda.synchronize()
        dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) / iters * 1e3)
    return best


def a2a(kind, chunk_bytes, bpp):
    n = chunk_bytes // 4
    buf, hdl, src = a2a_common.buffers(symm_mem, gname, rank, world, n)
    if kind == "triton":
        step = lambda: a2a_triton.a2a_push(src, hdl, n, rank, world, bpp=bpp)  # noqa: E731
    else:
        step = lambda: a2a_cuda.a2a_push(src, hdl, chunk_bytes, rank, world, blocks_per_peer=bpp)  # noqa: E731
    us = time_us(lambda: (step(), hdl.barrier()))
    torch.cuda.synchronize()
    dist.barrier()
    ok = a2a_common.arrived_correctly(buf, rank, world, n)
    oks = [None] * world
    dist.all_gather_object(oks, ok)
    gbs = (world - 1) * chunk_bytes * world / us / 1e3
    out(what="a2a", kernel=kind, chunk_kib=chunk_bytes >> 10, bpp=bpp, us=round(us, 2), agg_GBps=round(gbs, 1),
        correct=all(oks))


def barrier_order_check():
    """Is hdl.barrier() a barrier? Write into the next rank's buffer, barrier,
    read what the previous rank wrote: count the rounds that read stale data."""
    n = 1 << 20
    buf = symm_mem.empty(n, dtype=torch.int64, device=dev)
    hb = symm_mem.rendezvous(buf, gname)
    remote = hb.get_buffer((rank + 1) % world, (n,), torch.int64)
    stale = 0
    for round_ in range(100):
        remote.fill_(round_ * 1000 + rank)
        hb.barrier()
        stale += int(not torch.all(buf == round_ * 1000 + (rank - 1) % world).item())
        hb.barrier()
    stales = [None] * world
    dist.all_gather_object(stales, stale)
    out(what="barrier_orders_writes", rounds=100, stale_rounds_per_rank=stales)


def small_op_overheads():
    """Where a small op's time goes: the host cost of a cached rendezvous
    (torch calls it on every op), and one_shot_all_reduce at 16 KiB eager
    against replayed from a CUDA graph (no host work per replay)."""
    t = symm_mem.empty(8192, dtype=torch.bfloat16, device=dev).normal_()
    symm_mem.rendezvous(t, gname)
    t0 = time.perf_counter()
    for _ in range(2000):
        symm_mem.rendezvous(t, gname)
    out(what="rendezvous_cached_host_us", us=round((time.perf_counter() - t0) / 2000 * 1e6, 2))
    eager = time_us(lambda: torch.ops.symm_mem.one_shot_all_reduce(t, "sum", gname))
    out(what="one_shot_all_reduce_16k_eager", us=round(eager, 2))
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                torch.ops.symm_mem.one_shot_all_reduce(t, "sum", gname)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(20):
                torch.ops.symm_mem.one_shot_all_reduce(t, "sum", gname)
        graphed = time_us(lambda: g.replay(), iters=20) / 20
        out(what="one_shot_all_reduce_16k_graph", us=round(graphed, 2))
    except Exception as e:  # noqa: BLE001
        out(what="one_shot_all_reduce_16k_graph", error=repr(e)[:200])


barrier_order_check()
if "--only-small-ops" in sys.argv:
    small_op_overheads()
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0)
if "--only-barrier-check" in sys.argv:
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0)

for chunk in [256 << 10, 4 << 20]:
    for kind, bpps in [("triton", [1, 16, 64]), ("cuda", [64])]:
        for bpp in bpps:
            try:
                a2a(kind, chunk, bpp)
            except Exception as e:  # noqa: BLE001
                out(what="a2a", kernel=kind, chunk_kib=chunk >> 10, bpp=bpp, error=repr(e)[:300])

for nbytes in [16 << 10, 1 << 20, 16 << 20]:
    try:
        t = symm_mem.empty(nbytes // 2, dtype=torch.bfloat16, device=dev).normal_()
        symm_mem.rendezvous(t, gname)
        us = time_us(lambda: torch.ops.symm_mem.one_shot_all_reduce(t, "sum", gname))
        out(what="one_shot_all_reduce", kib=nbytes >> 10, us=round(us, 2))
    except Exception as e:  # noqa: BLE001
        out(what="one_shot_all_reduce", kib=nbytes >> 10, error=repr(e)[:300])

t = symm_mem.empty(1 << 20, dtype=torch.uint8, device=dev)
h = symm_mem.rendezvous(t, gname)
out(what="hdl_barrier", us=round(time_us(lambda: h.barrier(), iters=1000, warm=50), 2))



for nbytes in [1 << 20, 64 << 20, 1 << 30]:
    ts = []
    for _ in range(3):
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        x = symm_mem.empty(nbytes, dtype=torch.uint8, device=dev)
        hx = symm_mem.rendezvous(x, gname)
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
        del hx, x
    out(what="alloc_rendezvous", mib=nbytes >> 20, ms_min=round(min(ts) * 1e3, 2), ms_first=round(ts[0] * 1e3, 2))

dist.barrier()
dist.destroy_process_group()
