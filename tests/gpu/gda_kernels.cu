// SPDX-License-Identifier: MIT
// Kernels of bench_gda, written once for CUDA and HIP.
#include "tests/gpu/gda_kernels.h"

#include <stdio.h>
#include <string.h>

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
  uint64_t rung_seen = ~0ull, wait_start = 0;
  mori_gda_qp_t d;
  uint64_t raddr;
  uint32_t rkey, lkey;
  if (mode == GDA_MODE_LIBRARY) {
    d = mori_gda_qp_desc(qp);
    raddr = mori_gda_remote_addr(view, peer, 0);
    rkey = g->rkey[peer];
    lkey = g->lkey;
    at = mori_gda_reserve(view, qp, 0, 1, kTimeoutNs, &rung_seen, &wait_start);
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
#if defined(MORI_DEVICE_COMPILER_HIP)
  int device_scope = 0; /* as mori_mlx5_ring orders them on ROCm */
#else
  int device_scope = mode == GDA_MODE_LIBRARY && d.sq_in_device; /* as mori_mlx5_ring orders them */
#endif
  if (fenced) {
    mori_fence_system();
    *(volatile uint32_t *)d.sq_dbrec = rec;
  } else if (device_scope) {
    mori_atomic_store_release_device_u32(d.sq_dbrec, rec);
  } else {
    mori_atomic_store_release_u32(d.sq_dbrec, rec);
  }
  long long c3 = clock64();
  if (fenced) {
    mori_fence_system();
    *(volatile uint64_t *)d.bf_reg = db;
  } else if (device_scope) {
    mori_atomic_store_release_device_u64(d.bf_reg, db);
  } else {
    mori_atomic_store_release_u64(d.bf_reg, db);
  }
  long long c4 = clock64();
  if (fenced) mori_fence_system();
  long long c5 = clock64();
  if (mode == GDA_MODE_LIBRARY) {
    while (rung_seen != (uint64_t)at && mori_atomic_load_acquire_device_u64(&qp->rung) != (uint64_t)at) {
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

// ---- gda_bench_ordering: what each ordering of a doorbell costs, by where
// the queue lives (no NIC reads these buffers; only the GPU's side). ----

#if defined(MORI_DEVICE_COMPILER_HIP)
#define GDA_REL_GPU(p, v) __hip_atomic_store((p), (v), __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT)
#define GDA_REL_SYS(p, v) __hip_atomic_store((p), (v), __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM)
#define GDA_ACQ_GPU(p) __hip_atomic_load((p), __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT)
#else
__device__ __forceinline__ void gda_rel_gpu_u32(uint32_t *p, uint32_t v) {
  asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void gda_rel_gpu_u64(uint64_t *p, uint64_t v) {
  asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void gda_rel_sys_u32(uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void gda_rel_sys_u64(uint64_t *p, uint64_t v) {
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t gda_acq_gpu_u64(uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
#endif

// Stores a 64-byte WQE's worth (eight 8-byte stores) at ring slot i.
__device__ __forceinline__ void gda_ordering_wqe(uint64_t *ring, int i) {
  volatile uint64_t *slot = (volatile uint64_t *)(ring + (size_t)(i & 63) * 8);
  for (int k = 0; k < 8; k++) slot[k] = (uint64_t)i * 8 + (uint64_t)k;
}

enum { GDA_SCOPE_NONE = 0, GDA_SCOPE_GPU = 1, GDA_SCOPE_SYS = 2 };

// Where a pattern's queue lives and how each store is ordered.
typedef struct gda_ordering_layout {
  int ring_host, dbrec_host; // 1: pinned host memory; 0: device memory
  int dbrec_scope, bf_scope; // the release on the record's and the register's store
} gda_ordering_layout_t;

// In the order of enum gda_ordering (the register is in host memory throughout).
static const gda_ordering_layout_t kGdaOrderings[GDA_ORDERING_COUNT] = {
    {1, 1, GDA_SCOPE_SYS, GDA_SCOPE_SYS}, {0, 0, GDA_SCOPE_SYS, GDA_SCOPE_SYS}, {0, 0, GDA_SCOPE_GPU, GDA_SCOPE_SYS},
    {0, 0, GDA_SCOPE_GPU, GDA_SCOPE_GPU}, {0, 0, GDA_SCOPE_GPU, GDA_SCOPE_NONE},
};

__global__ void gda_ordering_kernel(uint64_t *dev, uint64_t *host, gda_ordering_layout_t layout, int iters, gda_bench_result_t *out) {
  // dev / host: 4 KiB ring at +0, record at +4096, register at +4160 (host),
  // rung at +4224 (device memory).
  const gda_ordering_layout_t *L = &layout;
  uint64_t *ring = L->ring_host ? host : dev;
  uint32_t *dbrec = (uint32_t *)((char *)(L->dbrec_host ? host : dev) + 4096);
  uint64_t *bf = (uint64_t *)((char *)host + 4160);
  uint64_t *rung = (uint64_t *)((char *)dev + 4224);
  unsigned long long acc[4] = {0, 0, 0, 0};
  uint64_t t0 = mori_clock_ns();
  long long k0 = clock64();
  for (int i = 0; i < iters; i++) {
    long long c0 = clock64();
    gda_ordering_wqe(ring, i);
    long long c1 = clock64();
#if defined(MORI_DEVICE_COMPILER_HIP)
    if (L->dbrec_scope == GDA_SCOPE_SYS) GDA_REL_SYS(dbrec, (uint32_t)i);
    else GDA_REL_GPU(dbrec, (uint32_t)i);
#else
    if (L->dbrec_scope == GDA_SCOPE_SYS) gda_rel_sys_u32(dbrec, (uint32_t)i);
    else gda_rel_gpu_u32(dbrec, (uint32_t)i);
#endif
    long long c2 = clock64();
#if defined(MORI_DEVICE_COMPILER_HIP)
    if (L->bf_scope == GDA_SCOPE_SYS) GDA_REL_SYS(bf, (uint64_t)i);
    else if (L->bf_scope == GDA_SCOPE_GPU) GDA_REL_GPU(bf, (uint64_t)i);
    else *(volatile uint64_t *)bf = (uint64_t)i;
#else
    if (L->bf_scope == GDA_SCOPE_SYS) gda_rel_sys_u64(bf, (uint64_t)i);
    else if (L->bf_scope == GDA_SCOPE_GPU) gda_rel_gpu_u64(bf, (uint64_t)i);
    else *(volatile uint64_t *)bf = (uint64_t)i;
#endif
    long long c3 = clock64();
#if defined(MORI_DEVICE_COMPILER_HIP)
    while (GDA_ACQ_GPU(rung) != (uint64_t)i) {
    }
    GDA_REL_GPU(rung, (uint64_t)i + 1);
#else
    while (gda_acq_gpu_u64(rung) != (uint64_t)i) {
    }
    gda_rel_gpu_u64(rung, (uint64_t)i + 1);
#endif
    long long c4 = clock64();
    acc[0] += (unsigned long long)(c1 - c0);
    acc[1] += (unsigned long long)(c2 - c1);
    acc[2] += (unsigned long long)(c3 - c2);
    acc[3] += (unsigned long long)(c4 - c3);
  }
  long long k1 = clock64();
  uint64_t t1 = mori_clock_ns();
  double ns_per_cycle = k1 > k0 ? (double)(t1 - t0) / (double)(k1 - k0) : 0;
  for (int k = 0; k < 4; k++) out->stage_ns[k] = (double)acc[k] * ns_per_cycle / (iters > 0 ? iters : 1);
  out->post_ns = (double)(t1 - t0) / (iters > 0 ? iters : 1);
  out->quiet_ns = 0;
  out->device_rc = 0;
}

extern "C" int gda_bench_ordering(int pattern, int iters, gda_bench_result_t *out) {
  if (pattern < 0 || pattern >= GDA_ORDERING_COUNT) return -1;
  gda_bench_result_t *d = NULL;
  uint64_t *dev = NULL, *host = NULL, *host_dev = NULL;
  int rc = -1;
  if (gpuMalloc((void **)&d, sizeof(*d)) != gpuSuccess) return -1;
  if (gpuMalloc((void **)&dev, 8192) != gpuSuccess) goto done;
#if defined(MORI_DEVICE_COMPILER_HIP)
  if (hipHostMalloc((void **)&host, 8192, hipHostMallocMapped) != hipSuccess) goto done;
  if (hipHostGetDevicePointer((void **)&host_dev, host, 0) != hipSuccess) goto done;
  if (hipMemset(dev, 0, 8192) != hipSuccess) goto done;
#else
  if (cudaHostAlloc((void **)&host, 8192, cudaHostAllocMapped) != cudaSuccess) goto done;
  if (cudaHostGetDevicePointer((void **)&host_dev, host, 0) != cudaSuccess) goto done;
  if (cudaMemset(dev, 0, 8192) != cudaSuccess) goto done;
#endif
  memset(host, 0, 8192);
  gda_ordering_kernel<<<1, 1>>>(dev, host_dev, kGdaOrderings[pattern], iters, d);
  rc = gpuGetLastError() == gpuSuccess && gpuDeviceSynchronize() == gpuSuccess ? 0 : -1;
  if (!rc && gpuMemcpy(out, d, sizeof(*out), gpuMemcpyDeviceToHost) != gpuSuccess) rc = -1;
done:
  (void)gpuFree(d);
  if (dev) (void)gpuFree(dev);
#if defined(MORI_DEVICE_COMPILER_HIP)
  if (host) (void)hipHostFree(host);
#else
  if (host) (void)cudaFreeHost(host);
#endif
  return rc;
}

// ---- gda_bench_claim: a slot claim's forms (enum gda_claim_form). ----

struct gda_claim_counters {
  uint64_t reserved, completed;
  uint32_t failed;
};

__global__ void gda_claim_kernel(gda_claim_counters *q, int form, int iters, gda_bench_result_t *out) {
  uint64_t t0 = mori_clock_ns();
  uint64_t sum = 0;
  for (int i = 0; i < iters; i++) {
    uint64_t r = 0;
    if (form == GDA_CLAIM_CHECK_THEN_LOAD) {
      if (*(volatile uint32_t *)&q->failed) break;
      r = mori_load_volatile_u64(&q->reserved);
      uint64_t done = mori_atomic_load_acquire_device_u64(&q->completed);
      if (r + 1 - done > 4096) break;
      if (mori_atomic_cas_device_u64(&q->reserved, r, r + 1) != r) break;
    } else if (form == GDA_CLAIM_LOADS_TOGETHER) {
      uint32_t failed = *(volatile uint32_t *)&q->failed;
      r = mori_load_volatile_u64(&q->reserved);
      uint64_t done = mori_atomic_load_acquire_device_u64(&q->completed);
      if (failed || r + 1 - done > 4096) break;
      if (mori_atomic_cas_device_u64(&q->reserved, r, r + 1) != r) break;
    } else {
      r = atomicAdd((unsigned long long *)&q->reserved, 1ull);
      uint64_t done = mori_atomic_load_acquire_device_u64(&q->completed);
      if (r + 1 - done > 4096) break;
    }
    q->completed = r + 1; /* the queue never fills: each claim completes at once */
    sum += r;
  }
  uint64_t t1 = mori_clock_ns();
  out->post_ns = (double)(t1 - t0) / (iters > 0 ? iters : 1);
  out->quiet_ns = 0;
  out->device_rc = mori_load_volatile_u64(&q->reserved) == (uint64_t)iters ? 0 : -1;
  out->stage_ns[0] = (double)sum;
}

extern "C" int gda_bench_claim(int form, int iters, gda_bench_result_t *out) {
  if (form < 0 || form >= GDA_CLAIM_FORM_COUNT) return -1;
  gda_bench_result_t *d = NULL;
  gda_claim_counters *q = NULL;
  int rc = -1;
  if (gpuMalloc((void **)&d, sizeof(*d)) != gpuSuccess) return -1;
  if (gpuMalloc((void **)&q, sizeof(*q)) == gpuSuccess) {
#if defined(MORI_DEVICE_COMPILER_HIP)
    (void)hipMemset(q, 0, sizeof(*q));
#else
    (void)cudaMemset(q, 0, sizeof(*q));
#endif
    gda_claim_kernel<<<1, 1>>>(q, form, iters, d);
    rc = gpuGetLastError() == gpuSuccess && gpuDeviceSynchronize() == gpuSuccess ? 0 : -1;
    if (!rc && gpuMemcpy(out, d, sizeof(*out), gpuMemcpyDeviceToHost) != gpuSuccess) rc = -1;
    (void)gpuFree(q);
  }
  (void)gpuFree(d);
  return rc;
}
