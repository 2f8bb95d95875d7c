# SPDX-License-Identifier: MIT
"""Tensors mori did not allocate (torchrun --nproc_per_node=N; two ranks may
share one GPU): mori.address_map.adopt makes them reachable by the group's
peers without a copy. A tensor of torch's caching allocator, at a
rank-specific offset of its cudaMalloc block, is written by the next rank
with the Iris-style translate + store (seed 002) on a view; a copy between
two adopted allocations translates the destination with its own map; a
tensor of torch's default symmetric backend (a virtual-memory mapping) is
adopted as is; bad input is a RuntimeError on every rank naming the cause;
release ends the adoption and the storage can be adopted again. The
mori.triton all-to-all runs into an adopted out, and the Iris store runs on
a mori.shmem heap allocation in the same process."""
import os
import sys

os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1"
os.environ.setdefault("MORI_SHMEM_HEAP_SIZE", "1G")  # the shmem API's static heap (the guide's default mode)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, needs_ranks, rank, refused, summary, world  # noqa: E402

dev = torch.device("cuda", rank % torch.cuda.device_count())
torch.cuda.set_device(dev)
dist.init_process_group("gloo")  # works with two ranks on one GPU (NCCL refuses that)
try:
    import triton
except ImportError:  # pragma: no cover - the GPU machines have triton
    triton = None
import mori.allocator  # noqa: E402,F401
from mori.address_map import adopt  # noqa: E402

peer = (rank + 1) % world
prev = (rank + world - 1) % world
N = 4096

if triton is not None:
    from iris_kernels import copy_between_kernel, iris_store_kernel


def meet():
    torch.cuda.synchronize()
    dist.barrier()


def iris_round(t, m, base_value):
    """Every rank stores into the next rank's t[16:16+N] through the map, on a
    view (translated against the storage's root); returns the values it
    expects from the previous rank."""
    view = t[16:]
    iris_store_kernel[(1,)](view, base_value + 100 * rank, peer, m.peer_bases, rank, N, BLOCK=N)
    meet()
    return base_value + 100 * prev + torch.arange(N, device=dev, dtype=t.dtype)


@check("a caching-allocator tensor at a rank-specific offset of its block: the next rank writes it (Iris translate + store on a view)")
def _():
    if triton is None:
        raise AssertionError("triton is not importable")
    pad = torch.empty(512 * (rank + 1), dtype=torch.uint8, device=dev)  # puts t elsewhere in the block on each rank
    t = torch.zeros(N + 64, dtype=torch.int32, device=dev)
    m = adopt(t)
    assert m.peer_bases.numel() == world and m.local_rank == rank
    assert m.allocation_base == t.untyped_storage().data_ptr() == m.host_bases[rank]
    assert all(m.host_bases), m.host_bases
    meet()  # every rank's zeros are on its GPU before a peer stores into them
    for rnd in range(3):
        want = iris_round(t, m, 1000 * (rnd + 1))
        got = t[16:16 + N]
        assert torch.equal(got, want), f"round {rnd}: {(got != want).sum().item()} of {N} words differ"
        meet()
    m.release()
    del pad


@check("copy between two adopted allocations: the destination is translated with its own map")
def _():
    needs_ranks(2)
    if triton is None:
        raise AssertionError("triton is not importable")
    src = torch.arange(N, dtype=torch.int32, device=dev) + 10000 * rank
    dst = torch.zeros(N, dtype=torch.int32, device=dev)
    ma, mb = adopt(src), adopt(dst)
    assert ma.host_bases != mb.host_bases
    meet()  # every rank's src and zeroed dst are on its GPU before a peer reads or writes them
    copy_between_kernel[(1,)](dst, src, N, peer, mb.peer_bases, rank, BLOCK=1024)
    meet()
    want = torch.arange(N, dtype=torch.int32, device=dev) + 10000 * prev
    assert torch.equal(dst, want), f"{(dst != want).sum().item()} of {N} words differ"
    meet()
    ma.release()
    mb.release()


@check("a tensor of torch's default symmetric backend (a virtual-memory mapping) is adopted without a second allocation")
def _():
    if triton is None:
        raise AssertionError("triton is not importable")
    import torch.distributed._symmetric_memory as symm_mem

    backend = symm_mem.get_backend(dev)
    if backend not in (None, "CUDA"):
        raise AssertionError(f"expected torch's default backend here, found {backend}")
    t = symm_mem.empty(N + 64, dtype=torch.int32, device=dev)
    t.zero_()
    m = adopt(t)
    assert m.allocation_base == t.untyped_storage().data_ptr()
    meet()  # every rank's zero_ is done before a peer stores into t
    want = iris_round(t, m, 7000)
    got = t[16:16 + N]
    assert torch.equal(got, want), f"{(got != want).sum().item()} of {N} words differ"
    meet()
    m.release()


