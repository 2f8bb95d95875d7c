# SPDX-License-Identifier: MIT
"""What the all-to-all examples share: process-group and backend set-up, the
symmetric buffers, and the check of what arrived."""
import os

import torch
import torch.distributed as dist


def setup(backend):
    """Joins the job, selects the symmetric-memory backend (MORI, default or
    NVSHMEM); returns (rank, world, symm_mem, group name)."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    import torch.distributed._symmetric_memory as symm_mem

    if backend.startswith("MORI"):
        import mori.allocator  # noqa: F401  (registers "MORI")

        symm_mem.set_backend("MORI")
    elif backend != "default":
        symm_mem.set_backend(backend)
    return rank, world, symm_mem, dist.group.WORLD.group_name


def buffers(symm_mem, group, rank, world, chunk_elems):
    """A symmetric int32 buffer with one chunk slot per rank, its handle, and a
    source whose chunk p is meant for rank p."""
    buf = symm_mem.empty(world * chunk_elems, dtype=torch.int32, device="cuda")
    hdl = symm_mem.rendezvous(buf, group)
    src = torch.arange(world * chunk_elems, dtype=torch.int32, device="cuda") + rank * 1000003
    return buf, hdl, src


def arrived_correctly(buf, rank, world, chunk_elems):
    """Slot r holds rank r's chunk for this rank, for every other rank r."""
    n = chunk_elems
    for r in range(world):
        if r == rank:
            continue
        expected = torch.arange(rank * n, (rank + 1) * n, dtype=torch.int32, device=buf.device) + r * 1000003
        if not torch.equal(buf[r * n:(r + 1) * n], expected):
            return False
    return True
