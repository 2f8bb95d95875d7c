// SPDX-License-Identifier: MIT
/* Bodies of mori/device/coll/all_to_all.h. Internal: mori_coll_impl_* may
 * change between releases. */
#ifndef MORI_DEVICE_COLL_IMPL_ALL_TO_ALL_FUNCS_H
#define MORI_DEVICE_COLL_IMPL_ALL_TO_ALL_FUNCS_H

#include "mori/device/coll/all_to_all.h"
#include "mori/device/coll/sync.h"
#include "mori/device/coll/impl/words__funcs.h"

/* The staging bytes per source slot: a whole number of slices (LL: two
 * bytes of line per byte of data). */
MORI_HOST_DEVICE uint64_t mori_coll_impl_a2a_slot_bytes(const mori_a2a_args_t *a) {
  return a->slice * a->slices * (a->algo == MORI_A2A_LL ? 2 : 1);
}

/* LL: one item moves `slice` bytes (a multiple of 8) of one member's chunk
 * as 16-byte lines {4 data bytes, epoch, 4 data bytes, epoch}; the reader
 * spins on the lines themselves, so no flag round follows the data. */
MORI_DEVICE_INLINE int mori_coll_impl_a2a_ll_item(mori_coll_dev_t c, const mori_a2a_args_t *a, uint64_t epoch, int kind, int member,
                                        uint64_t off, uint64_t len) {
  int me = c.team.rank, t = MORI_THREAD_RANK_BLOCK(), threads = MORI_THREAD_COUNT_BLOCK(), rc = MORI_DEVICE_OK;
  uint64_t flag = (uint64_t)(uint32_t)epoch << 32, line0 = off / 8, lines = (len + 7) / 8;
  if (kind == 0) { /* push to member */
    const char *src = a->in + (uint64_t)member * a->bytes;
    uint64_t *dst = (uint64_t *)mori_coll_impl_ll_staging(c, member, epoch, (uint64_t)me * mori_coll_impl_a2a_slot_bytes(a));
    for (uint64_t l = (uint64_t)t; l < lines; l += (uint64_t)threads) {
      uint64_t w = mori_coll_impl_ar_load_word(src, off + l * 8, a->bytes);
      mori_store_ll_line(dst + 2 * (line0 + l), (w & 0xffffffffull) | flag, (w >> 32) | flag);
    }
    return rc;
  }
  const uint64_t *lines_in = (const uint64_t *)mori_coll_impl_ll_staging(c, me, epoch, (uint64_t)member * mori_coll_impl_a2a_slot_bytes(a));
  char *out = a->out + (uint64_t)member * a->bytes;
  for (uint64_t l = (uint64_t)t; l < lines; l += (uint64_t)threads) {
    uint64_t w;
    rc = mori_coll_impl_wait_ll_line(c, lines_in + 2 * (line0 + l), epoch, mori_team_to_world(c.team, member),
                                (uint32_t)(line0 + l), &w);
    if (rc) break;
    mori_coll_impl_ar_store_word(out, off + l * 8, a->bytes, w);
  }
  return rc;
}

/* DIRECT: this rank has started call `epoch`, announced to every member.
 * Block 0 runs it before its items (on the host: before any item). */
MORI_DEVICE_INLINE void mori_a2a_begin(mori_coll_dev_t c, const mori_a2a_args_t *a, uint64_t epoch) {
  if (a->algo != MORI_A2A_DIRECT) return;
  for (int m = MORI_THREAD_RANK_BLOCK(); m < c.team.size; m += MORI_THREAD_COUNT_BLOCK())
    if (m != c.team.rank) mori_atomic_store_release_u64(mori_coll_impl_ready(c, m, c.team.rank), epoch);
}

/* DIRECT push of slice [off, off + len) of member dst's chunk, once dst
 * has started the call; then its flag. */
