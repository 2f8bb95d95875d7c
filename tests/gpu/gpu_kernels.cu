// SPDX-License-Identifier: MIT
// GPU kernels for tests and benchmarks, written once for CUDA and HIP.
#include "tests/gpu/gpu_kernels.h"

#include <stdio.h>

#include "mori/device.h"
#include "mori/device/team.h"

#if defined(MORI_DEVICE_COMPILER_HIP)
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuSetDevice hipSetDevice
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemset hipMemset
#define gpuMemcpy hipMemcpy
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuEvent_t hipEvent_t
#define gpuEventCreate hipEventCreate
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuEventDestroy hipEventDestroy
#define gpuStreamQuery hipStreamQuery
#define gpuStream_t hipStream_t
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuStreamDestroy hipStreamDestroy
#define gpuErrorNotReady hipErrorNotReady
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamCaptureModeGlobal hipStreamCaptureModeGlobal
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuGraph_t hipGraph_t
#define gpuGraphExec_t hipGraphExec_t
#define gpuGraphInstantiate(exec, g) hipGraphInstantiate((exec), (g), nullptr, nullptr, 0)
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#else
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuSetDevice cudaSetDevice
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemset cudaMemset
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuStreamQuery cudaStreamQuery
#define gpuStream_t cudaStream_t
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuStreamDestroy cudaStreamDestroy
#define gpuErrorNotReady cudaErrorNotReady
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamCaptureModeGlobal cudaStreamCaptureModeGlobal
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuGraph_t cudaGraph_t
#define gpuGraphExec_t cudaGraphExec_t
#define gpuGraphInstantiate(exec, g) cudaGraphInstantiate((exec), (g), 0)
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuEvent_t cudaEvent_t
#define gpuEventCreate cudaEventCreate
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuEventDestroy cudaEventDestroy
#endif

static char last_error[256];
const char *gpu_last_error(void) { return last_error; }

static int check(gpuError_t e, const char *what) {
  if (e == gpuSuccess) return 0;
  snprintf(last_error, sizeof(last_error), "%s: %s", what, gpuGetErrorString(e));
  return -1;
}
#define GPU_TRY(call) \
  do {                \
    if (check((call), #call)) return -1; \
  } while (0)

static __device__ uint32_t pattern(int writer, int reader, uint64_t i, uint32_t salt) {
  return (uint32_t)(writer * 1000003u + reader * 7919u + (uint32_t)i * 31u + salt);
}

int gpu_device_count(void) {
  int n = 0;
  return check(gpuGetDeviceCount(&n), "device count") ? -1 : n;
}

int gpu_select_device(int local_rank) {
  int n = gpu_device_count();
  if (n <= 0) return -1;
  int dev = local_rank % n;
  GPU_TRY(gpuSetDevice(dev));
  GPU_TRY(gpuFree(0)); /* creates the primary context now */
  return dev;
}

int gpu_synchronize(void) {
  GPU_TRY(gpuDeviceSynchronize());
  return 0;
}

__global__ void exchange_kernel(mori_window_dev_t view, int via_table, uint64_t chunk, uint32_t salt, int blocks_per_peer) {
  int peer = blockIdx.x / blocks_per_peer, slice = blockIdx.x % blocks_per_peer;
  uint64_t words = chunk / 4, per = (words + blocks_per_peer - 1) / blocks_per_peer;
  uint64_t lo = slice * per, hi = lo + per < words ? lo + per : words;
  uint64_t offset = (uint64_t)view.world_rank * chunk;
  uint32_t *dst = (uint32_t *)(via_table ? mori_table_ptr(view, peer, offset) : mori_peer_ptr(view, peer, offset));
  if (!dst) return;
  for (uint64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) dst[i] = pattern(view.world_rank, peer, i, salt);
}

int gpu_exchange(mori_window_dev_t view, int via_table, uint64_t chunk, uint32_t salt, int blocks_per_peer) {
  exchange_kernel<<<view.world_size * blocks_per_peer, 256>>>(view, via_table, chunk, salt, blocks_per_peer);
  GPU_TRY(gpuGetLastError());
  GPU_TRY(gpuDeviceSynchronize());
  return 0;
}

__global__ void count_kernel(mori_window_dev_t view, uint64_t chunk, uint32_t salt, unsigned long long *bad) {
  const uint32_t *mine = (const uint32_t *)mori_local_ptr(view, 0);
  uint64_t words = chunk / 4, total = words * view.world_size;
  unsigned long long local_bad = 0;
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    int writer = (int)(i / words);
    if (mine[i] != pattern(writer, view.world_rank, i % words, salt)) local_bad++;
  }
  if (local_bad) atomicAdd(bad, local_bad);
}

static long long run_count(void (*launch)(unsigned long long *, void *), void *arg) {
  unsigned long long *bad = 0, host = 0;
  if (check(gpuMalloc((void **)&bad, sizeof(*bad)), "malloc")) return -1;
  (void)gpuMemset(bad, 0, sizeof(*bad));
  launch(bad, arg);
  if (check(gpuGetLastError(), "count kernel") || check(gpuMemcpy(&host, bad, sizeof(host), gpuMemcpyDeviceToHost), "copy")) {
    (void)gpuFree(bad);
    return -1;
  }
  (void)gpuFree(bad);
  return (long long)host;
}

struct count_args {
  mori_window_dev_t view;
  uint64_t chunk;
  uint32_t salt;
  int peer;
};

static void launch_count(unsigned long long *bad, void *arg) {
  struct count_args *a = (struct count_args *)arg;
  count_kernel<<<64, 256>>>(a->view, a->chunk, a->salt, bad);
}

long long gpu_count_mismatches(mori_window_dev_t view, uint64_t chunk, uint32_t salt) {
  struct count_args a = {view, chunk, salt, 0};
  return run_count(launch_count, &a);
}

__global__ void fill_kernel(mori_window_dev_t view, uint64_t words, uint32_t salt) {
  uint32_t *mine = (uint32_t *)mori_local_ptr(view, 0);
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += gridDim.x * blockDim.x)
    mine[i] = pattern(view.world_rank, -1, i, salt);
}

