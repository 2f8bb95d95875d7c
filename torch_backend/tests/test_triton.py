# SPDX-License-Identifier: MIT
"""Address maps and mori.triton on GPUs (torchrun --nproc_per_node=N): the
map of a MORI tensor (invariant, views, per-allocation tables, refusals),
an Iris-style translate + store kernel on a view, a copy between two
allocations each translated with its own map, the Triton barrier, and the
all-to-all built on mori.triton against NCCL over back-to-back calls with
random delays and under CUDA-graph replay. With ranks sharing a GPU (no
NCCL) the all-to-all's expected output is computed on the GPU from the
peers' known inputs."""
import os
import random
import sys

import torch
import torch.distributed as dist
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(__file__))
from checks import SHARED_GPU, a2a_int_pattern, check, rank, ref_int_a2a, setup_job, summary, world  # noqa: E402

dev = setup_job()
group = dist.group.WORLD
import mori.allocator  # noqa: E402,F401
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402
from mori import triton as mt  # noqa: E402
from mori.address_map import CAP_LOAD_STORE, address_map  # noqa: E402
from iris_kernels import copy_between_kernel, iris_store_kernel  # noqa: E402

symm_mem.set_backend("MORI")
ITERS = int(os.environ.get("MORI_OPS_ITERS", "1000" if SHARED_GPU else "10000")) // 5
rng = random.Random(7 + rank)


@triton.jit
def barrier_round_kernel(data, data_bases, sig, sig_bases, my_rank, world, epoch, stale, max_spins):
    # Write this round's value into my slot on every rank (slots alternate
    # by round: a rank one barrier ahead writes the other half), meet, then
    # read every rank's slot here.
    half = (epoch % 2) * world
    for peer in range(0, world):
        mt.store(data + half + my_rank, epoch * 1000 + my_rank, peer, data_bases, my_rank)
    passed = mt.barrier(sig, epoch, world, sig_bases, my_rank, max_spins)
    bad = 1 - passed.to(tl.int64)
    for r in range(0, world):
        v = tl.load(data + half + r, volatile=True)
        bad += (v != epoch * 1000 + r).to(tl.int64)
    tl.store(stale, tl.load(stale) + bad)


@check("address map of a MORI tensor: peer_bases[local_rank] is the allocation's root; views translate against it")
def _():
    t = symm_mem.empty(4096, dtype=torch.float32, device=dev)
    m = address_map(t, group)
    assert m.local_rank == rank and m.world_size == world
    assert m.allocation_base == t.data_ptr() and m.allocation_bytes >= 4096 * 4
    assert int(m.peer_bases[rank].item()) == m.allocation_base
    assert m.capabilities & CAP_LOAD_STORE
    view = t[100:]
    peer = (rank + 1) % world
    assert m.translate(view.data_ptr(), peer) == m.host_bases[peer] + 400
    other = symm_mem.empty(4096, dtype=torch.float32, device=dev)
    m2 = address_map(other, group)
    assert m2.host_bases != m.host_bases, "each allocation has its own table"
    for bad, words in [((t.data_ptr() + m.allocation_bytes, 0), "outside the allocation"),
                       ((t.data_ptr(), world), "out of range")]:
        try:
            m.translate(*bad)
            raise AssertionError(f"accepted {bad}")
        except ValueError as e:
            assert words in str(e), str(e)


@check("Iris-style translate + store on a view, every rank into its next rank")
def _():
    t = symm_mem.empty(8192, dtype=torch.float32, device=dev)
    t.fill_(-1)
    m = address_map(t, group)
    torch.cuda.synchronize()  # filled before a peer stores into it (a gloo barrier is host-only)
    dist.barrier()
    view = t[1000:]
    peer = (rank + 1) % world
    iris_store_kernel[(1,)](view, float(rank * 10000), peer, m.peer_bases, rank, 256, BLOCK=256)
    torch.cuda.synchronize()
    dist.barrier()
    src = (rank - 1) % world
    want = torch.arange(256, device=dev, dtype=torch.float32) + src * 10000
    assert torch.equal(t[1000:1256], want), "the peer's store did not land at the view's offset"
    assert bool((t[:1000] == -1).all()) and bool((t[1256:] == -1).all()), "stores outside the view"


@check("copy between two allocations, the destination translated with its own map")
def _():
    a = symm_mem.empty(4096, dtype=torch.int32, device=dev)
    b = symm_mem.empty(4096, dtype=torch.int32, device=dev)
    mb = address_map(b, group)
    address_map(a, group)
    a.copy_(torch.arange(4096, device=dev, dtype=torch.int32) + rank * 100000)
    b.fill_(-1)
    torch.cuda.synchronize()
    dist.barrier()
    peer = (rank + 1) % world
    copy_between_kernel[(1,)](b[16:], a, 4000, peer, mb.peer_bases, rank, BLOCK=1024)
    torch.cuda.synchronize()
    dist.barrier()
    src = (rank - 1) % world
    assert torch.equal(b[16:4016], torch.arange(4000, device=dev, dtype=torch.int32) + src * 100000)


@triton.jit
def translate_kernel(t, peer_bases, my_rank, entries, out):
    # out[r]: where a pointer 40 bytes into the allocation lands on rank r
    for r in range(0, entries):
        p = mt.translate(t + 5, r, peer_bases, my_rank)
        tl.store(out + r, p.to(tl.int64))


