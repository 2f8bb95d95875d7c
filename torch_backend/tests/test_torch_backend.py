# SPDX-License-Identifier: MIT
"""The MORI torch backend on GPUs (torchrun --nproc_per_node=N). Rank 0
prints one line per check: "PASS name" or "FAIL name: why" (failures of any
rank are gathered). Ends with an interpreter exit that must return 0 on
every rank (torchrun reports any other code)."""
import gc
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
from checks import (check, needs_own_gpu, needs_ranks, rank, ref_all_gather, ref_all_reduce,  # noqa: E402
                    ref_reduce_scatter, results, setup_job, summary, world)

dev = setup_job()
group = dist.group.WORLD.group_name

import mori.allocator  # noqa: E402
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402

symm_mem.set_backend("MORI")


@check("backend registered and selected")
def _():
    assert symm_mem.get_backend(dev) == "MORI", symm_mem.get_backend(dev)
    assert mori.allocator.supports()["platform"] == "cuda", mori.allocator.BUILD_INFO


@check("empty / rendezvous / get_buffer / buffer_ptrs_dev")
def _():
    n = 1 << 20
    t = symm_mem.empty(n, dtype=torch.float32, device=dev)
    hdl = symm_mem.rendezvous(t, group)
    assert hdl.rank == rank and hdl.world_size == world
    assert hdl.buffer_size >= n * 4
    assert hdl.buffer_ptrs[rank] == t.data_ptr(), "local pointer is the allocation"
    t.fill_(rank + 1)
    hdl.barrier(channel=0)
    for peer in range(world):
        peer_t = hdl.get_buffer(peer, (n,), torch.float32)
        assert torch.all(peer_t == peer + 1).item(), f"peer {peer} buffer"
    # buffer_ptrs_dev: a device array holding the same pointers.
    ptrs = torch.empty(world, dtype=torch.int64, device=dev)
    ptrs.copy_(torch.tensor(hdl.buffer_ptrs, dtype=torch.int64))
    assert hdl.buffer_ptrs_dev != 0
    hdl.barrier(channel=0)
    # A second rendezvous is a cache hit (same handle object semantics).
    t0 = time.perf_counter()
    hdl2 = symm_mem.rendezvous(t, group)
    assert (time.perf_counter() - t0) < 0.05, "cached rendezvous should be instant"
    assert hdl2.buffer_ptrs == hdl.buffer_ptrs


@check("interior pointers report their offset")
def _():
    t = symm_mem.empty(4096, dtype=torch.float32, device=dev)
    hdl = symm_mem.rendezvous(t, group)
    # A tensor whose storage starts inside the allocation (torch passes the
    # storage pointer to rendezvous).
    inner = hdl.get_buffer(rank, (1024,), torch.float32, storage_offset=1024)
    inner_hdl = symm_mem.rendezvous(inner, group)
    expected = inner.untyped_storage().data_ptr() - t.data_ptr()
    assert expected == 4096, expected
    assert inner_hdl.offset == expected, (inner_hdl.offset, expected)
    assert inner_hdl.buffer_ptrs == hdl.buffer_ptrs, "same allocation, same peers"
    inner.fill_(float(rank))
    hdl.barrier()
    peer = (rank + 1) % world
    got = hdl.get_buffer(peer, (1024,), torch.float32, storage_offset=1024)
    assert torch.all(got == peer).item()
    hdl.barrier()


@check("put_signal / wait_signal carry data between ranks")
def _():
    t = symm_mem.empty(1 << 16, dtype=torch.int32, device=dev)
    hdl = symm_mem.rendezvous(t, group)
    peer_next, peer_prev = (rank + 1) % world, (rank - 1) % world
    for round_ in range(20):
        remote = hdl.get_buffer(peer_next, (1 << 16,), torch.int32)
        remote.fill_(rank * 1000 + round_)
        hdl.put_signal(peer_next, channel=1)
        hdl.wait_signal(peer_prev, channel=1)
        assert torch.all(t == peer_prev * 1000 + round_).item(), f"round {round_}"
        hdl.barrier(channel=2)
    pads = hdl.get_signal_pad(rank, (world * 4,), torch.int32)
    torch.cuda.synchronize()
    assert torch.count_nonzero(pads).item() == 0, "pad is all zero after matched signals"


