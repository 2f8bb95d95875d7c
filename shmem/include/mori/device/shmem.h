// SPDX-License-Identifier: MIT
/* The shmem device API, for HIP, CUDA and plain C (CPU PEs on the host
 * platform): thin wrappers over mori's device API (mori/device.h) that
 * address heap memory by the symmetric pointer itself, as OpenSHMEM does.
 *
 * Every call takes the device state (mori_shmem_device_state_t) by value:
 * from mori_shmem_device_state() as a kernel argument, or — in a module
 * loaded at run time (Triton) — from the global variable that
 * MORI_SHMEM_DEFINE_GLOBAL_STATE defines and shmem_module_init fills.
 *
 * Heap memory of a PE reached by load/store (the LSA team: same node, P2P
 * enabled) is read and written directly. Another PE answers NULL from
 * shmem_dev_ptr_p2p and MORI_DEVICE_EUNREACHABLE from put/get/signal: use
 * the window device API (mori_shmem_window + mori/device/put.h), whose
 * proxy carries RDMA. Waits take a timeout (0: none), honour the abort
 * flag and leave a record for mori_shmem_check instead of trapping. */
#ifndef MORI_DEVICE_SHMEM_H
#define MORI_DEVICE_SHMEM_H

#include "mori/device/barrier.h"
#include "mori/device/impl/shmem__types.h"
#include "mori/device/put.h"
#include "mori/device/signal.h"

/* In device code that shmem_module_init fills: one definition per module. */
#define MORI_SHMEM_DEFINE_GLOBAL_STATE MORI_DEVICE_VARIABLE mori_shmem_device_state_t globalGpuStates

/* The device barrier's channel in shmem's own window. */
#define MORI_SHMEM_BARRIER_CHANNEL 0u

MORI_HOST_DEVICE int shmem_dev_mype(mori_shmem_device_state_t st) { return st.mype; }
MORI_HOST_DEVICE int shmem_dev_npes(mori_shmem_device_state_t st) { return st.npes; }

/* Where this process reaches byte `ptr` (this PE's heap address) of PE
 * `pe`'s heap by load/store; NULL outside the heap, for a PE not reached
 * by load/store, or in a chunk not mapped. The device knows chunks, not
 * allocations: an address in a mapped chunk but in no allocation still
 * translates (the host's shmem_ptr_p2p answers NULL there). */
MORI_HOST_DEVICE void *shmem_dev_ptr_p2p(mori_shmem_device_state_t st, const void *ptr, int pe) {
  uint64_t at = (uint64_t)(uintptr_t)ptr - st.heap_base; /* wraps to huge below the heap */
  if (pe < 0 || pe >= st.npes || st.chunk_size == 0) return (void *)0;
  uint64_t chunk = at < st.chunk_size ? 0 : at / st.chunk_size; /* a static heap is one chunk */
  if (chunk >= st.table_chunks) return (void *)0;
  uint64_t base = st.peer_chunk_bases[chunk * (uint64_t)st.npes + (uint64_t)pe];
  return base ? (void *)(uintptr_t)(base + (at - chunk * st.chunk_size)) : (void *)0;
}

/* [ptr, +bytes) of PE pe's heap as one run of this process's addresses
 * (*out), or why not: MORI_DEVICE_EUNREACHABLE (no load/store path, or no
 * allocation there) or MORI_DEVICE_ERANGE (the run leaves the heap chunk it
 * starts in: a peer's chunks are mapped apart, so its end would land in
 * whatever mapping follows). Internal to the puts and gets below. */
