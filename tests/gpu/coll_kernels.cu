// SPDX-License-Identifier: MIT
#include "tests/gpu/coll_kernels.h"

#include "mori/device/coll/impl/numeric__funcs.h"

#if defined(MORI_DEVICE_COMPILER_HIP)
#define gpu(name) hip##name
#define GPU_SUCCESS hipSuccess
#define GPU_STREAM_NON_BLOCKING hipStreamNonBlocking
#define GPU_CAPTURE_GLOBAL hipStreamCaptureModeGlobal
typedef hipStream_t stream_t;
typedef hipGraph_t graph_t;
typedef hipGraphExec_t graph_exec_t;
#else
#define gpu(name) cuda##name
#define GPU_SUCCESS cudaSuccess
#define GPU_STREAM_NON_BLOCKING cudaStreamNonBlocking
#define GPU_CAPTURE_GLOBAL cudaStreamCaptureModeGlobal
typedef cudaStream_t stream_t;
typedef cudaGraph_t graph_t;
typedef cudaGraphExec_t graph_exec_t;
#endif
#define launch_status() (gpu(GetLastError)() == GPU_SUCCESS ? 0 : -1)

namespace {

__host__ __device__ uint32_t pattern(int src, int dst, uint64_t word, uint64_t iter) {
  uint64_t x = (uint64_t)src * 0x9e3779b97f4a7c15ull ^ (uint64_t)dst * 0xbf58476d1ce4e5b9ull ^ word * 0x94d049bb133111ebull ^
               iter * 0x2545f4914f6cdd1dull;
  x ^= x >> 31;
  return (uint32_t)(x * 0xff51afd7ed558ccdull >> 32);
}

__host__ __device__ float value(int rank, uint64_t i, uint64_t iter) {
  uint32_t p = pattern(rank, 7, i, iter);
  return (float)((int)(p % 4001u) - 2000) / 128.0f;
}

__global__ void fill_a2a(uint32_t *in, uint64_t words, int me, int n, uint64_t iter) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words * n; i += (uint64_t)gridDim.x * blockDim.x)
    in[i] = pattern(me, (int)(i / words), i % words, iter);
}

__global__ void check_a2a(const uint32_t *out, uint64_t words, int me, int n, uint64_t iter, unsigned long long *bad) {
  unsigned long long local = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words * n; i += (uint64_t)gridDim.x * blockDim.x)
    local += out[i] != pattern((int)(i / words), me, i % words, iter);
  if (local) atomicAdd(bad, local);
}

__global__ void fill_values(void *in, uint64_t count, int dtype, int me, uint64_t iter) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < count; i += (uint64_t)gridDim.x * blockDim.x)
    mori_coll_impl_store_elem(in, i, (uint32_t)dtype, value(me, i, iter));
}

__global__ void check_reduce(const void *out, uint64_t count, int dtype, int op, int n, uint64_t iter,
                             unsigned long long *bad) {
  unsigned long long local = 0;
  uint32_t size = mori_coll_impl_dtype_size((uint32_t)dtype);
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < count; i += (uint64_t)gridDim.x * blockDim.x) {
    float acc = 0;
    for (int r = 0; r < n; r++) {
      uint32_t word = 0;
      mori_coll_impl_store_elem(&word, 0, (uint32_t)dtype, value(r, i, iter)); /* rounded to the input's type */
      float x = mori_coll_impl_load_elem(&word, 0, (uint32_t)dtype);
      acc = r == 0 ? x : mori_coll_impl_reduce(acc, x, (uint32_t)op);
    }
    uint32_t want = 0, got = 0;
    mori_coll_impl_store_elem(&want, 0, (uint32_t)dtype, mori_coll_impl_reduce_finish(acc, (uint32_t)op, n));
    const char *p = (const char *)out + i * size;
    for (uint32_t b = 0; b < size; b++) got |= (uint32_t)(uint8_t)p[b] << (8 * b);
    local += want != got;
  }
  if (local) atomicAdd(bad, local);
}

__global__ void delay(uint64_t ns) {
  uint64_t start = mori_clock_ns();
  while (mori_clock_since(start) < ns) {
  }
}

constexpr int kBlocks = 264, kThreads = 256;

}  // namespace

int coll_fill_a2a(void *in, uint64_t bytes, int me, int n, uint64_t iter, void *stream) {
  fill_a2a<<<kBlocks, kThreads, 0, (stream_t)stream>>>((uint32_t *)in, bytes / 4, me, n, iter);
  return launch_status();
}