@check("barrier orders writes to peers before their reads (with and without a timeout, 50 rounds)")
def _():
    n = 1 << 18
    t = symm_mem.empty(n, dtype=torch.int64, device=dev)
    hdl = symm_mem.rendezvous(t, group)
    peer_next, peer_prev = (rank + 1) % world, (rank - 1) % world
    remote = hdl.get_buffer(peer_next, (n,), torch.int64)
    stale = 0
    for round_ in range(50):
        seed = torch.randint(0, 1 << 40, (1,), device=dev)
        remote.copy_(torch.arange(n, device=dev) + seed)  # into the next rank's buffer
        if round_ % 2:
            hdl.barrier(channel=1)
        else:
            hdl.barrier(channel=1, timeout_ms=10000)  # waits for itself on the host
        seeds = ref_all_gather(seed)
        expected = torch.arange(n, device=dev) + seeds[peer_prev]
        stale += int(not torch.equal(t, expected))
        hdl.barrier(channel=2)  # nobody overwrites before everyone has read
    assert stale == 0, f"{stale} of 50 rounds read stale data"


@check("a timed-out wait raises RuntimeError naming the peer, and the handle works after")
def _():
    t = symm_mem.empty(1024, dtype=torch.int32, device=dev)
    hdl = symm_mem.rendezvous(t, group)
    peer = (rank + 1) % world
    try:
        hdl.wait_signal(peer, channel=3, timeout_ms=100)  # nobody signals
        torch.cuda.synchronize()
        raise AssertionError("the timeout was not raised")
    except RuntimeError as e:
        assert "timed out" in str(e) and f"rank {peer}" in str(e), str(e)
    dist.barrier()
    hdl.barrier(channel=0)  # the GPU context and the handle are intact
    torch.cuda.synchronize()


def handle_with_untimed_bound(ms):
    """A handle whose waits given no timeout end after `ms` (the variable is
    read when the window is made)."""
    os.environ["MORI_UNTIMED_WAIT_MS"] = str(ms)
    try:
        t = symm_mem.empty(1024, dtype=torch.int32, device=dev)
        return t, symm_mem.rendezvous(t, group)
    finally:
        del os.environ["MORI_UNTIMED_WAIT_MS"]


@check("a wait given no timeout ends at MORI_UNTIMED_WAIT_MS; the next call raises naming the bound")
def _():
    t, hdl = handle_with_untimed_bound(300)
    peer = (rank + 1) % world
    hdl.wait_signal(peer, channel=3)  # nobody signals; torch's default: no timeout
    torch.cuda.synchronize()  # returns: the kernel ended at the bound
    dist.barrier()
    try:
        # (This barrier is made before the earlier record is raised: a
        # timeout of its own, as this handle's untimed waits end at 300 ms.)
        hdl.barrier(channel=0, timeout_ms=20000)
        raise AssertionError("the wait that reached the bound was not reported")
    except RuntimeError as e:
        assert "timed out" in str(e) and f"rank {peer}" in str(e) and "MORI_UNTIMED_WAIT_MS (300 ms" in str(e), str(e)
    dist.barrier()
    hdl.barrier(channel=0)  # the GPU context and the handle are intact
    torch.cuda.synchronize()


