# SPDX-License-Identifier: MIT
"""mori.ops' MoE dispatch/combine (the MORI-EP interface) on GPUs
(torchrun --nproc_per_node=N; two ranks may share one GPU): every call
checked against the torch reference of tests/ep_python/ep_reference.py in
bf16, fp16, fp32 and fp8 (e4m3fn, with scales), six routings, back to
back; CUDA-graph capture and replay with a new routing written into the
captured inputs on the GPU before each replay; torch.compile (inductor,
fullgraph); refusals; and with EP_BENCH=1 the host cost of issuing one
dispatch + combine eagerly against two plain torch kernels in the same loop.
MORI_EP_TEST_CALLS sets the back-to-back calls (default 1000)."""
import os
import sys
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "ep_python"))
from checks import check, rank, summary, world  # noqa: E402
from checks import raises, setup_job  # noqa: E402
import ep_reference as ref  # noqa: E402

os.environ.setdefault("MORI_SHMEM_HEAP_SIZE", "4G")
dev = setup_job()
import mori.ops  # noqa: E402
import mori.shmem  # noqa: E402

torch._C._distributed_c10d._register_process_group("default", dist.group.WORLD)
mori.shmem.shmem_torch_process_group_init("default")

HIDDEN, MAX_TOKENS, EXPERTS_PER_RANK, TOPK = 256, 64, 4, 4
CALLS = int(os.environ.get("MORI_EP_TEST_CALLS", "1000"))
FP8 = torch.float8_e4m3fn if torch.version.hip is None else torch.float8_e4m3fnuz
SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def bits(t):
    return t.contiguous().view(SAME_SIZE_INT[t.element_size()])


def make_op(dtype, **kw):
    scaled = dtype.itemsize == 1
    args = dict(data_type=dtype, rank=rank, world_size=world, hidden_dim=HIDDEN, scale_dim=4 if scaled else 0,
                scale_type_size=4, max_token_type_size=4, max_num_inp_token_per_rank=MAX_TOKENS,
                num_experts_per_rank=EXPERTS_PER_RANK, num_experts_per_token=TOPK, gpu_per_node=world)
    args.update(kw)
    return mori.ops.EpDispatchCombineOp(mori.ops.EpDispatchCombineConfig(**args))


def everyone(op, seed, kind, n=None):
    c = op.config
    return [ref.make_inputs(seed, r, world, c.data_type, HIDDEN, MAX_TOKENS, EXPERTS_PER_RANK, TOPK, c.scale_dim,
                            kind, n) for r in range(world)]


def to_dev(t):
    return None if t is None else t.to(dev)


def one_call(op, seed, kind, combine_dtype):
    inputs = everyone(op, seed, kind)
    x, w, s, idx = inputs[rank]
    out, ow, os_, oi, cnt = op.dispatch(to_dev(x), to_dev(w), to_dev(s), to_dev(idx))
    n = int(cnt[0].item())
    ex, ew, es, ei, epos = ref.expected_dispatch(inputs, rank, world, EXPERTS_PER_RANK, MAX_TOKENS)
    where = f"rank {rank}, {op.config.data_type}, seed {seed}, {kind}"
    assert n == ex.shape[0], f"{where}: {n} rows, expected {ex.shape[0]}"
    assert torch.equal(bits(out[:n].cpu()), bits(ex)), f"{where}: tokens differ"
    assert torch.equal(bits(ow[:n].cpu()), bits(ew)), f"{where}: weights differ"
    assert torch.equal(oi[:n].cpu(), ei), f"{where}: indices differ"
    if es is not None:
        assert torch.equal(bits(os_[:n].cpu()), bits(es)), f"{where}: scales differ"
    assert torch.equal(op.get_dispatch_src_token_pos().cpu(), epos), f"{where}: src_token_pos differ"
    y = (out[:n].to(torch.float32) * (rank + 1)).to(combine_dtype)
    co, cw = op.combine(y, ow[:n], to_dev(idx))
    ey, eww = ref.expected_combine(x, w, idx, EXPERTS_PER_RANK, world, combine_dtype)
    rtol, atol = ref.TOLERANCE[combine_dtype]
    torch.testing.assert_close(co.cpu(), ey, rtol=rtol, atol=atol, msg=lambda m: f"{where}: combine: {m}")
    torch.testing.assert_close(cw.cpu(), eww, rtol=1e-6, atol=1e-6, msg=lambda m: f"{where}: weights: {m}")


@check("dispatch/combine against the torch reference, every dtype and routing")
def _():
    seed = 1
    for dtype in (torch.bfloat16, torch.float16, torch.float32, FP8):
        op = make_op(dtype)
        for kind in ref.ROUTINGS:
            for cdt in ((torch.bfloat16, torch.float32) if dtype.itemsize == 1 else (dtype,)):
                seed += 1
                one_call(op, seed, kind, cdt)
        op.destroy()


