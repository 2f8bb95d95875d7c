// SPDX-License-Identifier: MIT
/* The GPU platforms' virtual memory management, written once for CUDA and
 * HIP over the names of gpu_api.h: physical create/release/export/import,
 * VA reserve/map/access, small device tables and mapped host memory. Every
 * entry point that concerns a device runs with that device current and
 * restores the caller's (a free from Python's garbage collector must not
 * change which device the program uses). */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/profile.h"
#include "core/platform/gpu_api.h"


static gpu_alloc_prop_t allocation_prop(int device, int handle_type, unsigned flags) {
  gpu_alloc_prop_t prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = (flags & MORI_PMEM_UNCACHED) ? GPU_ALLOC_UNCACHED : GPU_ALLOC_PINNED;
  prop.location.type = GPU_LOCATION_DEVICE;
  prop.location.id = device;
  GPU_PROP_HANDLE_TYPES(prop) = handle_type == MORI_HANDLE_FABRIC ? GPU_HANDLE_FABRIC : GPU_HANDLE_POSIX_FD;
  GPU_PROP_RDMA_CAPABLE(prop, device); /* so the rdma transport can register it */
  return prop;
}

static int handle_type_of(const gpu_alloc_prop_t *prop) {
  if (GPU_PROP_HANDLE_TYPES(*prop) & GPU_HANDLE_FABRIC) return MORI_HANDLE_FABRIC;
  if (GPU_PROP_HANDLE_TYPES(*prop) & GPU_HANDLE_POSIX_FD) return MORI_HANDLE_POSIX_FD;
  return MORI_HANDLE_NONE;
}

int mori_platform_device_count(int *count) {
  int rc = gpu_ready();
  if (rc) return rc;
  GPU_TRY(gpu.getDeviceCount(count), "counting devices");
  if (*count == 0) return mori_error_set(MORI_ENO_GPU, "%s: no GPU present", mori_platform_name());
  return 0;
}

int mori_platform_device_names(int *count) { return mori_platform_device_count(count); }

static int device_uuid(int device, uint8_t uuid[16]) {
  gpu_uuid_t u;
  GPU_TRY(gpu.deviceGetUuid(&u, device), "UUID of device %d", device);
  memcpy(uuid, u.bytes, 16);
  return 0;
}

int mori_platform_device_uuid(int device, uint8_t uuid[16]) { return GPU_ON_DEVICE(device, device_uuid(device, uuid)); }

int mori_platform_device_pci_bus_id(int device, char *out, size_t len) {
  int rc = gpu_ready();
  if (rc) return rc;
  GPU_TRY(gpu.deviceGetPCIBusId(out, (int)len, device), "PCI address of device %d", device);
  /* sysfs spells the address in lower case. */
  for (char *p = out; *p; p++) *p = (char)tolower((unsigned char)*p);
  return 0;
}

static int device_describe(int device, char *name, size_t name_len, char *arch, size_t arch_len) {
  int major = 0, minor = 0;
  GPU_TRY(gpu.deviceGetName(name, (int)name_len, device), "name of device %d", device);
  GPU_TRY(gpu.deviceGetAttribute(&major, GPU_ATTR_CC_MAJOR, device), "compute capability of device %d", device);
  GPU_TRY(gpu.deviceGetAttribute(&minor, GPU_ATTR_CC_MINOR, device), "compute capability of device %d", device);
#if defined(MORI_PLATFORM_HIP)
  snprintf(arch, arch_len, "gfx %d.%d", major, minor);
#else
  snprintf(arch, arch_len, "sm_%d%d", major, minor);
#endif
  return 0;
}

int mori_platform_device_describe(int device, char *name, size_t name_len, char *arch, size_t arch_len) {
  int rc = gpu_ready();
  return rc ? rc : GPU_ON_DEVICE(device, device_describe(device, name, name_len, arch, arch_len));
}

static int module_set_global(int device, void *module, const char *name, const void *src, size_t size) {
  gpu_va_t at;
  size_t bytes = 0;
  gpu_status_t st = gpu.moduleGetGlobal(&at, &bytes, (gpu_module_t)module, name);
  if (st == GPU_ERR_NOT_FOUND)
    return mori_error_set(MORI_ENOENT, "%s: module %p has no global variable '%s'", mori_platform_name(), module, name);
  if (st != GPU_OK) return gpu_fail(st, "looking up a module's global variable");
  if (bytes != size)
    return mori_error_set(MORI_EMISMATCH, "%s: global variable '%s' of module %p has %zu bytes, the value %zu", mori_platform_name(),
                          name, module, bytes, size);
  return mori_platform_upload(device, (void *)(uintptr_t)at, src, size);
}

