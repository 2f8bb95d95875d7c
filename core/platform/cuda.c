// SPDX-License-Identifier: MIT
/* CUDA platform: what differs from HIP. The driver API is loaded with
 * dlopen (a cuda build starts, and fails with a clear error, on a machine
 * without a driver); every call runs in the device's primary context, the
 * one the CUDA runtime and torch use; the copy engine is a stream of its
 * own; stream memory operations are one batched call. The virtual-memory
 * sequences themselves are in gpu_vmm.c. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/dynlib.h"
#include "core/base/error.h"
#include "core/platform/gpu_api.h"

#define CUDA_STR2(x) #x
#define CUDA_STR(x) CUDA_STR2(x)

struct gpu_funcs gpu;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_status;
static char load_message[512];
enum { MAX_DEVICES = 64 };
static CUcontext primary[MAX_DEVICES];
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

static __typeof__(cuMemGetHandleForAddressRange) *get_handle_for_range;

static void load_driver(void) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  static const mori_dynlib_symbol_t symbols[] = {
#define CUDA_SYMBOL(field, symbol) MORI_DYNLIB_ENTRY(gpu, field, CUDA_STR(symbol))
      GPU_FUNCS(CUDA_SYMBOL)
#undef CUDA_SYMBOL
  };
  void *driver = NULL;
  load_status = mori_dynlib_load(names, symbols, sizeof(symbols) / sizeof(symbols[0]), MORI_ENO_GPU, &driver);
  if (load_status) {
    snprintf(load_message, sizeof(load_message), "cuda: cannot load the driver: %s", mori_last_error());
    return;
  }
  /* Optional (CUDA 11.7 and later drivers): without it, no dma-buf. */
  *(void **)&get_handle_for_range = dlsym(driver, "cuMemGetHandleForAddressRange");
  CUresult r = gpu.init(0);
  if (r != CUDA_SUCCESS) {
    const char *name = "?";
    gpu.getErrorName(r, &name);
    load_status = r == CUDA_ERROR_NO_DEVICE ? MORI_ENO_GPU : MORI_ERUNTIME;
    snprintf(load_message, sizeof(load_message),
             "cuda: cuInit failed with %s (no usable GPU, or a CUDA context inherited across fork)", name);
  }
}

int gpu_ready(void) {
  pthread_once(&load_once, load_driver);
  if (load_status != 0) return mori_error_set(load_status, "%s", load_message);
  return 0;
}

int gpu_fail(CUresult r, const char *what) {
  const char *name = "?", *text = "?";
  gpu.getErrorName(r, &name);
  gpu.getErrorString(r, &text);
  int code = r == CUDA_ERROR_OUT_OF_MEMORY ? MORI_ENOMEM
           : r == CUDA_ERROR_INVALID_VALUE ? MORI_EINVAL
           : r == CUDA_ERROR_NOT_PERMITTED || r == CUDA_ERROR_NOT_SUPPORTED ? MORI_ENOTSUP
           : r == CUDA_ERROR_NO_DEVICE ? MORI_ENO_GPU : MORI_ERUNTIME;
  return mori_error_set(code, "cuda: %s failed: %s (%s)", what, name, text);
}

static int primary_context(int device, CUcontext *ctx) {
  if (device < 0 || device >= MAX_DEVICES) return mori_error_set(MORI_EINVAL, "cuda: device %d out of range", device);
  pthread_mutex_lock(&ctx_lock);
  CUresult r = CUDA_SUCCESS;
  if (!primary[device]) {
    CUdevice dev;
    r = gpu.deviceGet(&dev, device);
    if (r == CUDA_SUCCESS) r = gpu.devicePrimaryCtxRetain(&primary[device], dev);
  }
  *ctx = primary[device];
  pthread_mutex_unlock(&ctx_lock);
  return r == CUDA_SUCCESS ? 0 : gpu_fail(r, "retaining the primary context");
}

int gpu_enter(int device, CUcontext *saved) {
  *saved = NULL;
  int rc = gpu_ready();
  CUcontext ctx = NULL;
  if (!rc) rc = primary_context(device, &ctx);
  if (rc) return rc;
  gpu.ctxGetCurrent(saved);
  if (*saved == ctx) return 0;
  GPU_TRY(gpu.ctxSetCurrent(ctx), "making device %d current", device);
  return 0;
}