int gpu_fill_local(mori_window_dev_t view, uint64_t bytes, uint32_t salt) {
  fill_kernel<<<64, 256>>>(view, bytes / 4, salt);
  GPU_TRY(gpuGetLastError());
  GPU_TRY(gpuDeviceSynchronize());
  return 0;
}

__global__ void check_peer_kernel(mori_window_dev_t view, int peer, uint64_t words, uint32_t salt, unsigned long long *bad) {
  const uint32_t *theirs = (const uint32_t *)mori_peer_ptr(view, peer, 0);
  if (!theirs) {
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(bad, (unsigned long long)words);
    return;
  }
  unsigned long long local_bad = 0;
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += gridDim.x * blockDim.x)
    if (theirs[i] != pattern(peer, -1, i, salt)) local_bad++;
  if (local_bad) atomicAdd(bad, local_bad);
}

static void launch_check_peer(unsigned long long *bad, void *arg) {
  struct count_args *a = (struct count_args *)arg;
  check_peer_kernel<<<64, 256>>>(a->view, a->peer, a->chunk / 4, a->salt, bad);
}

long long gpu_check_peer(mori_window_dev_t view, int peer, uint64_t bytes, uint32_t salt) {
  struct count_args a = {view, bytes, salt, peer};
  return run_count(launch_check_peer, &a);
}

/* One block: put `bytes` of a pattern into the peer (block, warp or thread
 * scope by round), signal, wait for the peer's signal, verify what the peer
 * put, then get it back from the peer and verify the round trip. Team
 * arithmetic is checked on the device on the way. */
