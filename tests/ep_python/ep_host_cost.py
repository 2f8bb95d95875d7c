# SPDX-License-Identifier: MIT
"""The host cost of one eager dispatch + combine from Python on the host
platform (one PE, CPU tensors, one small token so the work itself is
small), against two plain torch kernels in the same loop (x.add_(1) twice),
and how much of it is the library call itself (the same two calls made
straight through ctypes with nothing checked). A measurement, not a test:
    MORI_LIB=bazel-bin/libmori.so MORI_SHMEM_HEAP_SIZE=64M PYTHONPATH=python:<torch> \\
        python3 tests/ep_python/ep_host_cost.py [iterations]"""
import os
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "shmem"))
from uid_file import share_unique_id  # noqa: E402

import mori  # noqa: E402
import mori.ops  # noqa: E402
from mori import shmem  # noqa: E402
from mori._lib import lib  # noqa: E402


def best_per_call(body, iters, rounds=7):
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iters):
            body()
        best = min(best, (time.perf_counter() - start) / iters)
    return best * 1e6


def main(iters=20000):
    with tempfile.TemporaryDirectory() as tmp:
        uid = share_unique_id(shmem, 0, os.path.join(tmp, "uid"))
        shmem.shmem_init_attr(shmem.MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 1, uid)
    config = mori.ops.EpDispatchCombineConfig(torch.bfloat16, 0, 1, 8, 0, 4, 4, 1, 8, 2, gpu_per_node=1)
    op = mori.ops.EpDispatchCombineOp(config)
    x = torch.ones(1, 8, dtype=torch.bfloat16)
    w = torch.ones(1, 2)
    idx = torch.tensor([[0, 5]], dtype=torch.int32)
    out, ow, _, _, _ = op.dispatch(x, w, None, idx)
    y = torch.zeros(op.max_recv_tokens, 8, dtype=torch.bfloat16)
    op.combine(y, ow, idx)
    z = torch.zeros(1024)

    def two_kernels():
        z.add_(1)
        z.add_(1)

    def ep():
        op.dispatch(x, w, None, idx)
        op.combine(y, ow, idx)

    launch = op._default_launch
    raw = (op._ep, x.data_ptr(), w.data_ptr(), idx.data_ptr(), y.data_ptr(), ow.data_ptr())

    def c_only():
        lib.mori_ep_dispatch(raw[0], raw[1], raw[2], None, raw[3], 1, launch, None)
        lib.mori_ep_combine_rows(raw[0], raw[4], y.shape[0], 1, raw[5], ow.shape[0], 0, launch, None)

    op.check_every_call = False

    def ep_unchecked():
        op.dispatch(x, w, None, idx)
        op.combine(y, ow, idx)

    results = {}
    for name, body in (("two torch kernels (x.add_(1) twice)", two_kernels), ("dispatch + combine", ep),
                       ("dispatch + combine, check_every_call off", ep_unchecked),
                       ("the two library calls alone (ctypes)", c_only)):
        results[name] = best_per_call(body, iters)
    for name, us in results.items():
        print(f"{name:45s} {us:7.2f} us per iteration")
    python = results["dispatch + combine"] - results["the two library calls alone (ctypes)"]
    print(f"{'Python layer (dispatch + combine - library)':45s} {python:7.2f} us per iteration")
    op.destroy()
    mori.finalize()


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