@check("use_external_inp_buf=False: rows the expert wrote into the registered buffer, and a second combine of "
       "each dispatch from other rows")
def _():
    op = make_op(torch.bfloat16, use_external_inp_buf=False)
    rtol, atol = ref.TOLERANCE[torch.bfloat16]
    for seed in range(500, 540):
        inputs = everyone(op, seed, "uniform")
        x, w, s, idx = inputs[rank]
        out, ow, _, _, cnt = op.dispatch(to_dev(x), to_dev(w), to_dev(s), to_dev(idx))
        n = int(cnt[0].item())
        y = (out[:n].to(torch.float32) * (rank + 1)).to(torch.bfloat16)
        ey, _ = ref.expected_combine(x, w, idx, EXPERTS_PER_RANK, world, torch.bfloat16)
        first = y
        if seed % 2:  # the expert writes into the registered buffer itself
            first = op.get_registered_combine_input_buffer(torch.bfloat16)
            first[:n] = y
        # x2 is exact in bfloat16, so the second combine's sums are exactly twice the first's
        for k, (rows, scale) in enumerate(((first, 1.0), (y * 2, 2.0))):
            co, _ = op.combine(rows, ow[:n], to_dev(idx))
            torch.testing.assert_close(co.cpu(), ey * scale, rtol=rtol, atol=atol,
                                       msg=lambda m: f"rank {rank}, seed {seed}, combine {k + 1} of 2: {m}")
    op.destroy()


@check(f"{CALLS} back-to-back calls, a new routing each, each checked")
def _():
    op = make_op(torch.bfloat16)
    for i in range(CALLS):
        one_call(op, 10_000 + i, ref.ROUTINGS[i % len(ref.ROUTINGS)], torch.bfloat16)
    op.destroy()


@check("CUDA graph: dispatch + expert + combine captured, replayed with new routings written on the GPU")
def _():
    op = make_op(torch.bfloat16)
    x = torch.zeros(MAX_TOKENS, HIDDEN, dtype=torch.bfloat16, device=dev)
    w = torch.zeros(MAX_TOKENS, TOPK, dtype=torch.float32, device=dev)
    idx = torch.zeros(MAX_TOKENS, TOPK, dtype=torch.int32, device=dev)
    first = everyone(op, 500, "uniform", n=MAX_TOKENS)[rank]
    x.copy_(first[0]), w.copy_(first[1]), idx.copy_(first[3])

    def step():
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        y = (out.to(torch.float32) * (rank + 1)).to(torch.bfloat16)  # whole capacity: no host sync
        co, cw = op.combine(y, ow, idx)
        return co, cw, cnt

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        co, cw, cnt = step()
    for i, kind in enumerate(ref.ROUTINGS * 4):
        if kind == "empty_source":
            continue  # the captured shapes are fixed: every rank sends MAX_TOKENS
        inputs = everyone(op, 600 + i, kind, n=MAX_TOKENS)
        xi, wi, _, ii = inputs[rank]
        x.copy_(xi), w.copy_(wi), idx.copy_(ii)  # the new routing, written on the GPU
        graph.replay()
        torch.cuda.synchronize()
        ex = ref.expected_dispatch(inputs, rank, world, EXPERTS_PER_RANK, MAX_TOKENS)[0]
        assert int(cnt[0].item()) == ex.shape[0], (i, kind, int(cnt[0].item()), ex.shape[0])
        ey, eww = ref.expected_combine(xi, wi, ii, EXPERTS_PER_RANK, world, torch.bfloat16)
        torch.testing.assert_close(co.cpu(), ey, rtol=1.6e-2, atol=1e-2)
        torch.testing.assert_close(cw.cpu(), eww, rtol=1e-6, atol=1e-6)
        dist.barrier()  # the host checks, then the next replay everywhere
    op.destroy()


@check("torch.compile (inductor, fullgraph) of dispatch + expert + combine")
def _():
    op = make_op(torch.bfloat16)

    def step(x, w, idx):
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        y = (out.to(torch.float32) * (rank + 1)).to(torch.bfloat16)
        co, cw = op.combine(y, ow, idx)
        return co * 1, cw * 1, cnt * 1

    fn = torch.compile(step, fullgraph=True)
    for i, kind in enumerate(["uniform", "skewed", "duplicate_ranks", "empty_destination"] * 2):
        inputs = everyone(op, 700 + i, kind, n=MAX_TOKENS)
        xi, wi, _, ii = inputs[rank]
        co, cw, cnt = fn(xi.to(dev), wi.to(dev), ii.to(dev))
        ex = ref.expected_dispatch(inputs, rank, world, EXPERTS_PER_RANK, MAX_TOKENS)[0]
        assert int(cnt[0].item()) == ex.shape[0]
        ey, eww = ref.expected_combine(xi, wi, ii, EXPERTS_PER_RANK, world, torch.bfloat16)
        torch.testing.assert_close(co.cpu(), ey, rtol=1.6e-2, atol=1e-2)
        torch.testing.assert_close(cw.cpu(), eww, rtol=1e-6, atol=1e-6)
    op.destroy()