@check("a rank whose earlier wait failed still takes part in the next barrier, then raises; its peers do not wait")
def _():
    needs_ranks(2)
    t, hdl = handle_with_untimed_bound(300)
    if rank == 0:
        hdl.wait_signal(1, channel=3)  # nobody signals: ends at the bound, its record left for the next call
        torch.cuda.synchronize()
    dist.barrier()
    if rank == 0:
        try:
            hdl.barrier(channel=0, timeout_ms=20000)
            raise AssertionError("the earlier wait was not reported")
        except RuntimeError as e:
            assert "(an earlier wait)" in str(e) and "timed out" in str(e) and "rank 1" in str(e), str(e)
    else:
        # Before, rank 0 raised without launching its part: this barrier
        # timed out after 20 s, and the ranks' channel 0 went out of step.
        hdl.barrier(channel=0, timeout_ms=20000)
    torch.cuda.synchronize()
    dist.barrier()
    hdl.barrier(channel=0, timeout_ms=20000)  # in step: every rank's barriers pair
    torch.cuda.synchronize()


@check("one_shot_all_reduce matches NCCL")
def _():
    for numel in [4096, 1 << 19]:
        t = symm_mem.empty(numel, dtype=torch.bfloat16, device=dev)
        t.copy_(torch.randn(numel, device=dev, dtype=torch.bfloat16))
        symm_mem.rendezvous(t, group)
        out = torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group)
        ref = ref_all_reduce(t)
        torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)


@check("two_shot_all_reduce_ matches NCCL")
def _():
    numel = 1 << 20
    t = symm_mem.empty(numel, dtype=torch.bfloat16, device=dev)
    t.copy_(torch.randn(numel, device=dev, dtype=torch.bfloat16))
    symm_mem.rendezvous(t, group)
    ref = ref_all_reduce(t)
    torch.ops.symm_mem.two_shot_all_reduce_(t, "sum", group)
    torch.testing.assert_close(t, ref, rtol=2e-2, atol=2e-2)


@check("reduce_scatter_out matches NCCL")
def _():
    needs_ranks(2)  # torch: "Not implemented for world_size=1"
    numel = world * 8192
    t = symm_mem.empty(numel, dtype=torch.float32, device=dev)
    t.copy_(torch.randn(numel, device=dev))
    symm_mem.rendezvous(t, group)
    out = torch.empty(numel // world, dtype=torch.float32, device=dev)
    torch.ops.symm_mem.reduce_scatter_out(t, group, False, out)
    ref = torch.empty_like(out)
    ref_reduce_scatter(ref, t)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


@check("MemPool-allocated symmetric tensor works with one_shot_all_reduce")
def _():
    pool = symm_mem.get_mem_pool(dev)
    with torch.cuda.use_mem_pool(pool):
        t = torch.randn(65536, device=dev, dtype=torch.bfloat16)
    symm_mem.rendezvous(t, group)
    out = torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group)
    torch.testing.assert_close(out, ref_all_reduce(t), rtol=2e-2, atol=2e-2)


@check("a pointer MORI does not own gives no handle (torch's fallback)")
def _():
    plain = torch.empty(1024, device=dev)
    try:
        h = symm_mem.rendezvous(plain, group)
    except (RuntimeError, ValueError):
        h = None  # torch turns the null handle into an error here
    assert h is None, "a handle for memory MORI does not own"


@check("frees in different orders, del + gc.collect, re-allocation")
def _():
    for cycle in range(20):
        ts = [symm_mem.empty(1 << (14 + i % 4), dtype=torch.uint8, device=dev) for i in range(6)]
        hs = [symm_mem.rendezvous(t, group) for t in ts]
        for t in ts:
            t.fill_(cycle)
        hs[0].barrier()
        order = list(range(6))
        order = order[rank % 6:] + order[:rank % 6] if rank % 2 == 0 else order[::-1]
        for i in order:
            ts[i] = None
            hs[i] = None
            if i % 2:
                gc.collect()
        gc.collect()
    torch.cuda.synchronize()


@check("a tensor on a device other than the current one (no set_device for it)")
def _():
    needs_own_gpu()
    other = torch.device("cuda", rank)
    with torch.cuda.device(0):  # the current device is cuda:0 on every rank
        t = symm_mem.empty(4096, dtype=torch.float32, device=other)
        hdl = symm_mem.rendezvous(t, group)
        assert hdl.device == other, hdl.device
        t.fill_(rank)
        hdl.barrier()
        peer = hdl.get_buffer((rank + 1) % world, (4096,), torch.float32)
        assert torch.all(peer == (rank + 1) % world).item()
        hdl.barrier()


