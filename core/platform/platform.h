// SPDX-License-Identifier: MIT
/* The platform layer: every GPU-runtime call of mori goes through these
 * functions. One implementation per build (--config=host|cuda|rocm),
 * libuv-style: one name, one definition per build. The two GPU platforms
 * share one implementation of the virtual-memory sequences (gpu_vmm.c) over
 * a name map (gpu_api.h); cuda.c and hip.c hold what really differs.
 *
 * Internal: visible to core and to the plug-in kit (transports, handle
 * libraries), never exported from a shared library. Every function returns
 * 0 or a negative MORI_E* with the message in mori_last_error(). Functions
 * that take a device make that device current for their duration and put
 * the caller's device (or context) back on the way out. */
#ifndef MORI_CORE_PLATFORM_H
#define MORI_CORE_PLATFORM_H

#include <stdbool.h>

#include "mori/types.h"

MORI_EXTERN_C_BEGIN

/* Devices one process can use (per-device caches and streams). */
enum { MORI_MAX_DEVICES = 64 };

/* Physical memory owned or imported by this process. */
typedef struct mori_pmem {
  uint64_t handle; /* driver handle (cuda/hip) or the memfd (host) */
  size_t size;
  int device;
  int handle_type;  /* mori_handle_type_t the memory was created or imported as */
  bool owned;       /* created here (as opposed to imported or retained) */
  char name[MORI_FABRIC_BLOB_SIZE]; /* host fabric: the shm object's name; legacy IPC: the runtime's handle */
  uint64_t offset;  /* legacy IPC: where the registered range starts inside the allocation */
} mori_pmem_t;

const char *mori_platform_name(void);
int mori_platform_device_count(int *count);
/* The device numbers a caller may name, 0 to *count - 1: the devices
 * there are on GPUs; on the host platform, where a device is a name for
 * a separate memory of the one CPU (the tests of several devices use
 * them), MORI_MAX_DEVICES. */
int mori_platform_device_names(int *count);
int mori_platform_current_device(int *device);
/* `device` as a caller gave it (`call` names the caller in messages): -1
 * is the current device; another must be one this process sees, else
 * MORI_EINVAL naming it and the count. */
int mori_platform_resolve_device(int device, const char *call, int *out);
/* A stable identity of the device (UUID on GPUs; zero on the host). */
int mori_platform_device_uuid(int device, uint8_t uuid[16]);
int mori_platform_granularity(int device, size_t *granularity);
/* The PCI address of `device` in sysfs's spelling ("0000:3b:00.0"), for
 * topology lookups. MORI_ENOTSUP on the host platform. */
int mori_platform_device_pci_bus_id(int device, char *out, size_t len);
/* What `device` is, for `mori_info`: its name ("NVIDIA H200") and
 * architecture ("sm_90" on cuda, "gfx 9.4" (the compute capability) on hip;
 * on the host platform the CPU's model and the machine ("x86_64")). */
int mori_platform_device_describe(int device, char *name, size_t name_len, char *arch, size_t arch_len);
/* Copies `size` host bytes into the global variable `name` of a loaded GPU
 * module (a CUmodule / hipModule_t) on `device`, on mori's own stream.
 * MORI_ENOENT when the module has no such variable, MORI_EMISMATCH when its
 * size differs, MORI_ENOTSUP on the host platform. */
int mori_platform_module_set_global(int device, void *module, const char *name, const void *src, size_t size);

/* Flags of mori_platform_mem_create. */
enum {
  /* Fine-grained ("uncached") memory where the GPU has it (AMD); CUDA's
   * virtual-memory allocations have no such kind and the host platform's
   * memory is coherent anyway: both create normal memory. */
  MORI_PMEM_UNCACHED = 1u << 0,
  /* Memory handed out piece by piece (a heap chunk): the host platform
   * backs its pages as the pieces are handed out (mori_platform_mem_back),
   * not all at creation, so a 1 GiB chunk holding a few small allocations
   * costs what they use. GPU memory is physical from its creation: nothing
   * changes there. */
  MORI_PMEM_BACK_ON_DEMAND = 1u << 1,
};
/* Memory made without MORI_PMEM_BACK_ON_DEMAND is backed whole at creation:
 * on the host platform its tmpfs pages are reserved (fallocate), so memory
 * that /dev/shm (or the system, for a memfd) cannot hold is MORI_ENOMEM
 * naming the size and what is free, here, not a SIGBUS at a first touch. */
