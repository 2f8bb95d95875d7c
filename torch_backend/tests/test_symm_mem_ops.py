# SPDX-License-Identifier: MIT
"""Every operation of torch's `torch.ops.symm_mem` namespace (torch 2.11),
and torch's fused matmul ops built on them, on MORI memory
(torchrun --nproc_per_node=N; ranks may share one GPU): each op that is
meant for any backend runs against a reference and must match; each op
that belongs to another backend (NVSHMEM's, NCCL's) or needs NVLink
multicast is listed with the reason it does not apply to MORI memory and
what to call instead. With MORI_OPS_RESULT=PATH, rank 0 writes one JSON
line per op (op, status, note) there: docs/torch.md's list of torch's ops
is generated from that file (bench/symm_mem_ops_table.py)."""
import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
from checks import Skip, check, needs_ranks, rank, ref_all_gather, ref_all_reduce, ref_reduce_scatter, setup_job, summary, world  # noqa: E402,E501

dev = setup_job()
group = dist.group.WORLD
import mori.allocator  # noqa: E402,F401
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402

symm_mem.set_backend("MORI")
gname = group.group_name
rows = []  # (op, status, note)


def works(*ops, note=""):
    """The ops of one check: recorded as working when the check passes, and
    as not checked (with the reason) when this job cannot run it (one rank:
    a two-rank op is listed, not silently missing from the list)."""
    def wrap(fn):
        def run():
            try:
                fn()
            except Skip as why:
                rows.extend((op, "not checked", str(why)) for op in ops)
                raise
            rows.extend((op, "works", note) for op in ops)
        return run
    return wrap


def rand(n, dtype, seed):
    g = torch.Generator(device=dev).manual_seed(seed)
    return torch.randn(n, device=dev, dtype=torch.float32, generator=g).to(dtype)


# The first check of the file, on purpose: in torch 2.11 (cu130) on an H200,
# at one rank, torch's _async_input_mm (signals in ordinary torch memory,
# set to 1 and read back before the call) never finishes when other GPU work
# ran before it in the process: after torch's own fused_all_gather_matmul on
# torch's default backend exactly as on MORI, and after this file's earlier
# checks. As the first GPU op of the process it finishes, and the fused ops
# after it do too. Its chunk signals are not MORI memory: torch's kernel.
@check("_async_input_mm: A's chunks become valid as their signals are set")
@works("_async_input_mm")
def _():
    # A local A, no collective before it: the matmul alone is under test.
    m, k, n = 256 * world, 512, 384
    a = rand(m * k, torch.bfloat16, 40).reshape(m, k)
    b = rand(k * n, torch.bfloat16, 60).reshape(k, n)
    chunks = world
    signals = torch.zeros(chunks, dtype=torch.uint32, device=dev)
    torch.ops.symm_mem.memset32_(signals, 0, 1, chunks)
    got = torch.ops.symm_mem._async_input_mm(a, b, signals, 0)
    torch.testing.assert_close(got, a @ b, rtol=2e-2, atol=2e-1)


@check("one_shot_all_reduce / _out (bf16, fp32) match the reference")
@works("one_shot_all_reduce", "one_shot_all_reduce_out")
def _():
    for dtype, tol in [(torch.bfloat16, 2e-2), (torch.float32, 1e-5)]:
        for numel in [4096, 1 << 18]:
            t = symm_mem.empty(numel, dtype=dtype, device=dev)
            t.copy_(rand(numel, dtype, 10 + rank))
            symm_mem.rendezvous(t, gname)
            ref = ref_all_reduce(t)
            torch.testing.assert_close(torch.ops.symm_mem.one_shot_all_reduce(t, "sum", gname), ref, rtol=tol, atol=tol)
            out = torch.empty_like(t)
            torch.ops.symm_mem.one_shot_all_reduce_out(t, "sum", gname, out)
            torch.testing.assert_close(out, ref, rtol=tol, atol=tol)