__global__ void put_signal_kernel(mori_window_dev_t view, int peer, uint64_t bytes, uint64_t signal_offset, uint64_t round,
                                  uint64_t timeout_ns, uint32_t *scratch, int *rc) {
  uint32_t *src = scratch, *back = scratch + bytes / 4;
  uint64_t words = bytes / 4;
  for (uint64_t i = threadIdx.x; i < words; i += blockDim.x) src[i] = pattern(view.world_rank, peer, i, (uint32_t)round);
  __syncthreads();
  int r = 0;
  uint64_t dst = (uint64_t)view.world_rank * bytes;
  switch (round % 3) {
    case 0: r = mori_put_block(view, peer, dst, src, bytes); break;
    case 1: /* each warp puts its share */ {
      int warps = blockDim.x / warpSize, warp = threadIdx.x / warpSize;
      uint64_t per = (bytes / warps + 15) / 16 * 16, lo = per * warp;
      if (lo < bytes) r = mori_put_warp(view, peer, dst + lo, (char *)src + lo, lo + per <= bytes ? per : bytes - lo);
      break;
    }
    default:
      if (threadIdx.x == 0) r = mori_put_thread(view, peer, dst, src, bytes);
  }
  if (r) atomicExch(rc, r);
  __syncthreads();
  if (threadIdx.x == 0) {
    mori_team_t world = {0, 1, view.world_size, view.world_rank};
    if (mori_team_to_world(world, mori_team_from_world(world, peer)) != peer) atomicExch(rc, -22);
    mori_quiet();
    if (!*rc) *rc = mori_signal_set(view, peer, signal_offset + 8ull * view.world_rank, round);
    if (!*rc) *rc = mori_signal_wait_until(view, signal_offset + 8ull * peer, MORI_CMP_GE, round, timeout_ns, peer, 0, 0);
  }
  __syncthreads();
  if (*rc) return;
  const uint32_t *got = (const uint32_t *)mori_local_ptr(view, (uint64_t)peer * bytes);
  for (uint64_t i = threadIdx.x; i < words; i += blockDim.x)
    if (got[i] != pattern(peer, view.world_rank, i, (uint32_t)round)) atomicAdd(rc, 1);
  /* get: what this rank put into the peer, read back over the link. */
  if (mori_get_block(view, peer, back, dst, bytes) != 0 && threadIdx.x == 0) atomicExch(rc, -1003);
  for (uint64_t i = threadIdx.x; i < words; i += blockDim.x)
    if (back[i] != src[i]) atomicAdd(rc, 1);
}

int gpu_put_signal_round(mori_window_dev_t view, int peer, uint64_t bytes, uint64_t signal_offset, uint64_t round,
                         uint64_t timeout_ns, int *device_rc) {
  uint32_t *scratch = 0;
  int *rc = 0;
  GPU_TRY(gpuMalloc((void **)&scratch, 2 * bytes));
  GPU_TRY(gpuMalloc((void **)&rc, sizeof(int)));
  (void)gpuMemset(rc, 0, sizeof(int));
  put_signal_kernel<<<1, 512>>>(view, peer, bytes, signal_offset, round, timeout_ns, scratch, rc);
  GPU_TRY(gpuGetLastError());
  GPU_TRY(gpuMemcpy(device_rc, rc, sizeof(int), gpuMemcpyDeviceToHost));
  (void)gpuFree(scratch);
  (void)gpuFree(rc);
  return 0;
}

__global__ void wait_nobody_kernel(mori_window_dev_t view, uint64_t signal_offset, uint64_t timeout_ns, int *rc) {
  *rc = mori_signal_wait_until(view, signal_offset, MORI_CMP_EQ, 0xabcdef, timeout_ns, (view.world_rank + 1) % view.world_size,
                               9, 0);
}

int gpu_wait_nobody(mori_window_dev_t view, uint64_t signal_offset, uint64_t timeout_ns, int *device_rc) {
  int *rc = 0;
  GPU_TRY(gpuMalloc((void **)&rc, sizeof(int)));
  wait_nobody_kernel<<<1, 1>>>(view, signal_offset, timeout_ns, rc);
  GPU_TRY(gpuGetLastError());
  GPU_TRY(gpuMemcpy(device_rc, rc, sizeof(int), gpuMemcpyDeviceToHost));
  (void)gpuFree(rc);
  return 0;
}

__global__ void barrier_once_kernel(mori_window_dev_t view, uint32_t channel, uint64_t timeout_ns, int *rc) {
  int r = mori_lsa_barrier_block(view, channel, timeout_ns);
  if (r) *rc = r; /* each thread's own wait: any failure is the block's */
}