int mori_platform_module_set_global(int device, void *module, const char *name, const void *src, size_t size) {
  return GPU_ON_DEVICE(device, module_set_global(device, module, name, src, size));
}

static int granularity(int device, size_t *out) {
  gpu_alloc_prop_t prop = allocation_prop(device, MORI_HANDLE_POSIX_FD, 0);
  GPU_TRY(gpu.memGetAllocationGranularity(out, &prop, GPU_GRANULARITY_MINIMUM), "granularity of device %d", device);
  return 0;
}

int mori_platform_granularity(int device, size_t *out) { return GPU_ON_DEVICE(device, granularity(device, out)); }

static int mem_create(int device, size_t size, int handle_type, unsigned flags, mori_pmem_t *out) {
  gpu_alloc_prop_t prop = allocation_prop(device, handle_type, flags);
  gpu_mem_t h;
  GPU_TRY(gpu.memCreate(&h, size, &prop, 0), "creating %zu bytes on device %d with %s handles", size, device,
          mori_handle_type_name(handle_type));
  out->handle = (uint64_t)(uintptr_t)h;
  out->size = size;
  out->device = device;
  out->handle_type = handle_type;
  out->owned = true;
  return 0;
}

int mori_platform_mem_create(int device, size_t size, int handle_type, unsigned flags, mori_pmem_t *out) {
  memset(out, 0, sizeof(*out));
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_MEM_CREATE, t, GPU_ON_DEVICE(device, mem_create(device, size, handle_type, flags, out)));
}

int mori_platform_mem_back(const mori_pmem_t *mem, size_t offset, size_t size) {
  if (offset > mem->size || size > mem->size - offset)
    return mori_error_set(MORI_ERANGE, "%s: backing [%zu, +%zu) of a %zu-byte allocation", mori_platform_name(), offset,
                          size, mem->size);
  return 0; /* physical since its creation */
}

bool mori_platform_fresh_memory_reads_zero(void) { return false; }

static int mem_release(mori_pmem_t *mem) {
  GPU_TRY(gpu.memRelease((gpu_mem_t)(uintptr_t)mem->handle), "releasing %zu bytes on device %d", mem->size, mem->device);
  mem->handle_type = MORI_HANDLE_NONE;
  return 0;
}

int mori_platform_mem_release(mori_pmem_t *mem) {
  if (mem->handle_type == MORI_HANDLE_NONE) return 0;
  if (mem->handle_type == MORI_HANDLE_LEGACY_IPC) { /* described, never retained: its owner frees it */
    mem->handle_type = MORI_HANDLE_NONE;
    return 0;
  }
  return GPU_ON_DEVICE(mem->device, mem_release(mem));
}

static int mem_export(const mori_pmem_t *mem, int handle_type, mori_shareable_t *out) {
  gpu_mem_t h = (gpu_mem_t)(uintptr_t)mem->handle;
  if (handle_type == MORI_HANDLE_POSIX_FD) {
    int fd = -1;
    GPU_TRY(gpu.memExportToShareableHandle(&fd, h, GPU_HANDLE_POSIX_FD, 0), "exporting a POSIX fd");
    out->fd = fd;
    return 0;
  }
  GPU_TRY(gpu.memExportToShareableHandle(out->blob, h, GPU_HANDLE_FABRIC, 0), "exporting a fabric handle");
  return 0;
}

int mori_platform_mem_export(const mori_pmem_t *mem, int handle_type, mori_shareable_t *out) {
  memset(out, 0, sizeof(*out));
  out->type = handle_type;
  out->fd = -1;
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_MEM_EXPORT, t, GPU_ON_DEVICE(mem->device, mem_export(mem, handle_type, out)));
}

static int mem_import(const mori_shareable_t *shared, mori_pmem_t *out) {
  gpu_mem_t h;
  if (shared->type == MORI_HANDLE_POSIX_FD) {
    int fd = shared->fd;
    GPU_TRY(gpu.memImportFromShareableHandle(&h, GPU_IMPORT_FD_ARG(&fd), GPU_HANDLE_POSIX_FD), "importing fd %d", fd);
  } else {
    uint8_t blob[MORI_FABRIC_BLOB_SIZE];
    memcpy(blob, shared->blob, sizeof(blob));
    GPU_TRY(gpu.memImportFromShareableHandle(&h, blob, GPU_HANDLE_FABRIC), "importing a fabric handle");
  }
  out->handle = (uint64_t)(uintptr_t)h;
  out->handle_type = shared->type;
  return 0;
}