@check("dispatcher ops with the TorchBind handle (_rendezvous, _barrier)")
def _():
    t = symm_mem.empty(1024, dtype=torch.float32, device=dev)
    sm = torch.ops.symm_mem._rendezvous(t, group)
    torch.ops.symm_mem._barrier(sm)
    torch.cuda.synchronize()


@check("get_signal_pad sizes and dtypes; set_signal_pad_size before allocating; raised after, refused")
def _():
    default = symm_mem.get_signal_pad_size()
    t = symm_mem.empty(64, dtype=torch.float32, device=dev)
    hdl = symm_mem.rendezvous(t, group)
    pad = hdl.get_signal_pad(rank)
    assert pad.dtype == torch.uint32 and pad.numel() == default // 4, (pad.dtype, pad.numel())
    assert pad.data_ptr() == hdl.signal_pad_ptrs[rank]
    assert hdl.get_signal_pad(rank, (8, 8)).numel() == 64
    assert hdl.get_signal_pad(rank, dtype=torch.uint64).numel() == default // 8
    symm_mem.set_signal_pad_size(2 * default)
    try:
        t2 = symm_mem.empty(64, dtype=torch.float32, device=dev)
        hdl2 = symm_mem.rendezvous(t2, group)
        assert hdl2.signal_pad_size == 2 * default
        pad2 = hdl2.get_signal_pad(rank)
        assert pad2.numel() == 2 * default // 4
        pad2[0] = 42
        torch.cuda.synchronize()
        assert int(pad2[0].item()) == 42
        pad2[0] = 0
        try:
            hdl.get_signal_pad(rank)  # made with the smaller size
            raise AssertionError("a pad smaller than the global size was handed out")
        except RuntimeError as e:
            assert "signal pad size was raised" in str(e), str(e)
    finally:
        symm_mem.set_signal_pad_size(default)
    hdl2.barrier()


@check("empty_strided_p2p with an alloc_id (persistent allocation)")
def _():
    from torch._C._distributed_c10d import _SymmetricMemory
    alloc_id = 4242
    t = _SymmetricMemory.empty_strided_p2p((64, 64), (64, 1), torch.float32, dev, group, alloc_id)
    ptr = t.data_ptr()
    try:
        _SymmetricMemory.empty_strided_p2p((64, 64), (64, 1), torch.float32, dev, group, alloc_id)
        raise AssertionError("a second live tensor with the same alloc_id")
    except RuntimeError:
        pass
    del t
    t = _SymmetricMemory.empty_strided_p2p((64, 64), (64, 1), torch.float32, dev, group, alloc_id)
    assert t.data_ptr() == ptr
    hdl = _SymmetricMemory.rendezvous(t)
    hdl.barrier()


@check("mismatched sizes: a RuntimeError on every rank naming the ranks")
def _():
    needs_ranks(2)
    # Sizes no earlier check used: the MemPool cannot hand back a cached block.
    t = symm_mem.empty((22 << 20) * (1 + rank), dtype=torch.uint8, device=dev)
    try:
        symm_mem.rendezvous(t, group)
        raise AssertionError("rendezvous of different sizes succeeded")
    except RuntimeError as e:
        assert "disagree on the size" in str(e) and "rank 1" in str(e), str(e)


@check("store keys stay bounded over 1000 rendezvous")
def _():
    store = dist.distributed_c10d._get_default_store()
    before = store.num_keys()
    held = []  # alive: each is new memory, so each rendezvous is a real exchange
    for _ in range(1000):
        t = symm_mem.empty(4096, dtype=torch.uint8, device=dev)
        symm_mem.rendezvous(t, group)
        held.append(t)
    dist.barrier()
    grown = store.num_keys() - before
    assert grown < 4 * world + 8, f"the store grew by {grown} keys"