int gpu_barrier_once(mori_window_dev_t view, uint32_t channel, uint64_t timeout_ns, int threads, int *device_rc) {
  int *rc = 0;
  GPU_TRY(gpuMalloc((void **)&rc, sizeof(int)));
  GPU_TRY(gpuMemset(rc, 0, sizeof(int)));
  barrier_once_kernel<<<1, threads>>>(view, channel, timeout_ns, rc);
  GPU_TRY(gpuGetLastError());
  GPU_TRY(gpuMemcpy(device_rc, rc, sizeof(int), gpuMemcpyDeviceToHost));
  (void)gpuFree(rc);
  return 0;
}

__global__ void barrier_loop_kernel(mori_window_dev_t view, int iters, int pad_protocol, int *rc) {
  for (int i = 0; i < iters; i++) {
    int r = pad_protocol ? mori_lsa_pad_barrier_block(view, 0, 5000000000ull)
                         : mori_lsa_barrier_block(view, 0, 5000000000ull);
    if (r) {
      if (threadIdx.x == 0) *rc = r;
      return;
    }
  }
}

static double time_kernel_us(void (*launch)(void *), void *arg, int iters_inside) {
  gpuEvent_t a, b;
  (void)gpuEventCreate(&a);
  (void)gpuEventCreate(&b);
  (void)gpuEventRecord(a, 0);
  launch(arg);
  (void)gpuEventRecord(b, 0);
  (void)gpuEventSynchronize(b);
  float ms = 0;
  (void)gpuEventElapsedTime(&ms, a, b);
  (void)gpuEventDestroy(a);
  (void)gpuEventDestroy(b);
  return ms * 1000.0 / iters_inside;
}

struct barrier_args {
  mori_window_dev_t view;
  int iters, pad_protocol;
  int *rc;
};
static void launch_barrier(void *arg) {
  struct barrier_args *a = (struct barrier_args *)arg;
  barrier_loop_kernel<<<1, 32>>>(a->view, a->iters, a->pad_protocol, a->rc);
}

double gpu_bench_barrier(mori_window_dev_t view, int iters, int pad_protocol) {
  struct barrier_args a = {view, 100, pad_protocol, 0};
  if (check(gpuMalloc((void **)&a.rc, sizeof(int)), "malloc")) return -1;
  (void)gpuMemset(a.rc, 0, sizeof(int));
  time_kernel_us(launch_barrier, &a, 100); /* warm-up */
  a.iters = iters;
  double us = time_kernel_us(launch_barrier, &a, iters);
  int rc = 0;
  (void)gpuMemcpy(&rc, a.rc, sizeof(int), gpuMemcpyDeviceToHost);
  (void)gpuFree(a.rc);
  if (check(gpuGetLastError(), "barrier kernel")) return -1;
  return rc ? -1 : us;
}

/* `reps` puts of `bytes` back to back (reps > 1: no launch gaps between
 * them, the put's own throughput). */
__global__ void put_kernel(mori_window_dev_t view, int peer, const char *src, uint64_t bytes, int via_table, int reps) {
  uint64_t per = (bytes / gridDim.x + 15) / 16 * 16;
  uint64_t lo = per * blockIdx.x;
  if (lo >= bytes) return;
  uint64_t n = lo + per <= bytes ? per : bytes - lo;
  for (int r = 0; r < reps; r++) {
    if (via_table) {
      char *dst = (char *)mori_table_ptr(view, peer, lo);
      mori_copy_cooperative(dst, src + lo, n, threadIdx.x, blockDim.x);
    } else {
      mori_put_block(view, peer, lo, src + lo, n);
    }
  }
}

struct put_args {
  mori_window_dev_t view;
  int peer, blocks, threads, via_table, iters, reps;
  void *src;
  uint64_t bytes;
};
static void launch_put(void *arg) {
  struct put_args *a = (struct put_args *)arg;
  for (int i = 0; i < a->iters; i++)
    put_kernel<<<a->blocks, a->threads>>>(a->view, a->peer, (const char *)a->src, a->bytes, a->via_table, a->reps);
}

