// SPDX-License-Identifier: MIT
/* mori's device library for Triton: extern "C" device functions over the
 * shmem device API (mori/device/shmem.h) and the world window's proxy ring,
 * compiled to LLVM bitcode (NVPTX and AMDGCN) and linked into Triton
 * kernels as an extern library (mori.triton.lib passes it as
 * extern_libs={"mori": path}).
 *
 * The device state is the module global globalGpuStates that
 * shmem_module_init fills after Triton has loaded the kernel's module; the
 * functions read it, so their arguments are scalars only (ints and
 * addresses as int64), which is what Triton's extern calls can pass.
 *
 * Names: every function starts with "mori_tl_": Triton's AMD backend links an
 * extern library only when a called declaration's name contains the
 * library's name ("mori").
 *
 * Scopes. A Triton program is one block, and a scalar call in it is made by
 * every thread of the block with the same arguments. So:
 *   - queries (my_pe, n_pes, ptr, pe_accessible, heap_base) are pure and may
 *     also be called elementwise (tensors of addresses);
 *   - everything else is block scope: every thread of the program calls it,
 *     at the top level of the program (never under a branch that differs
 *     between threads); the threads share the copy, one thread performs a
 *     signal or proxy request, and every thread returns the same code.
 * Codes: 0, or a negative MORI_DEVICE_E* (= the host's MORI_E*):
 * -22 invalid argument, -1003 unreachable PE, -1007 aborted, -1008 timed out.
 *
 * Peers: a PE reached by load/store (the LSA team) is written directly;
 * another PE (another node, reached by RDMA) goes through the proxy ring of
 * shmem's world window, which reaches the heap chunk that window lives in
 * (all of a static heap); addresses outside that chunk give -22, a comm
 * without a proxy -1003. Complete proxy traffic with mori_tl_quiet_block. */
#include "mori/device/shmem.h"

/* One definition per module: shmem_module_init fills it. Default
 * visibility, so the loader's symbol table (cuModuleGetGlobal,
 * hipModuleGetGlobal) finds it in the code object. */
extern "C" {
__attribute__((visibility("default"))) MORI_SHMEM_DEFINE_GLOBAL_STATE;
}

#define MORI_TL extern "C" __device__ __attribute__((visibility("hidden")))