@check("handles dropped on other threads while this one allocates")
def _():
    import threading
    held = []
    for _ in range(8):
        t = symm_mem.empty(1 << 16, dtype=torch.uint8, device=dev)
        held.append((t, symm_mem.rendezvous(t, group)))
    errors = []

    def drop(items):
        try:
            for item in items:
                del item
            items.clear()
            gc.collect()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=drop, args=([held.pop() for _ in range(2)],)) for _ in range(4)]
    for th in threads:
        th.start()
    for _ in range(8):  # collective allocations on this thread meanwhile
        t = symm_mem.empty(1 << 16, dtype=torch.uint8, device=dev)
        symm_mem.rendezvous(t, group).barrier()
    for th in threads:
        th.join()
    assert not errors, errors


@check("every rank on one device (TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES), then on its own")
def _():
    needs_own_gpu()
    os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1"
    try:
        shared = torch.device("cuda", 0)
        t = symm_mem.empty(64, dtype=torch.float32, device=shared)
        hdl = symm_mem.rendezvous(t, group)
        assert hdl.rank == rank and hdl.world_size == world
        assert hdl.get_buffer(rank, (64,), torch.float32).data_ptr() == t.data_ptr()
        hdl.barrier()
    finally:
        os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "0"
    mine = symm_mem.empty(64, dtype=torch.float32, device=dev)
    h2 = torch.ops.symm_mem._rendezvous(mine, group)
    torch.ops.symm_mem._barrier(h2)
    torch.cuda.synchronize()


@check("many rendezvous on one group: one collective step each (no device agreement after the first)")
def _():
    import ctypes
    from mori._lib import lib

    class Entry(ctypes.Structure):  # mori_profile_entry_t (mori/profile.h)
        _fields_ = [("name", ctypes.c_char_p), ("calls", ctypes.c_uint64), ("total_ns", ctypes.c_uint64),
                    ("max_ns", ctypes.c_uint64)]

    def collective_steps():
        entries = (Entry * 16)()
        n = lib.mori_profile_read(entries, 16)
        return sum(e.calls for e in entries[:n] if e.name == b"collective_step")

    n = 32
    warm = symm_mem.empty(4096, dtype=torch.float32, device=dev)
    symm_mem.rendezvous(warm, group)  # the group's devices agreed (again, after the check above), its heap mapped
    ts = [symm_mem.empty(4096, dtype=torch.float32, device=dev) for _ in range(n)]
    lib.mori_profile_reset()
    hs = [symm_mem.rendezvous(t, group) for t in ts]
    steps = collective_steps()
    # Each: its window's exchange, and one more only when the ranks'
    # signal-slot proposals differ. With a device allgather per rendezvous
    # (as before) it was at least two each.
    assert steps < 2 * n, f"{n} rendezvous made {steps} collective steps"
    for i, t in enumerate(ts):
        t.fill_(rank * 100 + i)
    hs[0].barrier()
    peer = (rank + 1) % world
    for i in (0, n - 1):
        got = hs[i].get_buffer(peer, (4096,), torch.float32)
        assert torch.all(got == peer * 100 + i).item(), f"tensor {i}: peer {peer}'s data"
    hs[0].barrier()


@check("heap: frees timed per rank through GC, then every peer's data through get_buffer")
def _():
    keep = []
    for cycle in range(12):
        ts = [symm_mem.empty(4096 * (1 + (i + cycle) % 5), dtype=torch.int32, device=dev) for i in range(4)]
        hs = [symm_mem.rendezvous(t, group) for t in ts]
        for i, t in enumerate(ts):
            t.fill_(rank * 1000 + cycle * 10 + i)
        hs[0].barrier()
        for i, h in enumerate(hs):
            for peer in range(world):
                got = h.get_buffer(peer, (64,), torch.int32)
                want = peer * 1000 + cycle * 10 + i
                assert torch.all(got == want).item(), f"cycle {cycle} tensor {i} peer {peer}: {got[0].item()} != {want}"
        hs[0].barrier()
        # Rank-specific lifetimes: some kept, the rest dropped in a rank order.
        keep.append(ts[rank % 4])
        for i in ([0, 1, 2, 3] if rank % 2 else [3, 2, 1, 0]):
            ts[i] = None
            hs[i] = None
            if (i + rank) % 2:
                gc.collect()
    torch.cuda.synchronize()