double gpu_bench_put(mori_window_dev_t view, int peer, void *src, uint64_t bytes, int blocks, int threads, int via_table,
                     int iters, int reps) {
  struct put_args a = {view, peer, blocks, threads, via_table, 3, 1, src, bytes};
  time_kernel_us(launch_put, &a, 3);
  a.iters = iters;
  a.reps = reps;
  double us = time_kernel_us(launch_put, &a, iters * reps);
  if (check(gpuGetLastError(), "put kernel")) return -1;
  return us;
}

void *gpu_alloc(uint64_t bytes) {
  void *p = 0;
  return check(gpuMalloc(&p, bytes), "malloc") ? 0 : p;
}

void gpu_free(void *p) { (void)gpuFree(p); }

__global__ void spin_kernel(uint64_t ns) {
  uint64_t start = mori_clock_ns();
  while (mori_clock_since(start) < ns) {
  }
}

int gpu_spin_start(uint64_t ns) {
  spin_kernel<<<1, 1>>>(ns);
  return check(gpuGetLastError(), "spin kernel");
}

int gpu_spin_on(void *stream, uint64_t ns) {
  spin_kernel<<<1, 1, 0, (gpuStream_t)stream>>>(ns);
  return check(gpuGetLastError(), "spin kernel");
}

int gpu_stream_busy(void *stream) {
  gpuError_t e = gpuStreamQuery((gpuStream_t)stream);
  if (e == gpuErrorNotReady) return 1;
  return e == gpuSuccess ? 0 : -1;
}

int gpu_spin_running(void) {
  gpuError_t e = gpuStreamQuery(0);
  if (e == gpuErrorNotReady) return 1;
  return e == gpuSuccess ? 0 : -1;
}

__global__ void read_table_kernel(void *const *table, int n, void **out) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = table[i];
}

/* On a stream of its own that waits for nobody: nothing orders the kernel
 * after mori's uploads but the getter that handed out `table_dev`. */
int gpu_read_table(void *const *table_dev, int n, void **out) {
  gpuStream_t st;
  void **dev_out = 0;
  GPU_TRY(gpuStreamCreateWithFlags(&st, gpuStreamNonBlocking));
  int rc = check(gpuMalloc((void **)&dev_out, sizeof(void *) * (size_t)n), "malloc");
  if (!rc) {
    read_table_kernel<<<1, 64, 0, st>>>(table_dev, n, dev_out);
    rc = check(gpuGetLastError(), "read_table_kernel");
  }
  if (!rc) rc = check(gpuStreamSynchronize(st), "stream synchronize");
  if (!rc) rc = check(gpuMemcpy(out, dev_out, sizeof(void *) * (size_t)n, gpuMemcpyDeviceToHost), "copy");
  (void)gpuFree(dev_out);
  (void)gpuStreamDestroy(st);
  return rc;
}

void *gpu_capture_begin(void) {
  gpuStream_t st = nullptr;
  if (check(gpuStreamCreateWithFlags(&st, gpuStreamNonBlocking), "stream")) return nullptr;
  if (check(gpuStreamBeginCapture(st, gpuStreamCaptureModeGlobal), "begin capture")) {
    (void)gpuStreamDestroy(st);
    return nullptr;
  }
  return (void *)st;
}

int gpu_read_table_async(void *const *table_dev, int n, void **dev_out, void *stream) {
  read_table_kernel<<<1, 64, 0, (gpuStream_t)stream>>>(table_dev, n, dev_out);
  return check(gpuGetLastError(), "read_table_kernel");
}

int gpu_capture_end_replay(void *stream) {
  gpuStream_t st = (gpuStream_t)stream;
  gpuGraph_t g = nullptr;
  gpuGraphExec_t exec = nullptr;
  int rc = check(gpuStreamEndCapture(st, &g), "end capture");
  if (!rc) rc = check(gpuGraphInstantiate(&exec, g), "instantiate");
  if (!rc) rc = check(gpuGraphLaunch(exec, st), "replay");
  if (!rc) rc = check(gpuStreamSynchronize(st), "stream synchronize");
  if (exec) (void)gpuGraphExecDestroy(exec);
  if (g) (void)gpuGraphDestroy(g);
  (void)gpuStreamDestroy(st);
  return rc;
}