@check("one_shot_all_reduce_copy / _copy_out: a local input through a symmetric buffer")
@works("one_shot_all_reduce_copy", "one_shot_all_reduce_copy_out")
def _():
    numel = 1 << 16
    buf = symm_mem.empty(numel, dtype=torch.bfloat16, device=dev)
    symm_mem.rendezvous(buf, gname)
    local = rand(numel, torch.bfloat16, 20 + rank)
    ref = ref_all_reduce(local)
    got = torch.ops.symm_mem.one_shot_all_reduce_copy(buf, local, "sum", gname)
    torch.testing.assert_close(got, ref, rtol=2e-2, atol=2e-2)
    out = torch.empty_like(local)
    torch.ops.symm_mem.one_shot_all_reduce_copy_out(buf, local, "sum", gname, out)
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)


@check("two_shot_all_reduce_ / _out match the reference")
@works("two_shot_all_reduce_", "two_shot_all_reduce_out")
def _():
    needs_ranks(2)  # torch: "Not implemented for world_size=1"
    numel = 1 << 20
    orig = rand(numel, torch.bfloat16, 30 + rank)
    t = symm_mem.empty(numel, dtype=torch.bfloat16, device=dev)
    t.copy_(orig)
    symm_mem.rendezvous(t, gname)
    ref = ref_all_reduce(t)
    out = torch.empty_like(t)
    torch.ops.symm_mem.two_shot_all_reduce_out(t, "sum", gname, out)  # reduces into t's shards too
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)
    t.copy_(orig)
    torch.ops.symm_mem._barrier(torch.ops.symm_mem._rendezvous(t, gname))  # every rank's input restored first
    torch.ops.symm_mem.two_shot_all_reduce_(t, "sum", gname)
    torch.testing.assert_close(t, ref, rtol=2e-2, atol=2e-2)


@check("reduce_scatter_out (split along dim 0) matches the reference")
@works("reduce_scatter_out")
def _():
    needs_ranks(2)  # torch: "Not implemented for world_size=1"
    numel = world * 8192
    t = symm_mem.empty(numel, dtype=torch.float32, device=dev)
    t.copy_(rand(numel, torch.float32, 40 + rank))
    symm_mem.rendezvous(t, gname)
    out = torch.empty(numel // world, dtype=torch.float32, device=dev)
    torch.ops.symm_mem.reduce_scatter_out(t, gname, False, out)
    ref = torch.empty_like(out)
    ref_reduce_scatter(ref, t)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


@check("stream_write_value32_ / memset32_ on MORI memory")
@works("stream_write_value32_", "memset32_")
def _():
    t = symm_mem.empty(64, dtype=torch.uint32, device=dev)
    symm_mem.rendezvous(t, gname)
    torch.ops.symm_mem.memset32_(t, 0, 7, 64)
    torch.ops.symm_mem.stream_write_value32_(t, 5, 99)
    want = torch.full((64,), 7, dtype=torch.int64)
    want[5] = 99
    assert torch.equal(t.cpu().to(torch.int64), want), t.cpu()


@check("_rendezvous / _barrier (the TorchBind handle)")
@works("_rendezvous", "_barrier")
def _():
    t = symm_mem.empty(1024, dtype=torch.float32, device=dev)
    t.fill_(rank + 1)
    sm = torch.ops.symm_mem._rendezvous(t, gname)
    torch.ops.symm_mem._barrier(sm)
    torch.cuda.synchronize()


def all_gather_matmul_operands():
    """bf16 (torch's async-input matmul, sm_90, takes nothing else): this
    rank's shard of A, B (the same on every rank) and the gathered A."""
    m, k, n = 256, 512, 384
    a_shard = rand(m * k, torch.bfloat16, 50 + rank).reshape(m, k)
    b = rand(k * n, torch.bfloat16, 60).reshape(k, n)
    return a_shard, b, torch.cat(ref_all_gather(a_shard))


@check("fused_all_gather_matmul matches all-gather then matmul")
@works("fused_all_gather_matmul")
def _():
    a_shard, b, ref_a = all_gather_matmul_operands()
    a_full, outs = torch.ops.symm_mem.fused_all_gather_matmul(a_shard, [b], 0, gname)
    torch.testing.assert_close(a_full, ref_a)
    torch.testing.assert_close(outs[0], ref_a @ b, rtol=2e-2, atol=2e-1)


@check("fused_matmul_reduce_scatter matches matmul then reduce-scatter")
@works("fused_matmul_reduce_scatter")
def _():
    m, k, n = 128 * world, 256, 192
    a = rand(m * k, torch.float32, 70 + rank).reshape(m, k)
    b = rand(k * n, torch.float32, 80).reshape(k, n)
    got = torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, gname)
    ref = torch.empty(m // world, n, dtype=torch.float32, device=dev)
    ref_reduce_scatter(ref, (a @ b).contiguous())
    torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-3)


