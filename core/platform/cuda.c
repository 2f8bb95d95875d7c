/* CUDA platform: the driver API's virtual memory management, loaded with
 * dlopen so that a build for cuda starts (and fails with a clear error) on a
 * machine with no driver. Every call uses the device's primary context, the
 * one the CUDA runtime and torch use too. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal/error.h"
#include "core/platform/platform.h"

/* X(symbol): each driver function mori calls. Names go through cuda.h's
 * macros first (cuMemAlloc → cuMemAlloc_v2), so dlsym finds the right ABI. */
#define CUDA_DRIVER_FUNCS(X)            \
  X(cuInit)                             \
  X(cuGetErrorName)                     \
  X(cuGetErrorString)                   \
  X(cuDeviceGetCount)                   \
  X(cuDeviceGet)                        \
  X(cuDeviceGetUuid)                    \
  X(cuDeviceCanAccessPeer)              \
  X(cuDevicePrimaryCtxRetain)           \
  X(cuCtxSetCurrent)                    \
  X(cuCtxGetCurrent)                    \
  X(cuCtxGetDevice)                     \
  X(cuCtxSynchronize)                   \
  X(cuMemGetAllocationGranularity)      \
  X(cuMemCreate)                        \
  X(cuMemRelease)                       \
  X(cuMemExportToShareableHandle)       \
  X(cuMemImportFromShareableHandle)     \
  X(cuMemRetainAllocationHandle)        \
  X(cuMemGetAllocationPropertiesFromHandle) \
  X(cuMemGetAddressRange)               \
  X(cuMemAddressReserve)                \
  X(cuMemAddressFree)                   \
  X(cuMemMap)                           \
  X(cuMemUnmap)                         \
  X(cuMemSetAccess)                     \
  X(cuMemsetD8)                         \
  X(cuMemcpy)                           \
  X(cuMemAlloc)                         \
  X(cuMemFree)                          \
  X(cuStreamCreate)                     \
  X(cuStreamSynchronize)                \
  X(cuStreamDestroy)                    \
  X(cuMemcpyAsync)                     \
  X(cuMemHostAlloc)                     \
  X(cuMemHostGetDevicePointer)          \
  X(cuMemFreeHost)                      \
  X(cuStreamBatchMemOp)                 \
  X(cuDeviceGetAttribute)

#define CUDA_STR2(x) #x
#define CUDA_STR(x) CUDA_STR2(x)

static struct {
#define CUDA_FIELD(f) __typeof__(f) *f;
  CUDA_DRIVER_FUNCS(CUDA_FIELD)
#undef CUDA_FIELD
} cu;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_status;
static char load_message[512];
enum { MAX_DEVICES = 64 };
static CUcontext primary[MAX_DEVICES];
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

static void load_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    load_status = MORI_ENO_GPU;
    snprintf(load_message, sizeof(load_message), "cuda: cannot load the driver (libcuda.so.1): %s", dlerror());
    return;
  }
#define CUDA_LOAD(f)                                                                 \
  cu.f = (__typeof__(f) *)dlsym(lib, CUDA_STR(f));                                   \
  if (!cu.f) {                                                                       \
    load_status = MORI_ENOSYS;                                                       \
    snprintf(load_message, sizeof(load_message), "cuda: driver lacks %s", CUDA_STR(f)); \
    return;                                                                          \
  }
  CUDA_DRIVER_FUNCS(CUDA_LOAD)
#undef CUDA_LOAD
  CUresult r = cu.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char *name = "?";
    cu.cuGetErrorName(r, &name);
    load_status = r == CUDA_ERROR_NO_DEVICE ? MORI_ENO_GPU : MORI_ERUNTIME;
    snprintf(load_message, sizeof(load_message), "cuda: cuInit failed with %s (no usable GPU, or a CUDA context inherited across fork)", name);
  }
}

/* The one place CUresult becomes a mori code. */
static int cuda_error(CUresult r, const char *what) {
  const char *name = "?", *text = "?";
  cu.cuGetErrorName(r, &name);
  cu.cuGetErrorString(r, &text);
  int code = r == CUDA_ERROR_OUT_OF_MEMORY ? MORI_ENOMEM
           : r == CUDA_ERROR_INVALID_VALUE ? MORI_EINVAL
           : r == CUDA_ERROR_NOT_PERMITTED || r == CUDA_ERROR_NOT_SUPPORTED ? MORI_ENOTSUP
           : r == CUDA_ERROR_NO_DEVICE ? MORI_ENO_GPU : MORI_ERUNTIME;
  return mori_error_set(code, "cuda: %s failed: %s (%s)", what, name, text);
}