namespace {

/* The block's threads agree on one value: thread 0's. Three barriers: the
 * slot is written, read by everyone, and free again for the next call. */
__device__ __forceinline__ int64_t block_from_leader(int64_t v) {
  __shared__ volatile int64_t slot;
  __syncthreads();
  if (MORI_THREAD_RANK_BLOCK() == 0) slot = v;
  __syncthreads();
  int64_t out = slot;
  __syncthreads();
  return out;
}

/* The first non-zero code any thread of the block holds (else 0). */
__device__ __forceinline__ int block_first_error(int rc) {
  __shared__ volatile int slot;
  if (MORI_THREAD_RANK_BLOCK() == 0) slot = 0;
  __syncthreads();
  if (rc) slot = rc;
  __syncthreads();
  int out = slot;
  __syncthreads();
  return out;
}

__device__ __forceinline__ bool leader(void) { return MORI_THREAD_RANK_BLOCK() == 0; }

/* Offset of heap address `a` inside the heap chunk that shmem's world window
 * lives in, relative to that window (what its proxy ring takes; wraps below
 * the window, which the ring's own addition of segment_offset undoes), or
 * false when `a` is outside that chunk. */
__device__ __forceinline__ bool proxy_offset(const mori_shmem_device_state_t &st, uint64_t a, uint64_t *out) {
  if (st.chunk_size == 0 || a < st.heap_base) return false;
  uint64_t world = (uint64_t)(uintptr_t)mori_local_ptr(st.world, 0) - st.heap_base;
  uint64_t chunk = world / st.chunk_size, at = a - st.heap_base;
  if (at / st.chunk_size != chunk) return false;
  *out = (at - chunk * st.chunk_size) - st.world.segment_offset;
  return true;
}

/* The state, or "not filled": shmem_module_init was not called for this
 * module (size 0), so every call answers -1003 rather than reading zeros. */
__device__ __forceinline__ bool state_ready(void) {
  return globalGpuStates.size == sizeof(mori_shmem_device_state_t) &&
         globalGpuStates.version == MORI_SHMEM_DEVICE_STATE_VERSION;
}

enum { SIGNAL_SET = 0, SIGNAL_ADD = 1 };

/* One thread: signal `sig` (a heap address) on pe. */
__device__ __forceinline__ int signal_one(const mori_shmem_device_state_t &st, uint64_t sig, uint64_t value, int op, int pe) {
  if (op != SIGNAL_SET && op != SIGNAL_ADD) return MORI_DEVICE_EINVAL;
  if (shmem_dev_ptr_p2p(st, (const void *)(uintptr_t)sig, pe)) /* load/store: its word checked there */
    return op == SIGNAL_SET ? shmem_dev_signal_set(st, (uint64_t *)(uintptr_t)sig, value, pe)
                            : shmem_dev_signal_add(st, (uint64_t *)(uintptr_t)sig, value, pe);
  uint64_t off;
  if (!st.world.proxy) return MORI_DEVICE_EUNREACHABLE;
  if (!proxy_offset(st, sig, &off)) return MORI_DEVICE_EINVAL;
  return mori_remote_request(st.world, op == SIGNAL_SET ? MORI_PROXY_SIGNAL_SET : MORI_PROXY_ATOMIC_ADD, pe, off, 0, value);
}

/* The block copies bytes from local src to dest (a heap address) on pe. */
__device__ __forceinline__ int put_block(const mori_shmem_device_state_t &st, uint64_t dest, uint64_t src, uint64_t bytes,
                                         int pe) {
  if (pe < 0 || pe >= st.npes) return MORI_DEVICE_EINVAL;
  char *to;
  int span = shmem_dev_impl_span_p2p(st, (const void *)(uintptr_t)dest, bytes, pe, &to);
  if (span == MORI_DEVICE_OK) {
    mori_copy_cooperative(to, (const void *)(uintptr_t)src, bytes, MORI_THREAD_RANK_BLOCK(), MORI_THREAD_COUNT_BLOCK());
    return MORI_DEVICE_OK;
  }
  if (span != MORI_DEVICE_EUNREACHABLE) return span; /* leaves the chunk: nothing written */
  if (!st.world.proxy) return MORI_DEVICE_EUNREACHABLE;
  uint64_t d, s, last = bytes ? bytes - 1 : 0, unused;
  if (!proxy_offset(st, dest, &d) || !proxy_offset(st, dest + last, &unused) || !proxy_offset(st, src, &s) ||
      !proxy_offset(st, src + last, &unused))
    return MORI_DEVICE_EINVAL;
  return leader() ? mori_remote_request(st.world, MORI_PROXY_PUT, pe, d, s, bytes) : MORI_DEVICE_OK;
}

}  // namespace

/* ---- queries (pure; elementwise allowed) ---- */

/* This PE, or -1003 when shmem_module_init has not filled this module. */
MORI_TL int32_t mori_tl_my_pe(void) { return state_ready() ? globalGpuStates.mype : MORI_DEVICE_EUNREACHABLE; }

/* Number of PEs, or -1003 when the module was not filled. */
MORI_TL int32_t mori_tl_n_pes(void) { return state_ready() ? globalGpuStates.npes : MORI_DEVICE_EUNREACHABLE; }

/* Where this process reaches heap address `ptr` (this PE's) of PE `pe` by
 * load/store, or 0 (outside the heap, a chunk not mapped, a PE reached only
 * by RDMA, or the module was not filled). Chunks, not allocations: an
 * address in a mapped chunk that no allocation holds still translates. */
MORI_TL int64_t mori_tl_ptr(int64_t ptr, int32_t pe) {
  if (!state_ready()) return 0;
  return (int64_t)(uintptr_t)shmem_dev_ptr_p2p(globalGpuStates, (const void *)(uintptr_t)ptr, pe);
}

