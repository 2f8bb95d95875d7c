# SPDX-License-Identifier: MIT
"""A torch group that spans nodes (torchrun --nproc_per_node=2): every rank
declares a node of its own (MORI_HOST_ID), so no peer is load/store
reachable and the backend makes the group's communicator with the rdma
transport for them (with the copy-engine NIC loaded from MORI_TEST_CE_NIC_LIBRARY
standing in for the NIC, so this runs on one machine, even with both
ranks on one GPU). What torch's contract asks of such a group: rendezvous
works, buffer pointers are published only where load/store reaches,
get_buffer of another node's rank is refused, barrier / put_signal /
wait_signal reach the other node through the proxy (and time out naming
the peer), and mori's fused collectives, which need load/store, refuse
with an error instead of running on half the group."""
import os
import sys
import time

os.environ["MORI_HOST_ID"] = "node-" + os.environ["RANK"]
os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, needs_ranks, rank, refused, summary, world  # noqa: E402

dev = torch.device("cuda", rank % torch.cuda.device_count())
torch.cuda.set_device(dev)
dist.init_process_group("gloo")  # NCCL refuses two ranks on one GPU
group = dist.group.WORLD.group_name
import mori.allocator  # noqa: E402,F401
import ce_nic  # noqa: E402

ce_nic.install()  # the copy-engine NIC when MORI_TEST_CE_NIC_LIBRARY names it
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402

symm_mem.set_backend("MORI")
peer = (rank + 1) % world
state = {}


@check("a group across nodes: rendezvous works; only this rank's own buffer is load/store reachable")
def _():
    needs_ranks(2)
    t = symm_mem.empty(1 << 20, dtype=torch.uint8, device=dev)
    hdl = symm_mem.rendezvous(t, group)
    state["t"], state["hdl"] = t, hdl
    ptrs = list(hdl.buffer_ptrs)
    assert ptrs[rank] == t.data_ptr(), (ptrs, t.data_ptr())
    assert all(p == 0 for r, p in enumerate(ptrs) if r != rank), f"another node's buffer published: {ptrs}"
    if hasattr(hdl, "world_within_direct_access"):
        assert not hdl.world_within_direct_access()


@check("get_buffer of another node's rank is refused; this rank's own works")
def _():
    needs_ranks(2)
    hdl = state["hdl"]
    refused(lambda: hdl.get_buffer(peer, (16,), torch.uint8), "across nodes")
    hdl.get_buffer(rank, (16,), torch.uint8).fill_(7)


def waited(fn):
    """Seconds until fn's stream work is done."""
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


@check("barrier across nodes meets every rank (a rank that comes 0.3 s late holds the others), 20 rounds")
def _():
    needs_ranks(2)
    hdl = state["hdl"]
    for i in range(20):
        hdl.barrier(channel=i % 8, timeout_ms=15000)
    torch.cuda.synchronize()
    dist.barrier()
    if rank == 0:
        time.sleep(0.3)
    took = waited(lambda: hdl.barrier(timeout_ms=15000))
    if rank != 0:
        assert took > 0.2, f"the barrier returned after {took * 1e3:.0f} ms, before rank 0 arrived"


@check("put_signal / wait_signal across nodes: the wait lasts until the late peer signals")
def _():
    needs_ranks(2)
    hdl = state["hdl"]
    dist.barrier()
    # Bounded: a signal that never comes is a RuntimeError naming the peer, not a hang.
    if rank == 0:
        time.sleep(0.3)
        hdl.put_signal(peer, channel=2, timeout_ms=15000)
        hdl.wait_signal(peer, channel=2, timeout_ms=15000)
    else:
        took = waited(lambda: hdl.wait_signal(peer, channel=2, timeout_ms=15000))
        hdl.put_signal(peer, channel=2, timeout_ms=15000)
        assert took > 0.2, f"wait_signal returned after {took * 1e3:.0f} ms, before rank 0 signalled"
    torch.cuda.synchronize()
    # Ping-pong, ops queued back to back without a host wait in between
    # (timeout 0), then one bounded wait for the last: 50 rounds.
    for i in range(50):
        if rank == 0:
            hdl.put_signal(peer, channel=3)
            hdl.wait_signal(peer, channel=3)
        else:
            hdl.wait_signal(peer, channel=3)
            hdl.put_signal(peer, channel=3)
    hdl.barrier(channel=3, timeout_ms=15000)


@check("a wait across nodes that nobody answers raises RuntimeError naming the peer")
def _():
    needs_ranks(2)
    hdl = state["hdl"]
    refused(lambda: hdl.wait_signal(peer, channel=5, timeout_ms=100), f"rank {peer}")
    dist.barrier()


@check("mori's collectives refuse a group across nodes clearly")
def _():
    needs_ranks(2)
    t = state["t"]
    out = symm_mem.empty(1 << 20, dtype=torch.uint8, device=dev)
    symm_mem.rendezvous(out, group)
    refused(lambda: torch.ops.mori.all_to_all(t, out, group), "load/store reachable")


sys.exit(0 if summary() else 1)