void gpu_leave(const CUcontext *saved) {
  CUcontext now = NULL;
  gpu.ctxGetCurrent(&now);
  if (*saved && now != *saved) gpu.ctxSetCurrent(*saved);
}

int gpu_peer_access(int device, int peer_device, bool *yes) {
  CUdevice a, b;
  int can = 0;
  GPU_TRY(gpu.deviceGet(&a, device), "device %d", device);
  GPU_TRY(gpu.deviceGet(&b, peer_device), "device %d", peer_device);
  GPU_TRY(gpu.deviceCanAccessPeer(&can, a, b), "peer access %d -> %d", device, peer_device);
  *yes = can != 0;
  return 0;
}

const char *mori_platform_name(void) { return "cuda"; }

int mori_platform_current_device(int *device) {
  int rc = gpu_ready();
  if (rc) return rc;
  CUcontext ctx = NULL;
  GPU_TRY(gpu.ctxGetCurrent(&ctx), "reading the current context");
  if (!ctx) {
    *device = 0; /* no context yet: the runtime's default device */
    return 0;
  }
  CUdevice dev;
  GPU_TRY(gpu.ctxGetDevice(&dev), "reading the current device");
  *device = (int)dev;
  return 0;
}

/* ---- the copy engine: cuMemcpyAsync on a stream of the queue's own ---- */

/* How far a queue has come is learned from events, recorded lazily: not
 * one per operation (a record costs about as much as the copy's own call)
 * but one when someone asks and operations were queued since the last
 * mark. Each mark remembers how many operations it covers. */
enum { QUEUE_EVENTS = 256 };

struct mori_platform_queue {
  CUstream stream;
  int device;
  CUevent events[QUEUE_EVENTS];
  uint64_t covers[QUEUE_EVENTS]; /* operations queued when that mark was recorded */
  uint64_t submitted, finished;
  uint64_t marks, marks_done; /* marks recorded, marks seen fired */
};

/* The word operation is a one-thread kernel, JIT-compiled by the driver from
 * this PTX the first time a queue on a device needs it (no device code in
 * the C library). Generic addresses: the word may be in this device's memory
 * or a peer's mapped into this process. */
static const char word_ptx[] =
    ".version 7.0\n"
    ".target sm_70\n"
    ".address_size 64\n"
    ".visible .entry mori_queue_word(.param .u64 dst, .param .u64 value, .param .u32 add)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .b32 %r<2>;\n"
    "  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [dst];\n"
    "  ld.param.u64 %rd2, [value];\n"
    "  ld.param.u32 %r1, [add];\n"
    "  setp.ne.u32 %p, %r1, 0;\n"
    "  @%p atom.sys.add.u64 %rd3, [%rd1], %rd2;\n"
    "  @!%p st.release.sys.u64 [%rd1], %rd2;\n"
    "  ret;\n"
    "}\n";
static CUfunction word_kernel[MAX_DEVICES];
static CUmodule word_module[MAX_DEVICES];
/* Its own lock: loading a module may wait for running kernels, and the
 * context lock is taken by every call of the platform. */
static pthread_mutex_t word_lock = PTHREAD_MUTEX_INITIALIZER;

static int load_word_kernel(int device, CUfunction *out) {
  pthread_mutex_lock(&word_lock);
  CUresult r = CUDA_SUCCESS;
  if (!word_kernel[device]) {
    r = gpu.moduleLoadData(&word_module[device], word_ptx);
    if (r == CUDA_SUCCESS) r = gpu.moduleGetFunction(&word_kernel[device], word_module[device], "mori_queue_word");
  }
  *out = word_kernel[device];
  pthread_mutex_unlock(&word_lock);
  return r == CUDA_SUCCESS ? 0 : gpu_fail(r, "loading the copy queue's word kernel (PTX JIT)");
}