MORI_DEVICE_INLINE int mori_coll_impl_a2a_direct_push(mori_coll_dev_t c, const mori_a2a_args_t *a, uint64_t epoch, int dst,
                                            uint32_t s, uint64_t off, uint64_t len) {
  int me = c.team.rank, dst_world = mori_team_to_world(c.team, dst);
  uint64_t *ready = mori_coll_impl_ready(c, me, dst);
  uint32_t channel = (uint32_t)(c.flag_slots + (uint64_t)dst);
  int rc = mori_coll_impl_wait_block(c, ready, epoch, dst_world, channel);
  if (rc) return rc;
  /* dst has started a later call already: it left this one without this
   * rank's chunk (a call it refused, or gave up on), which it can do only
   * that way, so nothing is written into its out. */
  int gone = 0, refused = 0;
  if (MORI_THREAD_RANK_BLOCK() == 0) {
    uint64_t seen = mori_atomic_load_acquire_u64(ready);
    if (seen > epoch) {
      gone = 1;
      refused = mori_coll_impl_check_refused(c, epoch, dst_world, 0) != MORI_DEVICE_OK;
      if (!refused) mori_device_report(c.win, MORI_DEVICE_ETIMEDOUT, dst_world, channel, 0, epoch, seen);
    }
  }
  refused = MORI_SYNC_BLOCK_OR(refused);
  if (MORI_SYNC_BLOCK_OR(gone)) return refused ? MORI_DEVICE_EINVAL : MORI_DEVICE_ETIMEDOUT;
  char *remote = (char *)mori_peer_ptr(a->out_win, dst_world, a->out_offset + (uint64_t)me * a->bytes + off);
  mori_copy_cooperative(remote, a->in + (uint64_t)dst * a->bytes + off, len, MORI_THREAD_RANK_BLOCK(),
                        MORI_THREAD_COUNT_BLOCK());
  mori_coll_impl_signal_block(mori_coll_impl_flag(c, dst, epoch, (uint64_t)me * a->slices + s), epoch);
  return MORI_DEVICE_OK;
}

/* One item of the call; block scope. Returns 0 or the error a wait left in
 * the mailbox. */
MORI_DEVICE_INLINE int mori_a2a_item(mori_coll_dev_t c, const mori_a2a_args_t *a, uint64_t epoch, uint32_t item) {
  int n = c.team.size, me = c.team.rank;
  uint32_t S = a->slices;
  uint32_t kind_end_push = (uint32_t)(n - 1) * S, kind_end_own = (uint32_t)n * S;
  uint32_t s = item % S;
  uint64_t off = (uint64_t)s * a->slice;
  uint64_t len = off < a->bytes ? (a->bytes - off < a->slice ? a->bytes - off : a->slice) : 0;
  int t = MORI_THREAD_RANK_BLOCK(), threads = MORI_THREAD_COUNT_BLOCK();
  if (a->algo == MORI_A2A_LL && item < kind_end_push)
    return mori_coll_impl_a2a_ll_item(c, a, epoch, 0, (me + 1 + (int)(item / S)) % n, off, len);
  if (a->algo == MORI_A2A_LL && item >= kind_end_own)
    return mori_coll_impl_a2a_ll_item(c, a, epoch, 1, (me - 1 - (int)((item - kind_end_own) / S) + n) % n, off, len);
  if (a->algo == MORI_A2A_DIRECT && item < kind_end_push)
    return mori_coll_impl_a2a_direct_push(c, a, epoch, (me + 1 + (int)(item / S)) % n, s, off, len);
  if (item < kind_end_push) {
    int k = 1 + (int)(item / S), dst = (me + k) % n;
    char *remote = mori_coll_impl_staging(c, dst, epoch, (uint64_t)me * mori_coll_impl_a2a_slot_bytes(a) + off);
    mori_copy_cooperative(remote, a->in + (uint64_t)dst * a->bytes + off, len, t, threads);
    mori_coll_impl_signal_block(mori_coll_impl_flag(c, dst, epoch, (uint64_t)me * S + s), epoch);
    return MORI_DEVICE_OK;
  }
  if (item < kind_end_own) {
    uint64_t at = (uint64_t)me * a->bytes + off;
    mori_copy_cooperative(a->out + at, a->in + at, len, t, threads);
    return MORI_DEVICE_OK;
  }
  int k = 1 + (int)((item - kind_end_own) / S), src = (me - k + n) % n;
  int rc = mori_coll_impl_wait_block(c, mori_coll_impl_flag(c, me, epoch, (uint64_t)src * S + s), epoch,
                                mori_team_to_world(c.team, src), (uint32_t)((uint64_t)src * S + s));
  if (a->algo == MORI_A2A_DIRECT) return rc; /* the data is in out already */
  const char *staged = mori_coll_impl_staging(c, me, epoch, (uint64_t)src * mori_coll_impl_a2a_slot_bytes(a) + off);
  mori_copy_cooperative(a->out + (uint64_t)src * a->bytes + off, staged, len, t, threads);
  MORI_SYNC_BLOCK();
  return rc;
}

#endif