@check("torch.compile (inductor): a call rank 0 refuses while tracing stays in its graph, so every rank's "
       "compiled call fails naming rank 0 and the calls after pair as they should")
def _():
    op = make_op(torch.bfloat16)
    # The peers learn of the refusal from the call itself (a GPU's default
    # reports it at check()): each rank's graph then stops at its dispatch,
    # and none runs the combine after it alone.
    op.check_every_call = True
    x, w, _, idx = [to_dev(t) for t in everyone(op, 820, "uniform", n=MAX_TOKENS)[rank]]

    def step(x, w, idx):
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        y = (out.to(torch.float32) * 2).to(torch.bfloat16)
        co, cw = op.combine(y, ow, idx)
        return co * 1, cnt * 1

    fn = torch.compile(step, fullgraph=True)
    for attempt in range(2):  # the second runs the graph compiled by the first
        if rank == 0:  # int64 indices: refused while tracing, the refusal run when the graph runs
            raises(ValueError, lambda: fn(x, w, idx.to(torch.int64)), "indices", "rank 0")
        else:
            raises(mori.ops.EpError, lambda: fn(x, w, idx), "rank 0 refused its part of a dispatch")
        torch.cuda.synchronize()
        one_call(op, 821 + attempt, "uniform", torch.bfloat16)
    op.destroy()


@check("refusals: CPU tensors, wrong dtype, too many tokens; a bad expert index reported by check()")
def _():
    op = make_op(torch.bfloat16)
    x, w, _, idx = everyone(op, 800, "uniform", n=8)[rank]
    xd, wd, idd = x.to(dev), w.to(dev), idx.to(dev)
    for fn, words in ((lambda: op.dispatch(x, wd, None, idd), "this context's buffers are on cuda"),
                      (lambda: op.dispatch(xd.half(), wd, None, idd), "input is torch.float16"),
                      (lambda: op.dispatch(torch.zeros(MAX_TOKENS + 1, HIDDEN, dtype=torch.bfloat16, device=dev),
                                           None, None,
                                           torch.zeros(MAX_TOKENS + 1, TOPK, dtype=torch.int32, device=dev)),
                       "max_num_inp_token_per_rank")):
        try:
            fn()
            raise AssertionError(f"no error saying {words!r}")
        except ValueError as e:
            assert words in str(e), e
    bad = idd.clone()
    bad[0, 0] = world * EXPERTS_PER_RANK + 3
    op.dispatch(xd, wd, None, bad)
    try:
        op.check()
        raise AssertionError("a bad expert index went unreported")
    except mori.ops.EpError as e:
        assert "MORI_EINVAL" in str(e), e
    op.check()
    one_call(op, 801, "uniform", torch.bfloat16)
    op.destroy()


if os.environ.get("EP_BENCH") == "1":
    @check("host issue cost: eager dispatch + combine vs two plain torch kernels")
    def _():
        op = make_op(torch.bfloat16)
        x, w, _, idx = [t if t is None else t.to(dev) for t in everyone(op, 900, "uniform", n=MAX_TOKENS)[rank]]
        y = torch.zeros(op.max_recv_tokens, HIDDEN, dtype=torch.bfloat16, device=dev)
        out, ow, _, _, _ = op.dispatch(x, w, None, idx)
        op.combine(y, ow, idx)
        z = torch.zeros(1024, device=dev)
        iters = int(os.environ.get("EP_BENCH_ITERS", "1000"))

        def timed(body):
            torch.cuda.synchronize()
            dist.barrier()
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(iters // 5):
                    body()
                best = min(best, (time.perf_counter() - start) / (iters // 5))
                torch.cuda.synchronize()
                dist.barrier()
            return best * 1e6

        def ep():
            op.dispatch(x, w, None, idx)
            op.combine(y, ow, idx)

        def two_kernels():
            z.add_(1)
            z.add_(1)

        t_kernels = timed(two_kernels)
        t_ep = timed(ep)
        print(f"rank {rank}: host issue cost per iteration: dispatch+combine {t_ep:.2f} us, "
              f"two torch kernels (x.add_(1) twice) {t_kernels:.2f} us, ratio {t_ep / t_kernels:.2f}", flush=True)
        op.destroy()

ok = summary()
mori.shmem.shmem_finalize()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
