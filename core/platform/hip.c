// SPDX-License-Identifier: MIT
/* HIP platform (AMD GPUs, the primary target): what differs from CUDA.
 * libamdhip64 is loaded with dlopen (a rocm build starts, and fails with a
 * clear error, on a machine without ROCm); devices are selected with
 * hipSetDevice rather than contexts; stream memory operations are one call
 * per slot; the copy engine is hsa-runtime's (hip_copy_engine.c). The
 * virtual-memory sequences themselves are in gpu_vmm.c; what ROCm versions
 * spell differently is in hip_compat.h. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/base/dynlib.h"
#include "core/base/error.h"
#include "core/platform/gpu_api.h"
#include "core/platform/hsa_compat.h"

#define HIP_STR2(x) #x
#define HIP_STR(x) HIP_STR2(x)

struct gpu_funcs gpu;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_status;
static char load_message[512];

static void load_runtime(void) {
  static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", NULL};
  static const mori_dynlib_symbol_t symbols[] = {
#define HIP_SYMBOL(field, symbol) MORI_DYNLIB_ENTRY(gpu, field, HIP_STR(symbol))
      GPU_FUNCS(HIP_SYMBOL)
#undef HIP_SYMBOL
  };
  load_status = mori_dynlib_load(names, symbols, sizeof(symbols) / sizeof(symbols[0]), MORI_ENO_GPU, NULL);
  if (load_status) {
    snprintf(load_message, sizeof(load_message), "hip: cannot load the runtime: %s", mori_last_error());
    return;
  }
  int count = 0;
  hipError_t e = gpu.getDeviceCount(&count);
  if (e != hipSuccess || count == 0) {
    (void)gpu.getLastError();
    load_status = MORI_ENO_GPU;
    snprintf(load_message, sizeof(load_message), "hip: no GPU present (%s)",
             e != hipSuccess ? gpu.getErrorString(e) : "0 devices");
  }
}

int gpu_ready(void) {
  pthread_once(&load_once, load_runtime);
  if (load_status != 0) return mori_error_set(load_status, "%s", load_message);
  return 0;
}

/* A failed call can leave a sticky error behind: read it once so the next
 * call starts clean. */
int gpu_fail(hipError_t e, const char *what) {
  (void)gpu.getLastError();
  int code = e == hipErrorOutOfMemory ? MORI_ENOMEM
           : e == hipErrorInvalidValue ? MORI_EINVAL
           : e == hipErrorNotSupported ? MORI_ENOTSUP
           : e == hipErrorNoDevice ? MORI_ENO_GPU : MORI_ERUNTIME;
  return mori_error_set(code, "hip: %s failed: %s (%s)", what, gpu.getErrorName(e), gpu.getErrorString(e));
}

int gpu_enter(int device, int *saved) {
  *saved = -1;
  int rc = gpu_ready();
  if (rc) return rc;
  if (gpu.getDevice(saved) != hipSuccess) {
    (void)gpu.getLastError();
    *saved = -1;
  }
  if (*saved == device) return 0;
  GPU_TRY(gpu.setDevice(device), "selecting device %d", device);
  return 0;
}

void gpu_leave(const int *saved) {
  int now = -1;
  if (*saved >= 0 && gpu.getDevice(&now) == hipSuccess && now != *saved) (void)gpu.setDevice(*saved);
}

int gpu_peer_access(int device, int peer_device, bool *yes) {
  int can = 0;
  GPU_TRY(gpu.deviceCanAccessPeer(&can, device, peer_device), "peer access %d -> %d", device, peer_device);
  *yes = can != 0;
  return 0;
}

const char *mori_platform_name(void) { return "hip"; }

int mori_platform_current_device(int *device) {
  int rc = gpu_ready();
  if (rc) return rc;
  GPU_TRY(gpu.getDevice(device), "reading the current device");
  return 0;
}

/* ---- stream memory operations: one call per slot ---- */