int mori_platform_mem_import(const mori_shareable_t *shared, size_t size, int device, mori_pmem_t *out) {
  memset(out, 0, sizeof(*out));
  out->size = size;
  out->device = device;
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_MEM_IMPORT, t, GPU_ON_DEVICE(device, mem_import(shared, out)));
}

int mori_platform_mem_retain(void *ptr, mori_pmem_t *out, void **base, size_t *size) {
  memset(out, 0, sizeof(*out));
  int rc = gpu_ready();
  if (rc) return rc;
  gpu_mem_t h;
  gpu_status_t s = gpu.memRetainAllocationHandle(&h, ptr);
  if (s != GPU_OK) {
    gpu_fail(s, "retaining the allocation handle");
    return mori_error_context(MORI_ENOT_OWNED, "%s: %p is not a VMM mapping", mori_platform_name(), ptr);
  }
  gpu_alloc_prop_t prop;
  gpu_va_t b;
  size_t s_size = 0;
  if ((s = gpu.memGetAllocationPropertiesFromHandle(&prop, h)) != GPU_OK ||
      (s = gpu.memGetAddressRange(&b, &s_size, VA(ptr))) != GPU_OK) {
    gpu.memRelease(h);
    return gpu_fail(s, "reading the properties of a retained allocation");
  }
  out->handle = (uint64_t)(uintptr_t)h;
  out->size = s_size;
  out->device = prop.location.id;
  out->handle_type = handle_type_of(&prop);
  if (out->handle_type == MORI_HANDLE_NONE) {
    gpu.memRelease(h);
    return mori_error_set(MORI_ENOTSUP, "%s: the allocation at %p was created without shareable handle types",
                          mori_platform_name(), ptr);
  }
  *base = PTR(b);
  *size = s_size;
  return 0;
}

static int va_reserve(size_t size, size_t alignment, void **out) {
  gpu_va_t p;
  GPU_TRY(gpu.memAddressReserve(&p, size, alignment, VA(0), 0), "reserving %zu bytes of VA", size);
  *out = PTR(p);
  return 0;
}

int mori_platform_va_reserve(int device, size_t size, size_t alignment, void **out) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_VA_RESERVE, t, GPU_ON_DEVICE(device, va_reserve(size, alignment, out)));
}

static int va_release(void *va, size_t size) {
  GPU_TRY(gpu.memAddressFree(VA(va), size), "releasing VA %p (%zu bytes)", va, size);
  return 0;
}

int mori_platform_va_release(int device, void *va, size_t size) { return GPU_ON_DEVICE(device, va_release(va, size)); }

static int mem_map(void *va, size_t size, const mori_pmem_t *mem) {
  GPU_TRY(gpu.memMap(VA(va), size, 0, (gpu_mem_t)(uintptr_t)mem->handle, 0), "mapping %zu bytes at %p", size, va);
  return 0;
}

int mori_platform_mem_map(void *va, size_t size, const mori_pmem_t *mem) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_MEM_MAP, t, GPU_ON_DEVICE(mem->device, mem_map(va, size, mem)));
}

static int mem_unmap(void *va, size_t size) {
  GPU_TRY(gpu.memUnmap(VA(va), size), "unmapping %zu bytes at %p", size, va);
  return 0;
}

int mori_platform_mem_unmap(int device, void *va, size_t size) { return GPU_ON_DEVICE(device, mem_unmap(va, size)); }

int mori_platform_span_release(int device, void *va, int slots, size_t stride, const bool *mapped) {
  int rc = 0;
  for (int i = 0; i < slots; i++) {
    if (!mapped || !mapped[i]) continue;
    int urc = mori_platform_mem_unmap(device, (char *)va + (size_t)i * stride, stride);
    if (urc && !rc) rc = mori_error_context(urc, "unmapping slot %d of %d", i, slots);
  }
  int vrc = mori_platform_va_release(device, va, (size_t)slots * stride);
  return rc ? rc : vrc;
}

static int set_access(void *va, size_t size, int device) {
  gpu_access_t desc;
  memset(&desc, 0, sizeof(desc));
  desc.location.type = GPU_LOCATION_DEVICE;
  desc.location.id = device;
  desc.flags = GPU_ACCESS_READ_WRITE;
  GPU_TRY(gpu.memSetAccess(VA(va), size, &desc, 1), "granting device %d access to %p (%zu bytes)", device, va, size);
  return 0;
}

int mori_platform_set_access(void *va, size_t size, int device) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_SET_ACCESS, t, GPU_ON_DEVICE(device, set_access(va, size, device)));
}