int coll_check_a2a(const void *out, uint64_t bytes, int me, int n, uint64_t iter, unsigned long long *mismatches,
                   void *stream) {
  check_a2a<<<kBlocks, kThreads, 0, (stream_t)stream>>>((const uint32_t *)out, bytes / 4, me, n, iter, mismatches);
  return launch_status();
}

int coll_fill_values(void *in, uint64_t count, int dtype, int me, uint64_t iter, void *stream) {
  fill_values<<<kBlocks, kThreads, 0, (stream_t)stream>>>(in, count, dtype, me, iter);
  return launch_status();
}

int coll_check_reduce(const void *out, uint64_t count, int dtype, int op, int n, uint64_t iter,
                      unsigned long long *mismatches, void *stream) {
  check_reduce<<<kBlocks, kThreads, 0, (stream_t)stream>>>(out, count, dtype, op, n, iter, mismatches);
  return launch_status();
}

int coll_delay(uint64_t ns, void *stream) {
  delay<<<1, 1, 0, (stream_t)stream>>>(ns);
  return launch_status();
}

unsigned long long *coll_counter_new(void) {
  unsigned long long *p = nullptr;
  if (gpu(Malloc)((void **)&p, sizeof(*p)) != GPU_SUCCESS) return nullptr;
  if (gpu(Memset)(p, 0, sizeof(*p)) != GPU_SUCCESS) return nullptr;
  return p;
}

unsigned long long coll_counter_read(unsigned long long *counter, void *stream) {
  unsigned long long v = ~0ull;
  if (gpu(StreamSynchronize)((stream_t)stream) != GPU_SUCCESS) return ~0ull;
  if (gpu(Memcpy)(&v, counter, sizeof(v), gpu(MemcpyDeviceToHost)) != GPU_SUCCESS) return ~0ull;
  return v;
}

void coll_counter_free(unsigned long long *counter) { (void)gpu(Free)(counter); }

void *coll_stream_new(void) {
  stream_t s = nullptr;
  return gpu(StreamCreateWithFlags)(&s, GPU_STREAM_NON_BLOCKING) == GPU_SUCCESS ? (void *)s : nullptr;
}

void coll_stream_free(void *stream) { (void)gpu(StreamDestroy)((stream_t)stream); }

int coll_capture_begin(void *stream) {
  return gpu(StreamBeginCapture)((stream_t)stream, GPU_CAPTURE_GLOBAL) == GPU_SUCCESS ? 0 : -1;
}

int coll_capture_end(void *stream, void **graph) {
  graph_t g = nullptr;
  graph_exec_t exec = nullptr;
  if (gpu(StreamEndCapture)((stream_t)stream, &g) != GPU_SUCCESS) return -1;
#if defined(MORI_DEVICE_COMPILER_HIP)
  int rc = hipGraphInstantiate(&exec, g, nullptr, nullptr, 0) == hipSuccess ? 0 : -1;
#else
  int rc = cudaGraphInstantiate(&exec, g, 0) == cudaSuccess ? 0 : -1;
#endif
  (void)gpu(GraphDestroy)(g);
  *graph = (void *)exec;
  return rc;
}

int coll_graph_replay(void *graph, void *stream) {
  return gpu(GraphLaunch)((graph_exec_t)graph, (stream_t)stream) == GPU_SUCCESS ? 0 : -1;
}

void coll_graph_free(void *graph) { (void)gpu(GraphExecDestroy)((graph_exec_t)graph); }

int coll_stream_sync(void *stream) { return gpu(StreamSynchronize)((stream_t)stream) == GPU_SUCCESS ? 0 : -1; }

double coll_time_replays(void *graph, void *stream, int replays) {
#if defined(MORI_DEVICE_COMPILER_HIP)
  hipEvent_t a, b;
#else
  cudaEvent_t a, b;
#endif
  if (gpu(EventCreate)(&a) != GPU_SUCCESS || gpu(EventCreate)(&b) != GPU_SUCCESS) return -1;
  (void)gpu(EventRecord)(a, (stream_t)stream);
  for (int r = 0; r < replays; r++) (void)gpu(GraphLaunch)((graph_exec_t)graph, (stream_t)stream);
  (void)gpu(EventRecord)(b, (stream_t)stream);
  (void)gpu(EventSynchronize)(b);
  float ms = 0;
  (void)gpu(EventElapsedTime)(&ms, a, b);
  (void)gpu(EventDestroy)(a);
  (void)gpu(EventDestroy)(b);
  return (double)ms * 1e3 / replays;
}
