// SPDX-License-Identifier: MIT
/* What mori's device headers take from the CUDA toolkit, spelled with
 * clang's own NVPTX builtins, so the NVPTX bitcode is compiled by clang
 * with -nocudainc -nocudalib and needs no CUDA headers at all (clang's CUDA
 * wrapper headers want a toolkit clang knows; CUDA 13 is newer than
 * clang 22.1 supports). Force-included (-include) in the NVPTX compile of
 * mori_triton_device.cu only. */
#ifndef MORI_TRITON_CUDA_PRELUDE_H
#define MORI_TRITON_CUDA_PRELUDE_H

#if !defined(__CUDA__) || defined(__HIP__)
#error "cuda_prelude.h is for clang's CUDA mode (-x cuda --cuda-device-only)"
#endif

/* mori/device/portability.h picks the CUDA branch on __CUDACC__, which
 * clang's CUDA mode leaves to the toolkit's headers. */
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif

#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))

/* threadIdx, blockDim, ...: clang's resource header, no toolkit needed. */
#include <__clang_cuda_builtin_vars.h>

#define warpSize 32

static __device__ __forceinline__ void __syncwarp(void) { __nvvm_bar_warp_sync(0xffffffffu); }
static __device__ __forceinline__ void __threadfence_system(void) { __nvvm_membar_sys(); }
static __device__ __forceinline__ void __trap(void) { __builtin_trap(); }
/* Lane `lane`'s 64-bit value to every lane (GPU posting's warp batch). */
static __device__ __forceinline__ long long __shfl_sync(unsigned int mask, long long v, int lane) {
  unsigned int lo = (unsigned int)__nvvm_shfl_sync_idx_i32(mask, (int)v, lane, 0x1f);
  unsigned int hi = (unsigned int)__nvvm_shfl_sync_idx_i32(mask, (int)(v >> 32), lane, 0x1f);
  return (long long)(((unsigned long long)hi << 32) | lo);
}
static __device__ __forceinline__ unsigned int atomicAdd(unsigned int *p, unsigned int v) {
  return __nvvm_atom_add_gen_i((int *)p, (int)v);
}

#endif