@check("mori.triton translate: a peer the table does not reach (entry 0) gives a null pointer, not the offset")
def _():
    t = symm_mem.empty(1024, dtype=torch.int64, device=dev)
    m = address_map(t, group)
    # One more entry than the group has, 0 as a peer of another node is in
    # a map (so the case exists at one rank too).
    bases = torch.cat([m.peer_bases, torch.zeros(1, dtype=torch.int64, device=dev)])
    out = torch.full((world + 1,), -1, dtype=torch.int64, device=dev)
    translate_kernel[(1,)](t, bases, rank, world + 1, out)
    got = out.tolist()
    for r in range(world + 1):
        want = 0 if r == world else m.host_bases[r] + 40
        assert got[r] == want, f"rank {r}: translate gave {got[r]:#x}, expected {want:#x}"


@check("mori.triton all-to-all refuses an out too small for world x chunk, a ragged input, another allocation's map")
def _():
    a2a = mt.AllToAll(group, dev)
    inp = torch.zeros(world * 1024, dtype=torch.int32, device=dev)
    out = symm_mem.empty(world * 1024, dtype=torch.int32, device=dev)
    m = address_map(out, group)
    other = symm_mem.empty(world * 1024, dtype=torch.int32, device=dev)
    m_other = address_map(other, group)
    small = symm_mem.empty(world * 1024 - 1, dtype=torch.int32, device=dev)
    m_small = address_map(small, group)
    cases = [((inp, small, m_small), "fewer than inp's"),
             ((inp[:world * 1024 - 1], out, m), "not a multiple of the world size"),
             ((inp, out, m_other), "do not lie inside out_map's allocation"),
             ((inp, out[8:], m), "fewer than inp's"),
             ((inp.to(torch.int64), out, m), "must match")]
    if world == 1:
        cases.pop(1)  # every size is a multiple of 1
    for args, words in cases:
        try:
            a2a(*args)
            raise AssertionError(f"accepted: expected '{words}'")
        except ValueError as e:
            assert words in str(e), str(e)
    torch.cuda.synchronize()
    a2a.check()  # nothing was launched: no wait gave up


@check("mori.triton barrier: 200 rounds in kernels, every rank's write visible after each (0 stale)")
def _():
    sig = symm_mem.empty(world, dtype=torch.int64, device=dev)
    data = symm_mem.empty(2 * world, dtype=torch.int64, device=dev)
    sig.zero_()
    data.fill_(-1)
    ms, md = address_map(sig, group), address_map(data, group)
    stale = torch.zeros(1, dtype=torch.int64, device=dev)
    torch.cuda.synchronize()
    dist.barrier()
    for epoch in range(1, 201):
        if rank == 0 and rng.random() < 0.125:
            torch.cuda._sleep(rng.randrange(1, 20000))
        barrier_round_kernel[(1,)](data, md.peer_bases, sig, ms.peer_bases, rank, world, epoch, stale, 1 << 26)
    assert int(stale.item()) == 0, f"{int(stale.item())} stale or missed reads"


def a2a_vs_nccl(a2a, chunk_elems, iters, delays=True):
    n = world * chunk_elems
    inp = torch.empty(n, dtype=torch.int32, device=dev)
    out = symm_mem.empty(n, dtype=torch.int32, device=dev)
    m = address_map(out, group)
    ref = torch.empty_like(inp)
    pattern = a2a_int_pattern(chunk_elems, 1103515245, dev)
    bad = torch.zeros((), dtype=torch.int64, device=dev)
    for it in range(iters):
        torch.arange(n, out=inp)
        inp.mul_(1103515245).add_(it * 40503 + rank * 1000003)
        if delays and rank == 0 and rng.random() < 0.125:
            torch.cuda._sleep(rng.randrange(1, 20000))
        a2a(inp, out, m)
        ref_int_a2a(ref, inp, pattern, it * 40503)
        bad += (out != ref).sum()
    a2a.check()
    return int(bad.item())


@check(f"mori.triton all-to-all equals NCCL bit for bit, {ITERS} calls back to back with delays (64 KiB, 4 MiB per peer)")
def _():
    a2a = mt.AllToAll(group, dev)
    for chunk in [64 << 10, 4 << 20]:
        bad = a2a_vs_nccl(a2a, chunk // 4, ITERS)
        assert bad == 0, f"{bad} mismatched elements at {chunk} bytes per peer"


@check("mori.triton all-to-all captured in a CUDA graph and replayed (checked every replay)")
def _():
    a2a = mt.AllToAll(group, dev)
    n = world * (1 << 18)
    inp = torch.empty(n, dtype=torch.int32, device=dev)
    out = symm_mem.empty(n, dtype=torch.int32, device=dev)
    m = address_map(out, group)
    ref = torch.empty_like(inp)
    pattern = a2a_int_pattern(n // world, 1, dev)  # every rank's inputs are known: no collective in the graph
    step = torch.zeros((), dtype=torch.int64, device=dev)
    bad = torch.zeros((), dtype=torch.int64, device=dev)
    a2a(inp, out, m)  # compiles outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(10):
            torch.arange(n, out=inp, device=dev)
            inp.add_(step.to(torch.int32) * 7 + rank * 1000003)
            step.add_(1)
            a2a(inp, out, m)
            torch.add(pattern, step.to(torch.int32) * 7 - 7, out=ref)  # step counted from 1 here
            bad.add_((out != ref).sum())
    for _ in range(20):
        g.replay()
    torch.cuda.synchronize()
    a2a.check()
    assert int(bad.item()) == 0, f"{int(bad.item())} mismatches over 200 replayed calls"


ok = summary()
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
