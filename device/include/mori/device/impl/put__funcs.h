// SPDX-License-Identifier: MIT
/* Bodies of mori/device/put.h, and the cooperative copy they share with
 * the shmem and Triton device libraries. */
#ifndef MORI_DEVICE_IMPL_PUT_FUNCS_H
#define MORI_DEVICE_IMPL_PUT_FUNCS_H

#include "mori/device/put.h"

typedef struct mori_vec16 {
  uint64_t lo, hi;
} __attribute__((aligned(16))) mori_vec16_t;

/* Threads [rank, count) of a scope copy `bytes`: 16-byte words where both
 * ends are aligned, bytes for the rest. */
MORI_DEVICE_INLINE void mori_copy_cooperative(void *dst, const void *src, uint64_t bytes, int rank, int count) {
  char *d = (char *)dst;
  const char *s = (const char *)src;
  uint64_t vec = 0;
  if ((((uintptr_t)d | (uintptr_t)s) & 15) == 0) {
    vec = bytes / 16;
    mori_vec16_t *dv = (mori_vec16_t *)d;
    const mori_vec16_t *sv = (const mori_vec16_t *)s;
    uint64_t i = (uint64_t)rank, n = (uint64_t)count;
    /* Eight independent 16-byte loads in flight per thread, then four. */
    for (; i + 7 * n < vec; i += 8 * n) {
      mori_vec16_t r0 = sv[i], r1 = sv[i + n], r2 = sv[i + 2 * n], r3 = sv[i + 3 * n];
      mori_vec16_t r4 = sv[i + 4 * n], r5 = sv[i + 5 * n], r6 = sv[i + 6 * n], r7 = sv[i + 7 * n];
      dv[i] = r0;
      dv[i + n] = r1;
      dv[i + 2 * n] = r2;
      dv[i + 3 * n] = r3;
      dv[i + 4 * n] = r4;
      dv[i + 5 * n] = r5;
      dv[i + 6 * n] = r6;
      dv[i + 7 * n] = r7;
    }
    for (; i + 3 * n < vec; i += 4 * n) {
      mori_vec16_t r0 = sv[i], r1 = sv[i + n], r2 = sv[i + 2 * n], r3 = sv[i + 3 * n];
      dv[i] = r0;
      dv[i + n] = r1;
      dv[i + 2 * n] = r2;
      dv[i + 3 * n] = r3;
    }
    for (; i < vec; i += n) dv[i] = sv[i];
  }
  for (uint64_t i = vec * 16 + (uint64_t)rank; i < bytes; i += (uint64_t)count) d[i] = s[i];
}

/* A peer outside the LSA team: one thread of the scope posts the operation
 * to the NIC itself (GPU posting) or hands it to the window's proxy, as the
 * rdma transport chose (mori_remote_request). The local side must lie in this rank's
 * window (that is the memory the transport registered). */
MORI_DEVICE_INLINE int mori_put_remote(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src,
                                          uint64_t bytes, int scope_rank) {
  if (!win.proxy) return MORI_DEVICE_EUNREACHABLE;
  if (scope_rank != 0) return MORI_DEVICE_OK;
  const char *base = (const char *)mori_local_ptr(win, 0);
  if ((const char *)src < base || (uint64_t)((const char *)src - base) > win.size ||
      bytes > win.size - (uint64_t)((const char *)src - base))
    return MORI_DEVICE_EINVAL;
  return mori_remote_request(win, MORI_PROXY_PUT, peer, dst_offset, (uint64_t)((const char *)src - base), bytes);
}

MORI_DEVICE_INLINE int mori_get_remote(mori_window_dev_t win, int peer, void *dst, uint64_t src_offset, uint64_t bytes,
                                          int scope_rank) {
  if (!win.proxy) return MORI_DEVICE_EUNREACHABLE;
  if (scope_rank != 0) return MORI_DEVICE_OK;
  char *base = (char *)mori_local_ptr(win, 0);
  if ((char *)dst < base || (uint64_t)((char *)dst - base) > win.size || bytes > win.size - (uint64_t)((char *)dst - base))
    return MORI_DEVICE_EINVAL;
  return mori_remote_request(win, MORI_PROXY_GET, peer, (uint64_t)((char *)dst - base), src_offset, bytes);
}

/* ---- put: local src -> peer's window at dst_offset ---- */
MORI_DEVICE_INLINE int mori_put_thread(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes) {
  void *dst = mori_peer_ptr(win, peer, dst_offset);
  if (!dst) return mori_put_remote(win, peer, dst_offset, src, bytes, 0);
  mori_copy_cooperative(dst, src, bytes, 0, 1);
  return MORI_DEVICE_OK;
}
MORI_DEVICE_INLINE int mori_put_warp(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes) {
  void *dst = mori_peer_ptr(win, peer, dst_offset);
  if (!dst) return mori_put_remote(win, peer, dst_offset, src, bytes, MORI_THREAD_RANK_WARP());
  mori_copy_cooperative(dst, src, bytes, MORI_THREAD_RANK_WARP(), MORI_THREAD_COUNT_WARP());
  MORI_SYNC_WARP();
  return MORI_DEVICE_OK;
}
MORI_DEVICE_INLINE int mori_put_block(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes) {
  void *dst = mori_peer_ptr(win, peer, dst_offset);
  if (!dst) return mori_put_remote(win, peer, dst_offset, src, bytes, MORI_THREAD_RANK_BLOCK());
  mori_copy_cooperative(dst, src, bytes, MORI_THREAD_RANK_BLOCK(), MORI_THREAD_COUNT_BLOCK());
  MORI_SYNC_BLOCK();
  return MORI_DEVICE_OK;
}

/* ---- get: peer's window at src_offset -> local dst ---- */
MORI_DEVICE_INLINE int mori_get_thread(mori_window_dev_t win, int peer, void *dst, uint64_t src_offset, uint64_t bytes) {
  const void *src = mori_peer_ptr(win, peer, src_offset);
  if (!src) return mori_get_remote(win, peer, dst, src_offset, bytes, 0);
  mori_copy_cooperative(dst, src, bytes, 0, 1);
  return MORI_DEVICE_OK;
}
MORI_DEVICE_INLINE int mori_get_warp(mori_window_dev_t win, int peer, void *dst, uint64_t src_offset, uint64_t bytes) {
  const void *src = mori_peer_ptr(win, peer, src_offset);
  if (!src) return mori_get_remote(win, peer, dst, src_offset, bytes, MORI_THREAD_RANK_WARP());
  mori_copy_cooperative(dst, src, bytes, MORI_THREAD_RANK_WARP(), MORI_THREAD_COUNT_WARP());
  MORI_SYNC_WARP();
  return MORI_DEVICE_OK;
}
MORI_DEVICE_INLINE int mori_get_block(mori_window_dev_t win, int peer, void *dst, uint64_t src_offset, uint64_t bytes) {
  const void *src = mori_peer_ptr(win, peer, src_offset);
  if (!src) return mori_get_remote(win, peer, dst, src_offset, bytes, MORI_THREAD_RANK_BLOCK());
  mori_copy_cooperative(dst, src, bytes, MORI_THREAD_RANK_BLOCK(), MORI_THREAD_COUNT_BLOCK());
  MORI_SYNC_BLOCK();
  return MORI_DEVICE_OK;
}

#endif
