// SPDX-License-Identifier: MIT
// Kernels of bench_gda, written once for CUDA and HIP.
#include "tests/gpu/gda_kernels.h"

#include <stdio.h>

#include "mori/device/gda.h"
#include "mori/device/proxy.h"

#if defined(MORI_DEVICE_COMPILER_HIP)
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpy hipMemcpy
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuGetLastError hipGetLastError
#define gpuSuccess hipSuccess
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuSetDevice hipSetDevice
#else
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuGetLastError cudaGetLastError
#define gpuSuccess cudaSuccess
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuSetDevice cudaSetDevice
#endif

static const uint64_t kTimeoutNs = 10ull * 1000 * 1000 * 1000;

// BENCH_WARP + f: a warp's batches with the WQE stores of form f
// (enum mori_gda_warp_stores).
enum { BENCH_PUT = 0, BENCH_PROXY = 1, BENCH_WARP = 2 };

__global__ void gda_bench_kernel(mori_window_dev_t view, int peer, uint64_t bytes, int iters, int kind, gda_bench_result_t *out) {
  int rc = 0;
  const char *src = (const char *)mori_local_ptr(view, 0);
  uint64_t t0 = mori_clock_ns();
  for (int i = 0; i < iters && !rc; i++) {
    if (kind == BENCH_PUT) {
      rc = mori_gda_put(view, peer, 0, src, bytes, kTimeoutNs);
    } else if (kind >= BENCH_WARP) {
      int lane = MORI_THREAD_RANK_WARP();
      rc = mori_gda_impl_put_warp(view, peer, (uint64_t)lane * bytes, src + (uint64_t)lane * bytes, bytes, kTimeoutNs,
                                  kind - BENCH_WARP);
    } else {
      int64_t t = mori_proxy_submit(view, MORI_PROXY_PUT, peer, 0, 0, bytes, kTimeoutNs);
      rc = t < 0 ? (int)t : 0;
    }
  }
  uint64_t t1 = mori_clock_ns();
  int qrc = 0;
  if (MORI_THREAD_RANK_BLOCK() == 0) qrc = kind == BENCH_PROXY ? mori_proxy_quiet(view, kTimeoutNs) : mori_gda_quiet(view, kTimeoutNs);
  uint64_t t2 = mori_clock_ns();
  if (MORI_THREAD_RANK_BLOCK() == 0) {
    double per = kind >= BENCH_WARP ? (double)iters * MORI_THREAD_COUNT_WARP() : (double)iters;
    out->post_ns = (double)(t1 - t0) / (per > 0 ? per : 1);
    out->quiet_ns = (double)(t2 - t1);
    out->device_rc = rc ? rc : qrc;
  }
}

// The claim as the library made it before its counters moved to GPU scope
// (system-scope acquires and compare-and-swap), for the stage comparison.
// The bench's puts never fill the queue (200 of 4096 per launch).
__device__ int64_t gda_reserve_system_scope(mori_gda_qp_t *qp) {
  for (;;) {
    uint64_t r = mori_atomic_load_acquire_u64(&qp->reserved);
    uint64_t done = mori_atomic_load_acquire_u64(&qp->completed);
    if (r + 1 - done > qp->wqe_cnt) return MORI_DEVICE_ETIMEDOUT;
    if (mori_atomic_cas_u64(&qp->reserved, r, r + 1) == r) return (int64_t)r;
  }
}

// One put, step by step (mori_gda_post_rdma's steps, with the doorbell
// written out so each ordering is timed apart); cycles added to acc[].
// mode (enum gda_stage_mode): the library's steps, or an earlier form.
__device__ int gda_stage_put(mori_window_dev_t view, int peer, uint64_t bytes, int mode, unsigned long long *acc) {
  const mori_gda_window_t *g = view.gda;
  mori_gda_qp_t *qp = mori_gda_qp_of(g, peer, 0);
  const char *src = (const char *)mori_local_ptr(view, 0);
  long long c0 = clock64();
  int64_t at;
  mori_gda_qp_t d;
  uint64_t raddr;
  uint32_t rkey, lkey;
  if (mode == GDA_MODE_LIBRARY) {
    d = mori_gda_qp_desc(qp);
    raddr = mori_gda_remote_addr(view, peer, 0);
    rkey = g->rkey[peer];
    lkey = g->lkey;
    at = mori_gda_reserve(view, qp, 0, 1, kTimeoutNs);
  } else {
    // Earlier: everything read after the claim (each load back to L2).
    at = gda_reserve_system_scope(qp);
    d = mori_gda_qp_desc(qp);
    raddr = mori_gda_remote_addr(view, peer, 0);
    rkey = g->rkey[peer];
    lkey = g->lkey;
  }
  if (at < 0) return (int)at;
  long long c1 = clock64();
  uint64_t db = mori_gda_write_rdma(&d, (uint64_t)at, 0, MORI_GDA_SIGNALED, raddr, rkey, (uint64_t)(uintptr_t)src, lkey,
                                    (uint32_t)bytes);
  long long c2 = clock64();
  uint32_t rec = mori_mlx5_be32((uint32_t)(((uint64_t)at + 1) & 0xffffu));
  int fenced = mode == GDA_MODE_FENCED;
  if (fenced) {
    mori_fence_system();
    *(volatile uint32_t *)d.sq_dbrec = rec;
  } else {
    mori_atomic_store_release_u32(d.sq_dbrec, rec);
  }
  long long c3 = clock64();
  if (fenced) {
    mori_fence_system();
    *(volatile uint64_t *)d.bf_reg = db;
  } else {
    mori_atomic_store_release_u64(d.bf_reg, db);
  }
  long long c4 = clock64();
  if (fenced) mori_fence_system();
  long long c5 = clock64();
  if (mode == GDA_MODE_LIBRARY) {
    while (mori_atomic_load_acquire_device_u64(&qp->rung) != (uint64_t)at) {
    }
    mori_atomic_store_release_device_u64(&qp->rung, (uint64_t)at + 1);
  } else {
    while (mori_atomic_load_acquire_u64(&qp->rung) != (uint64_t)at) {
    }
    mori_atomic_store_release_u64(&qp->rung, (uint64_t)at + 1);
  }
  long long c6 = clock64();
  long long c[7] = {c0, c1, c2, c3, c4, c5, c6};
  for (int k = 0; k < GDA_STAGE_COUNT; k++) acc[k] += (unsigned long long)(c[k + 1] - c[k]);
  return 0;
}