/* How PE `pe` is reached: 1 load/store, 2 through the proxy (RDMA), 0 not
 * at all (or an invalid PE, or the module was not filled). */
MORI_TL int32_t mori_tl_pe_accessible(int32_t pe) {
  if (!state_ready() || pe < 0 || pe >= globalGpuStates.npes) return 0;
  if (mori_lsa_index(globalGpuStates.world, pe) >= 0) return 1;
  return globalGpuStates.world.proxy ? 2 : 0;
}

/* This PE's heap base address (0 when the module was not filled). */
MORI_TL int64_t mori_tl_heap_base(void) { return state_ready() ? (int64_t)globalGpuStates.heap_base : 0; }

/* ---- block scope: every thread of the program calls ---- */

/* Copies `bytes` from local `src` to heap address `dest` on PE `pe`. A
 * load/store PE: the block copies, and the data is complete for this
 * program's later signals after mori_tl_fence (putmem_signal does it).
 * Another PE: one proxy request; both addresses must lie in the world
 * window's heap chunk; complete it with mori_tl_quiet_block. */
MORI_TL int32_t mori_tl_putmem_block(int64_t dest, int64_t src, int64_t bytes, int32_t pe) {
  if (!state_ready()) return MORI_DEVICE_EUNREACHABLE;
  int rc = bytes < 0 ? MORI_DEVICE_EINVAL : put_block(globalGpuStates, (uint64_t)dest, (uint64_t)src, (uint64_t)bytes, pe);
  return block_first_error(rc);
}

/* Copies `bytes` from heap address `source` on PE `pe` to local `dest`
 * (load/store PEs; the proxy for the others, as putmem). */
MORI_TL int32_t mori_tl_getmem_block(int64_t dest, int64_t source, int64_t bytes, int32_t pe) {
  if (!state_ready()) return MORI_DEVICE_EUNREACHABLE;
  const mori_shmem_device_state_t &st = globalGpuStates;
  int rc = MORI_DEVICE_OK, span = MORI_DEVICE_EUNREACHABLE;
  char *from = nullptr;
  if (bytes >= 0 && pe >= 0 && pe < st.npes)
    span = shmem_dev_impl_span_p2p(st, (const void *)(uintptr_t)source, (uint64_t)bytes, pe, &from);
  if (bytes < 0 || pe < 0 || pe >= st.npes) {
    rc = MORI_DEVICE_EINVAL;
  } else if (span == MORI_DEVICE_OK) {
    mori_copy_cooperative((void *)(uintptr_t)dest, from, (uint64_t)bytes, MORI_THREAD_RANK_BLOCK(), MORI_THREAD_COUNT_BLOCK());
  } else if (span != MORI_DEVICE_EUNREACHABLE) {
    rc = span; /* leaves the chunk: nothing read */
  } else if (!st.world.proxy) {
    rc = MORI_DEVICE_EUNREACHABLE;
  } else {
    uint64_t d, s, last;
    uint64_t end = (uint64_t)dest + (uint64_t)bytes - (bytes ? 1 : 0);
    if (!proxy_offset(st, (uint64_t)dest, &d) || !proxy_offset(st, end, &last) || !proxy_offset(st, (uint64_t)source, &s))
      rc = MORI_DEVICE_EINVAL;
    else if (leader())
      rc = mori_remote_request(st.world, MORI_PROXY_GET, pe, d, s, (uint64_t)bytes);
  }
  return block_first_error(rc);
}

/* Heap address `sig` (a uint64) on PE `pe`: op 0 sets it to `value`, op 1
 * adds `value` (release, system scope: this thread's earlier stores to that
 * PE are visible to a PE that observed the signal). One thread of the block
 * signals, after a block barrier, so the block's earlier stores (a
 * putmem_block's copy) come first. */