static int copy(void *dst, const void *src, size_t size) {
  GPU_TRY(GPU_MEMCPY(dst, src, size), "copying %zu bytes", size);
  return 0;
}

int mori_platform_memcpy(int device, void *dst, const void *src, size_t size) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_BLOCKING_COPY, t, GPU_ON_DEVICE(device, copy(dst, src, size)));
}

static int synchronize(int device) {
  GPU_TRY(gpu.synchronize(), "synchronizing device %d", device);
  return 0;
}

bool mori_platform_device_is_async(void) { return true; }

/* Uploads and zeroing: a non-blocking stream per device, waited for
 * alone (work the application queued on its own streams is neither waited
 * for nor delayed). The caller may be capturing a graph on another stream
 * (a window's first device view taken inside torch.cuda.graph): the
 * capture's default "global" mode forbids queueing a pageable copy or
 * synchronising any stream from this thread, so the thread is relaxed for
 * those calls. The upload stream is never part of a capture, and nothing
 * done on it changes what the graph records. */
static pthread_mutex_t upload_lock = PTHREAD_MUTEX_INITIALIZER;
static gpu_stream_t upload_streams[MORI_MAX_DEVICES];

static int upload_stream(int device, gpu_stream_t **out) {
  gpu_stream_t *st = &upload_streams[device];
  if (!*st) GPU_TRY(GPU_STREAM_CREATE_NONBLOCKING(st), "creating the upload stream of device %d", device);
  *out = st;
  return 0;
}

/* Waits for everything queued on the upload stream; the lock is held. */
static int drain(int device) {
  gpu_capture_mode_t mode = GPU_CAPTURE_MODE_RELAXED;
  GPU_TRY(gpu.threadExchangeCaptureMode(&mode), "relaxing this thread's capture mode");
  gpu_status_t synced = gpu.streamSynchronize(upload_streams[device]);
  (void)gpu.threadExchangeCaptureMode(&mode); /* the caller's mode back */
  GPU_TRY(synced, "waiting for device %d's uploads", device);
  return 0;
}

/* The source is pageable host memory: the driver stages it before the
 * call returns. */
static int upload(int device, void *dst, const void *src, size_t size) {
  gpu_stream_t *st;
  int rc = upload_stream(device, &st);
  if (rc) return rc;
  uint64_t t = mori_profile_now();
  gpu_capture_mode_t mode = GPU_CAPTURE_MODE_RELAXED;
  GPU_TRY(gpu.threadExchangeCaptureMode(&mode), "relaxing this thread's capture mode");
  gpu_status_t queued = GPU_UPLOAD_ASYNC(dst, src, size, *st);
  (void)gpu.threadExchangeCaptureMode(&mode); /* the caller's mode back */
  mori_profile_add(MORI_PROF_TABLE_UPLOAD, t);
  GPU_TRY(queued, "uploading %zu bytes to %p", size, dst);
  t = mori_profile_now();
  return mori_profile_done(MORI_PROF_TABLE_WAIT, t, drain(device));
}

/* Zeroing goes on the upload stream and waits for it alone: a kernel the
 * application runs meanwhile on its own streams is not waited for (a
 * synchronous memset, or a context synchronisation, would). */
static int memset_zero(int device, void *ptr, size_t size) {
  gpu_stream_t *st;
  int rc = upload_stream(device, &st);
  if (rc) return rc;
  GPU_TRY(gpu.memsetD8Async(VA(ptr), 0, size, *st), "zeroing %zu bytes at %p", size, ptr);
  return drain(device);
}

static int check_device(int device, const char *what) {
  if (device >= 0 && device < MORI_MAX_DEVICES) return 0;
  return mori_error_set(MORI_EINVAL, "%s: %s on device %d", mori_platform_name(), what, device);
}

int mori_platform_memset_zero(int device, void *ptr, size_t size) {
  int rc = check_device(device, "zeroing");
  if (rc) return rc;
  pthread_mutex_lock(&upload_lock);
  rc = GPU_ON_DEVICE(device, memset_zero(device, ptr, size));
  pthread_mutex_unlock(&upload_lock);
  return rc;
}

void *mori_platform_upload_stream(int device) {
  if (check_device(device, "the upload stream")) return NULL;
  pthread_mutex_lock(&upload_lock);
  gpu_stream_t *st = NULL;
  int rc = GPU_ON_DEVICE(device, upload_stream(device, &st));
  pthread_mutex_unlock(&upload_lock);
  return rc ? NULL : (void *)*st;
}