int gpu_copy_out(void *host, const void *dev, uint64_t bytes) {
  return check(gpuMemcpy(host, dev, bytes, gpuMemcpyDeviceToHost), "copy");
}

/* A copy from pageable host memory may return once the bytes are in the
 * driver's staging buffer, before they land in `dev`; a kernel then queued
 * on a non-blocking stream does not wait for the legacy stream and may read
 * the old contents. Waiting for the legacy stream makes the copy complete. */
int gpu_copy_in(void *dev, const void *host, uint64_t bytes) {
  if (check(gpuMemcpy(dev, host, bytes, gpuMemcpyHostToDevice), "copy")) return -1;
  return check(gpuStreamSynchronize((gpuStream_t)0), "synchronize");
}

int gpu_zero(void *p, uint64_t bytes) {
  if (check(gpuMemset(p, 0, bytes), "memset")) return -1;
  return check(gpuDeviceSynchronize(), "synchronize");
}

/* ---- through the proxy ring ---- */

/* Waits for the kernel just launched by its event, not by a blocking copy:
 * a synchronous copy on the legacy stream keeps other threads of this
 * process from queueing work on the device until it returns, and the
 * proxy thread must queue copies for the kernel to finish. */
static int wait_launched(void) {
  gpuEvent_t done;
  GPU_TRY(gpuEventCreate(&done));
  GPU_TRY(gpuEventRecord(done, 0));
  int rc = check(gpuEventSynchronize(done), "gpuEventSynchronize") ? -1 : 0;
  (void)gpuEventDestroy(done);
  return rc;
}

static __device__ uint32_t proxy_word(int writer, int block, int round, uint64_t i) {
  return (uint32_t)(writer * 0x9E3779B1u) ^ ((uint32_t)block << 20) ^ ((uint32_t)round << 8) ^ (uint32_t)(i * 2654435761u);
}

__global__ void proxy_exchange_kernel(mori_window_dev_t view, int peer, uint64_t slot, int rounds, uint64_t timeout_ns, int *rc,
                                      unsigned long long *mismatches) {
  int b = blockIdx.x, blocks = gridDim.x;
  uint64_t recv_base = (uint64_t)blocks * 2 * slot, sig_base = 2 * recv_base, counter = sig_base + (uint64_t)blocks * 8;
  char *local = (char *)mori_local_ptr(view, 0);
  uint64_t words = slot / 4;
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  for (int r = 0; r < rounds; r++) {
    uint64_t at = ((uint64_t)b * 2 + (uint64_t)(r % 2)) * slot;
    uint32_t *send = (uint32_t *)(local + at);
    for (uint64_t i = threadIdx.x; i < words; i += blockDim.x) send[i] = proxy_word(view.world_rank, b, r, i);
    __syncthreads();
    int e = mori_put_block(view, peer, recv_base + at, send, slot);
    if (threadIdx.x == 0) {
      if (!e) e = mori_signal_set(view, peer, sig_base + (uint64_t)b * 8, (uint64_t)r + 1);
      if (!e) e = mori_signal_add(view, peer, counter, 1);
      if (!e) e = mori_signal_wait_until(view, sig_base + (uint64_t)b * 8, MORI_CMP_GE, (uint64_t)r + 1, timeout_ns, peer, b, 0);
      if (e) {
        atomicCAS(rc, 0, e);
        failed = 1;
      }
    }
    __syncthreads();
    if (failed) return;
    const uint32_t *got = (const uint32_t *)(local + recv_base + at);
    unsigned long long bad = 0;
    for (uint64_t i = threadIdx.x; i < words; i += blockDim.x) bad += got[i] != proxy_word(peer, b, r, i);
    if (bad) atomicAdd(mismatches, bad);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    int e = mori_quiet_window(view, timeout_ns);
    if (e) atomicCAS(rc, 0, e);
  }
}