int mori_platform_mem_create(int device, size_t size, int handle_type, unsigned flags, mori_pmem_t *out);
/* Backs [offset, offset + size) of memory made with MORI_PMEM_BACK_ON_DEMAND
 * now (host: reserves those pages of its file; MORI_ENOMEM as above when
 * they cannot be had). 0 on GPUs, whose memory is always backed. */
int mori_platform_mem_back(const mori_pmem_t *mem, size_t offset, size_t size);
/* Whether memory fresh from mori_platform_mem_create reads as zero (host:
 * a new file does) so that zeroing it can be skipped; GPU memory: false. */
bool mori_platform_fresh_memory_reads_zero(void);
int mori_platform_mem_release(mori_pmem_t *mem);
int mori_platform_mem_export(const mori_pmem_t *mem, int handle_type, mori_shareable_t *out);
int mori_platform_mem_import(const mori_shareable_t *shared, size_t size, int device, mori_pmem_t *out);
/* The physical memory behind an address mapped elsewhere (e.g. by torch):
 * its handle (retained), the base of that mapping and the mapping's size. */
int mori_platform_mem_retain(void *ptr, mori_pmem_t *out, void **base, size_t *size);

/* Legacy IPC (MORI_HANDLE_LEGACY_IPC): memory of the runtime's plain
 * allocator (cudaMalloc / hipMalloc; on the host platform a shared file
 * mapping made elsewhere), shared as the runtime's IPC handle of the whole
 * allocation and opened by a peer at an address the runtime chooses.
 *   ipc_describe  [ptr, ptr + size) must lie inside one allocation of
 *                 `device` (-1: the current one): *out
 *                 gets its handle, base (handle), size, device and the
 *                 range's offset; nothing is retained (the owner keeps the
 *                 allocation alive while it is registered)
 *   ipc_open      maps a peer's allocation into this process; *base is the
 *                 allocation's start here. Opening the same allocation
 *                 again returns the same address (counted: the runtime
 *                 maps a handle once per process)
 *   ipc_close     drops one open; the mapping goes with the last */
int mori_platform_ipc_describe(void *ptr, size_t size, int device, mori_pmem_t *out);
int mori_platform_ipc_open(const mori_shareable_t *shared, int device, void **base);
int mori_platform_ipc_close(int device, void *base);

int mori_platform_va_reserve(int device, size_t size, size_t alignment, void **out);
int mori_platform_va_release(int device, void *va, size_t size);
int mori_platform_mem_map(void *va, size_t size, const mori_pmem_t *mem);
int mori_platform_mem_unmap(int device, void *va, size_t size);
int mori_platform_set_access(void *va, size_t size, int device);
/* Releases a reserved span of `slots` ranges of `stride` bytes, unmapping
 * first the ranges whose mapped[i] is set. On the host one munmap of the
 * span does both (a span of a 256-rank team was 256 remaps and a munmap,
 * most of a job's teardown); a GPU runtime unmaps each range first. The
 * first failure is returned; the rest is still released. */
int mori_platform_span_release(int device, void *va, int slots, size_t stride, const bool *mapped);

/* Zeroes device memory and waits for it (the bytes read zero afterwards on
 * every stream). */
int mori_platform_memset_zero(int device, void *ptr, size_t size);
int mori_platform_memcpy(int device, void *dst, const void *src, size_t size);
int mori_platform_synchronize(int device);
/* Whether the device runs work asynchronously to the host (GPUs), so that
 * freed memory may still be in use until mori_platform_synchronize. The
 * host platform's "kernels" are the CPU's own calls: false. */
bool mori_platform_device_is_async(void);
/* Copies host bytes into device memory on a stream of mori's own and waits
 * for that copy alone: work queued on other streams is neither waited for
 * nor delayed. */
int mori_platform_upload(int device, void *dst, const void *src, size_t size);
/* The stream uploads go on, created on first use (NULL on the host platform
 * or when it cannot be created): tests hold it with work of their own to
 * show who waits for an upload and who does not. */
void *mori_platform_upload_stream(int device);
int mori_platform_can_access_peer(int device, int peer_device, bool *yes);

/* Device-visible memory for small tables (pointer tables, descriptors). */
int mori_platform_device_alloc(int device, size_t size, void **out);
int mori_platform_device_free(int device, void *ptr);

/* Host memory that kernels can read and write (a mailbox): *host for the
 * CPU, *dev for kernels (the same pointer on the host platform). */