@check("heap: empty + rendezvous return while a kernel still runs on the current stream (no device sync)")
def _():
    warm = symm_mem.empty(1 << 20, dtype=torch.uint8, device=dev)
    symm_mem.rendezvous(warm, group).barrier()
    # Earlier checks left frees pending (the heap reuses them only after
    # waiting for the device, and only when it needs the room): the same
    # allocations once while the device is idle, so that the timed ones
    # below find the room reclaimed, as a steady state does.
    gc.collect()
    idle = [symm_mem.empty((1 << 20) + 4096 * i, dtype=torch.uint8, device=dev) for i in range(10)]
    del idle  # freed: their room is what the timed allocations below take
    gc.collect()
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda._sleep(int(1.5e9))  # about half a second of GPU time on the current stream
    done = torch.cuda.Event()
    done.record()
    t0 = time.perf_counter()
    held = []
    for i in range(10):
        t = symm_mem.empty((1 << 20) + 4096 * i, dtype=torch.uint8, device=dev)
        held.append((t, symm_mem.rendezvous(t, group)))
    dt = time.perf_counter() - t0
    assert not done.query(), f"the sleep kernel finished during 10 empty + rendezvous ({dt * 1e3:.1f} ms): something waited"
    torch.cuda.synchronize()
    if rank == 0:
        print(f"RESULT {{\"what\": \"alloc_rendezvous_while_busy\", \"backend\": \"MORI\", \"us_per_call\": {dt * 1e5:.1f}}}")


def allocate_during_capture(make):
    """Allocates a symmetric tensor (make) inside a CUDA-graph capture, fills
    it in the graph; rendezvous after capture; the replay's values must
    reach every peer."""
    pool = symm_mem.get_mem_pool(dev)
    with torch.cuda.use_mem_pool(pool):
        warm = torch.empty(1 << 20, device=dev)  # the heap exists and has room before capture
    del warm
    n = 1 << 16
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        t = make(n)
        t.fill_(rank + 1.0)
    hdl = symm_mem.rendezvous(t, group)
    g.replay()
    torch.cuda.synchronize()
    hdl.barrier()
    peer = (rank + 1) % world
    assert torch.all(hdl.get_buffer(peer, (n,), torch.float32) == peer + 1.0).item()
    hdl.barrier()


@check("heap: symm_mem.empty inside CUDA-graph capture")
def _():
    allocate_during_capture(lambda n: symm_mem.empty(n, dtype=torch.float32, device=dev))


@check("heap: an allocation from the MORI MemPool inside CUDA-graph capture")
def _():
    def from_pool(n):
        with torch.cuda.use_mem_pool(symm_mem.get_mem_pool(dev)):
            return torch.empty(n, device=dev)

    allocate_during_capture(from_pool)


@check("alloc + rendezvous timing (1 MiB, 64 MiB)")
def _():
    for nbytes in [1 << 20, 64 << 20]:
        ts = []
        for _ in range(3):
            torch.cuda.synchronize()
            dist.barrier()
            t0 = time.perf_counter()
            t = symm_mem.empty(nbytes, dtype=torch.uint8, device=dev)
            h = symm_mem.rendezvous(t, group)
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
            del h, t
        if rank == 0:
            print(f"RESULT {{\"what\": \"alloc_rendezvous\", \"backend\": \"MORI\", \"mib\": {nbytes >> 20}, \"ms_min\": {min(ts) * 1e3:.2f}}}")


dist.barrier()
summary()
dist.destroy_process_group()
# Interpreter exit with live symmetric tensors: the exit hook finalizes.
keep_alive = symm_mem.empty(1 << 20, dtype=torch.uint8, device=dev)
sys.exit(0 if all(results) else 1)
