// SPDX-License-Identifier: MIT
#include "tests/gpu/ep_bench_kernels.h"

#include <stdio.h>
#include <string.h>

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define gpu(name) hip##name
#define GPU_SUCCESS hipSuccess
#define GPU_D2D hipMemcpyDeviceToDevice
typedef hipStream_t stream_t;
typedef hipEvent_t event_t;
#else
#define gpu(name) cuda##name
#define GPU_SUCCESS cudaSuccess
#define GPU_D2D cudaMemcpyDeviceToDevice
typedef cudaStream_t stream_t;
typedef cudaEvent_t event_t;
#endif

int ep_bench_copy(void *dst, const void *src, uint64_t bytes, void *stream) {
  return gpu(MemcpyAsync)(dst, src, bytes, GPU_D2D, (stream_t)stream) == GPU_SUCCESS ? 0 : -1;
}

void *ep_bench_event_new(void) {
  event_t e = nullptr;
  return gpu(EventCreate)(&e) == GPU_SUCCESS ? (void *)e : nullptr;
}

int ep_bench_event_record(void *event, void *stream) {
  return gpu(EventRecord)((event_t)event, (stream_t)stream) == GPU_SUCCESS ? 0 : -1;
}

double ep_bench_event_ms(void *a, void *b) {
  float ms = -1;
  if (gpu(EventSynchronize)((event_t)b) != GPU_SUCCESS) return -1;
  if (gpu(EventElapsedTime)(&ms, (event_t)a, (event_t)b) != GPU_SUCCESS) return -1;
  return ms;
}

void ep_bench_event_free(void *event) { (void)gpu(EventDestroy)((event_t)event); }

int ep_bench_arch(char *arch, int size) {
  int device = 0;
  if (gpu(GetDevice)(&device) != GPU_SUCCESS) return -1;
#if defined(__HIPCC__)
  hipDeviceProp_t p;
  if (hipGetDeviceProperties(&p, device) != hipSuccess) return -1;
  snprintf(arch, (size_t)size, "%s", p.gcnArchName);
  char *colon = strchr(arch, ':');
  if (colon) *colon = 0;
#else
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return -1;
  snprintf(arch, (size_t)size, "sm_%d%d", p.major, p.minor);
#endif
  return 0;
}
