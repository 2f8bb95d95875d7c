// SPDX-License-Identifier: MIT
// The GPU launcher: one kernel per call, as many blocks as there are items
// but no more than the device keeps resident at once (every block must be
// running for the waits to be met), on the caller's stream and device.
#include <stdlib.h>

#include "collectives/internal.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "mori/device.h"
#include "mori/device/coll.h"

#if defined(MORI_DEVICE_COMPILER_HIP)
#define gpu(name) hip##name
typedef hipStream_t stream_t;
typedef hipError_t status_t;
#define GPU_SUCCESS hipSuccess
#define GPU_ATTR_SMS hipDeviceAttributeMultiprocessorCount
#else
#define gpu(name) cuda##name
typedef cudaStream_t stream_t;
typedef cudaError_t status_t;
#define GPU_SUCCESS cudaSuccess
#define GPU_ATTR_SMS cudaDevAttrMultiProcessorCount
#endif

namespace {

constexpr int kThreads = 512;  // the most a block has; MORI_COLL_THREADS may ask for fewer

// One call's kernel: the members' signatures compared (contexts that check
// calls), block 0 runs begin (the start-of-call step, or NO_BEGIN), every
// block its share of the items, then the epoch.
#define NO_BEGIN(c, a, epoch) ((void)0)
#define COLL_KERNEL(name, Args, begin, item)                                                 \
  __global__ void __launch_bounds__(kThreads) name(mori_coll_dev_t c, Args a) {             \
    c.call_start_ns = mori_clock_ns(); /* the call's waits count from here */                \
    uint64_t epoch = mori_coll_epoch(c, blockIdx.x);                                         \
    if (mori_coll_check_call(c, &a.sig, blockIdx.x, epoch)) { /* a member's call differs */  \
      mori_coll_finish_block(c, blockIdx.x, epoch);                                          \
      return;                                                                                \
    }                                                                                        \
    if (blockIdx.x == 0) begin(c, &a, epoch);                                                \
    uint32_t first, stride, last;                                                            \
    mori_coll_block_range(c.grid, blockIdx.x, a.kind_end, a.share, &first, &stride, &last); \
    for (uint32_t i = first; i < last; i += stride) item(c, &a, epoch, i);                   \
    mori_coll_finish_block(c, blockIdx.x, epoch);                                            \
  }

COLL_KERNEL(all_to_all_kernel, mori_a2a_args_t, mori_a2a_begin, mori_a2a_item)
COLL_KERNEL(all_reduce_kernel, mori_allreduce_args_t, NO_BEGIN, mori_allreduce_item)
COLL_KERNEL(all_to_all_v_kernel, mori_a2av_args_t, mori_a2av_begin, mori_a2av_item)

__global__ void refusal_kernel(mori_coll_dev_t c) { mori_coll_refuse_block(c, blockIdx.x); }

int env_int(const char *name, int fallback) { return (int)mori_env_int_or(name, fallback); }

int fail(status_t e, const char *what) {
  return mori_error_set(MORI_ERUNTIME, "collectives: %s: %s", what, gpu(GetErrorString)(e));
}

// Blocks the device keeps resident at once for the heavier of the kernels.
int resident_blocks(int device, int *out) {
  int sms = 0, a2a = 0, ar = 0;
  status_t e = gpu(DeviceGetAttribute)(&sms, GPU_ATTR_SMS, device);
  if (e == GPU_SUCCESS) e = gpu(OccupancyMaxActiveBlocksPerMultiprocessor)(&a2a, all_to_all_kernel, kThreads, 0);
  if (e == GPU_SUCCESS) e = gpu(OccupancyMaxActiveBlocksPerMultiprocessor)(&ar, all_reduce_kernel, kThreads, 0);
  int a2av = 0;
  if (e == GPU_SUCCESS) e = gpu(OccupancyMaxActiveBlocksPerMultiprocessor)(&a2av, all_to_all_v_kernel, kThreads, 0);
  if (e != GPU_SUCCESS) return fail(e, "querying the resident blocks");
  int per_sm = a2a < ar ? a2a : ar;
  if (a2av < per_sm) per_sm = a2av;
  *out = sms * (per_sm > 0 ? per_sm : 1);
  return 0;
}

template <typename Kernel, typename Args>
int launch(const mori_coll_t *c, Kernel kernel, const Args *a, void *stream) {
  int saved = -1;
  status_t e = gpu(GetDevice)(&saved);
  if (e == GPU_SUCCESS && saved != c->device) e = gpu(SetDevice)(c->device);
  if (e != GPU_SUCCESS) return fail(e, "selecting the context's device");
  int threads = env_int("MORI_COLL_THREADS", a->threads ? (int)a->threads : kThreads);
  if (threads <= 0 || threads > kThreads) threads = kThreads;
  kernel<<<c->grid, threads, 0, (stream_t)stream>>>(c->view, *a);
  e = gpu(GetLastError)();
  int rc = e == GPU_SUCCESS ? 0 : fail(e, "launching the kernel");
  if (saved >= 0 && saved != c->device) (void)gpu(SetDevice)(saved);
  return rc;
}

__global__ void barrier_kernel(mori_window_dev_t v, mori_window_dev_t sync, int channel, uint64_t timeout_ns) {
  mori_world_barrier_block(v, sync, (uint32_t)channel, timeout_ns);
}

__global__ void put_signal_kernel(mori_window_dev_t v, mori_window_dev_t sync, int peer, int channel, uint64_t timeout_ns) {
  mori_fence_system(); /* the stream's earlier writes go before the signal */
  if (mori_lsa_index(v, peer) < 0) mori_remote_signal_put(v, sync, peer, (uint32_t)channel, timeout_ns);
  else mori_pad_put(v, peer, (uint32_t)channel, timeout_ns);
}

__global__ void wait_signal_kernel(mori_window_dev_t v, mori_window_dev_t sync, int peer, int channel, uint64_t timeout_ns) {
  if (mori_lsa_index(v, peer) < 0) mori_remote_signal_wait(v, sync, peer, (uint32_t)channel, timeout_ns);
  else mori_pad_wait(v, peer, (uint32_t)channel, timeout_ns);
  mori_fence_system();
}

// Loads the window-op kernels into the current device's context before the
// first of them is launched. Under CUDA's lazy module loading (the default
// since CUDA 12) a kernel is loaded at its first launch, and loading may
// wait for the kernels already running in the context. A wait_signal queued
// behind a put_signal that waits for the proxy is such a first launch: the
// proxy's copy-engine executor needs a kernel of its own to start in this
// context, the loader waits for put_signal, and put_signal for that kernel
// (seen on an H200: the first round of put/wait across nodes hung). Once
// per device; a failure here is left to the launch to report.
void preload_window_ops(int device) {
  static unsigned char loaded[64];
  if (device < 0 || device >= 64 || __atomic_load_n(&loaded[device], __ATOMIC_ACQUIRE)) return;
  gpu(FuncAttributes) attr;
  bool ok = gpu(FuncGetAttributes)(&attr, reinterpret_cast<const void *>(barrier_kernel)) == GPU_SUCCESS &&
            gpu(FuncGetAttributes)(&attr, reinterpret_cast<const void *>(put_signal_kernel)) == GPU_SUCCESS &&
            gpu(FuncGetAttributes)(&attr, reinterpret_cast<const void *>(wait_signal_kernel)) == GPU_SUCCESS;
  if (ok) __atomic_store_n(&loaded[device], 1, __ATOMIC_RELEASE);
  else (void)gpu(GetLastError)();
}

}  // namespace