#define CU_CHECK(call, ...)                                   \
  do {                                                        \
    CUresult cu_r_ = (call);                                  \
    if (cu_r_ != CUDA_SUCCESS) {                              \
      char what_[256];                                        \
      snprintf(what_, sizeof(what_), __VA_ARGS__);            \
      return cuda_error(cu_r_, what_);                        \
    }                                                         \
  } while (0)

static int ready(void) {
  pthread_once(&load_once, load_driver);
  if (load_status != 0) return mori_error_set(load_status, "%s", load_message);
  return 0;
}

/* Makes `device`'s primary context current on this thread. */
static int use_device(int device) {
  int rc = ready();
  if (rc) return rc;
  if (device < 0 || device >= MAX_DEVICES) return mori_error_set(MORI_EINVAL, "cuda: device %d out of range", device);
  pthread_mutex_lock(&ctx_lock);
  if (!primary[device]) {
    CUdevice dev;
    CUresult r = cu.cuDeviceGet(&dev, device);
    if (r == CUDA_SUCCESS) r = cu.cuDevicePrimaryCtxRetain(&primary[device], dev);
    if (r != CUDA_SUCCESS) {
      pthread_mutex_unlock(&ctx_lock);
      return cuda_error(r, "retaining the primary context");
    }
  }
  CUcontext ctx = primary[device];
  pthread_mutex_unlock(&ctx_lock);
  CU_CHECK(cu.cuCtxSetCurrent(ctx), "making device %d current", device);
  return 0;
}

/* Entry points that make a device's primary context current put the
 * caller's context back on the way out: a free from Python's garbage
 * collector must not change which device the program is using. */
static CUcontext save_context(void) {
  CUcontext ctx = NULL;
  if (ready() == 0) cu.cuCtxGetCurrent(&ctx);
  return ctx;
}

static void restore_context(CUcontext ctx) {
  if (ctx) cu.cuCtxSetCurrent(ctx);
}

static CUmemAllocationHandleType cuda_handle_type(int type) {
  return type == MORI_HANDLE_FABRIC ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

static CUmemAllocationProp allocation_prop(int device, int type) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = cuda_handle_type(type);
  return prop;
}

const char *mori_platform_name(void) { return "cuda"; }

int mori_platform_device_count(int *count) {
  int rc = ready();
  if (rc) return rc;
  CU_CHECK(cu.cuDeviceGetCount(count), "counting devices");
  if (*count == 0) return mori_error_set(MORI_ENO_GPU, "cuda: no GPU present");
  return 0;
}

int mori_platform_current_device(int *device) {
  int rc = ready();
  if (rc) return rc;
  CUcontext ctx = NULL;
  CU_CHECK(cu.cuCtxGetCurrent(&ctx), "reading the current context");
  if (!ctx) {
    *device = 0;
    return 0;
  }
  CUdevice dev;
  CU_CHECK(cu.cuCtxGetDevice(&dev), "reading the current device");
  *device = (int)dev;
  return 0;
}

static int device_uuid_in_context(int device, uint8_t uuid[16]) {
  int rc = use_device(device);
  if (rc) return rc;
  CUdevice dev;
  CUuuid u;
  CU_CHECK(cu.cuDeviceGet(&dev, device), "device %d", device);
  CU_CHECK(cu.cuDeviceGetUuid(&u, dev), "UUID of device %d", device);
  memcpy(uuid, u.bytes, 16);
  return 0;
}

