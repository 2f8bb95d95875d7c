// SPDX-License-Identifier: MIT
// Kernels of the shmem GPU test (mori/device/shmem.h on a real GPU), behind
// a C interface so the test itself is host C++.
#ifndef MORI_TESTS_GPU_SHMEM_KERNELS_H
#define MORI_TESTS_GPU_SHMEM_KERNELS_H

#include "mori/device/impl/shmem__types.h"

#ifdef __cplusplus
extern "C" {
#endif

const char *gpu_shmem_last_error(void);
// One block: put `words` uint64 of this PE's pattern into row `mype` of
// `data` on the next PE, signal it, wait for the previous PE's signal to
// reach `round`, then meet every PE at the device barrier. *device_rc gets
// the first device-side code (0: all fine).
int gpu_shmem_ring(mori_shmem_device_state_t st, uint64_t *data, uint64_t words, uint64_t *sig, uint64_t round,
                   uint64_t timeout_ns, int *device_rc);
// The pattern PE `writer` puts for PE `reader`, word i (host side of the check).
uint64_t gpu_shmem_pattern(int writer, int reader, uint64_t i, uint64_t round);
// shmem_dev_ptr_p2p(st, ptr, pe), computed by a kernel.
int gpu_shmem_ptr_p2p(mori_shmem_device_state_t st, const void *ptr, int pe, void **out);
int gpu_shmem_copy_to_host(void *dst, const void *src, uint64_t bytes);
int gpu_shmem_zero(void *p, uint64_t bytes);
// A module loaded at run time (CUDA: hand-written PTX that defines
// globalGpuStates and a kernel reading it): loads it, and after
// shmem_module_init reads back mype, npes and heap_base through the kernel.
// -95 (MORI_ENOTSUP) where the platform has no PTX loader (HIP).
int gpu_shmem_module_load(void **module);
int gpu_shmem_module_read(void *module, int *mype, int *npes, uint64_t *heap_base);
int gpu_shmem_module_unload(void *module);

#ifdef __cplusplus
}
#endif

#endif
