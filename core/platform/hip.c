/* HIP platform (AMD GPUs, the primary target): HIP's virtual memory
 * management API. Linked against libamdhip64; with no GPU present every call
 * fails with MORI_ENO_GPU and a message, never a crash. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal/error.h"
#include "core/platform/hip_compat.h"
#include "core/platform/platform.h"

/* The one place hipError_t becomes a mori code. A failed call can leave a
 * sticky error behind: read it once so the next call starts clean. */
static int hip_error(hipError_t e, const char *what) {
  (void)hipGetLastError();
  int code = e == hipErrorOutOfMemory ? MORI_ENOMEM
           : e == hipErrorInvalidValue ? MORI_EINVAL
           : e == hipErrorNotSupported ? MORI_ENOTSUP
           : e == hipErrorNoDevice ? MORI_ENO_GPU : MORI_ERUNTIME;
  return mori_error_set(code, "hip: %s failed: %s (%s)", what, hipGetErrorName(e), hipGetErrorString(e));
}

#define HIP_CHECK(call, ...)                        \
  do {                                              \
    hipError_t hip_e_ = (call);                     \
    if (hip_e_ != hipSuccess) {                     \
      char what_[256];                              \
      snprintf(what_, sizeof(what_), __VA_ARGS__);  \
      return hip_error(hip_e_, what_);              \
    }                                               \
  } while (0)

static int use_device(int device) {
  int count = 0;
  hipError_t e = hipGetDeviceCount(&count);
  if (e != hipSuccess || count == 0) {
    (void)hipGetLastError();
    return mori_error_set(MORI_ENO_GPU, "hip: no GPU present (%s)", hipGetErrorString(e));
  }
  if (device < 0 || device >= count)
    return mori_error_set(MORI_EINVAL, "hip: device %d out of range (have %d)", device, count);
  HIP_CHECK(hipSetDevice(device), "selecting device %d", device);
  return 0;
}

/* Entry points that select a device put the caller's device back on the way
 * out: a free from Python's garbage collector must not change it. */
static int save_device(void) {
  int device = -1;
  if (hipGetDevice(&device) != hipSuccess) {
    (void)hipGetLastError();
    device = -1;
  }
  return device;
}

static void restore_device(int device) {
  if (device >= 0) (void)hipSetDevice(device);
}

static hipMemAllocationHandleType hip_handle_type(int type) {
  return type == MORI_HANDLE_FABRIC ? MORI_HIP_HANDLE_TYPE_FABRIC : hipMemHandleTypePosixFileDescriptor;
}

static hipMemAllocationProp allocation_prop(int device, int type) {
  hipMemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = hipMemAllocationTypePinned;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = device;
  MORI_HIP_PROP_HANDLE_TYPES(prop) = hip_handle_type(type);
  return prop;
}

const char *mori_platform_name(void) { return "hip"; }

int mori_platform_device_count(int *count) {
  hipError_t e = hipGetDeviceCount(count);
  if (e != hipSuccess || *count == 0) {
    (void)hipGetLastError();
    return mori_error_set(MORI_ENO_GPU, "hip: no GPU present (%s)", hipGetErrorString(e));
  }
  return 0;
}

int mori_platform_current_device(int *device) {
  int count = 0;
  int rc = mori_platform_device_count(&count);
  if (rc) return rc;
  HIP_CHECK(hipGetDevice(device), "reading the current device");
  return 0;
}

static int device_uuid_on_device(int device, uint8_t uuid[16]) {
  int rc = use_device(device);
  if (rc) return rc;
  hipUUID u;
  HIP_CHECK(hipDeviceGetUuid(&u, device), "UUID of device %d", device);
  memcpy(uuid, u.bytes, 16);
  return 0;
}

static int granularity_on_device(int device, size_t *granularity) {
  int rc = use_device(device);
  if (rc) return rc;
  hipMemAllocationProp prop = allocation_prop(device, MORI_HANDLE_POSIX_FD);
  HIP_CHECK(hipMemGetAllocationGranularity(granularity, &prop, hipMemAllocationGranularityMinimum),
            "granularity of device %d", device);
  return 0;
}

static int mem_create_on_device(int device, size_t size, int handle_type, mori_pmem_t *out) {
  memset(out, 0, sizeof(*out));
  int rc = use_device(device);
  if (rc) return rc;
  hipMemAllocationProp prop = allocation_prop(device, handle_type);
  hipMemGenericAllocationHandle_t h;
  HIP_CHECK(hipMemCreate(&h, size, &prop, 0), "hipMemCreate of %zu bytes on device %d with %s handles", size, device,
            mori_handle_type_name(handle_type));
  out->handle = (uint64_t)(uintptr_t)h;
  out->size = size;
  out->device = device;
  out->handle_type = handle_type;
  out->owned = true;
  return 0;
}

int mori_platform_mem_release(mori_pmem_t *mem) {
  if (mem->handle_type == MORI_HANDLE_NONE) return 0;
  HIP_CHECK(hipMemRelease((hipMemGenericAllocationHandle_t)(uintptr_t)mem->handle), "releasing %zu bytes", mem->size);
  mem->handle_type = MORI_HANDLE_NONE;
  return 0;
}

