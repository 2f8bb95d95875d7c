# SPDX-License-Identifier: MIT
"""One backend, one round: every measurement this backend can take, in its
own processes (torch locks the symmetric-memory backend per process).

    torchrun --nproc_per_node=N bench/worker.py <backend> <round> <out.jsonl>

Backends: MORI (mori's fused ops, and torch's ops on MORI tensors), default
(torch's own CUDA backend), NVSHMEM, NCCL-symm (torch's NCCL symmetric-memory
backend), NCCL (plain collectives). Each record's label says what the op
really does (for example, NVSHMEM's hdl.barrier is an empty function in
torch 2.11, so its "push + barrier" is a push alone)."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "torch_backend", "examples"))
from harness import Harness  # noqa: E402

A2A_BYTES = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]  # per peer
AR_BYTES = [16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]  # bf16, whole buffer
ALLOC_BYTES = [1 << 20, 1 << 30]
ALLOC_LIVE = 4  # distinct allocations kept alive: the pool cannot hand one back

backend, round_, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
# MORI's heap modes as backends of their own (the variables are read when
# the first symmetric allocation is made, so setting them here is in time).
VARIANT_ENV = {
    "MORI-static": {"MORI_SHMEM_MODE": "static", "MORI_SHMEM_HEAP_SIZE": "8G"},
    "MORI-isolation": {"MORI_SHMEM_MODE": "isolation"},
}
os.environ.update(VARIANT_ENV.get(backend, {}))
kind = "MORI" if backend.startswith("MORI") else backend
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(rank)
dev = torch.device("cuda", rank)
dist.init_process_group("nccl", device_id=dev)
group = dist.group.WORLD
gname = group.group_name
symm_mem = None
if kind != "NCCL":
    import torch.distributed._symmetric_memory as symm_mem

    if kind == "MORI":
        import mori.allocator  # noqa: F401
        import mori.ops

        symm_mem.set_backend("MORI")
    elif backend == "NVSHMEM":
        symm_mem.set_backend("NVSHMEM")
    elif backend == "NCCL-symm":
        symm_mem.set_backend("NCCL")
H = Harness(backend, round_, out_path, rank, world, dev)


def pattern(n, src, dst, k):
    """What src sends to dst in verification round k (int32, n elements)."""
    return torch.arange(n, dtype=torch.int32, device=dev) + (src * 1000003 + dst * 7919 + k * 31)


def a2a_input(n, k):
    return torch.cat([pattern(n, rank, dst, k) for dst in range(world)])


def a2a_expected(n, k):
    return torch.cat([pattern(n, src, rank, k) for src in range(world)])


def barrier_stale(hdl, buf, rounds=30):
    """Write into the next rank's buffer, barrier, read what the previous
    rank wrote: the rounds that read stale data."""
    n = buf.numel()
    nxt = hdl.get_buffer((rank + 1) % world, (n,), buf.dtype)
    stale = 0
    for k in range(rounds):
        nxt.copy_(pattern(n, rank, 0, k))
        hdl.barrier()
        stale += int(not torch.equal(buf, pattern(n, (rank - 1) % world, 0, k)))
        hdl.barrier()
    return stale


# ---- measurements ----


def floor():
    """The cost of one launch: an empty kernel (a zero-cycle spin)."""
    H.measure("floor", 0, "empty kernel", lambda: torch.cuda._sleep(0))


def triton_push(label, with_barrier):
    import a2a_triton

    for chunk in A2A_BYTES:
        n = chunk // 4
        buf = symm_mem.empty(world * n, dtype=torch.int32, device=dev)
        hdl = symm_mem.rendezvous(buf, gname)
        src = a2a_input(n, 0)
        bpp = 16 if chunk <= (1 << 20) else 64

        def step():
            a2a_triton.a2a_push(src, hdl, n, rank, world, bpp=bpp)
            if with_barrier:
                hdl.barrier()

        def check():
            ok = True
            for k in range(1, 6):
                src.copy_(a2a_input(n, k))
                buf[rank * n:(rank + 1) * n].copy_(pattern(n, rank, rank, k))
                step()
                hdl.barrier()
                ok &= torch.equal(buf, a2a_expected(n, k))
                hdl.barrier()
            return ok

        rec = H.measure("a2a", chunk, label, step, check=check)
        del buf, hdl
        if "error" in rec:
            break  # the next sizes would fail the same way


def mori_a2a(symmetric=False):
    """torch.ops.mori.all_to_all; `symmetric`: into a rendezvoused MORI
    tensor, which peers write straight into (no staging)."""
    label = ("fused kernel into a symmetric out: direct push + per-slice flags" if symmetric
             else "fused kernel: push + per-slice flags")
    for chunk in A2A_BYTES:
        n = chunk // 4
        inp = a2a_input(n, 0)
        if symmetric:
            out = symm_mem.empty(world * n, dtype=torch.int32, device=dev)
            symm_mem.rendezvous(out, group.group_name)
        else:
            out = torch.empty(world * n, dtype=torch.int32, device=dev)

        def check():
            ok = True
            for k in range(1, 11):
                inp.copy_(a2a_input(n, k))
                out.fill_(-1)
                mori.ops.all_to_all(inp, out, group)
                ok &= torch.equal(out, a2a_expected(n, k))
            return ok

        rec = H.measure("a2a", chunk, label, lambda: mori.ops.all_to_all(inp, out, group), check=check)
        if "error" in rec:
            break


def mori_triton_a2a():
    """The all-to-all of mori.triton: a Triton kernel over address maps that
    pushes into the peers' symmetric out and completes with per-peer
    signals inside the kernel (works on any backend's symmetric tensors)."""
    from mori import triton as mt
    from mori.address_map import address_map

    a2a = mt.AllToAll(group, dev)
    for chunk in A2A_BYTES:
        n = chunk // 4
        inp = a2a_input(n, 0)
        out = symm_mem.empty(world * n, dtype=torch.int32, device=dev)
        m = address_map(out, group)

        def check():
            ok = True
            for k in range(1, 11):
                inp.copy_(a2a_input(n, k))
                out.fill_(-1)
                a2a(inp, out, m)
                ok &= torch.equal(out, a2a_expected(n, k))
            a2a.check()
            return ok

        rec = H.measure("a2a", chunk, "mori.triton all-to-all (Triton push + per-peer signals in the kernel)",
                        lambda: a2a(inp, out, m), check=check)
        if "error" in rec:
            break


def nvshmem_a2a():
    for chunk in A2A_BYTES:
        n = chunk // 4
        inp = symm_mem.empty(world * n, dtype=torch.int32, device=dev)
        out = symm_mem.empty(world * n, dtype=torch.int32, device=dev)
        symm_mem.rendezvous(inp, gname)
        symm_mem.rendezvous(out, gname)
        inp.copy_(a2a_input(n, 0))

        def check():
            ok = True
            for k in range(1, 6):
                inp.copy_(a2a_input(n, k))
                torch.ops.symm_mem.nvshmem_all_to_all(inp, out, gname)
                ok &= torch.equal(out, a2a_expected(n, k))
                dist.barrier()  # nvshmem_all_to_all has no trailing barrier
            return ok

        rec = H.measure("a2a", chunk, "nvshmem_all_to_all (synchronised)",
                        lambda: torch.ops.symm_mem.nvshmem_all_to_all(inp, out, gname), check=check)
        if "error" in rec:
            break


def nccl_a2a():
    for chunk in A2A_BYTES:
        n = chunk // 4
        inp, out = a2a_input(n, 0), torch.empty(world * n, dtype=torch.int32, device=dev)

        def check():
            inp.copy_(a2a_input(n, 3))
            dist.all_to_all_single(out, inp)
            return torch.equal(out, a2a_expected(n, 3))

        if "error" in H.measure("a2a", chunk, "all_to_all_single", lambda: dist.all_to_all_single(out, inp), check=check):
            break


HIDDEN = 7168  # MoE rows: 7168 bf16 features
VDEV_ROWS = 256  # rows per peer on average (about 3.5 MiB)


def moe_buffers(in_rows, out_rows, nsplits, seed, fewest, most):
    """The symmetric tensors of an all_to_all_vdev call, rendezvoused on the
    group: inp (in_rows random bf16 rows of HIDDEN), out (out_rows rows),
    in_splits (nsplits row counts drawn from [fewest, most] with seed) and
    the output splits and offsets (2 x nsplits)."""
    inp = symm_mem.empty(in_rows, HIDDEN, dtype=torch.bfloat16, device=dev)
    out = symm_mem.empty(out_rows, HIDDEN, dtype=torch.bfloat16, device=dev)
    in_splits = symm_mem.empty(nsplits, dtype=torch.int64, device=dev)
    oso = symm_mem.empty(2, nsplits, dtype=torch.int64, device=dev)
    for t in (inp, out, in_splits, oso):
        symm_mem.rendezvous(t, gname)
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    in_splits.copy_(torch.randint(fewest, most + 1, (nsplits,), device=dev, generator=gen))
    inp.copy_(torch.randn(inp.shape, device=dev, generator=gen))
    return inp, out, in_splits, oso


def vdev(label, op):
    """all_to_all_vdev with MoE rows: every pair's row count drawn from
    [VDEV_ROWS / 2, 3 VDEV_ROWS / 2] (the same draw on every backend), every
    tensor symmetric (what NVSHMEM's op requires); checked against NCCL's
    all_to_all_single with the same splits."""
    max_rows = VDEV_ROWS * 3 // 2
    inp, out, in_splits, oso = moe_buffers(world * max_rows, world * max_rows, world, 7 + rank,
                                           VDEV_ROWS // 2, max_rows)

    def check():
        op(inp, out, in_splits, oso)
        out_splits = torch.empty_like(in_splits)
        dist.all_to_all_single(out_splits, in_splits)
        ins, outs = in_splits.tolist(), out_splits.tolist()
        ref = torch.empty(sum(outs), HIDDEN, dtype=torch.bfloat16, device=dev)
        dist.all_to_all_single(ref, inp[:sum(ins)], outs, ins)
        return torch.equal(out[:sum(outs)], ref) and oso[0].tolist() == outs

    total = int(in_splits.sum().item()) * HIDDEN * 2
    H.measure("a2a_vdev", VDEV_ROWS * HIDDEN * 2, label, lambda: op(inp, out, in_splits, oso), check=check,
              bytes_sent=total)


EXPERTS = 8  # MoE dispatch: local experts per rank


def vdev_2d(label, op):
    """MoE dispatch (all_to_all_vdev_2d, major_align 1): EXPERTS local experts
    per rank, each (rank, expert) pair's rows drawn around VDEV_ROWS /
    EXPERTS, 7168 bf16 features; every tensor symmetric."""
    per = VDEV_ROWS // EXPERTS
    nsplits = world * EXPERTS
    max_rows = nsplits * per * 3 // 2
    inp, out, in_splits, oso = moe_buffers(max_rows, world * max_rows + EXPERTS, nsplits, 11 + rank,
                                           per // 2, per * 3 // 2)

    def check():
        op(inp, out, in_splits, oso)
        out_splits = torch.empty_like(in_splits)
        dist.all_to_all_single(out_splits, in_splits)
        want = out_splits.reshape(world, EXPERTS).t().reshape(-1).tolist()
        return oso[0].tolist() == want

    H.measure("a2a_vdev_2d", VDEV_ROWS * HIDDEN * 2, label, lambda: op(inp, out, in_splits, oso), check=check)


def mori_vdev():
    vdev("torch.ops.mori.all_to_all_vdev (one kernel)",
         lambda i, o, s, x: mori.ops.all_to_all_vdev(i, o, s, x, group))


def mori_vdev_2d():
    vdev_2d("torch.ops.mori.all_to_all_vdev_2d (one kernel)",
            lambda i, o, s, x: mori.ops.all_to_all_vdev_2d(i, o, s, x, group))


def nvshmem_vdev_2d():
    vdev_2d("torch.ops.symm_mem.all_to_all_vdev_2d",
            lambda i, o, s, x: torch.ops.symm_mem.all_to_all_vdev_2d(i, o, s, x, gname))


def nvshmem_vdev():
    vdev("torch.ops.symm_mem.all_to_all_vdev",
         lambda i, o, s, x: torch.ops.symm_mem.all_to_all_vdev(i, o, s, x, gname))


def reference_sum(x):
    """Every rank's input summed in rank order in fp32, then rounded: what a
    deterministic all-reduce returns."""
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x)
    acc = parts[0].float()
    for p in parts[1:]:
        acc = acc + p.float()
    return acc.to(x.dtype)


def ar_check(run, inp, out, exact):
    def check():
        ok = True
        for k in range(5):
            torch.manual_seed(1000 * k + rank)
            inp.copy_(torch.randn(inp.numel(), device=dev, dtype=inp.dtype))
            result = run()
            ref = reference_sum(inp)
            ok &= torch.equal(result, ref) if exact else torch.allclose(result.float(), ref.float(), rtol=2e-2, atol=2e-2)
        return ok

    return check


def mori_all_reduce():
    for nbytes in AR_BYTES:
        inp = torch.randn(nbytes // 2, device=dev, dtype=torch.bfloat16)
        out = torch.empty_like(inp)

        def run():
            mori.ops.all_reduce(inp, out, "sum", group)
            return out

        label = "fused kernel: LL lines" if nbytes <= (256 << 10) else "fused kernel: reduce-scatter + all-gather"
        rec = H.measure("all_reduce", nbytes, label, lambda: mori.ops.all_reduce(inp, out, "sum", group),
                        check=ar_check(run, inp, out, exact=True))
        if "error" in rec:
            break


def one_shot_all_reduce(label):
    for nbytes in AR_BYTES:
        t = symm_mem.empty(nbytes // 2, dtype=torch.bfloat16, device=dev)
        symm_mem.rendezvous(t, gname)
        t.copy_(torch.randn(t.numel(), device=dev, dtype=torch.bfloat16))
        run = lambda: torch.ops.symm_mem.one_shot_all_reduce(t, "sum", gname)  # noqa: E731
        if "error" in H.measure("all_reduce", nbytes, label, run, check=ar_check(run, t, None, exact=False)):
            break


def nccl_all_reduce(label, symmetric):
    for nbytes in AR_BYTES:
        if symmetric:
            x = symm_mem.empty(nbytes // 2, dtype=torch.bfloat16, device=dev)
            symm_mem.rendezvous(x, gname)
        else:
            x = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=dev)
        x.copy_(torch.randn(x.numel(), device=dev, dtype=torch.bfloat16))
        keep = x.clone()

        def run():
            x.copy_(keep)
            dist.all_reduce(x)
            return x

        # The timed op reduces in place (the value grows; only time matters).
        if "error" in H.measure("all_reduce", nbytes, label, lambda: dist.all_reduce(x),
                                check=ar_check(run, keep, None, exact=False)):
            break


def barrier(label):
    buf = symm_mem.empty(1 << 16, dtype=torch.int32, device=dev)
    hdl = symm_mem.rendezvous(buf, gname)
    H.measure("barrier", 0, label, lambda: hdl.barrier(), stale=lambda: barrier_stale(hdl, buf))


def alloc_rendezvous():
    """symm_mem.empty + rendezvous, host wall time until the device is idle:
    the first call of the process, then ALLOC_LIVE more with all of them kept
    alive (new memory each time), then again after freeing them (a pool may
    hand one back)."""
    first = True
    for nbytes in ALLOC_BYTES:
        live = []

        def one():
            t = symm_mem.empty(nbytes, dtype=torch.uint8, device=dev)
            live.append((t, symm_mem.rendezvous(t, gname)))

        try:
            t_first = H.wall_ms(one)
            steady = [H.wall_ms(one) for _ in range(ALLOC_LIVE)]
            live.clear()
            reuse = [H.wall_ms(one) for _ in range(2)]
            live.clear()
            H.record("alloc_rendezvous", nbytes, "empty + rendezvous", first_ms=round(t_first, 3),
                     first_in_process=first, steady_ms=round(sorted(steady)[len(steady) // 2], 3),
                     steady_ms_min=round(min(steady), 3), steady_ms_max=round(max(steady), 3),
                     reuse_ms=round(min(reuse), 3))
        except Exception as e:  # noqa: BLE001
            live.clear()
            H.record("alloc_rendezvous", nbytes, "empty + rendezvous", error=f"{type(e).__name__}: {str(e)[:300]}")
        first = False
        torch.cuda.empty_cache()


def step(name, fn):
    fn.__name__ = name
    return fn


PLANS = {
    "MORI": [floor, mori_a2a, step("mori_a2a_symmetric", lambda: mori_a2a(True)), mori_vdev, mori_vdev_2d,
             mori_triton_a2a,
             step("triton_push", lambda: triton_push("Triton push + hdl.barrier", True)),
             mori_all_reduce,
             step("one_shot_all_reduce", lambda: one_shot_all_reduce("torch one_shot_all_reduce on MORI tensors")),
             step("barrier", lambda: barrier("hdl.barrier")), alloc_rendezvous],
    "MORI-static": [floor, alloc_rendezvous],
    "MORI-isolation": [floor, alloc_rendezvous],
    "default": [floor, step("triton_push", lambda: triton_push("Triton push + hdl.barrier", True)),
                step("one_shot_all_reduce", lambda: one_shot_all_reduce("torch one_shot_all_reduce")),
                step("barrier", lambda: barrier("hdl.barrier")), alloc_rendezvous],
    "NVSHMEM": [floor, step("triton_push", lambda: triton_push("Triton push (hdl.barrier is a no-op in torch 2.11)", True)),
                nvshmem_a2a, nvshmem_vdev, nvshmem_vdev_2d,
                step("one_shot_all_reduce", lambda: one_shot_all_reduce("torch one_shot_all_reduce")),
                step("barrier", lambda: barrier("hdl.barrier (an empty function in torch 2.11)")), alloc_rendezvous],
    "NCCL-symm": [floor, step("nccl_all_reduce", lambda: nccl_all_reduce("dist.all_reduce on NCCL symmetric memory", True)),
                  alloc_rendezvous],
    "NCCL": [floor, nccl_a2a, step("nccl_all_reduce", lambda: nccl_all_reduce("dist.all_reduce", False))],
}

# MORI_BENCH_ONLY=a,b: only the steps whose names contain a or b (and the floor).
only = [o for o in os.environ.get("MORI_BENCH_ONLY", "").split(",") if o]
for fn in PLANS[backend]:
    name = fn.__name__
    if only and name != "floor" and not any(o in name for o in only):
        continue
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (one failed step must not end the round)
        H.record("step_failed", 0, name, error=f"{type(e).__name__}: {str(e)[:300]}")
        torch.cuda.synchronize()
dist.barrier()
dist.destroy_process_group()
