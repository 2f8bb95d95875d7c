# SPDX-License-Identifier: MIT
"""One-shot all-to-all over symmetric memory in Triton, reading peers
through `hdl.buffer_ptrs_dev`, each chunk sliced over BPP blocks. Run:
    torchrun --nproc_per_node=2 a2a_triton.py [MORI|default|NVSHMEM]
"""
import sys

import a2a_common
import torch
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["chunk_elems", "my_rank", "world"])
def a2a_push_kernel(src, peer_ptrs, chunk_elems, my_rank, world, BPP: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    peer = (my_rank + 1 + pid // BPP) % world
    sub = pid % BPP
    ptrs = peer_ptrs.to(tl.pointer_type(tl.uint64))
    dst = tl.load(ptrs + peer).to(tl.pointer_type(tl.int32)) + my_rank.to(tl.int64) * chunk_elems
    s = src + peer.to(tl.int64) * chunk_elems
    per = tl.cdiv(chunk_elems, BPP)
    lo = sub * per
    for off in range(lo, lo + per, BLOCK):
        o = off + tl.arange(0, BLOCK)
        m = (o < lo + per) & (o < chunk_elems)
        tl.store(dst + o, tl.load(s + o, mask=m), mask=m)


def a2a_push(src, hdl, chunk_elems, rank, world, bpp=16, block=2048):
    a2a_push_kernel[((world - 1) * bpp,)](src, hdl.buffer_ptrs_dev, chunk_elems, rank, world, BPP=bpp, BLOCK=block)


def main():
    rank, world, symm_mem, group = a2a_common.setup(sys.argv[1] if len(sys.argv) > 1 else "MORI")
    n = (1 << 20) // 4
    buf, hdl, src = a2a_common.buffers(symm_mem, group, rank, world, n)
    a2a_push(src, hdl, n, rank, world)
    hdl.barrier()
    torch.cuda.synchronize()
    assert a2a_common.arrived_correctly(buf, rank, world, n), f"rank {rank}: wrong data"
    print(f"rank {rank}: all-to-all correct")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