static int granularity_in_context(int device, size_t *granularity) {
  int rc = use_device(device);
  if (rc) return rc;
  CUmemAllocationProp prop = allocation_prop(device, MORI_HANDLE_POSIX_FD);
  CU_CHECK(cu.cuMemGetAllocationGranularity(granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
           "granularity of device %d", device);
  return 0;
}

static int mem_create_in_context(int device, size_t size, int handle_type, mori_pmem_t *out) {
  memset(out, 0, sizeof(*out));
  int rc = use_device(device);
  if (rc) return rc;
  CUmemAllocationProp prop = allocation_prop(device, handle_type);
  CUmemGenericAllocationHandle h;
  CU_CHECK(cu.cuMemCreate(&h, size, &prop, 0), "cuMemCreate of %zu bytes on device %d with %s handles", size,
           device, mori_handle_type_name(handle_type));
  out->handle = (uint64_t)h;
  out->size = size;
  out->device = device;
  out->handle_type = handle_type;
  out->owned = true;
  return 0;
}

int mori_platform_mem_release(mori_pmem_t *mem) {
  if (mem->handle_type == MORI_HANDLE_NONE) return 0;
  int rc = ready();
  if (rc) return rc;
  CU_CHECK(cu.cuMemRelease((CUmemGenericAllocationHandle)mem->handle), "releasing %zu bytes", mem->size);
  mem->handle_type = MORI_HANDLE_NONE;
  return 0;
}

static int mem_export_in_context(const mori_pmem_t *mem, int handle_type, mori_shareable_t *out) {
  memset(out, 0, sizeof(*out));
  out->type = handle_type;
  out->fd = -1;
  int rc = use_device(mem->device);
  if (rc) return rc;
  CUmemGenericAllocationHandle h = (CUmemGenericAllocationHandle)mem->handle;
  if (handle_type == MORI_HANDLE_POSIX_FD) {
    int fd = -1;
    CU_CHECK(cu.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "exporting a POSIX fd");
    out->fd = fd;
    return 0;
  }
  CUmemFabricHandle fabric;
  CU_CHECK(cu.cuMemExportToShareableHandle(&fabric, h, CU_MEM_HANDLE_TYPE_FABRIC, 0), "exporting a fabric handle");
  _Static_assert(sizeof(fabric) == MORI_FABRIC_BLOB_SIZE, "fabric handle is 64 bytes");
  memcpy(out->blob, &fabric, sizeof(fabric));
  return 0;
}

static int mem_import_in_context(const mori_shareable_t *shared, size_t size, int device, mori_pmem_t *out) {
  memset(out, 0, sizeof(*out));
  int rc = use_device(device);
  if (rc) return rc;
  CUmemGenericAllocationHandle h;
  if (shared->type == MORI_HANDLE_POSIX_FD) {
    CU_CHECK(cu.cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)shared->fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
             "importing fd %d", shared->fd);
  } else {
    CUmemFabricHandle fabric;
    memcpy(&fabric, shared->blob, sizeof(fabric));
    CU_CHECK(cu.cuMemImportFromShareableHandle(&h, &fabric, CU_MEM_HANDLE_TYPE_FABRIC), "importing a fabric handle");
  }
  out->handle = (uint64_t)h;
  out->size = size;
  out->device = device;
  out->handle_type = shared->type;
  out->owned = false;
  return 0;
}

int mori_platform_mem_retain(void *ptr, mori_pmem_t *out, void **base, size_t *size) {
  memset(out, 0, sizeof(*out));
  int rc = ready();
  if (rc) return rc;
  CUmemGenericAllocationHandle h;
  CUresult r = cu.cuMemRetainAllocationHandle(&h, ptr);
  if (r != CUDA_SUCCESS) {
    cuda_error(r, "cuMemRetainAllocationHandle");
    return mori_error_context(MORI_ENOT_OWNED, "cuda: %p is not a VMM mapping", ptr);
  }
  CUmemAllocationProp prop;
  CUdeviceptr b;
  size_t s;
  CU_CHECK(cu.cuMemGetAllocationPropertiesFromHandle(&prop, h), "properties of %p", ptr);
  CU_CHECK(cu.cuMemGetAddressRange(&b, &s, (CUdeviceptr)(uintptr_t)ptr), "address range of %p", ptr);
  out->handle = (uint64_t)h;
  out->size = s;
  out->device = prop.location.id;
  out->handle_type = (prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC) ? MORI_HANDLE_FABRIC
                   : (prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ? MORI_HANDLE_POSIX_FD
                   : MORI_HANDLE_NONE;
  if (out->handle_type == MORI_HANDLE_NONE) {
    cu.cuMemRelease(h);
    return mori_error_set(MORI_ENOTSUP, "cuda: the allocation at %p was created without shareable handle types", ptr);
  }
  *base = (void *)(uintptr_t)b;
  *size = s;
  return 0;
}

int mori_platform_va_reserve(size_t size, size_t alignment, void **out) {
  int rc = ready();
  if (rc) return rc;
  CUdeviceptr p;
  CU_CHECK(cu.cuMemAddressReserve(&p, size, alignment, 0, 0), "reserving %zu bytes of VA", size);
  *out = (void *)(uintptr_t)p;
  return 0;
}

int mori_platform_va_release(void *va, size_t size) {
  int rc = ready();
  if (rc) return rc;
  CU_CHECK(cu.cuMemAddressFree((CUdeviceptr)(uintptr_t)va, size), "releasing VA %p", va);
  return 0;
}

int mori_platform_mem_map(void *va, size_t size, const mori_pmem_t *mem) {
  int rc = ready();
  if (rc) return rc;
  CU_CHECK(cu.cuMemMap((CUdeviceptr)(uintptr_t)va, size, 0, (CUmemGenericAllocationHandle)mem->handle, 0),
           "mapping %zu bytes at %p", size, va);
  return 0;
}

int mori_platform_mem_unmap(void *va, size_t size) {
  int rc = ready();
  if (rc) return rc;
  CU_CHECK(cu.cuMemUnmap((CUdeviceptr)(uintptr_t)va, size), "unmapping %zu bytes at %p", size, va);
  return 0;
}

int mori_platform_set_access(void *va, size_t size, int device) {
  int rc = ready();
  if (rc) return rc;
  CUmemAccessDesc desc;
  memset(&desc, 0, sizeof(desc));
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = device;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU_CHECK(cu.cuMemSetAccess((CUdeviceptr)(uintptr_t)va, size, &desc, 1), "granting device %d access to %p", device, va);
  return 0;
}

int mori_platform_memset_zero(void *ptr, size_t size) {
  int rc = ready();
  if (rc) return rc;
  CU_CHECK(cu.cuMemsetD8((CUdeviceptr)(uintptr_t)ptr, 0, size), "zeroing %zu bytes at %p", size, ptr);
  CU_CHECK(cu.cuCtxSynchronize(), "synchronizing after zeroing");
  return 0;
}

int mori_platform_memcpy(void *dst, const void *src, size_t size) {
  int rc = ready();
  if (rc) return rc;
  CU_CHECK(cu.cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, size), "copying %zu bytes", size);
  return 0;
}