MORI_TL int32_t mori_tl_signal_op_block(int64_t sig, int64_t value, int32_t op, int32_t pe) {
  if (!state_ready()) return MORI_DEVICE_EUNREACHABLE;
  __syncthreads();
  int rc = MORI_DEVICE_OK;
  if (leader()) {
    mori_fence_system();
    rc = (pe < 0 || pe >= globalGpuStates.npes) ? MORI_DEVICE_EINVAL
                                                  : signal_one(globalGpuStates, (uint64_t)sig, (uint64_t)value, op, pe);
  }
  return (int32_t)block_from_leader(rc);
}

/* putmem_block, then every thread's stores fenced, then signal_op_block on
 * the same PE: the signal arrives after the data. */
MORI_TL int32_t mori_tl_putmem_signal_block(int64_t dest, int64_t src, int64_t bytes, int64_t sig, int64_t value, int32_t op,
                                         int32_t pe) {
  int rc = mori_tl_putmem_block(dest, src, bytes, pe);
  if (rc) return rc;
  mori_fence_system(); /* each thread's part of the copy, before the leader's signal */
  return mori_tl_signal_op_block(sig, value, op, pe);
}

/* Waits until this PE's uint64 at heap address `sig` compares (0 ==, 1 !=,
 * 2 >=, 3 >, 4 <, 6 <=; 5 and others refused) with `value`; timeout_ns 0 waits for good (the abort flag still
 * ends it). One thread waits, then the block goes on together; a timeout
 * leaves a record for mori_shmem_check / shmem's host calls. */
MORI_TL int32_t mori_tl_signal_wait_until_block(int64_t sig, int32_t cmp, int64_t value, int64_t timeout_ns) {
  if (!state_ready()) return MORI_DEVICE_EUNREACHABLE;
  int rc = MORI_DEVICE_OK;
  if (leader()) {
    if (!mori_cmp_valid((mori_cmp_t)cmp) || timeout_ns < 0)
      rc = MORI_DEVICE_EINVAL;
    else
      rc = shmem_dev_signal_wait_until(globalGpuStates, (uint64_t *)(uintptr_t)sig, (mori_cmp_t)cmp, (uint64_t)value,
                                       (uint64_t)timeout_ns, (uint64_t *)0);
  }
  return (int32_t)block_from_leader(rc);
}

/* This PE's uint64 at `sig`, read with acquire (system scope), the same
 * value for every thread of the block. */
MORI_TL int64_t mori_tl_signal_fetch_block(int64_t sig) {
  int64_t v = 0;
  if (leader()) v = (int64_t)mori_atomic_load_acquire_u64((uint64_t *)(uintptr_t)sig);
  return block_from_leader(v);
}

/* Orders every thread's earlier stores to peers before its later ones. */
MORI_TL int32_t mori_tl_fence(void) {
  shmem_dev_fence();
  return 0;
}

/* Completes every thread's earlier stores to load/store peers and every
 * request this process submitted to the world window's proxy (RDMA PEs). */
MORI_TL int32_t mori_tl_quiet_block(int64_t timeout_ns) {
  if (!state_ready()) return MORI_DEVICE_EUNREACHABLE;
  shmem_dev_quiet();
  __syncthreads();
  int rc = MORI_DEVICE_OK;
  if (leader()) rc = timeout_ns < 0 ? MORI_DEVICE_EINVAL : mori_remote_quiet(globalGpuStates.world, (uint64_t)timeout_ns);
  return (int32_t)block_from_leader(rc);
}

/* Every PE's program meets here (one program per PE at a time, every thread
 * of it calls); needs every PE reached by load/store (one node), else -1003:
 * use the host's shmem_barrier_all. Earlier stores to peers are complete
 * and visible when it returns. */
MORI_TL int32_t mori_tl_barrier_all_block(int64_t timeout_ns) {
  if (!state_ready()) return MORI_DEVICE_EUNREACHABLE;
  if (timeout_ns < 0) return MORI_DEVICE_EINVAL;
  mori_fence_system();
  int rc = shmem_dev_barrier_all_block(globalGpuStates, (uint64_t)timeout_ns);
  return block_first_error(rc);
}
