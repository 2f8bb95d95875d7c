// SPDX-License-Identifier: MIT
/* Legacy IPC on the GPU platforms (platform.h): the runtime's IPC handle of
 * a cudaMalloc / hipMalloc allocation, written once over gpu_api.h's names.
 * A handle names the whole allocation; the registered range's place in it
 * travels next to it (mori_shareable_t.offset). */
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/platform/gpu_api.h"
#include "core/platform/ipc_cache.h"

_Static_assert(sizeof(gpu_ipc_handle_t) == MORI_FABRIC_BLOB_SIZE, "an IPC handle travels as a 64-byte blob");

static int ipc_describe(void *ptr, size_t size, int device, mori_pmem_t *out) {
  gpu_va_t base;
  size_t bytes = 0;
  gpu_status_t st = gpu.memGetAddressRange(&base, &bytes, VA(ptr));
  if (st != GPU_OK) {
    gpu_fail(st, "looking up the allocation");
    return mori_error_context(MORI_ENOT_OWNED, "%s: %p is not inside device memory of the runtime's allocator", mori_platform_name(),
                              ptr);
  }
  uintptr_t b = (uintptr_t)base, p = (uintptr_t)ptr;
  if (size > bytes - (p - b))
    return mori_error_set(MORI_ERANGE, "%s: [%p, +%zu bytes) runs past the end of its allocation [%p, +%zu bytes)",
                          mori_platform_name(), ptr, size, PTR(base), bytes);
  gpu_ipc_handle_t h;
  if ((st = gpu.ipcGetMemHandle(&h, base)) != GPU_OK) {
    gpu_fail(st, "getting the allocation's IPC handle");
    return mori_error_context(MORI_ENOTSUP,
                              "%s: the allocation at %p (%zu bytes) has no IPC handle (memory of the virtual-memory API is "
                              "registered with mori_mem_register; host or managed memory cannot be shared)",
                              mori_platform_name(), PTR(base), bytes);
  }
  memset(out, 0, sizeof(*out));
  out->handle = (uint64_t)b;
  out->size = bytes;
  out->device = device;
  out->handle_type = MORI_HANDLE_LEGACY_IPC;
  out->offset = (uint64_t)(p - b);
  memcpy(out->name, &h, sizeof(h));
  return 0;
}

int mori_platform_ipc_describe(void *ptr, size_t size, int device, mori_pmem_t *out) {
  int rc = gpu_ready();
  if (!rc && device < 0) rc = mori_platform_current_device(&device);
  return rc ? rc : GPU_ON_DEVICE(device, ipc_describe(ptr, size, device, out));
}

static int ipc_open(const mori_shareable_t *shared, void **base) {
  gpu_ipc_handle_t h;
  memcpy(&h, shared->blob, sizeof(h));
  gpu_va_t va;
  gpu_status_t st = gpu.ipcOpenMemHandle(&va, h, GPU_IPC_LAZY_PEER_ACCESS);
  if (st != GPU_OK) {
    gpu_fail(st, "opening the IPC handle");
    return mori_error_context(MORI_EINVAL,
                              "%s: a peer's IPC handle does not open here (its memory was freed, or it is this process's own)",
                              mori_platform_name());
  }
  *base = PTR(va);
  return 0;
}

int mori_platform_ipc_open(const mori_shareable_t *shared, int device, void **base) {
  if (shared->type != MORI_HANDLE_LEGACY_IPC)
    return mori_error_set(MORI_EINVAL, "%s: a %s handle is not a legacy IPC handle", mori_platform_name(),
                          mori_handle_type_name(shared->type));
  int rc = gpu_ready();
  if (rc) return rc;
  mori_ipc_cache_lock();
  void *opened = mori_ipc_cache_acquire(shared->blob, device);
  if (!opened) {
    rc = GPU_ON_DEVICE(device, ipc_open(shared, &opened));
    if (!rc && (rc = mori_ipc_cache_insert(shared->blob, device, opened, (size_t)shared->size)) != 0)
      (void)GPU_ON_DEVICE(device, (int)gpu.ipcCloseMemHandle(VA(opened)));
  }
  mori_ipc_cache_unlock();
  if (!rc) *base = opened;
  return rc;
}

static int ipc_close(void *base) {
  GPU_TRY(gpu.ipcCloseMemHandle(VA(base)), "closing a peer's IPC mapping at %p", base);
  return 0;
}

int mori_platform_ipc_close(int device, void *base) {
  bool last = false;
  size_t size = 0;
  mori_ipc_cache_lock();
  int rc = mori_ipc_cache_release(device, base, &last, &size);
  if (!rc && last) rc = GPU_ON_DEVICE(device, ipc_close(base));
  mori_ipc_cache_unlock();
  return rc;
}