int mori_platform_host_alloc_mapped(int device, size_t size, void **host, void **dev);
int mori_platform_host_free_mapped(void *host);
/* Makes host memory someone else allocated (a NIC's queues; with io set, a
 * NIC's doorbell page, mapped I/O memory) reachable by `device`'s kernels
 * at *dev (cuMemHostRegister / hipHostRegister; the host platform: itself).
 * ptr and size: whole pages. Memory already pinned and mapped by its owner
 * is only looked up: *registered says whether this call registered it (and
 * mori_platform_host_unregister must undo it). */
int mori_platform_host_register(int device, void *ptr, size_t size, bool io, void **dev, bool *registered);
int mori_platform_host_unregister(int device, void *ptr);
/* Whether `p` lies in device memory (cuMemAlloc / hipMalloc, a VMM
 * mapping), which kernels reach as it is, rather than host memory (mapped
 * or not). The host platform: false (one memory). */
int mori_platform_is_device_memory(int device, const void *p, bool *yes);

/* A dma-buf file descriptor for `device`'s memory [ptr, ptr + size), for
 * registering that memory with a NIC (ibv_reg_dmabuf_mr): *fd, and *offset,
 * where ptr lies within the buffer the fd describes (the driver exports
 * whole pages). cuda: cuMemGetHandleForAddressRange (DMA_BUF_FD); rocm:
 * hsa_amd_portable_export_dmabuf. MORI_ENOTSUP, with the reason, where
 * there is none: the host platform (plain host memory), a driver without
 * the call, memory or a device the driver does not export. Close the fd
 * with mori_platform_dmabuf_close once the NIC holds the memory. */
int mori_platform_dmabuf_export(int device, void *ptr, size_t size, int *fd, uint64_t *offset);
int mori_platform_dmabuf_close(int fd);

/* Stream-ordered signalling without a kernel: on `stream` (a CUstream /
 * hipStream_t; ignored on the host platform), write `value` to each of
 * `writes` (uint64 slots, peers' included) with a system-scope fence before
 * each, then wait until each of `waits` holds a value >= `value`. The wait
 * has no timeout on GPUs: callers use it only where "forever" was asked. */
int mori_platform_stream_signal_wait(void *stream, void *const *writes, int n_writes, void *const *waits, int n_waits,
                                     uint64_t value);
/* Whether mori_platform_stream_signal_wait works on `device`. */
int mori_platform_stream_memops_supported(int device, bool *yes);
/* Waits for everything queued on `stream` (NULL: the default stream). */
int mori_platform_stream_synchronize(int device, void *stream);
/* Whether `stream` is being captured into a graph (no waiting allowed). */
int mori_platform_stream_capturing(int device, void *stream, bool *yes);

/* Copy engine: asynchronous copies on a queue of their own (cuMemcpyAsync
 * on a stream on NVIDIA; hsa-runtime's SDMA engines on AMD; a worker thread
 * on the host platform). */
typedef struct mori_platform_queue mori_platform_queue_t;
int mori_platform_queue_create(int device, mori_platform_queue_t **out);
int mori_platform_queue_copy(mori_platform_queue_t *q, void *dst, const void *src, size_t size);
int mori_platform_queue_wait(mori_platform_queue_t *q);
int mori_platform_queue_destroy(mori_platform_queue_t *q);
/* One 64-bit word at `dst`, after every copy queued before it has finished:
 * stored with release semantics (add false) or added atomically at system
 * scope (add true). What a NIC does for a fenced inline write or a remote
 * atomic; the copy-engine executor of transport/rdma is built on it. CUDA:
 * a one-thread kernel on the queue's stream; host: the worker thread; HIP:
 * not built (MORI_ENOTSUP: its engines do not keep queue order). */
int mori_platform_queue_word(mori_platform_queue_t *q, uint64_t *dst, uint64_t value, bool add);
/* How many operations (copies and words) queued on `q` have finished,
 * counted from its creation, never waiting. Operations finish in queue
 * order on CUDA and host; on HIP the count moves only when the queue has
 * drained (a lower bound, never more than what finished). */
int mori_platform_queue_finished(mori_platform_queue_t *q, uint64_t *count);

/* Which handle types create + export both succeed for on `device`, as a
 * bitmask of (1 << mori_handle_type_t). Probed once per device and cached
 * (probe.c, common to all platforms). */
int mori_platform_probe_handle_types(int device, unsigned *mask);
/* The handle type to allocate with: fabric if it works, else POSIX fd.
 * MORI_HANDLE_TYPE=posix_fd|fabric forces one (an error if it fails). */
int mori_platform_preferred_handle_type(int device, int *type);

MORI_EXTERN_C_END

#endif