def fp8(x):
    """x (float32, |x| < 6) as e4m3fn with one tensor-wise scale that every
    rank shares: (values, scale)."""
    scale = torch.tensor(6.0 / 448.0, dtype=torch.float32, device=dev)
    return (x / scale).to(torch.float8_e4m3fn), scale


@check("fused_all_gather_scaled_matmul (fp8, tensor-wise scales) matches all-gather then _scaled_mm")
@works("fused_all_gather_scaled_matmul")
def _():
    m, k, n = 128, 256, 192
    a_shard, a_scale = fp8(rand(m * k, torch.float32, 90 + rank).reshape(m, k).clamp(-5, 5))
    b_rows, b_scale = fp8(rand(k * n, torch.float32, 100).reshape(k, n).clamp(-5, 5))
    b = b_rows.t().contiguous().t()  # column-major, as _scaled_mm wants
    a_full, outs = torch.ops.symm_mem.fused_all_gather_scaled_matmul(
        a_shard, [b], a_scale, [b_scale], 0, gname, [None], [None], [torch.bfloat16], [False])
    ref_a = torch.cat(ref_all_gather(a_shard.view(torch.uint8))).view(torch.float8_e4m3fn)
    ref = torch._scaled_mm(ref_a, b, a_scale, b_scale, out_dtype=torch.bfloat16)
    torch.testing.assert_close(outs[0], ref, rtol=2e-2, atol=2e-2)