int mori_platform_upload(int device, void *dst, const void *src, size_t size) {
  int rc = check_device(device, "upload");
  if (rc) return rc;
  pthread_mutex_lock(&upload_lock);
  rc = GPU_ON_DEVICE(device, upload(device, dst, src, size));
  pthread_mutex_unlock(&upload_lock);
  return rc;
}

int mori_platform_synchronize(int device) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_DEVICE_WAIT, t, GPU_ON_DEVICE(device, synchronize(device)));
}

int mori_platform_can_access_peer(int device, int peer_device, bool *yes) {
  if (device == peer_device) {
    *yes = true;
    return 0;
  }
  int rc = gpu_ready();
  return rc ? rc : gpu_peer_access(device, peer_device, yes);
}

static int device_alloc(int device, size_t size, void **out) {
  gpu_va_t p;
  GPU_TRY(gpu.deviceMalloc(&p, size ? size : 1), "allocating %zu bytes on device %d", size, device);
  *out = PTR(p);
  return 0;
}

int mori_platform_device_alloc(int device, size_t size, void **out) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_DEVICE_ALLOC, t, GPU_ON_DEVICE(device, device_alloc(device, size, out)));
}

static int device_free(void *ptr) {
  GPU_TRY(gpu.deviceFree(VA(ptr)), "freeing %p", ptr);
  return 0;
}

int mori_platform_device_free(int device, void *ptr) {
  if (!ptr) return 0;
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_DEVICE_ALLOC, t, GPU_ON_DEVICE(device, device_free(ptr)));
}

static int host_alloc_mapped(size_t size, void **host, void **dev) {
  GPU_TRY(gpu.hostAlloc(host, size, GPU_HOST_ALLOC_FLAGS), "allocating %zu bytes of mapped host memory", size);
  memset(*host, 0, size);
  gpu_va_t d;
  gpu_status_t s = gpu.hostGetDevicePointer(&d, *host, 0);
  if (s != GPU_OK) {
    gpu.hostFree(*host);
    *host = NULL;
    return gpu_fail(s, "device address of mapped host memory");
  }
  *dev = PTR(d);
  return 0;
}

int mori_platform_host_alloc_mapped(int device, size_t size, void **host, void **dev) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_PINNED_ALLOC, t, GPU_ON_DEVICE(device, host_alloc_mapped(size, host, dev)));
}

int mori_platform_is_device_memory(int device, const void *p, bool *yes) {
  *yes = false;
  return GPU_ON_DEVICE(device, gpu_is_device_memory(p, yes));
}

static int host_register(void *ptr, size_t size, bool io, void **dev, bool *registered) {
  /* Memory its owner already pinned and mapped (cuMemHostAlloc'ed, as the
   * software ConnectX's queues are) has a device address already; the
   * runtime refuses to register it again with INVALID_VALUE, not
   * ALREADY_REGISTERED, so look first. */
  gpu_va_t d;
  if (gpu.hostGetDevicePointer(&d, ptr, 0) == GPU_OK) {
    *dev = PTR(d);
    return 0;
  }
  gpu_status_t s = gpu.hostRegister(ptr, size, GPU_HOST_REGISTER_FLAGS(io));
  if (s != GPU_OK && s != GPU_ERR_ALREADY_REGISTERED)
    return mori_error_context(gpu_fail(s, io ? "registering host I/O memory for the device" : "registering host memory for the device"),
                              "%zu bytes at %p", size, ptr);
  *registered = s == GPU_OK; /* else its owner pinned and mapped it */
  s = gpu.hostGetDevicePointer(&d, ptr, 0);
  if (s != GPU_OK) {
    if (*registered) gpu.hostUnregister(ptr);
    *registered = false;
    return gpu_fail(s, "device address of registered host memory");
  }
  *dev = PTR(d);
  return 0;
}

int mori_platform_host_register(int device, void *ptr, size_t size, bool io, void **dev, bool *registered) {
  *registered = false;
  return GPU_ON_DEVICE(device, host_register(ptr, size, io, dev, registered));
}

static int host_unregister(void *ptr) {
  GPU_TRY(gpu.hostUnregister(ptr), "unregistering host memory at %p", ptr);
  return 0;
}

int mori_platform_host_unregister(int device, void *ptr) { return GPU_ON_DEVICE(device, host_unregister(ptr)); }

int mori_platform_host_free_mapped(void *host) {
  if (!host) return 0;
  int rc = gpu_ready();
  if (rc) return rc;
  uint64_t t = mori_profile_now();
  gpu_status_t freed = gpu.hostFree(host);
  mori_profile_add(MORI_PROF_PINNED_ALLOC, t);
  GPU_TRY(freed, "freeing mapped host memory");
  return 0;
}