static int synchronize_in_context(int device) {
  int rc = use_device(device);
  if (rc) return rc;
  CU_CHECK(cu.cuCtxSynchronize(), "synchronizing device %d", device);
  return 0;
}

int mori_platform_can_access_peer(int device, int peer_device, bool *yes) {
  if (device == peer_device) {
    *yes = true;
    return 0;
  }
  int rc = ready();
  if (rc) return rc;
  CUdevice a, b;
  int can = 0;
  CU_CHECK(cu.cuDeviceGet(&a, device), "device %d", device);
  CU_CHECK(cu.cuDeviceGet(&b, peer_device), "device %d", peer_device);
  CU_CHECK(cu.cuDeviceCanAccessPeer(&can, a, b), "peer access %d→%d", device, peer_device);
  *yes = can != 0;
  return 0;
}

static int device_alloc_in_context(int device, size_t size, void **out) {
  int rc = use_device(device);
  if (rc) return rc;
  CUdeviceptr p;
  CU_CHECK(cu.cuMemAlloc(&p, size ? size : 1), "allocating %zu bytes on device %d", size, device);
  *out = (void *)(uintptr_t)p;
  return 0;
}

int mori_platform_device_free(void *ptr) {
  if (!ptr) return 0;
  int rc = ready();
  if (rc) return rc;
  CU_CHECK(cu.cuMemFree((CUdeviceptr)(uintptr_t)ptr), "freeing %p", ptr);
  return 0;
}

static int host_alloc_mapped_in_context(size_t size, void **host, void **dev) {
  int device = 0;
  int rc = mori_platform_current_device(&device);
  if (!rc) rc = use_device(device);
  if (rc) return rc;
  CU_CHECK(cu.cuMemHostAlloc(host, size, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
           "allocating %zu bytes of mapped host memory", size);
  memset(*host, 0, size);
  CUdeviceptr d;
  CU_CHECK(cu.cuMemHostGetDevicePointer(&d, *host, 0), "device address of mapped host memory");
  *dev = (void *)(uintptr_t)d;
  return 0;
}

int mori_platform_host_free_mapped(void *host) {
  if (!host) return 0;
  CU_CHECK(cu.cuMemFreeHost(host), "freeing mapped host memory");
  return 0;
}

struct mori_platform_queue {
  CUstream stream;
  int device;
};

static int queue_create_in_context(int device, mori_platform_queue_t **out) {
  int rc = use_device(device);
  if (rc) return rc;
  struct mori_platform_queue *q = calloc(1, sizeof(*q));
  if (!q) return mori_error_set(MORI_ENOMEM, "cuda: copy queue");
  CUresult r = cu.cuStreamCreate(&q->stream, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) {
    free(q);
    return cuda_error(r, "creating a copy stream");
  }
  q->device = device;
  *out = q;
  return 0;
}

int mori_platform_queue_copy(mori_platform_queue_t *q, void *dst, const void *src, size_t size) {
  CU_CHECK(cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, size, q->stream),
           "queueing a %zu-byte copy", size);
  return 0;
}