@check("fused_scaled_matmul_reduce_scatter (fp8, tensor-wise scales) matches _scaled_mm then reduce-scatter")
@works("fused_scaled_matmul_reduce_scatter")
def _():
    m, k, n = 64 * world, 256, 128
    a, a_scale = fp8(rand(m * k, torch.float32, 110 + rank).reshape(m, k).clamp(-5, 5))
    b_rows, b_scale = fp8(rand(k * n, torch.float32, 120).reshape(k, n).clamp(-5, 5))
    b = b_rows.t().contiguous().t()
    got = torch.ops.symm_mem.fused_scaled_matmul_reduce_scatter(
        a, b, a_scale, b_scale, "sum", 0, 0, gname, [m, n], out_dtype=torch.bfloat16)
    full = torch._scaled_mm(a, b, a_scale, b_scale, out_dtype=torch.bfloat16).float()
    ref = torch.empty(m // world, n, dtype=torch.float32, device=dev)
    ref_reduce_scatter(ref, full.contiguous())
    torch.testing.assert_close(got.float(), ref, rtol=3e-2, atol=5e-1)


@check("_low_contention_all_gather / _low_contention_reduce_scatter match the references")
@works("_low_contention_all_gather", "_low_contention_reduce_scatter")
def _():
    numel = 8192
    x = rand(numel, torch.float32, 130 + rank)
    wait = torch.ops._c10d_functional.wait_tensor
    got = wait(torch.ops.symm_mem._low_contention_all_gather(x, gname))
    torch.testing.assert_close(got, torch.cat(ref_all_gather(x)))
    y = rand(numel * world, torch.float32, 140 + rank)
    got = wait(torch.ops.symm_mem._low_contention_reduce_scatter(y, "sum", gname))
    ref = torch.empty(numel, dtype=torch.float32, device=dev)
    ref_reduce_scatter(ref, y)
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


@check("get_remote_tensors: every rank's tensor, in rank order")
@works("get_remote_tensors")
def _():
    t = symm_mem.empty(1024, dtype=torch.int32, device=dev)
    t.fill_(rank * 7 + 1)
    symm_mem.rendezvous(t, gname)
    torch.ops.symm_mem._barrier(torch.ops.symm_mem._rendezvous(t, gname))
    remote = torch.ops.symm_mem.get_remote_tensors(t, gname)
    assert len(remote) == world
    for peer, r in enumerate(remote):
        assert bool((r == peer * 7 + 1).all()), f"rank {peer}'s tensor"
    torch.ops.symm_mem._barrier(torch.ops.symm_mem._rendezvous(t, gname))


@check("multicast: MORI reports none, so torch's multimem_* ops do not apply")
def _():
    t = symm_mem.empty(1024, dtype=torch.float32, device=dev)
    hdl = symm_mem.rendezvous(t, gname)
    assert hdl.multicast_ptr == 0, hdl.multicast_ptr
    for op in ["multimem_all_reduce_", "multimem_one_shot_all_reduce", "multimem_one_shot_all_reduce_out",
               "multimem_one_shot_reduce_out", "multimem_all_gather_out"]:
        rows.append((op, "not applicable", "needs NVLink multicast; MORI creates no multicast objects "
                                           "(has_multicast_support() is false): use one_shot_all_reduce / "
                                           "torch.ops.mori.all_reduce"))


# Ops that torch implements for one backend only: torch calls that backend's
# library on the tensor, so they do not apply to MORI memory (they are not
# called here: NVSHMEM's would touch an NVSHMEM heap that does not exist).
OTHER_BACKEND = [
    ("all_to_all_vdev", "NVSHMEM", "torch.ops.mori.all_to_all_vdev"),
    ("all_to_all_vdev_2d", "NVSHMEM", "torch.ops.mori.all_to_all_vdev_2d"),
    ("all_to_all_vdev_2d_offset", "NVSHMEM", "torch.ops.mori.all_to_all_vdev_2d_offset"),
    ("nvshmem_all_to_all", "NVSHMEM", "torch.ops.mori.all_to_all"),
    ("nvshmem_put", "NVSHMEM", "hdl.get_buffer(peer).copy_(...) or mori.triton.put"),
    ("nvshmem_get", "NVSHMEM", "hdl.get_buffer(peer) as a source"),
    ("nvshmem_broadcast", "NVSHMEM", "hdl.get_buffer(root) after hdl.barrier()"),
    ("nvshmem_wait_for_signal", "NVSHMEM", "hdl.wait_signal"),
    ("nvshmem_put_with_signal", "NVSHMEM", "hdl.get_buffer(peer).copy_(...) then hdl.put_signal"),
    ("tile_reduce", "NVSHMEM", "torch.ops.mori.all_reduce"),
    ("multi_root_tile_reduce", "NVSHMEM", "torch.ops.mori.all_reduce"),
    ("nccl_put", "NCCL", "hdl.get_buffer(peer).copy_(...)"),
    ("nccl_get", "NCCL", "hdl.get_buffer(peer) as a source"),
    ("nccl_wait_for_signal", "NCCL", "hdl.wait_signal"),
    ("nccl_put_with_signal", "NCCL", "hdl.put_signal"),
    ("nccl_put_signal", "NCCL", "hdl.put_signal"),
    ("nccl_wait_signal", "NCCL", "hdl.wait_signal"),
]


@check("the list covers every op of torch.ops.symm_mem in this torch")
def _():
    for op, lib, instead in OTHER_BACKEND:
        rows.append((op, "not applicable", f"{lib} backend only; on MORI memory use {instead}"))
    listed = {op for op, _, _ in rows}
    # Every op torch registered under symm_mem (the dispatcher's own list).
    present = {n.split("::", 1)[1].split(".", 1)[0] for n in torch._C._dispatch_get_all_op_names()
               if n.startswith("symm_mem::")}
    assert present, "torch registered no symm_mem ops?"
    missing = sorted(present - listed)
    assert not missing, f"ops of torch.ops.symm_mem with no entry here: {missing}"


ok = summary()
if rank == 0 and os.environ.get("MORI_OPS_RESULT"):
    with open(os.environ["MORI_OPS_RESULT"], "w") as f:
        for op, status, note in rows:
            f.write(json.dumps({"op": op, "status": status, "note": note, "torch": torch.__version__}) + "\n")
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