static int queue_create(int device, mori_platform_queue_t *q) {
  /* Loaded now, not at the first word: loading a module waits for the
   * kernels running on the device, and the kernel that asked for the word
   * (through a proxy) may be one of them — it would wait on itself. A queue
   * that only copies (the sdma transport's) works without it: a failure
   * here is reported by the first word instead. */
  CUfunction kernel = NULL;
  mori_error_saved_t before;
  mori_error_save(&before);
  if (load_word_kernel(device, &kernel) != 0) mori_error_restore(&before);
  GPU_TRY(gpu.streamCreate(&q->stream, CU_STREAM_NON_BLOCKING), "creating a copy stream on device %d", device);
  q->device = device;
  for (int i = 0; i < QUEUE_EVENTS; i++)
    GPU_TRY(gpu.eventCreate(&q->events[i], CU_EVENT_DISABLE_TIMING), "creating the copy queue's events on device %d", device);
  return 0;
}

static void queue_release(mori_platform_queue_t *q) {
  for (int i = 0; i < QUEUE_EVENTS; i++)
    if (q->events[i]) gpu.eventDestroy(q->events[i]);
  if (q->stream) gpu.streamDestroy(q->stream);
  free(q);
}

int mori_platform_queue_create(int device, mori_platform_queue_t **out) {
  if (device < 0 || device >= MAX_DEVICES) return mori_error_set(MORI_EINVAL, "cuda: device %d out of range", device);
  mori_platform_queue_t *q = calloc(1, sizeof(*q));
  if (!q) return mori_error_set(MORI_ENOMEM, "cuda: copy queue");
  int rc = GPU_ON_DEVICE(device, queue_create(device, q));
  if (rc) {
    (void)GPU_ON_DEVICE(device, (queue_release(q), 0));
    return rc;
  }
  *out = q;
  return 0;
}

/* Moves `finished` past every mark that has fired. */
static int queue_poll(mori_platform_queue_t *q) {
  while (q->marks_done < q->marks) {
    CUresult r = gpu.eventQuery(q->events[q->marks_done % QUEUE_EVENTS]);
    if (r == CUDA_ERROR_NOT_READY) return 0;
    if (r != CUDA_SUCCESS) return gpu_fail(r, "asking how far a copy queue has come");
    q->finished = q->covers[q->marks_done % QUEUE_EVENTS];
    q->marks_done++;
  }
  return 0;
}

/* Marks everything queued so far (when anything is unmarked); with every
 * event of the ring in use, waits for the oldest first. */
static int queue_mark(mori_platform_queue_t *q) {
  uint64_t marked = q->marks ? q->covers[(q->marks - 1) % QUEUE_EVENTS] : 0;
  if (q->submitted == marked) return 0;
  /* Every event in use: mark later (never wait here: the caller may hold
   * locks a kernel's progress depends on). */
  if (q->marks - q->marks_done == QUEUE_EVENTS) return 0;
  GPU_TRY(gpu.eventRecord(q->events[q->marks % QUEUE_EVENTS], q->stream), "marking copies on device %d", q->device);
  q->covers[q->marks % QUEUE_EVENTS] = q->submitted;
  q->marks++;
  return 0;
}

static int queue_copy(mori_platform_queue_t *q, void *dst, const void *src, size_t size) {
  GPU_TRY(gpu.memcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, size, q->stream),
          "queueing a %zu-byte copy", size);
  q->submitted++;
  return 0;
}

int mori_platform_queue_copy(mori_platform_queue_t *q, void *dst, const void *src, size_t size) {
  return GPU_ON_DEVICE(q->device, queue_copy(q, dst, src, size));
}

static int queue_word(mori_platform_queue_t *q, uint64_t *dst, uint64_t value, bool add) {
  CUfunction kernel = NULL;
  int rc = load_word_kernel(q->device, &kernel);
  if (rc) return rc;
  CUdeviceptr where = (CUdeviceptr)(uintptr_t)dst;
  uint32_t is_add = add;
  void *params[] = {&where, &value, &is_add};
  GPU_TRY(gpu.launchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, q->stream, params, NULL), "queueing a word %s at %p",
          add ? "add" : "store", (void *)dst);
  q->submitted++;
  return 0;
}

