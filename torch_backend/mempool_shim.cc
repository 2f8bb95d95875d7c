// SPDX-License-Identifier: MIT
// torch.cuda.MemPool-backed symmetric tensors (symm_mem.get_mem_pool): the
// one part of the backend that needs torch's device library, because torch
// builds MemPool allocators from CUDAPluggableAllocator. A small library of
// its own (libmori_torch_mempool.so), built per platform, that forwards to
// the device-generic backend's C entry points.
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

extern "C" void *mori_torch_alloc(size_t size, int device);
extern "C" void mori_torch_free(void *ptr);

namespace {

struct Registration {
  Registration() {
    auto pool = torch::cuda::CUDAPluggableAllocator::createCustomAllocator(
        [](size_t size, int device, cudaStream_t) { return mori_torch_alloc(size, device); },
        [](void *ptr, size_t, int, cudaStream_t) { mori_torch_free(ptr); });
    c10d::symmetric_memory::register_mempool_allocator(c10::DeviceType::CUDA, pool);
  }
} registration;

}  // namespace
