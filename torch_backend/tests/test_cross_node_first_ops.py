# SPDX-License-Identifier: MIT
"""The first window ops of a process across declared nodes (torchrun
--nproc_per_node=2, one GPU is enough): put_signal and wait_signal queued
back to back with no timeout, before any of their kernels ever ran. With
CUDA's lazy module loading the second kernel's first launch waited for the
first, which waited for the copy-engine NIC's word kernel, which could
not start: the first round hung. mori now loads its window-op kernels
before their first launch; 300 rounds with random delays must pass (a hang
is caught by the watchdog and printed as a FAIL naming where it stuck)."""
import faulthandler
import os
import random
import sys
import time

os.environ["MORI_HOST_ID"] = "node-" + os.environ["RANK"]
os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, needs_ranks, rank, summary, world  # noqa: E402

dev = torch.device("cuda", rank % torch.cuda.device_count())
torch.cuda.set_device(dev)
dist.init_process_group("gloo")
import mori.allocator  # noqa: E402,F401
import ce_nic  # noqa: E402

ce_nic.install()  # the copy-engine NIC when MORI_TEST_CE_NIC_LIBRARY names it
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402

symm_mem.set_backend("MORI")
peer = (rank + 1) % world


@check("the first put_signal + wait_signal of the process, queued back to back (no timeout), then 300 rounds with random delays")
def _():
    needs_ranks(2)
    buf = symm_mem.empty(1 << 16, dtype=torch.uint8, device=dev)
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
    # A hang prints every thread's stack and ends the process (the check fails).
    faulthandler.dump_traceback_later(60, exit=True)
    rng = random.Random(rank)
    for _ in range(300):
        dist.barrier()
        if rank == 0:
            time.sleep(rng.random() * 0.01)
            hdl.put_signal(peer, channel=2)
            hdl.wait_signal(peer, channel=2)
        else:
            hdl.wait_signal(peer, channel=2)
            torch.cuda.synchronize()
            hdl.put_signal(peer, channel=2)
        torch.cuda.synchronize()
    faulthandler.cancel_dump_traceback_later()


summary()
