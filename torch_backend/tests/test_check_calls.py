# SPDX-License-Identifier: MIT
"""torch.ops.mori.* with MORI_COLL_CHECK_CALLS=1 (torchrun, 2 or more ranks;
they may share a GPU): matched ops give the right results, empty ones
included; ranks that give one op different sizes are told on every rank,
naming both calls, and the next op pairs; an empty op one rank refuses ends
the others' at once, naming it."""
import os
import sys
import time

os.environ["MORI_COLL_CHECK_CALLS"] = "1"  # read when the group's context is made (its first op)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, needs_ranks, rank, setup_job, summary, world  # noqa: E402

dev = setup_job()
group = dist.group.WORLD
import mori.allocator  # noqa: E402,F401
import mori.ops  # noqa: E402
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402

symm_mem.set_backend("MORI")
want = world * (world + 1) / 2


def sum_round(n=4096):
    a = torch.full((n,), float(rank + 1), device=dev)
    out = torch.empty_like(a)
    torch.ops.mori.all_reduce(a, out, "sum", group.group_name)
    torch.cuda.synchronize()
    assert torch.all(out == want).item(), f"{out[:4].tolist()} != {want}"


@check("matched ops are right in a group that checks its calls, empty ones included")
def _():
    needs_ranks(2)
    for _ in range(20):
        sum_round()
        empty = torch.empty(0, device=dev)
        torch.ops.mori.all_reduce(empty, torch.empty_like(empty), "sum", group.group_name)
        a = torch.arange(world * 256, device=dev, dtype=torch.float32) + rank
        out = torch.empty_like(a)
        torch.ops.mori.all_to_all(a, out, group.group_name)
    torch.cuda.synchronize()
    sum_round()


@check("ranks that give an op different sizes are told on every rank, naming both calls; the next op pairs")
def _():
    needs_ranks(2)
    last = world - 1
    n = 512 if rank == last else 1024
    a = torch.ones(n, device=dev)
    out = torch.full_like(a, -5.0)
    start = time.monotonic()
    torch.ops.mori.all_reduce(a, out, "sum", group.group_name)
    torch.cuda.synchronize()
    try:
        sum_round()  # learns of it from the record the mismatched call left
        raise AssertionError("the mismatch was not reported")
    except RuntimeError as e:
        assert "all_reduce of 512 float32" in str(e) and "all_reduce of 1024 float32" in str(e), str(e)
    took = time.monotonic() - start
    assert took < 5, f"the mismatch was waited out ({took:.1f} s)"
    assert torch.all(out == -5.0).item(), "the mismatched op wrote its output"
    sum_round()


@check("an empty op one rank refuses ends the others' at once, naming it, and the next op pairs")
def _():
    needs_ranks(2)
    last = world - 1
    empty = torch.empty(0, device=dev)
    start = time.monotonic()
    if rank == last:
        try:
            torch.ops.mori.all_reduce(empty, torch.empty(0, device=dev, dtype=torch.int32), "sum", group.group_name)
            raise AssertionError("accepted an Int out")
        except RuntimeError as e:
            assert "Int" in str(e), str(e)
    else:
        torch.ops.mori.all_reduce(empty, torch.empty_like(empty), "sum", group.group_name)
        torch.cuda.synchronize()
    try:
        sum_round()
        assert rank == last, "the refusal was not reported"
    except RuntimeError as e:
        assert rank != last and f"rank {last} refused its part" in str(e), str(e)
    took = time.monotonic() - start
    assert took < 5, f"the refusal was waited out ({took:.1f} s)"
    sum_round()


ok = summary()
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