int mori_platform_queue_word(mori_platform_queue_t *q, uint64_t *dst, uint64_t value, bool add) {
  if ((uintptr_t)dst % 8) return mori_error_set(MORI_EINVAL, "cuda: word at %p is not 8-byte aligned", (void *)dst);
  return GPU_ON_DEVICE(q->device, queue_word(q, dst, value, add));
}

static int queue_mark_and_poll(mori_platform_queue_t *q) {
  int rc = queue_mark(q);
  return rc ? rc : queue_poll(q);
}

int mori_platform_queue_finished(mori_platform_queue_t *q, uint64_t *count) {
  int rc = GPU_ON_DEVICE(q->device, queue_mark_and_poll(q));
  *count = q->finished;
  return rc;
}

static int queue_wait(mori_platform_queue_t *q) {
  GPU_TRY(gpu.streamSynchronize(q->stream), "waiting for copies on device %d", q->device);
  q->finished = q->submitted;
  q->marks_done = q->marks;
  return 0;
}

int mori_platform_queue_wait(mori_platform_queue_t *q) { return GPU_ON_DEVICE(q->device, queue_wait(q)); }

int mori_platform_queue_destroy(mori_platform_queue_t *q) {
  if (!q) return 0;
  (void)GPU_ON_DEVICE(q->device, (queue_release(q), 0));
  return 0;
}

/* ---- stream memory operations ---- */

int mori_platform_stream_signal_wait(void *stream, void *const *writes, int n_writes, void *const *waits, int n_waits,
                                     uint64_t value) {
  int rc = gpu_ready();
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
    GPU_TRY(gpu.streamBatchMemOp((CUstream)stream, (unsigned)count, ops, 0), "stream signal/wait (%d operations)", count);
  }
  return 0;
}

static int memops_supported(int device, bool *yes) {
  CUdevice dev;
  int v = 0;
  GPU_TRY(gpu.deviceGet(&dev, device), "device %d", device);
  GPU_TRY(gpu.deviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev), "memop attribute");
  *yes = v != 0;
  return 0;
}

int mori_platform_stream_memops_supported(int device, bool *yes) {
  return GPU_ON_DEVICE(device, memops_supported(device, yes));
}

/* ---- dma-buf: the NIC registers GPU memory through it where it can ---- */

static int dmabuf_export(int device, void *ptr, size_t size, int *fd, uint64_t *offset) {
  if (!get_handle_for_range)
    return mori_error_set(MORI_ENOTSUP, "cuda: the driver has no cuMemGetHandleForAddressRange (older than CUDA 11.7)");
  CUdevice dev;
  int supported = 0;
  GPU_TRY(gpu.deviceGet(&dev, device), "device %d", device);
  GPU_TRY(gpu.deviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev), "dma-buf attribute");
  if (!supported)
    return mori_error_set(MORI_ENOTSUP, "cuda: device %d does not support dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)",
                          device);
  /* The driver exports whole host pages. */
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)ptr & ~(page - 1),
            end = ((uintptr_t)ptr + size + page - 1) & ~(page - 1);
  int handle = -1;
  GPU_TRY(get_handle_for_range(&handle, (CUdeviceptr)start, end - start, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
          "cuMemGetHandleForAddressRange (dma-buf) of %zu bytes at %p on device %d", (size_t)(end - start), (void *)start,
          device);
  *fd = handle;
  *offset = (uintptr_t)ptr - start;
  return 0;
}

int mori_platform_dmabuf_export(int device, void *ptr, size_t size, int *fd, uint64_t *offset) {
  *fd = -1;
  *offset = 0;
  return GPU_ON_DEVICE(device, dmabuf_export(device, ptr, size, fd, offset));
}

int mori_platform_dmabuf_close(int fd) {
  return fd >= 0 && close(fd) != 0 ? mori_error_set(MORI_EIO, "cuda: closing dma-buf fd %d", fd) : 0;
}

int gpu_is_device_memory(const void *p, bool *yes) {
  CUmemorytype type = 0;
  *yes = gpu.pointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
         type == CU_MEMORYTYPE_DEVICE;
  return 0;
}