MORI_HOST_DEVICE int shmem_dev_impl_span_p2p(mori_shmem_device_state_t st, const void *ptr, uint64_t bytes, int pe, char **out) {
  *out = (char *)shmem_dev_ptr_p2p(st, ptr, pe);
  if (!*out) return MORI_DEVICE_EUNREACHABLE;
  if (bytes <= 1) return MORI_DEVICE_OK;
  uint64_t last = (uint64_t)(uintptr_t)ptr + bytes - 1;
  if (last < (uint64_t)(uintptr_t)ptr) return MORI_DEVICE_ERANGE; /* wraps */
  char *end = (char *)shmem_dev_ptr_p2p(st, (const void *)(uintptr_t)last, pe);
  return end == *out + (bytes - 1) ? MORI_DEVICE_OK : MORI_DEVICE_ERANGE;
}

/* ---- put: local src -> `dest` (a heap address) on PE pe ----
 * MORI_DEVICE_ERANGE when [dest, +bytes) leaves the heap chunk it starts in
 * (nothing is written), MORI_DEVICE_EUNREACHABLE when PE pe is not reached. */
MORI_DEVICE_INLINE int shmem_dev_putmem_thread(mori_shmem_device_state_t st, void *dest, const void *src, uint64_t bytes,
                                               int pe) {
  char *to;
  int rc = shmem_dev_impl_span_p2p(st, dest, bytes, pe, &to);
  if (rc) return rc;
  mori_copy_cooperative(to, src, bytes, 0, 1);
  return MORI_DEVICE_OK;
}
MORI_DEVICE_INLINE int shmem_dev_putmem_warp(mori_shmem_device_state_t st, void *dest, const void *src, uint64_t bytes,
                                             int pe) {
  char *to;
  int rc = shmem_dev_impl_span_p2p(st, dest, bytes, pe, &to);
  if (rc) return rc;
  mori_copy_cooperative(to, src, bytes, MORI_THREAD_RANK_WARP(), MORI_THREAD_COUNT_WARP());
  MORI_SYNC_WARP();
  return MORI_DEVICE_OK;
}
MORI_DEVICE_INLINE int shmem_dev_putmem_block(mori_shmem_device_state_t st, void *dest, const void *src, uint64_t bytes,
                                              int pe) {
  char *to;
  int rc = shmem_dev_impl_span_p2p(st, dest, bytes, pe, &to);
  if (rc) return rc;
  mori_copy_cooperative(to, src, bytes, MORI_THREAD_RANK_BLOCK(), MORI_THREAD_COUNT_BLOCK());
  MORI_SYNC_BLOCK();
  return MORI_DEVICE_OK;
}

/* ---- get: `source` (a heap address) on PE pe -> local dest (errors as for put) ---- */
MORI_DEVICE_INLINE int shmem_dev_getmem_thread(mori_shmem_device_state_t st, void *dest, const void *source, uint64_t bytes,
                                               int pe) {
  char *from;
  int rc = shmem_dev_impl_span_p2p(st, source, bytes, pe, &from);
  if (rc) return rc;
  mori_copy_cooperative(dest, from, bytes, 0, 1);
  return MORI_DEVICE_OK;
}
MORI_DEVICE_INLINE int shmem_dev_getmem_warp(mori_shmem_device_state_t st, void *dest, const void *source, uint64_t bytes,
                                             int pe) {
  char *from;
  int rc = shmem_dev_impl_span_p2p(st, source, bytes, pe, &from);
  if (rc) return rc;
  mori_copy_cooperative(dest, from, bytes, MORI_THREAD_RANK_WARP(), MORI_THREAD_COUNT_WARP());
  MORI_SYNC_WARP();
  return MORI_DEVICE_OK;
}
MORI_DEVICE_INLINE int shmem_dev_getmem_block(mori_shmem_device_state_t st, void *dest, const void *source, uint64_t bytes,
                                              int pe) {
  char *from;
  int rc = shmem_dev_impl_span_p2p(st, source, bytes, pe, &from);
  if (rc) return rc;
  mori_copy_cooperative(dest, from, bytes, MORI_THREAD_RANK_BLOCK(), MORI_THREAD_COUNT_BLOCK());
  MORI_SYNC_BLOCK();
  return MORI_DEVICE_OK;
}

