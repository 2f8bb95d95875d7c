# SPDX-License-Identifier: MIT
"""MORI_TRAP_ON_DEVICE_ERROR=1 under CUDA-graph capture (torchrun
--nproc_per_node=1, its own process: a trap ends the CUDA context). A
captured wait_signal that times out cannot raise on the host (nothing waits
during capture); with the variable set the kernel records the timeout and
traps, so the replay fails at the next synchronisation — torch's default
backend behaves the same. Then the record is still readable: the error of
the next MORI call names the peer and the channel."""
import os
import sys

os.environ["MORI_TRAP_ON_DEVICE_ERROR"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

rank = int(os.environ["RANK"])
dev = torch.device("cuda", rank % torch.cuda.device_count())
torch.cuda.set_device(dev)
dist.init_process_group("gloo")
import mori.allocator  # noqa: E402,F401
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402

symm_mem.set_backend("MORI")
NAME = "a captured wait_signal that times out traps at replay; the next synchronisation raises; the record names the wait"


def result(ok, why=""):
    print(f"{'PASS' if ok else 'FAIL'} {NAME}{'' if ok else ': ' + why}", flush=True)
    print(f"SUMMARY {int(ok)} passed, {int(not ok)} failed", flush=True)
    os._exit(0 if ok else 1)  # the context is gone: skip every teardown


t = symm_mem.empty(4096, dtype=torch.uint8, device=dev)
hdl = symm_mem.rendezvous(t, dist.group.WORLD.group_name)
stream = torch.cuda.Stream()
g = torch.cuda.CUDAGraph()
with torch.cuda.stream(stream):
    with torch.cuda.graph(g, stream=stream):
        # Nobody signals this rank on channel 3: the wait runs out at 20 ms.
        hdl.wait_signal(rank, channel=3, timeout_ms=20)
try:
    g.replay()
    torch.cuda.synchronize()
except RuntimeError as e:  # torch.AcceleratorError is a RuntimeError
    if "CUDA error" not in str(e):
        result(False, f"the replay failed, but not with a CUDA error: {e}")
    try:
        hdl.barrier(channel=0)
    except RuntimeError as e2:
        text = str(e2)
        print(f"next call: {text[:300]}", flush=True)
        if "timed out" in text and "channel 3" in text:
            result(True)
        result(False, f"the next MORI call did not report the recorded wait: {text[:300]}")
    result(False, "the next MORI call raised nothing")
result(False, "the replay of a timed-out wait ran on without an error (no trap)")
