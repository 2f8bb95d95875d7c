# SPDX-License-Identifier: MIT
"""Contiguous and locality views of MORI tensors on GPUs (torchrun
--nproc_per_node=N; runs at 1 rank, the checks that need peers SKIP there):
the contiguous view of an allocation above a heap chunk (its own mapping,
so it has a flat span) aliases every rank's copy; heap carves at different
offsets are refused, naming why; a backend other than MORI is refused; the
locality records and the device table agree with the job's layout (one
node)."""
import os
import sys

# Small heap chunks, so that an allocation of a few MiB is above a chunk
# and gets a mapping of its own. Read when the heap is made: set first.
os.environ.setdefault("MORI_SHMEM_VMM_CHUNK_SIZE", "4M")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from checks import Skip, check, needs_ranks, raises, rank, setup_job, summary, world  # noqa: E402,F401

dev = setup_job()
group = dist.group.WORLD
import mori.allocator  # noqa: E402,F401
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402
from mori import address_map as am  # noqa: E402

symm_mem.set_backend("MORI")
BIG = (8 << 20) // 4  # float32 elements: 8 MiB, above a 4 MiB chunk


@check("contiguous view of a MORI tensor: shape [world, *shape], row p is rank p's copy, writes land there")
def _():
    t = symm_mem.empty(BIG, dtype=torch.float32, device=dev)
    t.fill_(float(rank))
    v = am.contiguous_view(t, group)
    assert v.shape == (world, BIG) and v.dtype == t.dtype and v.device == t.device, (v.shape, v.dtype, v.device)
    torch.cuda.synchronize()  # the fill is done before the peers read it (gloo's barrier is host-only)
    dist.barrier()
    for p in range(world):
        assert torch.all(v[p] == float(p)).item(), f"row {p} does not hold rank {p}'s values"
    dist.barrier()  # every rank has read every row before anyone writes into them
    # Each rank writes one element of every row; each row's owner sees all.
    for p in range(world):
        v[p, 100 + rank] = 1000.0 + rank
    torch.cuda.synchronize()
    dist.barrier()
    got = t[100:100 + world].tolist()
    assert got == [1000.0 + r for r in range(world)], got
    # A view into the tensor maps to the same place of every row.
    inner = am.contiguous_view(t[256:], group)
    assert inner.shape == (world, BIG - 256)
    assert inner[rank].data_ptr() == v[rank, 256:].data_ptr()


@check("contiguous view of a 2-D tensor keeps its strides inside each row")
def _():
    t = symm_mem.empty((2048, 2048), dtype=torch.bfloat16, device=dev)  # 8 MiB: a mapping of its own
    t.fill_(rank)
    v = am.contiguous_view(t, group)
    assert v.shape == (world, 2048, 2048) and v.stride()[1:] == t.stride(), (v.shape, v.stride())
    torch.cuda.synchronize()
    dist.barrier()
    for p in range(world):
        assert torch.all(v[p] == p).item(), f"row {p}"
    col = am.contiguous_view(t[:, 7], group)  # a strided view: element stride 2048
    assert col.shape == (world, 2048) and col.stride()[1] == 2048, (col.shape, col.stride())
    assert torch.all(col[world - 1] == world - 1).item()


@check("contiguous view refuses heap carves at different offsets, naming the rank and the size")
def _():
    needs_ranks(2)
    # Odd ranks carve something first, so the next carve lands elsewhere.
    pad = symm_mem.empty(4096, dtype=torch.uint8, device=dev) if rank % 2 else None
    t = symm_mem.empty(1024, dtype=torch.float32, device=dev)
    raises(RuntimeError, lambda: am.contiguous_view(t, group), "different heap offsets", f"on rank {rank}")
    del pad


@check("contiguous view and locality refuse a backend other than MORI")
def _():
    t = symm_mem.empty(1024, dtype=torch.float32, device=dev)
    real = symm_mem.get_backend
    symm_mem.get_backend = lambda device: "NVSHMEM"
    try:
        raises(ValueError, lambda: am.contiguous_view(t, group), "'NVSHMEM', not 'MORI'")
        raises(ValueError, lambda: am.locality(t, group), "'NVSHMEM', not 'MORI'")
    finally:
        symm_mem.get_backend = real


@check("locality: self, then load/store peers on one node; the device table holds the words")
def _():
    t = symm_mem.empty(1024, dtype=torch.float32, device=dev)
    loc = am.locality(t, group)
    assert len(loc.peers) == world
    assert loc.table.device == dev and loc.table.dtype == torch.int32 and loc.table.shape == (world,)
    for p, rec in enumerate(loc.peers):
        assert rec.rank == p
        if p == rank:
            assert rec.peer_class == "self" and rec.direct_access and rec.system_atomics, rec
        elif rec.peer_class == "lsa":
            assert rec.direct_access, rec
        else:
            assert not rec.direct_access and rec.peer_class in ("node", "remote"), rec
    assert [w & 0xFFFFFFFF for w in loc.table.tolist()] == [r.word for r in loc.peers]


@check("locality of a 2-rank job on one node: the peer is load/store reachable with system atomics")
def _():
    needs_ranks(2)
    t = symm_mem.empty(1024, dtype=torch.float32, device=dev)
    peer = am.locality(t, group).peers[(rank + 1) % world]
    if peer.peer_class != "lsa":
        raise Skip(f"the GPUs of this job do not reach each other by load/store ({peer})")
    assert peer.direct_access and peer.system_atomics and not peer.rdma, peer


@check("a handle kept past mori.finalize raises naming it, rather than reading freed memory (last: it finalizes)")
def _():
    t = symm_mem.empty(1024, dtype=torch.float32, device=dev)
    hdl = symm_mem.rendezvous(t, group.group_name)
    hdl.barrier(channel=0)
    torch.cuda.synchronize()
    dist.barrier()
    mori.finalize()
    for what, call in (("get_buffer_ptrs", lambda: hdl.buffer_ptrs), ("get_buffer_ptrs_dev", lambda: hdl.buffer_ptrs_dev),
                       ("get_signal_pad_ptrs", lambda: hdl.signal_pad_ptrs),
                       ("barrier", lambda: hdl.barrier(channel=0, timeout_ms=1000)),
                       ("put_signal", lambda: hdl.put_signal((rank + 1) % world, channel=0, timeout_ms=1000))):
        raises(RuntimeError, call, f"MORI {what}", "finalized")
    assert hdl.rank == rank and hdl.world_size == world  # kept from the handle's making


ok = summary()
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