int mori_platform_mem_export(const mori_pmem_t *mem, int handle_type, mori_shareable_t *out) {
  memset(out, 0, sizeof(*out));
  out->type = handle_type;
  out->fd = -1;
  hipMemGenericAllocationHandle_t h = (hipMemGenericAllocationHandle_t)(uintptr_t)mem->handle;
  if (handle_type == MORI_HANDLE_POSIX_FD) {
    int fd = -1;
    HIP_CHECK(hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor, 0), "exporting a POSIX fd");
    out->fd = fd;
    return 0;
  }
  HIP_CHECK(hipMemExportToShareableHandle(out->blob, h, MORI_HIP_HANDLE_TYPE_FABRIC, 0), "exporting a fabric handle");
  return 0;
}

static int mem_import_on_device(const mori_shareable_t *shared, size_t size, int device, mori_pmem_t *out) {
  memset(out, 0, sizeof(*out));
  int rc = use_device(device);
  if (rc) return rc;
  hipMemGenericAllocationHandle_t h;
  if (shared->type == MORI_HANDLE_POSIX_FD) {
    int fd = shared->fd;
    HIP_CHECK(hipMemImportFromShareableHandle(&h, MORI_HIP_IMPORT_FD_ARG(&fd), hipMemHandleTypePosixFileDescriptor),
              "importing fd %d", fd);
  } else {
    uint8_t blob[MORI_FABRIC_BLOB_SIZE];
    memcpy(blob, shared->blob, sizeof(blob));
    HIP_CHECK(hipMemImportFromShareableHandle(&h, blob, MORI_HIP_HANDLE_TYPE_FABRIC), "importing a fabric handle");
  }
  out->handle = (uint64_t)(uintptr_t)h;
  out->size = size;
  out->device = device;
  out->handle_type = shared->type;
  out->owned = false;
  return 0;
}

int mori_platform_mem_retain(void *ptr, mori_pmem_t *out, void **base, size_t *size) {
  memset(out, 0, sizeof(*out));
  hipMemGenericAllocationHandle_t h;
  hipError_t e = hipMemRetainAllocationHandle(&h, ptr);
  if (e != hipSuccess) {
    hip_error(e, "hipMemRetainAllocationHandle");
    return mori_error_context(MORI_ENOT_OWNED, "hip: %p is not a VMM mapping", ptr);
  }
  hipMemAllocationProp prop;
  hipDeviceptr_t b = NULL;
  size_t s = 0;
  HIP_CHECK(hipMemGetAllocationPropertiesFromHandle(&prop, h), "properties of %p", ptr);
  HIP_CHECK(hipMemGetAddressRange(&b, &s, (hipDeviceptr_t)ptr), "address range of %p", ptr);
  out->handle = (uint64_t)(uintptr_t)h;
  out->size = s;
  out->device = prop.location.id;
  out->handle_type = MORI_HIP_PROP_HANDLE_TYPES(prop) == MORI_HIP_HANDLE_TYPE_FABRIC ? MORI_HANDLE_FABRIC
                                                                                   : MORI_HANDLE_POSIX_FD;
  *base = (void *)b;
  *size = s;
  return 0;
}

int mori_platform_va_reserve(size_t size, size_t alignment, void **out) {
  HIP_CHECK(hipMemAddressReserve(out, size, alignment, NULL, 0), "reserving %zu bytes of VA", size);
  return 0;
}

int mori_platform_va_release(void *va, size_t size) {
  HIP_CHECK(hipMemAddressFree(va, size), "releasing VA %p", va);
  return 0;
}

int mori_platform_mem_map(void *va, size_t size, const mori_pmem_t *mem) {
  HIP_CHECK(hipMemMap(va, size, 0, (hipMemGenericAllocationHandle_t)(uintptr_t)mem->handle, 0), "mapping %zu bytes at %p",
            size, va);
  return 0;
}

int mori_platform_mem_unmap(void *va, size_t size) {
  HIP_CHECK(hipMemUnmap(va, size), "unmapping %zu bytes at %p", size, va);
  return 0;
}

int mori_platform_set_access(void *va, size_t size, int device) {
  hipMemAccessDesc desc;
  memset(&desc, 0, sizeof(desc));
  desc.location.type = hipMemLocationTypeDevice;
  desc.location.id = device;
  desc.flags = hipMemAccessFlagsProtReadWrite;
  HIP_CHECK(hipMemSetAccess(va, size, &desc, 1), "granting device %d access to %p", device, va);
  return 0;
}

int mori_platform_memset_zero(void *ptr, size_t size) {
  HIP_CHECK(hipMemset(ptr, 0, size), "zeroing %zu bytes at %p", size, ptr);
  HIP_CHECK(hipDeviceSynchronize(), "synchronizing after zeroing");
  return 0;
}

int mori_platform_memcpy(void *dst, const void *src, size_t size) {
  HIP_CHECK(hipMemcpy(dst, src, size, hipMemcpyDefault), "copying %zu bytes", size);
  return 0;
}

