# SPDX-License-Identifier: MIT
"""What the backend's GPU test files share: the job's set-up, `check`,
which runs one check on every rank and prints "PASS name" or "FAIL name:
why" on rank 0 (any rank's failure counts), and the reference collectives
the checks compare against.

A job may have more ranks than GPUs (two ranks sharing one GPU, each with
its own context): NCCL refuses that, so such a job runs over gloo and the
references move raw bytes through host memory (SHARED_GPU says which)."""
import datetime
import faulthandler
import math
import os
import traceback

import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
results = []
NGPU = torch.cuda.device_count()
SHARED_GPU = world > NGPU  # ranks share GPUs: no NCCL


def setup_job():
    """Selects this rank's GPU (rank modulo the GPUs) and starts the default
    process group: NCCL with a GPU per rank, gloo when ranks share one.
    Returns the device."""
    dev = torch.device("cuda", rank % NGPU)
    torch.cuda.set_device(dev)
    # A check that fails on one rank mid-way leaves the ranks' collectives
    # out of step: bounded, so the job ends instead of hanging.
    timeout = datetime.timedelta(seconds=int(os.environ.get("MORI_TEST_PG_TIMEOUT_S", "180")))
    if SHARED_GPU:
        # torch's own backends refuse a group on overlapping devices unless
        # told; MORI allows it (each process its own context).
        os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1"
        dist.init_process_group("gloo", timeout=timeout)
    else:
        dist.init_process_group("nccl", device_id=dev, timeout=timeout)
    return dev


class Skip(Exception):
    """Raised by a check that cannot run here (e.g. it needs two ranks):
    printed as SKIP with the reason, counted neither passed nor failed."""


def raises(kind, fn, *words):
    """fn() must raise a `kind` whose text holds each of `words`; returns it."""
    try:
        fn()
    except kind as e:
        for w in words:
            assert w in str(e), f"rank {rank}: the {kind.__name__} does not say {w!r}: {e}"
        return e
    raise AssertionError(f"rank {rank}: no {kind.__name__} (expected one saying {words})")


def refused(fn, words):
    """fn() must raise a RuntimeError whose text holds `words`."""
    raises(RuntimeError, fn, words)


def needs_ranks(n):
    if world < n:
        raise Skip(f"needs {n} ranks, the job has {world}")


def needs_own_gpu():
    if SHARED_GPU:
        raise Skip(f"needs a GPU per rank ({world} ranks share {NGPU} GPU(s))")


# Reference collectives: NCCL's with a GPU per rank; with shared GPUs, gloo
# over the tensors' bytes in host memory (dtype-agnostic, exact).
def _rows_as_bytes(x):
    """x as a CPU uint8 tensor of shape (rows, bytes per row): splits along
    dim 0 keep their meaning."""
    rows = x.shape[0] if x.dim() else 1
    return x.detach().contiguous().reshape(rows, math.prod(x.shape[1:])).view(torch.uint8).cpu()


def _from_bytes(b, like):
    return b.to(like.device).view(like.dtype).reshape(like.shape)


def ref_all_gather(x):
    """Every rank's x, in rank order."""
    if not SHARED_GPU:
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x.contiguous())
        return parts
    b = _rows_as_bytes(x)
    parts = [torch.empty_like(b) for _ in range(world)]
    dist.all_gather(parts, b)
    return [_from_bytes(p, x) for p in parts]


def ref_all_reduce(x):
    """The sum of every rank's x (a new tensor). Shared GPUs: summed in
    float32 in rank order, then rounded to x's dtype."""
    if not SHARED_GPU:
        y = x.clone()
        dist.all_reduce(y)
        return y
    parts = ref_all_gather(x)
    acc = parts[0].float()
    for p in parts[1:]:
        acc = acc + p.float()
    return acc.to(x.dtype)


def ref_reduce_scatter(out, x):
    """out = this rank's 1/world of the sum of every rank's x."""
    if not SHARED_GPU:
        dist.reduce_scatter_tensor(out, x.clone())
        return
    out.copy_(ref_all_reduce(x).reshape(world, -1)[rank].reshape(out.shape))


def ref_all_to_all_single(out, inp, out_splits=None, in_splits=None):
    """torch.distributed.all_to_all_single's result (splits in rows of dim 0)."""
    if not SHARED_GPU:
        dist.all_to_all_single(out, inp, out_splits, in_splits)
        return
    b_in = _rows_as_bytes(inp)
    b_out = torch.empty((out.shape[0] if out.dim() else 1, b_in.shape[1]), dtype=torch.uint8)
    dist.all_to_all_single(b_out, b_in, out_splits, in_splits)
    out.copy_(_from_bytes(b_out, out))


def a2a_int_pattern(chunk, mul, device):
    """What an all-to-all delivers here when every rank r sends
    `arange(world * chunk) * mul + r * 1000003 + k` (int32, wrapping) with
    k = 0: block src holds src's elements rank*chunk .. (rank+1)*chunk.
    Add k for the real call. Lets a check compare on the GPU with no
    collective (with shared GPUs, and inside CUDA-graph capture)."""
    mine = torch.arange(rank * chunk, (rank + 1) * chunk, dtype=torch.int32, device=device).mul_(mul)
    return torch.cat([mine + src * 1000003 for src in range(world)])


def ref_int_a2a(ref, inp, pattern, k):
    """ref = the all-to-all of inp, which every rank made as
    a2a_int_pattern's input plus k: NCCL's with a GPU per rank; with shared
    GPUs pattern + k, computed here (no host synchronisation)."""
    if SHARED_GPU:
        torch.add(pattern, k, out=ref)
    else:
        dist.all_to_all_single(ref, inp)


# A check still running after this many seconds prints every thread's Python
# stack on stderr (once; the check goes on), so a hang names its line.
STALL_S = int(os.environ.get("MORI_TEST_CHECK_STALL_S", "120"))
# Only the checks whose name holds this text run (the same on every rank).
ONLY = os.environ.get("MORI_TEST_ONLY", "")


def check(name):
    def wrap(fn):
        if ONLY and ONLY not in name:
            return fn
        faulthandler.dump_traceback_later(STALL_S, exit=False)
        try:
            fn()
            ok, why = True, ""
        except Skip as e:
            faulthandler.cancel_dump_traceback_later()
            if rank == 0:
                print(f"SKIP {name}: {e}", flush=True)
            dist.barrier()
            return fn
        except Exception as e:  # noqa: BLE001
            ok, why = False, f"{type(e).__name__}: {str(e)[:300]}"
            traceback.print_exc()
        try:
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            ok, why = False, why or f"synchronize: {e}"
        finally:
            faulthandler.cancel_dump_traceback_later()
        dist.barrier()
        outcomes = [None] * world
        dist.all_gather_object(outcomes, (ok, why))
        bad = [(r, w) for r, (o, w) in enumerate(outcomes) if not o]
        if rank == 0:
            print(f"PASS {name}" if not bad else f"FAIL {name}: " + "; ".join(f"rank {r}: {w}" for r, w in bad), flush=True)
        results.append(not bad)
        return fn

    return wrap


def summary():
    if rank == 0:
        print(f"SUMMARY {sum(results)} passed, {len(results) - sum(results)} failed", flush=True)
    return all(results)
