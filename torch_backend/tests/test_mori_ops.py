# SPDX-License-Identifier: MIT
"""torch.ops.mori.* on GPUs (torchrun --nproc_per_node=N): results equal to
NCCL's (all-to-all bit for bit; all-reduce within bf16 tolerance of an fp32
reference) over 10 000 back-to-back calls with no host synchronisation, a
fresh input every call, every output checked on the GPU, random delays on
rank 0; the same under CUDA-graph replay and torch.compile; bad input.
With ranks sharing a GPU (no NCCL) the references are computed on the GPU
from the peers' known inputs, or moved through host memory with gloo, and
the back-to-back loops default to 1000 calls (MORI_OPS_ITERS)."""
import os
import random
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
from checks import (SHARED_GPU, a2a_int_pattern, check, needs_ranks, rank, ref_all_gather,  # noqa: E402
                    ref_all_reduce, ref_all_to_all_single, ref_int_a2a, setup_job, summary, world)

dev = setup_job()
group = dist.group.WORLD
import mori.allocator  # noqa: E402,F401
import mori.ops  # noqa: E402
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402

symm_mem.set_backend("MORI")
ITERS = int(os.environ.get("MORI_OPS_ITERS", "1000" if SHARED_GPU else "10000"))
rng = random.Random(42 + rank)


def fresh_ints(buf, it):
    """A different input every iteration, made on the GPU (no host traffic)."""
    torch.arange(buf.numel(), out=buf)
    buf.mul_(1103515245).add_(it * 40503 + rank * 1000003)


def maybe_delay():
    if rank == 0 and rng.random() < 0.125:
        torch.cuda._sleep(rng.randrange(1, 20000))  # a rank running late