extern "C" int mori_launch_window_op(mori_window_t *win, const mori_window_dev_t *v, const mori_window_dev_t *sync, int op,
                                     int peer, int channel, uint64_t timeout_ns, void *stream) {
  int device = mori_comm_device(mori_window_comm(win)), saved = -1;
  status_t e = gpu(GetDevice)(&saved);
  if (e == GPU_SUCCESS && saved != device) e = gpu(SetDevice)(device);
  if (e != GPU_SUCCESS) return fail(e, "selecting the window's device");
  preload_window_ops(device);
  if (op == MORI_WINDOW_OP_BARRIER)
    barrier_kernel<<<1, (v->lsa_size + 31) / 32 * 32, 0, (stream_t)stream>>>(*v, *sync, channel, timeout_ns);
  else if (op == MORI_WINDOW_OP_PUT_SIGNAL)
    put_signal_kernel<<<1, 1, 0, (stream_t)stream>>>(*v, *sync, peer, channel, timeout_ns);
  else
    wait_signal_kernel<<<1, 1, 0, (stream_t)stream>>>(*v, *sync, peer, channel, timeout_ns);
  e = gpu(GetLastError)();
  int rc = e == GPU_SUCCESS ? 0 : fail(e, "launching a window op");
  if (saved >= 0 && saved != device) (void)gpu(SetDevice)(saved);
  return rc;
}

extern "C" int mori_coll_grid(int device, uint32_t *grid) {
  int saved = -1;
  status_t e = gpu(GetDevice)(&saved);
  if (e == GPU_SUCCESS && saved != device) e = gpu(SetDevice)(device);
  if (e != GPU_SUCCESS) return fail(e, "selecting the device");
  int blocks = 0;
  int rc = resident_blocks(device, &blocks);
  if (saved >= 0 && saved != device) (void)gpu(SetDevice)(saved);
  if (rc) return rc;
  int cap = env_int("MORI_COLL_MAX_BLOCKS", 0);
  if (cap > 0 && cap < blocks) blocks = cap;
  if (blocks > MORI_COLL_MAX_GRID) blocks = MORI_COLL_MAX_GRID;
  *grid = (uint32_t)(blocks > 0 ? blocks : 1);
  return 0;
}

extern "C" int mori_coll_launch_all_to_all(const mori_coll_t *c, const mori_a2a_args_t *a, void *stream) {
  return launch(c, all_to_all_kernel, a, stream);
}

extern "C" int mori_coll_launch_all_reduce(const mori_coll_t *c, const mori_allreduce_args_t *a, void *stream) {
  return launch(c, all_reduce_kernel, a, stream);
}

extern "C" int mori_coll_launch_all_to_all_v(const mori_coll_t *c, const mori_a2av_args_t *a, void *stream) {
  return launch(c, all_to_all_v_kernel, a, stream);
}

extern "C" int mori_coll_launch_refusal(const mori_coll_t *c, void *stream) {
  int saved = -1;
  status_t e = gpu(GetDevice)(&saved);
  if (e == GPU_SUCCESS && saved != c->device) e = gpu(SetDevice)(c->device);
  if (e != GPU_SUCCESS) return fail(e, "selecting the context's device");
  refusal_kernel<<<c->grid, 32, 0, (stream_t)stream>>>(c->view);
  e = gpu(GetLastError)();
  int rc = e == GPU_SUCCESS ? 0 : fail(e, "launching a refused call's part");
  if (saved >= 0 && saved != c->device) (void)gpu(SetDevice)(saved);
  return rc;
}
