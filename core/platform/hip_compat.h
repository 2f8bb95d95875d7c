// SPDX-License-Identifier: MIT
/* What ROCm versions spell differently, in one place.
 *
 * - The fabric handle type is missing from older headers; its value is 0x8,
 *   as in CUDA's CU_MEM_HANDLE_TYPE_FABRIC.
 * - hipMemImportFromShareableHandle's POSIX-fd argument: ROCm releases before
 *   7.1 read the fd through the pointer (pass &fd); from 7.1 on, the fd value
 *   itself travels in the pointer, as in CUDA.
 * - hipMemAllocationProp's handle field is requestedHandleType up to ROCm 6
 *   and requestedHandleTypes from ROCm 7. */
#ifndef MORI_CORE_PLATFORM_HIP_COMPAT_H
#define MORI_CORE_PLATFORM_HIP_COMPAT_H

#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>

#define MORI_HIP_HANDLE_TYPE_FABRIC ((hipMemAllocationHandleType)0x8)
/* Fine-grained device memory through the VMM API (ROCm 7.2's
 * hipMemAllocationTypeUncached); older runtimes refuse the value, and the
 * error names the allocation that asked for it. */
#define MORI_HIP_ALLOC_UNCACHED ((hipMemAllocationType)0x40000000)

#if HIP_VERSION >= 70100000
#define MORI_HIP_IMPORT_FD_ARG(fd_ptr) ((void *)(uintptr_t)(*(fd_ptr)))
#else
#define MORI_HIP_IMPORT_FD_ARG(fd_ptr) ((void *)(fd_ptr))
#endif

#if HIP_VERSION_MAJOR >= 7
#define MORI_HIP_PROP_HANDLE_TYPES(prop) ((prop).requestedHandleTypes)
#else
#define MORI_HIP_PROP_HANDLE_TYPES(prop) ((prop).requestedHandleType)
#endif

/* hipPointerAttribute_t's memory type: `type` from ROCm 6 on, `memoryType` before. */
#if HIP_VERSION_MAJOR >= 6
#define MORI_HIP_POINTER_TYPE(attr) ((attr).type)
#else
#define MORI_HIP_POINTER_TYPE(attr) ((attr).memoryType)
#endif

#endif
