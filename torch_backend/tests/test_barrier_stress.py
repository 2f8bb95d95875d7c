# SPDX-License-Identifier: MIT
"""Stress of torch's barrier on MORI windows (torchrun --nproc_per_node=N;
written for two ranks sharing one GPU, where each rank's kernels are
time-sliced against the other's): many runs of the pattern that once hung —
a Triton push and barrier on one window, then rounds of a store into the
next rank's buffer, hdl.barrier(channel=it % 4), a check, and
hdl.barrier(channel=(it + 1) % 4) on a second window — with barriers on
several windows and channels interleaved, windows made and dropped between
runs (so signal-pad slots are released and reused), and every other run
with a timeout, so a lost wake-up names who waited for whom instead of
hanging. MORI_STRESS_RUNS sets the number of runs (default 100)."""
import faulthandler
import gc
import os
import sys

import torch
import torch.distributed as dist
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, rank, setup_job, summary, world  # noqa: E402

dev = setup_job()
group = dist.group.WORLD
import mori.allocator  # noqa: E402,F401
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402
from mori import triton as mt  # noqa: E402
from mori.address_map import address_map  # noqa: E402

symm_mem.set_backend("MORI")
RUNS = int(os.environ.get("MORI_STRESS_RUNS", "100"))
# A hang shows where each rank's host was: its stack after this long.
faulthandler.dump_traceback_later(int(os.environ.get("MORI_STRESS_STACKS_AFTER_S", "120")), exit=False)
ROUNDS = 20
N = 1 << 16


@triton.jit
def push_kernel(data, data_bases, sig, sig_bases, my_rank, world, epoch, max_spins, n, BLOCK: tl.constexpr):
    # This rank's row of every peer's buffer, then a Triton barrier.
    offs = tl.arange(0, BLOCK)
    value = tl.zeros((BLOCK,), dtype=tl.int32) + epoch * 100 + my_rank
    for peer in range(0, world):
        for start in range(0, n, BLOCK):
            mt.store(data + my_rank * n + start + offs, value, peer, data_bases, my_rank, mask=start + offs < n)
    mt.barrier(sig, epoch, world, sig_bases, my_rank, max_spins)


def run_once(run, timeout_ms):
    # Window 1: a Triton push and barrier, then torch's barrier on it.
    data = symm_mem.empty(world * N, dtype=torch.int32, device=dev)
    sig = symm_mem.empty(world, dtype=torch.int64, device=dev)
    sig.zero_()
    h1 = symm_mem.rendezvous(data, group)
    dm, sm = address_map(data, group), address_map(sig, group)
    h1.barrier(channel=0, timeout_ms=timeout_ms)  # sig zeroed everywhere before anyone signals
    push_kernel[(1,)](data, dm.peer_bases, sig, sm.peer_bases, rank, world, run + 1, 1 << 30, N, BLOCK=1024)
    h1.barrier(timeout_ms=timeout_ms)
    for src in range(world):
        got = data[src * N:(src + 1) * N]
        assert bool((got == (run + 1) * 100 + src).all()), f"run {run}: row of rank {src} after the push"
    # Window 2: the rounds; window 3 interleaved on other channels.
    t = symm_mem.empty(N, dtype=torch.int32, device=dev)
    h2 = symm_mem.rendezvous(t, group)
    u = symm_mem.empty(N, dtype=torch.int32, device=dev)
    h3 = symm_mem.rendezvous(u, group)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    remote = h2.get_buffer(nxt, (N,), torch.int32)
    for it in range(ROUNDS):
        remote.fill_(run * 1000 + it * 10 + rank)
        h2.barrier(channel=it % 4, timeout_ms=timeout_ms)
        assert bool((t == run * 1000 + it * 10 + prv).all()), f"run {run} round {it}: stale data from rank {prv}"
        if it % 3 == 0:
            h3.barrier(channel=(it // 3) % 4, timeout_ms=timeout_ms)
        h2.barrier(channel=(it + 1) % 4, timeout_ms=timeout_ms)
    h1.barrier(channel=1, timeout_ms=timeout_ms)
    torch.cuda.synchronize()


@check(f"barrier stress: {RUNS} runs x {ROUNDS} rounds, windows made and dropped, timeouts on every other run")
def _():
    for run in range(RUNS):
        run_once(run, 20000 if run % 2 else 0)
        if run % 10 == 9:
            gc.collect()  # the dropped windows go now, at different moments on each rank
        if rank == 0 and run % 25 == 24:
            print(f"  {run + 1} runs done", flush=True)


ok = summary()
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