int gpu_proxy_exchange(mori_window_dev_t view, int peer, uint64_t slot, int blocks, int rounds, uint64_t timeout_ns,
                       int *device_rc, unsigned long long *mismatches) {
  int *rc = 0;
  unsigned long long *bad = 0;
  GPU_TRY(gpuMalloc((void **)&rc, sizeof(int)));
  GPU_TRY(gpuMalloc((void **)&bad, sizeof(*bad)));
  (void)gpuMemset(rc, 0, sizeof(int));
  (void)gpuMemset(bad, 0, sizeof(*bad));
  proxy_exchange_kernel<<<blocks, 256>>>(view, peer, slot, rounds, timeout_ns, rc, bad);
  GPU_TRY(gpuGetLastError());
  if (wait_launched()) return -1;
  GPU_TRY(gpuMemcpy(device_rc, rc, sizeof(int), gpuMemcpyDeviceToHost));
  GPU_TRY(gpuMemcpy(mismatches, bad, sizeof(*bad), gpuMemcpyDeviceToHost));
  (void)gpuFree(rc);
  (void)gpuFree(bad);
  return 0;
}

__global__ void proxy_get_kernel(mori_window_dev_t view, int peer, uint64_t dst_offset, uint64_t src_offset, uint64_t bytes,
                                 int *rc) {
  int e = mori_get_block(view, peer, (char *)mori_local_ptr(view, 0) + dst_offset, src_offset, bytes);
  if (threadIdx.x == 0) {
    if (!e) e = mori_quiet_window(view, 20000000000ull);
    *rc = e;
  }
}

int gpu_proxy_get(mori_window_dev_t view, int peer, uint64_t dst_offset, uint64_t src_offset, uint64_t bytes, int *device_rc) {
  int *rc = 0;
  GPU_TRY(gpuMalloc((void **)&rc, sizeof(int)));
  proxy_get_kernel<<<1, 256>>>(view, peer, dst_offset, src_offset, bytes, rc);
  GPU_TRY(gpuGetLastError());
  if (wait_launched()) return -1;
  GPU_TRY(gpuMemcpy(device_rc, rc, sizeof(int), gpuMemcpyDeviceToHost));
  (void)gpuFree(rc);
  return 0;
}

// Warp batches over GPU posting: every thread puts its own source slot (a
// length that changes with thread and batch) into its destination slot, one
// claim and one doorbell per warp and batch; the batches wrap the send
// queue. A block size that is not a multiple of the warp's leaves a last
// warp with fewer lanes, whose batches are that much shorter.
__global__ void gda_warp_batches_kernel(mori_window_dev_t view, int peer, uint64_t slot, uint64_t recv, int batches, int *rc) {
  int tid = MORI_THREAD_RANK_BLOCK(), threads = MORI_THREAD_COUNT_BLOCK();
  const char *base = (const char *)mori_local_ptr(view, 0);
  int r = 0;
  for (int b = 0; b < batches && !r; b++) {
    uint64_t bytes = gpu_gda_warp_batch_bytes(tid, b);
    uint64_t dst = recv + ((uint64_t)(b % GPU_GDA_WARP_BATCH_SETS) * (uint64_t)threads + (uint64_t)tid) * slot;
    r = mori_gda_put_warp(view, peer, dst, base + (uint64_t)tid * slot, bytes, 10000000000ull);
  }
  __syncthreads();
  if (tid == 0 && !r) r = mori_gda_quiet(view, 10000000000ull);
  if (r) atomicCAS(rc, 0, r);
}

int gpu_gda_warp_batches(mori_window_dev_t view, int peer, uint64_t slot, uint64_t recv, int batches, int threads,
                         int *device_rc) {
  int *rc = 0;
  GPU_TRY(gpuMalloc((void **)&rc, sizeof(int)));
  GPU_TRY(gpuMemset(rc, 0, sizeof(int)));
  gda_warp_batches_kernel<<<1, threads>>>(view, peer, slot, recv, batches, rc);
  GPU_TRY(gpuGetLastError());
  if (wait_launched()) return -1;
  GPU_TRY(gpuMemcpy(device_rc, rc, sizeof(int), gpuMemcpyDeviceToHost));
  (void)gpuFree(rc);
  return 0;
}