__global__ void gda_stages_kernel(mori_window_dev_t view, int peer, uint64_t bytes, int iters, int mode, gda_bench_result_t *out) {
  unsigned long long acc[GDA_STAGE_COUNT] = {0};
  int rc = 0;
  uint64_t t0 = mori_clock_ns();
  long long k0 = clock64();
  for (int i = 0; i < iters && !rc; i++) rc = gda_stage_put(view, peer, bytes, mode, acc);
  long long k1 = clock64();
  uint64_t t1 = mori_clock_ns();
  int qrc = mori_gda_quiet(view, kTimeoutNs);
  uint64_t t2 = mori_clock_ns();
  double ns_per_cycle = k1 > k0 ? (double)(t1 - t0) / (double)(k1 - k0) : 0;
  for (int k = 0; k < GDA_STAGE_COUNT; k++) out->stage_ns[k] = (double)acc[k] * ns_per_cycle / (iters > 0 ? iters : 1);
  out->post_ns = (double)(t1 - t0) / (iters > 0 ? iters : 1);
  out->quiet_ns = (double)(t2 - t1);
  out->device_rc = rc ? rc : qrc;
}

static int run(mori_window_dev_t view, int peer, uint64_t bytes, int iters, int kind, gda_bench_result_t *out) {
  gda_bench_result_t *d = NULL;
  if (gpuMalloc((void **)&d, sizeof(*d)) != gpuSuccess) return -1;
  int warp = kind >= BENCH_WARP;
  int threads = warp ? 32 : 1;
#if defined(MORI_DEVICE_COMPILER_HIP)
  if (warp) threads = 64; /* a wavefront */
#endif
  gda_bench_kernel<<<1, threads>>>(view, peer, bytes, iters, kind, d);
  int rc = gpuGetLastError() == gpuSuccess && gpuDeviceSynchronize() == gpuSuccess ? 0 : -1;
  if (!rc && gpuMemcpy(out, d, sizeof(*out), gpuMemcpyDeviceToHost) != gpuSuccess) rc = -1;
  (void)gpuFree(d);
  return rc;
}

extern "C" int gda_select_device(int local_rank) {
  int n = 0;
  if (gpuGetDeviceCount(&n) != gpuSuccess || n <= 0 || gpuSetDevice(local_rank % n) != gpuSuccess) {
    fprintf(stderr, "gda_select_device: no GPU for local rank %d\n", local_rank);
    return -1;
  }
  return local_rank % n;
}

extern "C" int gda_bench_put(mori_window_dev_t view, int peer, uint64_t bytes, int iters, gda_bench_result_t *out) {
  return run(view, peer, bytes, iters, BENCH_PUT, out);
}
extern "C" int gda_bench_put_warp(mori_window_dev_t view, int peer, uint64_t bytes, int iters, gda_bench_result_t *out) {
  return run(view, peer, bytes, iters, BENCH_WARP + MORI_GDA_WARP_STORES_ENCODER, out);
}
extern "C" int gda_bench_put_warp_pieces(mori_window_dev_t view, int peer, uint64_t bytes, int iters, gda_bench_result_t *out) {
  return run(view, peer, bytes, iters, BENCH_WARP + MORI_GDA_WARP_STORES_PIECES, out);
}
extern "C" int gda_bench_put_warp_runs(mori_window_dev_t view, int peer, uint64_t bytes, int iters, gda_bench_result_t *out) {
  return run(view, peer, bytes, iters, BENCH_WARP + MORI_GDA_WARP_STORES_RUNS, out);
}
extern "C" int gda_bench_stages(mori_window_dev_t view, int peer, uint64_t bytes, int iters, int mode, gda_bench_result_t *out) {
  gda_bench_result_t *d = NULL;
  if (gpuMalloc((void **)&d, sizeof(*d)) != gpuSuccess) return -1;
  gda_stages_kernel<<<1, 1>>>(view, peer, bytes, iters, mode, d);
  int rc = gpuGetLastError() == gpuSuccess && gpuDeviceSynchronize() == gpuSuccess ? 0 : -1;
  if (!rc && gpuMemcpy(out, d, sizeof(*out), gpuMemcpyDeviceToHost) != gpuSuccess) rc = -1;
  (void)gpuFree(d);
  return rc;
}

extern "C" int gda_bench_proxy_submit(mori_window_dev_t view, int peer, uint64_t bytes, int iters, gda_bench_result_t *out) {
  return run(view, peer, bytes, iters, BENCH_PROXY, out);
}
