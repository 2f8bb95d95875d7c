// SPDX-License-Identifier: MIT
/* Symmetric-memory allocations. alloc and free are local (never collective):
 * torch allocates and frees at any time on any rank, in any order. A window
 * (mori/window.h) makes an allocation addressable by the peers.
 *
 * Allocations are carved from the device's symmetric heap (mori/heap.h)
 * unless MORI_SHMEM_MODE=isolation, or the request is larger than a vmm
 * chunk: then they get a mapping of their own. Either way nothing waits for
 * the device and the memory is not zeroed (torch.empty's semantics). */
#ifndef MORI_MEM_H
#define MORI_MEM_H

#include "mori/error.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_mem_attr {
  int device;             /* -1: the current device */
  size_t signal_pad_size; /* bytes of signal pad each window of this memory carries (0: none) */
  size_t alignment;       /* of the returned pointer; a power of two (0: 4096) */
} mori_mem_attr_t;

typedef struct mori_mem_info {
  void *base;             /* what mori_mem_alloc returned */
  size_t size;            /* bytes asked for */
  size_t mapped_size;     /* rounded up to the granularity */
  size_t offset;          /* of the queried pointer from base */
  size_t signal_pad_size;
  int device;
  int handle_type;        /* mori_handle_type_t */
  int registered;         /* 1: memory made elsewhere (mori_mem_register) */
  int heap;               /* 1: carved from the device's symmetric heap */
} mori_mem_info_t;

MORI_API void mori_mem_attr_init(mori_mem_attr_t *attr);
/* attr may be NULL (current device, no pad, 4096-byte alignment). Not
 * zeroed. Heap exhaustion is MORI_ENOMEM naming the request and the free
 * space. */
MORI_API int mori_mem_alloc(size_t size, const mori_mem_attr_t *attr, void **out);
/* Local, and never waits for the device: windows still using the memory
 * keep it alive until destroyed, and heap memory is reused only after the
 * device has been synchronised. */
MORI_API int mori_mem_free(void *ptr);
/* Adopts memory mapped elsewhere (a VMM allocation, e.g. torch's) so windows
 * can be made of it; *base receives the start of that allocation. */
MORI_API int mori_mem_register(void *ptr, const mori_mem_attr_t *attr, void **base);
/* Adopts [ptr, ptr + size) of memory from the runtime's plain allocator
 * (cudaMalloc / hipMalloc, e.g. torch's caching allocator; on the host
 * platform a shared file mapping made elsewhere) without a copy. Peers reach
 * it through the runtime's IPC handle of the allocation that holds it,
 * opened at an address the runtime picks: windows of it have a pointer
 * table and no flat span (the device view's stride is 0), and each rank's
 * range may sit anywhere in an allocation of any size. attr: device (-1:
 * current) and signal_pad_size. The owner keeps the allocation alive until
 * mori_mem_free(ptr), after the windows of it. Errors: the range overlaps
 * mori memory (MORI_EEXIST), runs past its allocation (MORI_ERANGE), is not
 * runtime device memory (MORI_ENOT_OWNED), or its allocation has no IPC
 * handle (MORI_ENOTSUP: virtual-memory mappings go to mori_mem_register). */
MORI_API int mori_mem_register_range(void *ptr, size_t size, const mori_mem_attr_t *attr);
/* Looks up the allocation covering ptr (interior pointers allowed). */
MORI_API int mori_mem_query(const void *ptr, mori_mem_info_t *info);
/* Live allocations of this process (registered ones included). */
MORI_API int mori_mem_count(void);

/* Tears down everything mori holds in this process, in order: MORI Shmem
 * (as shmem_finalize), then windows (deregister, unmap, release), then
 * allocations. Collective and EP contexts made before it refuse every
 * call after it (MORI_EINVAL: make them anew); destroying them is still
 * right. Comms stay usable. Idempotent; never collective. Use it before
 * the GPU runtime shuts down. */
MORI_API int mori_finalize(void);

MORI_EXTERN_C_END

#endif