int mori_platform_stream_signal_wait(void *stream, void *const *writes, int n_writes, void *const *waits, int n_waits,
                                     uint64_t value) {
  int rc = gpu_ready();
  if (rc) return rc;
  hipStream_t st = (hipStream_t)stream;
  for (int i = 0; i < n_writes; i++)
    GPU_TRY(gpu.streamWriteValue64(st, writes[i], value, 0), "stream write to slot %d", i);
  for (int i = 0; i < n_waits; i++)
    GPU_TRY(gpu.streamWaitValue64(st, waits[i], value, hipStreamWaitValueGte, ~0ull), "stream wait on slot %d", i);
  return 0;
}

int mori_platform_stream_memops_supported(int device, bool *yes) {
  *yes = true; /* part of HIP's stream API on every AMD GPU it supports */
  return 0;
}

/* ---- dma-buf: the NIC registers GPU memory through it where it can ---- */

/* hsa-runtime's export (ROCm 5.6 and later), looked up once in the
 * libhsa-runtime64 the HIP runtime already loaded. */
static struct {
  pthread_once_t once;
  mori_hsa_export_dmabuf_fn export_dmabuf;
  mori_hsa_close_dmabuf_fn close_dmabuf;
  char missing[256];
} dmabuf = {.once = PTHREAD_ONCE_INIT};

static void load_dmabuf(void) {
  void *h = dlopen("libhsa-runtime64.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) h = dlopen("libhsa-runtime64.so", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    snprintf(dmabuf.missing, sizeof(dmabuf.missing), "hip: libhsa-runtime64 cannot be loaded: %s", dlerror());
    return;
  }
  *(void **)&dmabuf.export_dmabuf = dlsym(h, "hsa_amd_portable_export_dmabuf");
  *(void **)&dmabuf.close_dmabuf = dlsym(h, "hsa_amd_portable_close_dmabuf");
  if (!dmabuf.export_dmabuf)
    snprintf(dmabuf.missing, sizeof(dmabuf.missing), "hip: hsa-runtime has no hsa_amd_portable_export_dmabuf (older than ROCm 5.6)");
}

int mori_platform_dmabuf_export(int device, void *ptr, size_t size, int *fd, uint64_t *offset) {
  *fd = -1;
  *offset = 0;
  int rc = gpu_ready();
  if (rc) return rc;
  pthread_once(&dmabuf.once, load_dmabuf);
  if (!dmabuf.export_dmabuf) return mori_error_set(MORI_ENOTSUP, "%s", dmabuf.missing);
  int handle = -1;
  uint64_t off = 0;
  hsa_status_t s = dmabuf.export_dmabuf(ptr, size, &handle, &off);
  if (s != HSA_STATUS_SUCCESS)
    return mori_error_set(MORI_ENOTSUP, "hip: hsa_amd_portable_export_dmabuf of %zu bytes at %p on device %d failed: status 0x%x",
                          size, ptr, device, (unsigned)s);
  *fd = handle;
  *offset = off;
  return 0;
}

int mori_platform_dmabuf_close(int fd) {
  if (fd < 0) return 0;
  if (dmabuf.close_dmabuf ? dmabuf.close_dmabuf(fd) != HSA_STATUS_SUCCESS : close(fd) != 0)
    return mori_error_set(MORI_EIO, "hip: closing dma-buf fd %d", fd);
  return 0;
}

int gpu_is_device_memory(const void *p, bool *yes) {
  hipPointerAttribute_t a;
  memset(&a, 0, sizeof(a));
  hipError_t e = gpu.pointerGetAttributes(&a, p);
  /* Host memory the runtime does not know is an error on older runtimes:
   * cleared, so the caller's next hipGetLastError does not see it. */
  if (e != hipSuccess) (void)gpu.getLastError();
  *yes = e == hipSuccess && MORI_HIP_POINTER_TYPE(a) == hipMemoryTypeDevice;
  return 0;
}
