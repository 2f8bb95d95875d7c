# SPDX-License-Identifier: MIT
"""One-shot all-to-all over symmetric memory with a CUDA/HIP kernel compiled
at run time (NVRTC/hiprtc through torch), reading peers through
`hdl.buffer_ptrs_dev`. Each (peer, slice) pair gets its own block, so a chunk
is spread over many blocks. Run:
    torchrun --nproc_per_node=2 a2a_cuda.py [MORI|default|NVSHMEM]
"""
import sys

import a2a_common
import torch

KERNEL = r"""
extern "C" __global__ void a2a_push(const int4* src, unsigned ptrs_lo, unsigned ptrs_hi,
                                    int chunk_vec, int my_rank, int world, int blocks_per_peer) {
  // chunk_vec: 16-byte words per peer chunk.
  void** ptrs = (void**)(((unsigned long long)ptrs_hi << 32) | ptrs_lo);
  int peer_idx = blockIdx.x / blocks_per_peer, slice = blockIdx.x % blocks_per_peer;
  int peer = (my_rank + 1 + peer_idx) % world;
  int4* dst = (int4*)ptrs[peer] + (long long)my_rank * chunk_vec;
  const int4* s = src + (long long)peer * chunk_vec;
  int per = (chunk_vec + blocks_per_peer - 1) / blocks_per_peer;
  int lo = slice * per, hi = min(lo + per, chunk_vec);
  for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) dst[i] = s[i];
}
"""

_kernel = None


def a2a_kernel():
    global _kernel
    if _kernel is None:
        _kernel = torch.cuda._compile_kernel(KERNEL, "a2a_push")
    return _kernel


def a2a_push(src, hdl, chunk_bytes, rank, world, blocks_per_peer=16, threads=512):
    ptrs = hdl.buffer_ptrs_dev
    a2a_kernel()(
        grid=((world - 1) * blocks_per_peer, 1, 1),
        block=(threads, 1, 1),
        args=[src, ptrs & 0xFFFFFFFF, ptrs >> 32, chunk_bytes // 16, rank, world, blocks_per_peer],
    )


def main():
    rank, world, symm_mem, group = a2a_common.setup(sys.argv[1] if len(sys.argv) > 1 else "MORI")
    chunk = 1 << 20
    buf, hdl, src = a2a_common.buffers(symm_mem, group, rank, world, chunk // 4)
    a2a_push(src, hdl, chunk, rank, world)
    hdl.barrier()
    torch.cuda.synchronize()
    assert a2a_common.arrived_correctly(buf, rank, world, chunk // 4), f"rank {rank}: wrong data"
    print(f"rank {rank}: all-to-all correct")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
