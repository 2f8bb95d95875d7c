# SPDX-License-Identifier: MIT
"""The Triton kernels of seed 002's Iris example that the address-map
suites run on every kind of memory (a MORI tensor, an adopted tensor, a
shmem heap allocation): translate + store, and a copy into another
allocation translated with that allocation's own map."""
import triton
import triton.language as tl

from mori import triton as mt


@triton.jit
def iris_store_kernel(buf, value, peer, peer_bases, my_rank, n, BLOCK: tl.constexpr):
    # Seed 002's example: translate a local pointer into the peer's copy of
    # the allocation, then store through it.
    o = tl.arange(0, BLOCK)
    mt.store(buf + o, value + o, peer, peer_bases, my_rank, mask=o < n)


@triton.jit
def copy_between_kernel(dst, src, n, peer, dst_bases, my_rank, BLOCK: tl.constexpr):
    # src and dst are two allocations: only dst's map translates dst.
    mt.put(dst, src, n, peer, dst_bases, my_rank, BLOCK)
