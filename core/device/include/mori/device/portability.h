// SPDX-License-Identifier: MIT
/* The one header that knows which compiler is reading it: nvcc (CUDA), hipcc
 * (HIP) or a plain C/C++ compiler (the host platform, where CPU ranks run the
 * same inline functions). Every other device header uses these macros. */
#ifndef MORI_DEVICE_PORTABILITY_H
#define MORI_DEVICE_PORTABILITY_H

#include <stddef.h>
#include <stdint.h>

#if defined(__HIPCC__)
#define MORI_DEVICE_COMPILER_HIP 1
#include <hip/hip_runtime.h>
#elif defined(__CUDACC__)
#define MORI_DEVICE_COMPILER_CUDA 1
#else
#define MORI_DEVICE_COMPILER_HOST 1
#endif

#if defined(MORI_DEVICE_COMPILER_HOST)
#define MORI_HOST_DEVICE static inline
#define MORI_DEVICE_INLINE static inline
/* A variable in device memory (a module global the host can fill). */
#define MORI_DEVICE_VARIABLE
#else
#define MORI_HOST_DEVICE static __host__ __device__ __forceinline__
#define MORI_DEVICE_INLINE static __device__ __forceinline__
#define MORI_DEVICE_VARIABLE __device__
#endif

#if defined(__cplusplus)
#define MORI_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define MORI_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* Atomics at system scope (visible to peers over NVLink/XGMI and to the
 * host), except the *_device_* ones (this device only). A
 * read-modify-write atomic is only ever aimed at device memory (this GPU's
 * or a peer's): on host memory a system-scope atomic needs host-native
 * atomics (NVLink-C2C) or PCIe AtomicOps end to end, which many hosts
 * lack. Host memory gets plain or release stores and acquire loads only. */
#if defined(MORI_DEVICE_COMPILER_HOST)
#include <sched.h>
#include <time.h>
/* GCC/Clang builtins: the same code compiles as C11 and as C++ (tests). */
MORI_DEVICE_INLINE uint32_t mori_atomic_load_acquire_u32(uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
MORI_DEVICE_INLINE uint64_t mori_atomic_load_acquire_u64(uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
MORI_DEVICE_INLINE void mori_atomic_store_release_u64(uint64_t *p, uint64_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
MORI_DEVICE_INLINE void mori_atomic_store_release_u32(uint32_t *p, uint32_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
MORI_DEVICE_INLINE uint64_t mori_atomic_add_release_u64(uint64_t *p, uint64_t v) {
  return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}
/* A compare-and-swap that returns the value it saw (desired was stored
 * when that equals expected); the six below differ only in order. */
#define MORI_CAS(name, T, success, failure)                                   \
  MORI_DEVICE_INLINE T name(T *p, T expected, T desired) {                    \
    __atomic_compare_exchange_n(p, &expected, desired, 0, success, failure); \
    return expected; /* the value seen */                                     \
  }
MORI_CAS(mori_atomic_cas_u32, uint32_t, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
MORI_CAS(mori_atomic_cas_u64, uint64_t, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
MORI_CAS(mori_atomic_cas_device_u32, uint32_t, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
MORI_CAS(mori_atomic_cas_device_u64, uint64_t, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
MORI_CAS(mori_atomic_cas_relaxed_device_u64, uint64_t, __ATOMIC_RELAXED, __ATOMIC_RELAXED)
MORI_CAS(mori_atomic_cas_release_u32, uint32_t, __ATOMIC_RELEASE, __ATOMIC_RELAXED)
MORI_CAS(mori_atomic_cas_acquire_u32, uint32_t, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)
#undef MORI_CAS
MORI_DEVICE_INLINE uint64_t mori_atomic_load_acquire_device_u64(uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
MORI_DEVICE_INLINE void mori_atomic_store_release_device_u64(uint64_t *p, uint64_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
MORI_DEVICE_INLINE void mori_atomic_store_release_device_u32(uint32_t *p, uint32_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
MORI_DEVICE_INLINE void mori_fence_acq_rel_device(void) { __atomic_thread_fence(__ATOMIC_ACQ_REL); }
MORI_DEVICE_INLINE void mori_fence_system(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
MORI_DEVICE_INLINE uint32_t mori_atomic_add_u32(uint32_t *p, uint32_t v) {
  return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
}
MORI_DEVICE_INLINE uint64_t mori_load_volatile_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
/* Two 8-byte halves, each written and read whole: what an LL line needs. */
MORI_DEVICE_INLINE void mori_store_ll_line(uint64_t *p, uint64_t lo, uint64_t hi) {
  __atomic_store_n(p, lo, __ATOMIC_RELAXED);
  __atomic_store_n(p + 1, hi, __ATOMIC_RELAXED);
}
MORI_DEVICE_INLINE void mori_load_ll_line(const uint64_t *p, uint64_t *lo, uint64_t *hi) {
  *lo = __atomic_load_n(p, __ATOMIC_RELAXED);
  *hi = __atomic_load_n(p + 1, __ATOMIC_RELAXED);
}
/* Nanoseconds of a monotonic clock, for wait timeouts. */
MORI_DEVICE_INLINE uint64_t mori_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
/* CPU ranks may outnumber cores: give the core away while waiting. */
MORI_DEVICE_INLINE void mori_pause(void) { sched_yield(); }
#define MORI_THREAD_COUNT_WARP() 1
#define MORI_THREAD_RANK_WARP() 0
#define MORI_THREAD_COUNT_BLOCK() 1
#define MORI_THREAD_RANK_BLOCK() 0
#define MORI_SYNC_WARP() ((void)0)
#define MORI_SYNC_BLOCK() ((void)0)
/* Block-wide barrier that also tells every thread whether any thread's pred held. */
#define MORI_SYNC_BLOCK_OR(pred) ((pred) != 0)
#elif defined(MORI_DEVICE_COMPILER_CUDA)
MORI_DEVICE_INLINE uint32_t mori_atomic_load_acquire_u32(uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
MORI_DEVICE_INLINE uint64_t mori_atomic_load_acquire_u64(uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
/* System-scope orderings as single PTX instructions (release/acquire
 * qualifiers) rather than full fences around relaxed atomics: a barrier
 * round is a few of these, and fence.sc.sys costs far more. */
MORI_DEVICE_INLINE void mori_fence_system(void) { __threadfence_system(); }
MORI_DEVICE_INLINE void mori_atomic_store_release_u64(uint64_t *p, uint64_t v) {
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
MORI_DEVICE_INLINE void mori_atomic_store_release_u32(uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
MORI_DEVICE_INLINE uint64_t mori_atomic_add_release_u64(uint64_t *p, uint64_t v) {
  uint64_t old;
  asm volatile("atom.release.sys.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
/* A compare-and-swap as one PTX instruction that returns the value it saw;
 * the six below differ only in order and scope (.gpu: a word in this GPU's
 * own memory that only its kernels touch). reg: "r" 32-bit, "l" 64-bit. */
#define MORI_CAS(name, T, op, reg)                                                                \
  MORI_DEVICE_INLINE T name(T *p, T expected, T desired) {                                      \
    T old;                                                                                        \
    asm volatile(op " %0, [%1], %2, %3;" : "=" reg(old) : "l"(p), reg(expected), reg(desired) : "memory"); \
    return old;                                                                                   \
  }
MORI_CAS(mori_atomic_cas_u32, uint32_t, "atom.acq_rel.sys.cas.b32", "r")
MORI_CAS(mori_atomic_cas_u64, uint64_t, "atom.acq_rel.sys.cas.b64", "l")
MORI_CAS(mori_atomic_cas_device_u32, uint32_t, "atom.acq_rel.gpu.cas.b32", "r")
MORI_CAS(mori_atomic_cas_device_u64, uint64_t, "atom.acq_rel.gpu.cas.b64", "l")
MORI_CAS(mori_atomic_cas_relaxed_device_u64, uint64_t, "atom.relaxed.gpu.cas.b64", "l")
MORI_CAS(mori_atomic_cas_release_u32, uint32_t, "atom.release.sys.cas.b32", "r")
MORI_CAS(mori_atomic_cas_acquire_u32, uint32_t, "atom.acquire.sys.cas.b32", "r")
#undef MORI_CAS
/* Acquire and release at GPU scope: for counters in this GPU's memory that
 * only its own kernels move (a system-scope release also waits for this
 * thread's earlier stores to host memory to arrive, a PCIe round trip). */
MORI_DEVICE_INLINE uint64_t mori_atomic_load_acquire_device_u64(uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
MORI_DEVICE_INLINE void mori_atomic_store_release_device_u64(uint64_t *p, uint64_t v) {
  asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
MORI_DEVICE_INLINE void mori_atomic_store_release_device_u32(uint32_t *p, uint32_t v) {
  asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
/* With the relaxed reads before it, an acquire at GPU scope for each. */
MORI_DEVICE_INLINE void mori_fence_acq_rel_device(void) { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
MORI_DEVICE_INLINE uint32_t mori_atomic_add_u32(uint32_t *p, uint32_t v) { return atomicAdd(p, v); }
MORI_DEVICE_INLINE uint64_t mori_load_volatile_u64(const uint64_t *p) { return *(const volatile uint64_t *)p; }
/* One 16-byte store / load: each 8-byte half {data, flag} arrives whole,
 * which the LL protocol relies on (as NCCL's does). */
MORI_DEVICE_INLINE void mori_store_ll_line(uint64_t *p, uint64_t lo, uint64_t hi) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
}
MORI_DEVICE_INLINE void mori_load_ll_line(const uint64_t *p, uint64_t *lo, uint64_t *hi) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*lo), "=l"(*hi) : "l"(p) : "memory");
}
MORI_DEVICE_INLINE uint64_t mori_clock_ns(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/* Pure spinning on the local copy: waits are latency-bound. */
MORI_DEVICE_INLINE void mori_pause(void) {}
#else /* HIP */
MORI_DEVICE_INLINE uint32_t mori_atomic_load_acquire_u32(uint32_t *p) {
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
}
MORI_DEVICE_INLINE uint64_t mori_atomic_load_acquire_u64(uint64_t *p) {
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
}
MORI_DEVICE_INLINE void mori_fence_system(void) { __threadfence_system(); }
MORI_DEVICE_INLINE void mori_atomic_store_release_u64(uint64_t *p, uint64_t v) {
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}
MORI_DEVICE_INLINE void mori_atomic_store_release_u32(uint32_t *p, uint32_t v) {
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}
MORI_DEVICE_INLINE uint64_t mori_atomic_add_release_u64(uint64_t *p, uint64_t v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_SYSTEM);
}
/* A compare-and-swap that returns the value it saw; the six below differ
 * only in order and scope (AGENT: this device only). */
#define MORI_CAS(name, T, success, failure, scope)                                          \
  MORI_DEVICE_INLINE T name(T *p, T expected, T desired) {                                 \
    __hip_atomic_compare_exchange_strong(p, &expected, desired, success, failure, scope); \
    return expected;                                                                       \
  }
MORI_CAS(mori_atomic_cas_u32, uint32_t, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM)
MORI_CAS(mori_atomic_cas_u64, uint64_t, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM)
MORI_CAS(mori_atomic_cas_device_u32, uint32_t, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT)
MORI_CAS(mori_atomic_cas_device_u64, uint64_t, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT)
MORI_CAS(mori_atomic_cas_relaxed_device_u64, uint64_t, __ATOMIC_RELAXED, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT)
MORI_CAS(mori_atomic_cas_release_u32, uint32_t, __ATOMIC_RELEASE, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM)
MORI_CAS(mori_atomic_cas_acquire_u32, uint32_t, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM)
#undef MORI_CAS
MORI_DEVICE_INLINE uint64_t mori_atomic_load_acquire_device_u64(uint64_t *p) {
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT);
}
MORI_DEVICE_INLINE void mori_atomic_store_release_device_u64(uint64_t *p, uint64_t v) {
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
}
MORI_DEVICE_INLINE void mori_atomic_store_release_device_u32(uint32_t *p, uint32_t v) {
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
}
MORI_DEVICE_INLINE void mori_fence_acq_rel_device(void) { __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "agent"); }
MORI_DEVICE_INLINE uint32_t mori_atomic_add_u32(uint32_t *p, uint32_t v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
MORI_DEVICE_INLINE uint64_t mori_load_volatile_u64(const uint64_t *p) {
  return __hip_atomic_load((uint64_t *)p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
/* Each 8-byte half {data, flag} written and read as one relaxed atomic. */
MORI_DEVICE_INLINE void mori_store_ll_line(uint64_t *p, uint64_t lo, uint64_t hi) {
  __hip_atomic_store(p, lo, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  __hip_atomic_store(p + 1, hi, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
MORI_DEVICE_INLINE void mori_load_ll_line(const uint64_t *p, uint64_t *lo, uint64_t *hi) {
  *lo = __hip_atomic_load((uint64_t *)p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  *hi = __hip_atomic_load((uint64_t *)p + 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
/* The real-time counter, in nanoseconds, at the 100 MHz of the gfx9 parts
 * (MI200, MI300, MI355X; not confirmed on gfx1250, where a different rate
 * would only scale the timeouts). gfx1250 has no s_memrealtime: clang's
 * __builtin_readsteadycounter reads the same counter on every target
 * (s_memrealtime on gfx9, a message on gfx1250); older clangs lack it. */
MORI_DEVICE_INLINE uint64_t mori_clock_ns(void) {
#if defined(__HIP_DEVICE_COMPILE__) && __has_builtin(__builtin_readsteadycounter)
  return __builtin_readsteadycounter() * 10ull;
#elif defined(__HIP_DEVICE_COMPILE__)
  return __builtin_amdgcn_s_memrealtime() * 10ull;
#else
  return 0;
#endif
}
MORI_DEVICE_INLINE void mori_pause(void) {
#if defined(__HIP_DEVICE_COMPILE__)
  __builtin_amdgcn_s_sleep(1);
#endif
}
#endif

/* Nanoseconds from `start` (a mori_clock_ns reading) to now, 0 while the
 * clock has not reached it: a wait marks its start taken with | 1, a
 * nanosecond past a clock whose tick is coarser (ten nanoseconds on AMD,
 * up to a microsecond on NVIDIA, and coarse in some virtual machines), and
 * a wait that looks within that tick would read 2^64 - 1 ns waited, a
 * timeout at its first look. */
MORI_DEVICE_INLINE uint64_t mori_clock_since(uint64_t start) {
  uint64_t now = mori_clock_ns();
  return now > start ? now - start : 0;
}

/* How often a wait looks at its clock and the abort flag, as a mask (it
 * looks at each spin whose low bits are all set): on a GPU every 256th
 * spin, as each look is a clock read and a load from memory the host
 * writes; CPU ranks give their core away at every spin (mori_pause), so on
 * a loaded machine one spin can take a scheduler slice, and 256 of them
 * let a wait run a second or more past its deadline: they look at every
 * spin (a clock read is tens of nanoseconds beside the yield). */
#if defined(MORI_DEVICE_COMPILER_HOST)
#define MORI_WAIT_LOOK_MASK 0u
#else
#define MORI_WAIT_LOOK_MASK 255u
#endif

#if !defined(MORI_DEVICE_COMPILER_HOST)
#define MORI_THREAD_RANK_WARP() ((int)(threadIdx.x % warpSize))
#define MORI_THREAD_COUNT_WARP() ((int)warpSize)
#define MORI_THREAD_RANK_BLOCK() ((int)(threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y))
#define MORI_THREAD_COUNT_BLOCK() ((int)(blockDim.x * blockDim.y * blockDim.z))
#if defined(MORI_DEVICE_COMPILER_CUDA)
#define MORI_SYNC_WARP() __syncwarp()
#else
#define MORI_SYNC_WARP() __builtin_amdgcn_wave_barrier()
#endif
#define MORI_SYNC_BLOCK() __syncthreads()
/* Written out, not __syncthreads_or: HIP's lowers to wavefront shifts that
 * gfx10+ does not have. Three block barriers: reset, vote, read. */
static __device__ __forceinline__ int mori_sync_block_or(int pred) {
  __shared__ volatile int any;
  if (MORI_THREAD_RANK_BLOCK() == 0) any = 0;
  __syncthreads();
  if (pred) any = 1;
  __syncthreads();
  int result = any;
  __syncthreads(); /* nobody resets it before every thread has read it */
  return result;
}
#define MORI_SYNC_BLOCK_OR(pred) (mori_sync_block_or((pred) != 0) != 0)
#endif

#endif