int mori_platform_queue_wait(mori_platform_queue_t *q) {
  CU_CHECK(cu.cuStreamSynchronize(q->stream), "waiting for copies");
  return 0;
}

int mori_platform_queue_destroy(mori_platform_queue_t *q) {
  if (!q) return 0;
  cu.cuStreamDestroy(q->stream);
  free(q);
  return 0;
}

int mori_platform_stream_signal_wait(void *stream, void *const *writes, int n_writes, void *const *waits, int n_waits,
                                     uint64_t value) {
  int rc = ready();
  if (rc) return rc;
  enum { BATCH = 128 }; /* the driver takes at most 256 operations a call */
  CUstreamBatchMemOpParams ops[BATCH];
  int total = n_writes + n_waits;
  for (int first = 0; first < total; first += BATCH) {
    int count = total - first < BATCH ? total - first : BATCH;
    memset(ops, 0, sizeof(ops[0]) * (size_t)count);
    for (int k = 0; k < count; k++) {
      int i = first + k;
      if (i < n_writes) {
        /* Default flags: a system-scope fence precedes the write, so the
         * stream's earlier stores reach the peer first. */
        ops[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
        ops[k].writeValue.address = (CUdeviceptr)(uintptr_t)writes[i];
        ops[k].writeValue.value64 = value;
      } else {
        ops[k].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
        ops[k].waitValue.address = (CUdeviceptr)(uintptr_t)waits[i - n_writes];
        ops[k].waitValue.value64 = value;
        ops[k].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
      }
    }
    CU_CHECK(cu.cuStreamBatchMemOp((CUstream)stream, (unsigned)count, ops, 0), "stream signal/wait (%d operations)", count);
  }
  return 0;
}

static int stream_memops_supported_in_context(int device, bool *yes) {
  int rc = use_device(device);
  if (rc) return rc;
  CUdevice dev;
  int v = 0;
  CU_CHECK(cu.cuDeviceGet(&dev, device), "device %d", device);
  CU_CHECK(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev), "memop attribute");
  *yes = v != 0;
  return 0;
}

/* ---- entry points that switch contexts (see save_context) ---- */

int mori_platform_device_uuid(int device, uint8_t uuid[16]) {
  CUcontext saved = save_context();
  int rc = device_uuid_in_context(device, uuid);
  restore_context(saved);
  return rc;
}

int mori_platform_granularity(int device, size_t *granularity) {
  CUcontext saved = save_context();
  int rc = granularity_in_context(device, granularity);
  restore_context(saved);
  return rc;
}

int mori_platform_mem_create(int device, size_t size, int handle_type, mori_pmem_t *out) {
  CUcontext saved = save_context();
  int rc = mem_create_in_context(device, size, handle_type, out);
  restore_context(saved);
  return rc;
}

int mori_platform_mem_export(const mori_pmem_t *mem, int handle_type, mori_shareable_t *out) {
  CUcontext saved = save_context();
  int rc = mem_export_in_context(mem, handle_type, out);
  restore_context(saved);
  return rc;
}

int mori_platform_mem_import(const mori_shareable_t *shared, size_t size, int device, mori_pmem_t *out) {
  CUcontext saved = save_context();
  int rc = mem_import_in_context(shared, size, device, out);
  restore_context(saved);
  return rc;
}

int mori_platform_synchronize(int device) {
  CUcontext saved = save_context();
  int rc = synchronize_in_context(device);
  restore_context(saved);
  return rc;
}

int mori_platform_device_alloc(int device, size_t size, void **out) {
  CUcontext saved = save_context();
  int rc = device_alloc_in_context(device, size, out);
  restore_context(saved);
  return rc;
}

int mori_platform_queue_create(int device, mori_platform_queue_t **out) {
  CUcontext saved = save_context();
  int rc = queue_create_in_context(device, out);
  restore_context(saved);
  return rc;
}

int mori_platform_host_alloc_mapped(size_t size, void **host, void **dev) {
  CUcontext saved = save_context();
  int rc = host_alloc_mapped_in_context(size, host, dev);
  restore_context(saved);
  return rc;
}

int mori_platform_stream_memops_supported(int device, bool *yes) {
  CUcontext saved = save_context();
  int rc = stream_memops_supported_in_context(device, yes);
  restore_context(saved);
  return rc;
}