def a2a_vs_nccl(chunk_bytes, iters, symmetric=False):
    n = world * chunk_bytes // 4
    inp = torch.empty(n, dtype=torch.int32, device=dev)
    if symmetric:  # peers write straight into a rendezvoused out
        out = symm_mem.empty(n, dtype=torch.int32, device=dev)
        symm_mem.rendezvous(out, group.group_name)
    else:
        out = torch.empty_like(inp)
    ref = torch.empty_like(inp)
    pattern = a2a_int_pattern(n // world, 1103515245, dev)
    bad = torch.zeros((), dtype=torch.int64, device=dev)
    for it in range(iters):
        fresh_ints(inp, it)
        maybe_delay()
        mori.ops.all_to_all(inp, out, group)
        ref_int_a2a(ref, inp, pattern, it * 40503)
        bad += (out != ref).sum()
    return int(bad.item())


@check(f"all_to_all equals NCCL's all_to_all_single bit for bit, {ITERS} calls back to back (256 KiB, 4 MiB per peer)")
def _():
    for chunk in [256 << 10, 4 << 20]:
        bad = a2a_vs_nccl(chunk, ITERS)
        assert bad == 0, f"{bad} mismatched elements at {chunk} bytes per peer"


@check(f"all_to_all into a symmetric out equals NCCL's bit for bit, {ITERS} calls back to back (64 KiB, 4 MiB per peer)")
def _():
    for chunk in [64 << 10, 4 << 20]:
        bad = a2a_vs_nccl(chunk, ITERS, symmetric=True)
        assert bad == 0, f"{bad} mismatched elements at {chunk} bytes per peer"


def all_reduce_vs_fp32(nbytes, iters):
    n = nbytes // 2
    inp = torch.empty(n, dtype=torch.bfloat16, device=dev)
    out = torch.empty_like(inp)
    ref = torch.empty(n, dtype=torch.float32, device=dev)
    worst = torch.zeros((), dtype=torch.float32, device=dev)
    gen = torch.Generator(device=dev)
    for it in range(iters):
        gen.manual_seed(it * world + rank)
        inp.copy_(torch.randn(n, device=dev, generator=gen))
        maybe_delay()
        mori.ops.all_reduce(inp, out, "sum", group)
        if SHARED_GPU:  # the peers' inputs made here from their seeds
            ref.zero_()
            for r in range(world):
                peer_gen = torch.Generator(device=dev)
                peer_gen.manual_seed(it * world + r)
                ref.add_(torch.randn(n, device=dev, generator=peer_gen).to(torch.bfloat16).float())
        else:
            ref.copy_(inp)
            dist.all_reduce(ref)  # fp32 reference of the same inputs
        # bf16 tolerance: the sum's own rounding, relative to its magnitude.
        err = (out.float() - ref).abs() - (1e-2 * ref.abs() + 1e-2)
        worst = torch.maximum(worst, err.max())
    return float(worst.item())


@check(f"all_reduce bf16 within bf16 tolerance of an fp32 reference, {ITERS} calls back to back (16 KiB, 16 MiB)")
def _():
    for nbytes, iters in [(16 << 10, ITERS), (16 << 20, max(ITERS // 5, 1))]:
        worst = all_reduce_vs_fp32(nbytes, iters)
        assert worst <= 0, f"{nbytes} bytes: an element off by {worst} beyond tolerance"


@check("all_reduce is deterministic and the same on every rank (sum, avg, max, min; fp32, bf16, fp16)")
def _():
    for dtype in [torch.float32, torch.bfloat16, torch.float16]:
        for op in ["sum", "avg", "max", "min"]:
            for n in [1, 1000, 300_000]:
                torch.manual_seed(n + rank)
                inp = torch.randn(n, device=dev).to(dtype)
                out = torch.empty_like(inp)
                mori.ops.all_reduce(inp, out, op, group)
                parts = ref_all_gather(inp)
                acc = parts[0].float()
                for p in parts[1:]:
                    acc = acc + p.float() if op in ("sum", "avg") else (
                        torch.maximum(acc, p.float()) if op == "max" else torch.minimum(acc, p.float()))
                if op == "avg":
                    acc = acc / world
                assert torch.equal(out, acc.to(dtype)), f"{dtype} {op} {n}: not the fp32 rank-order result"
                outs = ref_all_gather(out)
                assert all(torch.equal(o, out) for o in outs), f"{dtype} {op} {n}: ranks differ"


@check("both ops captured in a CUDA graph and replayed (output checked every replay)")
def _():
    n = world * (1 << 18)
    inp = torch.empty(n, dtype=torch.int32, device=dev)
    out, ref = torch.empty_like(inp), torch.empty_like(inp)
    pattern = a2a_int_pattern(n // world, 1, dev)  # every rank's inputs are known: no collective in the graph
    x = torch.randn(8192, device=dev, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    step = torch.zeros((), dtype=torch.int64, device=dev)
    bad = torch.zeros((), dtype=torch.int64, device=dev)
    mori.ops.all_to_all(inp, out, group)  # sizes the workspace outside the capture
    mori.ops.all_reduce(x, y, "sum", group)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(10):
            torch.arange(n, out=inp, device=dev)
            inp.add_(step.to(torch.int32) * 7 + rank * 1000003)
            step.add_(1)
            mori.ops.all_to_all(inp, out, group)
            torch.add(pattern, step.to(torch.int32) * 7 - 7, out=ref)  # step counted from 1 here
            bad.add_((out != ref).sum())
            mori.ops.all_reduce(x, y, "sum", group)
    for _ in range(20):
        g.replay()
    torch.cuda.synchronize()
    assert int(bad.item()) == 0, f"{int(bad.item())} mismatches over 200 replayed calls"


@check("torch.compile(fullgraph) of a function that calls the ops")
def _():
    @torch.compile(fullgraph=True)
    def f(a, b, c):
        torch.ops.mori.all_reduce(a, b, "sum", group.group_name)
        torch.ops.mori.all_to_all(b, c, group.group_name)
        return c * 2

    a = torch.randn(world * 1024, device=dev)
    b, c = torch.empty_like(a), torch.empty_like(a)
    got = f(a, b, c)
    rb, rc = ref_all_reduce(a), torch.empty_like(a)
    ref_all_to_all_single(rc, rb)
    torch.testing.assert_close(got, rc * 2, rtol=1e-5, atol=1e-5)


HIDDEN = 7168  # MoE rows: 7168 bf16 features


def vdev_case(max_rows, iters, capture=False):
    """all_to_all_vdev with row counts drawn on the GPU every iteration (a
    different count per pair, zeros included) against NCCL's
    all_to_all_single with the same splits; returns (bad rows, bad splits)."""
    inp = torch.empty(world * max_rows, HIDDEN, dtype=torch.bfloat16, device=dev)
    out = symm_mem.empty(world * max_rows, HIDDEN, dtype=torch.bfloat16, device=dev)
    symm_mem.rendezvous(out, group.group_name)
    in_splits = torch.empty(world, dtype=torch.int64, device=dev)
    oso = torch.empty(2, world, dtype=torch.int64, device=dev)
    gen = torch.Generator(device=dev)
    bad_rows = bad_splits = 0
    for it in range(iters):
        gen.manual_seed(1000 * it + rank)
        in_splits.copy_(torch.randint(0, max_rows + 1, (world,), device=dev, generator=gen))
        inp.copy_(torch.randn(inp.shape, device=dev, generator=gen))
        maybe_delay()
        mori.ops.all_to_all_vdev(inp, out, in_splits, oso, group)
        out_splits = torch.empty_like(in_splits)
        ref_all_to_all_single(out_splits, in_splits)  # the reference splits
        ins, outs = in_splits.tolist(), out_splits.tolist()
        ref = torch.empty(sum(outs), HIDDEN, dtype=torch.bfloat16, device=dev)
        ref_all_to_all_single(ref, inp[:sum(ins)], outs, ins)
        offsets = torch.cumsum(out_splits, 0) - out_splits
        bad_splits += int((oso[0] != out_splits).sum() + (oso[1] != offsets).sum())
        bad_rows += int((out[:sum(outs)] != ref).any(dim=1).sum())
    return bad_rows, bad_splits


@check("all_to_all_vdev (MoE rows of 7168 bf16, counts drawn on the GPU per call) equals NCCL's all_to_all_single")
def _():
    for max_rows, iters in [(3, 200), (256, 100)]:
        bad_rows, bad_splits = vdev_case(max_rows, iters)
        assert bad_rows == 0 and bad_splits == 0, f"max {max_rows} rows: {bad_rows} rows, {bad_splits} splits differ"


@check("all_to_all_vdev captured in a CUDA graph: new counts written on the GPU between replays")
def _():
    max_rows = 64
    inp = torch.empty(world * max_rows, HIDDEN, dtype=torch.bfloat16, device=dev)
    out = symm_mem.empty(world * max_rows, HIDDEN, dtype=torch.bfloat16, device=dev)
    symm_mem.rendezvous(out, group.group_name)
    in_splits = torch.ones(world, dtype=torch.int64, device=dev)
    oso = torch.empty(2, world, dtype=torch.int64, device=dev)
    mori.ops.all_to_all_vdev(inp, out, in_splits, oso, group)  # sizes the workspace outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        mori.ops.all_to_all_vdev(inp, out, in_splits, oso, group)
    for it in range(20):
        counts = [(rank + dst + it) % (max_rows + 1) for dst in range(world)]
        in_splits.copy_(torch.tensor(counts, device=dev))
        inp.copy_(torch.arange(inp.numel(), device=dev).reshape(inp.shape).remainder(251).to(torch.bfloat16) + rank)
        g.replay()
        outs = [(src + rank + it) % (max_rows + 1) for src in range(world)]
        assert oso[0].tolist() == outs, f"replay {it}: splits {oso[0].tolist()} != {outs}"
        ref = torch.empty(sum(outs), HIDDEN, dtype=torch.bfloat16, device=dev)
        ref_all_to_all_single(ref, inp[:sum(counts)], outs, counts)
        assert torch.equal(out[:sum(outs)], ref), f"replay {it}: rows differ"


@check("all_to_all_vdev refuses an out that is not a rendezvoused MORI tensor, and rows that do not fit")
def _():
    inp = torch.zeros(world * 4, 8, device=dev)
    splits = torch.full((world,), 4, dtype=torch.int64, device=dev)
    oso = torch.empty(2, world, dtype=torch.int64, device=dev)
    try:
        mori.ops.all_to_all_vdev(inp, torch.empty_like(inp), splits, oso, group)
        raise AssertionError("accepted a plain tensor as out")
    except RuntimeError as e:
        assert "rendezvoused" in str(e), str(e)
    small = symm_mem.empty(3, 8, device=dev)
    symm_mem.rendezvous(small, group.group_name)
    mori.ops.all_to_all_vdev(inp, small, splits, oso, group)  # 4 * world rows into 3: recorded on the device
    torch.cuda.synchronize()  # the host does not wait for the kernel: the next call after it ran reports it
    try:
        mori.ops.all_to_all_vdev(inp, small, torch.zeros_like(splits), oso, group)  # the next call reports it
        raise AssertionError("the overflow was not reported")
    except RuntimeError as e:
        assert "rows needed" in str(e), str(e)
    mori.ops.all_to_all_vdev(inp, small, torch.zeros_like(splits), oso, group)  # and the context goes on
    torch.cuda.synchronize()
    assert oso[0].tolist() == [0] * world


@check("all_to_all_vdev_2d (dispatch, major_align 1 and 8) and _2d_offset (combine) match torch's contract and round-trip")
def _():
    ne, k, hidden = 4, 10, 64
    nsplits = ne * world
    for align in (1, 8):
        for it in range(20):
            gen = torch.Generator(device=dev)
            gen.manual_seed(100 * it + rank + align)
            splits = torch.randint(k, (nsplits,), dtype=torch.int64, device=dev, generator=gen)
            max_in = k * nsplits
            max_out = max_in * world + ne * align
            inp = torch.randn(max_in, hidden, device=dev, generator=gen)
            out = symm_mem.empty(max_out, hidden, device=dev)
            back = symm_mem.empty(max_out, hidden, device=dev)
            symm_mem.rendezvous(out, group.group_name)
            symm_mem.rendezvous(back, group.group_name)
            oso = torch.full((2, nsplits), -1, dtype=torch.int64, device=dev)
            bso = torch.full((2, nsplits), -1, dtype=torch.int64, device=dev)
            mori.ops.all_to_all_vdev_2d(inp, out, splits, oso, group, major_align=align)
            # The reference, as torch's own test builds it: splits exchanged,
            # expert groups padded (at least `align` rows), data via NCCL.
            out_splits = torch.empty_like(splits)
            ref_all_to_all_single(out_splits, splits)
            table = out_splits.reshape(world, ne).t().tolist()  # [expert][source]
            want_offsets, start = [], 0
            for e in range(ne):
                row = start
                for src in range(world):
                    want_offsets.append(row)
                    row += table[e][src]
                total = sum(table[e])
                start += max((total + align - 1) // align * align, align)
            assert oso[0].tolist() == [table[e][src] for e in range(ne) for src in range(world)], "splits"
            assert oso[1].tolist() == want_offsets, f"offsets {oso[1].tolist()} != {want_offsets}"
            in_rank = splits.reshape(world, ne).sum(1).tolist()
            out_rank = out_splits.reshape(world, ne).sum(1).tolist()
            expected = torch.empty(sum(out_rank), hidden, device=dev)
            ref_all_to_all_single(expected, inp[:sum(in_rank)], out_rank, in_rank)
            ends = torch.cumsum(out_splits, 0).tolist()
            for e in range(ne):
                for src in range(world):
                    c = src * ne + e
                    chunk = expected[ends[c] - table[e][src]:ends[c]]
                    at = want_offsets[e * world + src]
                    assert torch.equal(out[at:at + table[e][src]], chunk), f"expert {e} from {src} (align {align})"
            mori.ops.all_to_all_vdev_2d_offset(out, back, oso, bso, group)
            n_in = int(splits.sum().item())
            assert torch.equal(back[:n_in], inp[:n_in]), f"combine(dispatch(x)) != x (align {align}, call {it})"
            assert bso[0].tolist() == splits.tolist(), "combine splits"
            assert bso[1].tolist() == (torch.cumsum(splits, 0) - splits).tolist(), "combine offsets"


@check("bad input is a RuntimeError on every rank, naming the cause")
def _():
    a = torch.zeros(world * 4, device=dev)
    cases = [((a, torch.zeros(world * 4, device=dev, dtype=torch.int32), group.group_name), "out is Int"),
             ((a, torch.zeros(world * 5, device=dev), group.group_name), "elements"),
             ((a, torch.zeros(world * 4), group.group_name), "same GPU"),
             ((a, torch.zeros(world * 4, device=dev), "no-such-group"), "no-such-group")]
    if world > 1:  # any count splits evenly over one rank
        cases.append(((torch.zeros(world * 4 + 1, device=dev), torch.zeros(world * 4 + 1, device=dev),
                       group.group_name), "split evenly"))
    for args, words in cases:
        try:
            torch.ops.mori.all_to_all(*args)
            raise AssertionError(f"accepted {words}")
        except RuntimeError as e:
            assert words in str(e), str(e)
    try:
        torch.ops.mori.all_reduce(a, torch.empty_like(a), "median", group.group_name)
        raise AssertionError("accepted median")
    except RuntimeError as e:
        assert "median" in str(e), str(e)


@check("an op refused by one rank's own checks ends the others' at once, naming that rank, and the next ops pair")
def _():
    needs_ranks(2)
    last = world - 1
    a = torch.full((world * 1024,), float(rank + 1), device=dev)
    out = torch.empty_like(a)
    torch.ops.mori.all_reduce(a, out, "sum", group.group_name)  # the group's context exists before the refusal
    torch.cuda.synchronize()
    bad = [torch.empty(world * 1024, device=dev, dtype=torch.int32),  # all_reduce: another dtype
           torch.empty(world * 1024 + world, device=dev)]  # all_to_all: another size
    for call, words in ((lambda o: torch.ops.mori.all_reduce(a, o, "sum", group.group_name), "out is Int"),
                        (lambda o: torch.ops.mori.all_to_all(a, o, group.group_name), "elements")):
        start = time.monotonic()
        if rank == last:
            try:
                call(bad.pop(0))
                raise AssertionError(f"accepted ({words})")
            except RuntimeError as e:
                assert words in str(e), str(e)
        else:
            call(out)  # launched; its kernel meets the refusal and ends
            torch.cuda.synchronize()  # at once, not at the timeout (took, below)
        try:
            # The next op pairs on every rank; the others learn of the
            # refusal from it (after its own call: the record the ended
            # kernel left).
            torch.ops.mori.all_reduce(a, out, "sum", group.group_name)
            assert rank == last, "the refusal was not reported"
        except RuntimeError as e:
            assert rank != last and f"rank {last} refused its part" in str(e), str(e)
        torch.cuda.synchronize()
        took = time.monotonic() - start
        assert took < 5, f"the refusal was waited out ({took:.1f} s)"
        want = world * (world + 1) / 2
        assert torch.all(out == want).item(), f"after the refusal: {out[:4].tolist()} != {want}"


ok = summary()
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