__global__ void proxy_throughput_kernel(mori_window_dev_t view, int peer, uint64_t bytes, int per_thread, int *rc) {
  uint64_t t = threadIdx.x, n = blockDim.x;
  const char *src = (const char *)mori_local_ptr(view, 0);
  for (int i = 0; i < per_thread; i++) {
    uint64_t at = ((uint64_t)i * n + t) * bytes;
    int e = mori_put_thread(view, peer, at, src + at, bytes);
    if (e) {
      atomicCAS(rc, 0, e);
      return;
    }
  }
  __syncthreads();
  if (t == 0) {
    int e = mori_quiet_window(view, 20000000000ull);
    if (e) atomicCAS(rc, 0, e);
  }
}

__global__ void proxy_latency_kernel(mori_window_dev_t view, int peer, uint64_t bytes, uint64_t signal_offset, int per_launch,
                                     int *rc) {
  const char *src = (const char *)mori_local_ptr(view, 0);
  for (int i = 0; i < per_launch; i++) {
    int e = mori_put_thread(view, peer, 0, src, bytes);
    if (!e) e = mori_signal_set(view, peer, signal_offset, (uint64_t)i + 1);
    if (!e) e = mori_quiet_window(view, 20000000000ull);
    if (e) {
      atomicCAS(rc, 0, e);
      return;
    }
  }
}

static double proxy_time_us(int iters, int requests_per_launch, int *rc, int *device_rc, int latency,
                            mori_window_dev_t view, int peer, uint64_t bytes, int threads, int per, uint64_t signal_offset) {
  gpuEvent_t start, stop;
  if (check(gpuEventCreate(&start), "gpuEventCreate") || check(gpuEventCreate(&stop), "gpuEventCreate")) return -1;
  if (latency) proxy_latency_kernel<<<1, 1>>>(view, peer, bytes, signal_offset, 1, rc); /* warm-up */
  else proxy_throughput_kernel<<<1, threads>>>(view, peer, bytes, 1, rc);
  (void)gpuEventRecord(start, 0);
  for (int i = 0; i < iters; i++) {
    if (latency) proxy_latency_kernel<<<1, 1>>>(view, peer, bytes, signal_offset, per, rc);
    else proxy_throughput_kernel<<<1, threads>>>(view, peer, bytes, per, rc);
  }
  (void)gpuEventRecord(stop, 0);
  if (check(gpuEventSynchronize(stop), "gpuEventSynchronize")) return -1;
  float ms = 0;
  (void)gpuEventElapsedTime(&ms, start, stop);
  (void)gpuEventDestroy(start);
  (void)gpuEventDestroy(stop);
  if (check(gpuMemcpy(device_rc, rc, sizeof(int), gpuMemcpyDeviceToHost), "gpuMemcpy")) return -1;
  return ms * 1000.0 / ((double)iters * requests_per_launch);
}

double gpu_bench_proxy_throughput(mori_window_dev_t view, int peer, uint64_t bytes, int threads, int per_thread, int iters,
                                  int *device_rc) {
  int *rc = 0;
  if (check(gpuMalloc((void **)&rc, sizeof(int)), "gpuMalloc")) return -1;
  (void)gpuMemset(rc, 0, sizeof(int));
  double us = proxy_time_us(iters, threads * per_thread, rc, device_rc, 0, view, peer, bytes, threads, per_thread, 0);
  (void)gpuFree(rc);
  return us;
}

double gpu_bench_proxy_latency(mori_window_dev_t view, int peer, uint64_t bytes, uint64_t signal_offset, int per_launch,
                               int iters, int *device_rc) {
  int *rc = 0;
  if (check(gpuMalloc((void **)&rc, sizeof(int)), "gpuMalloc")) return -1;
  (void)gpuMemset(rc, 0, sizeof(int));
  double us = proxy_time_us(iters, per_launch, rc, device_rc, 1, view, peer, bytes, 1, per_launch, signal_offset);
  (void)gpuFree(rc);
  return us;
}