/* ---- ordering ---- */
/* Orders this thread's earlier stores to peers before its later ones. */
MORI_DEVICE_INLINE void shmem_dev_fence(void) { mori_fence(); }
/* Completes this thread's earlier stores to load/store peers. */
MORI_DEVICE_INLINE void shmem_dev_quiet(void) { mori_quiet(); }

/* ---- signals: a uint64 at a heap address ---- */
/* The signal word at heap address `sig` on PE pe: its 8 bytes in the heap
 * chunk `sig` starts in (MORI_DEVICE_ERANGE, as a put's), and aligned
 * (MORI_DEVICE_EINVAL: an unaligned atomic tears or faults). */
MORI_HOST_DEVICE int shmem_dev_impl_signal_p2p(mori_shmem_device_state_t st, const uint64_t *sig, int pe, uint64_t **out) {
  char *at;
  int rc = shmem_dev_impl_span_p2p(st, sig, sizeof(uint64_t), pe, &at);
  if (rc) return rc;
  if ((uintptr_t)sig % sizeof(uint64_t)) return MORI_DEVICE_EINVAL;
  *out = (uint64_t *)at;
  return MORI_DEVICE_OK;
}
/* PE pe's signal := value (release, system scope: data put before it is
 * visible to a PE that observed it with shmem_dev_signal_wait_until). */
MORI_DEVICE_INLINE int shmem_dev_signal_set(mori_shmem_device_state_t st, uint64_t *sig, uint64_t value, int pe) {
  uint64_t *at;
  int rc = shmem_dev_impl_signal_p2p(st, sig, pe, &at);
  if (rc) return rc;
  mori_atomic_store_release_u64(at, value);
  return MORI_DEVICE_OK;
}
MORI_DEVICE_INLINE int shmem_dev_signal_add(mori_shmem_device_state_t st, uint64_t *sig, uint64_t value, int pe) {
  uint64_t *at;
  int rc = shmem_dev_impl_signal_p2p(st, sig, pe, &at);
  if (rc) return rc;
  mori_atomic_add_release_u64(at, value);
  return MORI_DEVICE_OK;
}
/* Waits until this PE's signal at `sig` satisfies cmp against value.
 * *seen_out (may be NULL) gets the last value read, also when the wait
 * fails. An unknown cmp: MORI_DEVICE_EINVAL, nothing read. */
MORI_DEVICE_INLINE int shmem_dev_signal_wait_until(mori_shmem_device_state_t st, uint64_t *sig, mori_cmp_t cmp, uint64_t value,
                                                   uint64_t timeout_ns, uint64_t *seen_out) {
  if (!mori_cmp_valid(cmp)) return MORI_DEVICE_EINVAL;
  uint64_t start = 0, seen = 0;
  for (uint32_t spin = 0;; spin++) {
    seen = mori_atomic_load_acquire_u64(sig);
    if (mori_cmp_holds(seen, cmp, value)) break;
    int rc = mori_wait_check(st.world, spin, &start, timeout_ns, -1, 0, value, seen);
    if (rc != MORI_DEVICE_OK) {
      if (seen_out) *seen_out = seen;
      return rc;
    }
    mori_pause();
  }
  if (seen_out) *seen_out = seen;
  return MORI_DEVICE_OK;
}

/* ---- barrier ---- */
/* Every PE's block meets here (all threads of one block call it, on every
 * PE). Needs every PE reached by load/store (one node, P2P enabled), else
 * MORI_DEVICE_EUNREACHABLE: use the host's shmem_barrier_all. */
MORI_DEVICE_INLINE int shmem_dev_barrier_all_block(mori_shmem_device_state_t st, uint64_t timeout_ns) {
  if (st.world.lsa_size != st.npes) return MORI_DEVICE_EUNREACHABLE;
  return mori_lsa_barrier_block(st.world, MORI_SHMEM_BARRIER_CHANNEL, timeout_ns);
}

#endif