@check("bad input: a CPU tensor, sizes that differ between ranks, the same storage twice, a released map: errors on every rank naming why")
def _():
    refused(lambda: adopt(torch.zeros(16)), "not a GPU")
    t = torch.zeros(1024 * (2 if rank == 1 else 1), dtype=torch.int32, device=dev)
    if world >= 2:
        refused(lambda: adopt(t), "rank 1")
    u = torch.zeros(1024, dtype=torch.int32, device=dev)
    m = adopt(u)
    refused(lambda: adopt(u), "already adopted")
    m.release()
    m2 = adopt(u)  # released: it can be adopted again
    assert m2.host_bases[rank] == u.untyped_storage().data_ptr()
    m2.release()
    try:  # a map whose adoption ended is refused, not used
        m2.translate(m2.allocation_base, rank)
    except ValueError as e:
        assert "released" in str(e), e
    else:
        raise AssertionError("translate on a released map returned an address")
    try:  # nor its table: a kernel given it would reach memory the peers may have let go
        m2.peer_bases
    except ValueError as e:
        assert "released" in str(e), e
    else:
        raise AssertionError("peer_bases of a released map was handed out")
    meet()


@check("mori.triton all-to-all into an adopted caching-allocator out (no symmetric allocation at all), 100 calls")
def _():
    if triton is None:
        raise AssertionError("triton is not importable")
    from mori import triton as mt

    chunk = 16384
    a2a = mt.AllToAll(dist.group.WORLD, dev, max_spins=1 << 24)
    out = torch.zeros(chunk * world, dtype=torch.int32, device=dev)
    m = adopt(out)
    base = torch.arange(chunk, dtype=torch.int32, device=dev)
    for i in range(100):
        inp = torch.cat([base + 1000000 * rank + 10000 * p + i for p in range(world)])
        a2a(inp, out, m)
    torch.cuda.synchronize()
    a2a.check()
    want = torch.cat([base + 1000000 * r + 10000 * rank + 99 for r in range(world)])
    assert torch.equal(out, want), f"{(out != want).sum().item()} of {out.numel()} words differ"
    meet()
    m.release()


@check("Iris translate + store on a view of a mori.shmem heap allocation, and a copy between two of them (shmem and the torch ops in one process)")
def _():
    if triton is None:
        raise AssertionError("triton is not importable")
    import mori.shmem as shmem
    from mori.shmem.device_view import tensor_over

    torch._C._distributed_c10d._register_process_group("mori_adopt_test", dist.group.WORLD)
    shmem.shmem_torch_process_group_init("mori_adopt_test")
    try:
        assert shmem.shmem_mype() == rank and shmem.shmem_npes() == world
        ptr = shmem.shmem_malloc((N + 64) * 4)
        t = tensor_over(ptr, N + 64, "int32")
        assert t.device == dev, (t.device, dev)
        t.zero_()
        m = shmem.shmem_address_map(ptr + 100)  # any pointer inside names the allocation
        assert m.allocation_base == ptr and m.host_bases[rank] == ptr and m.world_size == world
        meet()
        want = iris_round(t, m, 3000)
        got = t[16:16 + N]
        assert torch.equal(got, want), f"{(got != want).sum().item()} of {N} words differ"
        meet()
        # A copy between two heap allocations: the destination translated
        # with its own map (one heap, but a table per allocation).
        if world >= 2:
            ptr2 = shmem.shmem_malloc(N * 4)
            dst = tensor_over(ptr2, N, "int32")
            dst.zero_()
            src = torch.arange(N, dtype=torch.int32, device=dev) + 50000 * rank
            m2 = shmem.shmem_address_map(ptr2)
            meet()
            copy_between_kernel[(1,)](dst, src, N, peer, m2.peer_bases, rank, BLOCK=1024)
            meet()
            want2 = torch.arange(N, dtype=torch.int32, device=dev) + 50000 * prev
            assert torch.equal(dst, want2), f"{(dst != want2).sum().item()} of {N} words differ"
            meet()
            shmem.shmem_free(ptr2)
        shmem.shmem_free(ptr)
    finally:
        shmem.shmem_finalize()


summary()