static int synchronize_on_device(int device) {
  int rc = use_device(device);
  if (rc) return rc;
  HIP_CHECK(hipDeviceSynchronize(), "synchronizing device %d", device);
  return 0;
}

int mori_platform_can_access_peer(int device, int peer_device, bool *yes) {
  if (device == peer_device) {
    *yes = true;
    return 0;
  }
  int can = 0;
  HIP_CHECK(hipDeviceCanAccessPeer(&can, device, peer_device), "peer access %d→%d", device, peer_device);
  *yes = can != 0;
  return 0;
}

static int device_alloc_on_device(int device, size_t size, void **out) {
  int rc = use_device(device);
  if (rc) return rc;
  HIP_CHECK(hipMalloc(out, size ? size : 1), "allocating %zu bytes on device %d", size, device);
  return 0;
}

int mori_platform_device_free(void *ptr) {
  if (!ptr) return 0;
  HIP_CHECK(hipFree(ptr), "freeing %p", ptr);
  return 0;
}

int mori_platform_host_alloc_mapped(size_t size, void **host, void **dev) {
  HIP_CHECK(hipHostMalloc(host, size, hipHostMallocMapped | hipHostMallocPortable),
            "allocating %zu bytes of mapped host memory", size);
  memset(*host, 0, size);
  HIP_CHECK(hipHostGetDevicePointer(dev, *host, 0), "device address of mapped host memory");
  return 0;
}

int mori_platform_host_free_mapped(void *host) {
  if (!host) return 0;
  HIP_CHECK(hipHostFree(host), "freeing mapped host memory");
  return 0;
}

/* Copies on a HIP stream (the sdma transport's queue): AMD runs peer
 * device-to-device copies on its SDMA engines. */
struct mori_platform_queue {
  hipStream_t stream;
};

static int queue_create_on_device(int device, mori_platform_queue_t **out) {
  int rc = use_device(device);
  if (rc) return rc;
  struct mori_platform_queue *q = calloc(1, sizeof(*q));
  if (!q) return mori_error_set(MORI_ENOMEM, "hip: copy queue");
  hipError_t e = hipStreamCreateWithFlags(&q->stream, hipStreamNonBlocking);
  if (e != hipSuccess) {
    free(q);
    return hip_error(e, "creating a copy stream");
  }
  *out = q;
  return 0;
}

int mori_platform_queue_copy(mori_platform_queue_t *q, void *dst, const void *src, size_t size) {
  HIP_CHECK(hipMemcpyAsync(dst, src, size, hipMemcpyDefault, q->stream), "queueing a %zu-byte copy", size);
  return 0;
}

int mori_platform_queue_wait(mori_platform_queue_t *q) {
  HIP_CHECK(hipStreamSynchronize(q->stream), "waiting for copies");
  return 0;
}

int mori_platform_queue_destroy(mori_platform_queue_t *q) {
  if (!q) return 0;
  (void)hipStreamDestroy(q->stream);
  free(q);
  return 0;
}

int mori_platform_stream_signal_wait(void *stream, void *const *writes, int n_writes, void *const *waits, int n_waits,
                                     uint64_t value) {
  hipStream_t st = (hipStream_t)stream;
  for (int i = 0; i < n_writes; i++)
    HIP_CHECK(hipStreamWriteValue64(st, writes[i], value, 0), "stream write to slot %d", i);
  for (int i = 0; i < n_waits; i++)
    HIP_CHECK(hipStreamWaitValue64(st, waits[i], value, hipStreamWaitValueGte, ~0ull), "stream wait on slot %d", i);
  return 0;
}

int mori_platform_stream_memops_supported(int device, bool *yes) {
  *yes = true; /* part of HIP's stream API on every AMD GPU it supports */
  return 0;
}

/* ---- entry points that switch devices (see save_device) ---- */

int mori_platform_device_uuid(int device, uint8_t uuid[16]) {
  int saved = save_device();
  int rc = device_uuid_on_device(device, uuid);
  restore_device(saved);
  return rc;
}

int mori_platform_granularity(int device, size_t *granularity) {
  int saved = save_device();
  int rc = granularity_on_device(device, granularity);
  restore_device(saved);
  return rc;
}

int mori_platform_mem_create(int device, size_t size, int handle_type, mori_pmem_t *out) {
  int saved = save_device();
  int rc = mem_create_on_device(device, size, handle_type, out);
  restore_device(saved);
  return rc;
}

int mori_platform_mem_import(const mori_shareable_t *shared, size_t size, int device, mori_pmem_t *out) {
  int saved = save_device();
  int rc = mem_import_on_device(shared, size, device, out);
  restore_device(saved);
  return rc;
}

int mori_platform_synchronize(int device) {
  int saved = save_device();
  int rc = synchronize_on_device(device);
  restore_device(saved);
  return rc;
}

int mori_platform_device_alloc(int device, size_t size, void **out) {
  int saved = save_device();
  int rc = device_alloc_on_device(device, size, out);
  restore_device(saved);
  return rc;
}

int mori_platform_queue_create(int device, mori_platform_queue_t **out) {
  int saved = save_device();
  int rc = queue_create_on_device(device, out);
  restore_device(saved);
  return rc;
}
