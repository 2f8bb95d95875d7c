// SPDX-License-Identifier: MIT
/* Bodies of mori/device/coll/all_reduce.h. Internal: mori_coll_impl_* may
 * change between releases. */
#ifndef MORI_DEVICE_COLL_IMPL_ALL_REDUCE_FUNCS_H
#define MORI_DEVICE_COLL_IMPL_ALL_REDUCE_FUNCS_H

#include "mori/device/coll/all_reduce.h"
#include "mori/device/coll/impl/numeric__funcs.h"
#include "mori/device/coll/sync.h"
#include "mori/device/coll/impl/words__funcs.h"

/* acc[j] := reduction of element j of the words seen so far (rank order),
 * in fp32: one rounding, at the end. */
MORI_HOST_DEVICE void mori_coll_impl_ar_accumulate(float *acc, uint64_t w, int first, uint32_t dtype, uint32_t op) {
  int k = mori_coll_impl_word_elems(dtype);
  for (int j = 0; j < k; j++) {
    float v = mori_coll_impl_word_elem(w, j, dtype);
    acc[j] = first ? v : mori_coll_impl_reduce(acc[j], v, op);
  }
}

/* The reduced word, in the buffer's type. */
MORI_HOST_DEVICE uint64_t mori_coll_impl_ar_pack(const float *acc, uint32_t dtype, uint32_t op, int n) {
  uint64_t w = 0;
  int k = mori_coll_impl_word_elems(dtype);
  for (int j = 0; j < k; j++) w = mori_coll_impl_word_set(w, j, dtype, mori_coll_impl_reduce_finish(acc[j], op, n));
  return w;
}

/* ---- LL ---- */

MORI_HOST_DEVICE uint64_t mori_coll_impl_ar_ll_lines(const mori_allreduce_args_t *a) {
  return (a->count * mori_coll_impl_dtype_size(a->dtype) + 7) / 8;
}

MORI_DEVICE_INLINE int mori_coll_impl_ar_ll_item(mori_coll_dev_t c, const mori_allreduce_args_t *a, uint64_t epoch, uint32_t item) {
  int n = c.team.size, me = c.team.rank;
  uint32_t writes = a->items / 2;
  uint64_t lines = mori_coll_impl_ar_ll_lines(a), bytes = a->count * mori_coll_impl_dtype_size(a->dtype);
  uint32_t run = item < writes ? item : item - writes;
  uint64_t first = (uint64_t)run * a->lines_per_item, last = first + a->lines_per_item;
  if (last > lines) last = lines;
  uint64_t flag = (uint64_t)(uint32_t)epoch << 32;
  int t = MORI_THREAD_RANK_BLOCK(), threads = MORI_THREAD_COUNT_BLOCK();
  int rc = MORI_DEVICE_OK;
  if (item < writes) {
    for (uint64_t l = first + (uint64_t)t; l < last; l += (uint64_t)threads) {
      uint64_t w = mori_coll_impl_ar_load_word((const char *)a->in, l * 8, bytes);
      uint64_t lo = (w & 0xffffffffull) | flag, hi = (w >> 32) | flag;
      /* Own line too: the reads then never overtake this write, so in and
       * out may be the same buffer. */
      for (int k = 0; k < n; k++) {
        int dst = (me + k) % n;
        uint64_t *line = (uint64_t *)mori_coll_impl_ll_staging(c, dst, epoch, ((uint64_t)me * lines + l) * 16);
        mori_store_ll_line(line, lo, hi);
      }
    }
    return rc;
  }
  for (uint64_t l = first + (uint64_t)t; l < last; l += (uint64_t)threads) {
    float acc[4] = {0, 0, 0, 0};
    for (int src = 0; src < n; src++) {
      uint64_t w;
      const uint64_t *line = (const uint64_t *)mori_coll_impl_ll_staging(c, me, epoch, ((uint64_t)src * lines + l) * 16);
      rc = mori_coll_impl_wait_ll_line(c, line, epoch, mori_team_to_world(c.team, src), (uint32_t)l, &w);
      if (rc) break;
      mori_coll_impl_ar_accumulate(acc, w, src == 0, a->dtype, a->op);
    }
    if (rc) break;
    mori_coll_impl_ar_store_word((char *)a->out, l * 8, bytes, mori_coll_impl_ar_pack(acc, a->dtype, a->op, n));
  }
  return rc;
}

/* ---- RS_AG ---- */


/* Elements [*begin, *end) of slice s of part p. */
MORI_HOST_DEVICE void mori_coll_impl_ar_slice(const mori_allreduce_args_t *a, int p, uint32_t s, uint64_t *begin, uint64_t *end) {
  uint64_t part_begin = (uint64_t)p * a->part_elems, part_end = part_begin + a->part_elems;
  if (part_end > a->count) part_end = a->count;
  uint64_t b = part_begin + (uint64_t)s * a->slice_elems, e = b + a->slice_elems;
  if (b > part_end) b = part_end;
  if (e > part_end) e = part_end;
  *begin = b;
  *end = e;
}

/* Staging of the reduce-scatter (region 0) and all-gather (region 1):
 * source slot src holds that member's copy of one part. */
MORI_HOST_DEVICE uint64_t mori_coll_impl_ar_staging_offset(const mori_allreduce_args_t *a, int n, int region, int src, uint64_t elem_in_part) {
  uint64_t esize = mori_coll_impl_dtype_size(a->dtype);
  return (((uint64_t)region * (uint64_t)n + (uint64_t)src) * a->part_elems + elem_in_part) * esize;
}

/* Word w of the buffer reduced over every member in rank order: this
 * rank's input for itself, the copy member src staged (region 0, slot src,
 * at byte `rel` of the part) for the others. */
MORI_DEVICE_INLINE uint64_t mori_coll_impl_ar_reduce_word(mori_coll_dev_t c, const mori_allreduce_args_t *a, uint64_t epoch,
                                                uint64_t byte, uint64_t rel, uint64_t bytes_end) {
  int n = c.team.size, me = c.team.rank;
  float acc[4] = {0, 0, 0, 0};
  for (int src = 0; src < n; src++) {
    uint64_t w;
    if (src == me) {
      w = mori_coll_impl_ar_load_word((const char *)a->in, byte, bytes_end);
    } else {
      const char *staged = mori_coll_impl_staging(c, me, epoch, mori_coll_impl_ar_staging_offset(a, n, 0, src, 0));
      w = mori_coll_impl_ar_load_word(staged, rel, rel + (bytes_end - byte));
    }
    mori_coll_impl_ar_accumulate(acc, w, src == 0, a->dtype, a->op);
  }
  return mori_coll_impl_ar_pack(acc, a->dtype, a->op, n);
}

/* Elements [b, e) of the buffer reduced over every member (base: the first
 * element of the part the staged copies hold); the result goes to out and,
 * with `gather`, from the same registers to every other member's
 * all-gather staging (region 1, slot me), so reduced bytes are never read
 * back. 16 bytes per thread and step where every address allows (slices
 * start on 16 bytes of the part), 8-byte words otherwise and for a tail. */
MORI_DEVICE_INLINE void mori_coll_impl_ar_reduce_range(mori_coll_dev_t c, const mori_allreduce_args_t *a, uint64_t epoch,
                                             uint64_t b, uint64_t e, uint64_t base, int gather) {
  int n = c.team.size, me = c.team.rank;
  uint64_t esize = mori_coll_impl_dtype_size(a->dtype), bytes_end = a->count * esize;
  uint64_t first = b * esize, last = e * esize, rel0 = first - base * esize;
  int t = MORI_THREAD_RANK_BLOCK(), threads = MORI_THREAD_COUNT_BLOCK();
  char *out = (char *)a->out;
  const char *in = (const char *)a->in;
  uint64_t gather_at = mori_coll_impl_ar_staging_offset(a, n, 1, me, 0);
  uint64_t vec_end = first;
  if ((((uintptr_t)(in + first) | (uintptr_t)(out + first)) & 15) == 0 && (rel0 & 15) == 0)
    vec_end = first + (last - first) / 16 * 16;
  for (uint64_t byte = first + (uint64_t)t * 16; byte < vec_end; byte += (uint64_t)threads * 16) {
    uint64_t rel = byte - base * esize;
    mori_vec16_t mine = *(const mori_vec16_t *)(in + byte);
    float lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
    for (int src = 0; src < n; src++) {
      mori_vec16_t v = mine;
      if (src != me)
        v = *(const mori_vec16_t *)mori_coll_impl_staging(c, me, epoch, mori_coll_impl_ar_staging_offset(a, n, 0, src, 0) + rel);
      mori_coll_impl_ar_accumulate(lo, v.lo, src == 0, a->dtype, a->op);
      mori_coll_impl_ar_accumulate(hi, v.hi, src == 0, a->dtype, a->op);
    }
    mori_vec16_t r;
    r.lo = mori_coll_impl_ar_pack(lo, a->dtype, a->op, n);
    r.hi = mori_coll_impl_ar_pack(hi, a->dtype, a->op, n);
    *(mori_vec16_t *)(out + byte) = r;
    for (int k = 1; gather && k < n; k++)
      *(mori_vec16_t *)mori_coll_impl_staging(c, (me + k) % n, epoch, gather_at + rel) = r;
  }
  for (uint64_t byte = vec_end + (uint64_t)t * 8; byte < last; byte += (uint64_t)threads * 8) {
    uint64_t rel = byte - base * esize, w = mori_coll_impl_ar_reduce_word(c, a, epoch, byte, rel, bytes_end);
    mori_coll_impl_ar_store_word(out, byte, bytes_end, w);
    for (int k = 1; gather && k < n; k++) {
      char *staged = mori_coll_impl_staging(c, (me + k) % n, epoch, gather_at);
      mori_coll_impl_ar_store_word(staged, rel, rel + (bytes_end - byte), w);
    }
  }
}

/* Waits for slice s's flags from every other member (RS region). */
MORI_DEVICE_INLINE int mori_coll_impl_ar_wait_slice(mori_coll_dev_t c, uint64_t epoch, uint32_t S, uint32_t s) {
  int n = c.team.size, me = c.team.rank, rc = MORI_DEVICE_OK;
  for (int src = 0; src < n; src++) {
    if (src == me) continue;
    int r = mori_coll_impl_wait_block(c, mori_coll_impl_flag(c, me, epoch, (uint64_t)src * S + s), epoch,
                                 mori_team_to_world(c.team, src), (uint32_t)((uint64_t)src * S + s));
    if (r && !rc) rc = r;
  }
  return rc;
}


MORI_DEVICE_INLINE int mori_coll_impl_ar_rsag_item(mori_coll_dev_t c, const mori_allreduce_args_t *a, uint64_t epoch, uint32_t item) {
  int n = c.team.size, me = c.team.rank;
  uint32_t S = a->slices, s = item % S;
  uint64_t esize = mori_coll_impl_dtype_size(a->dtype);
  int t = MORI_THREAD_RANK_BLOCK(), threads = MORI_THREAD_COUNT_BLOCK();
  const char *in = (const char *)a->in;
  char *out = (char *)a->out;
  if (item < (uint32_t)(n - 1) * S) {
    int dst = (me + 1 + (int)(item / S)) % n;
    uint64_t b, e;
    mori_coll_impl_ar_slice(a, dst, s, &b, &e);
    uint64_t in_part = b - (uint64_t)dst * a->part_elems;
    char *remote = mori_coll_impl_staging(c, dst, epoch, mori_coll_impl_ar_staging_offset(a, n, 0, me, in_part));
    mori_copy_cooperative(remote, in + b * esize, (e - b) * esize, t, threads);
    mori_coll_impl_signal_block(mori_coll_impl_flag(c, dst, epoch, (uint64_t)me * S + s), epoch);
    return MORI_DEVICE_OK;
  }
  if (item < (uint32_t)n * S) {
    uint64_t b, e;
    mori_coll_impl_ar_slice(a, me, s, &b, &e);
    int rc = mori_coll_impl_ar_wait_slice(c, epoch, S, s);
    mori_coll_impl_ar_reduce_range(c, a, epoch, b, e, (uint64_t)me * a->part_elems, 1);
    for (int k = 1; k < n; k++) /* each signal syncs the block: every thread's stores are done */
      mori_coll_impl_signal_block(mori_coll_impl_flag(c, (me + k) % n, epoch, (uint64_t)n * S + (uint64_t)me * S + s), epoch);
    return rc;
  }
  int src = (me - 1 - (int)((item - (uint32_t)n * S) / S) + n) % n;
  uint64_t b, e;
  mori_coll_impl_ar_slice(a, src, s, &b, &e);
  uint64_t in_part = b - (uint64_t)src * a->part_elems;
  uint64_t slot = (uint64_t)n * S + (uint64_t)src * S + s;
  int rc = mori_coll_impl_wait_block(c, mori_coll_impl_flag(c, me, epoch, slot), epoch, mori_team_to_world(c.team, src), (uint32_t)slot);
  const char *staged = mori_coll_impl_staging(c, me, epoch, mori_coll_impl_ar_staging_offset(a, n, 1, src, in_part));
  mori_copy_cooperative(out + b * esize, staged, (e - b) * esize, t, threads);
  MORI_SYNC_BLOCK();
  return rc;
}

/* ---- ONESHOT: every member's whole buffer in flagged slices ---- */

MORI_DEVICE_INLINE int mori_coll_impl_ar_oneshot_item(mori_coll_dev_t c, const mori_allreduce_args_t *a, uint64_t epoch,
                                            uint32_t item) {
  int n = c.team.size, me = c.team.rank;
  uint32_t S = a->slices, s = item % S;
  uint64_t esize = mori_coll_impl_dtype_size(a->dtype), b, e;
  mori_coll_impl_ar_slice(a, 0, s, &b, &e);
  if (item < (uint32_t)(n - 1) * S) {
    int dst = (me + 1 + (int)(item / S)) % n;
    char *remote = mori_coll_impl_staging(c, dst, epoch, mori_coll_impl_ar_staging_offset(a, n, 0, me, b));
    mori_copy_cooperative(remote, (const char *)a->in + b * esize, (e - b) * esize, MORI_THREAD_RANK_BLOCK(),
                          MORI_THREAD_COUNT_BLOCK());
    mori_coll_impl_signal_block(mori_coll_impl_flag(c, dst, epoch, (uint64_t)me * S + s), epoch);
    return MORI_DEVICE_OK;
  }
  int rc = mori_coll_impl_ar_wait_slice(c, epoch, S, s);
  /* In place, this rank's own pushes of slice s (other items, other blocks
   * on a GPU) read in[b, e), which the reduce below overwrites: it waits
   * until each has set its flag at the peer, or a peer would add this
   * rank's sum for its input. Push items come before reduce items in every
   * block's order, so the wait cannot close a cycle. */
  if (a->in == a->out)
    for (int k = 1; k < n; k++) {
      int dst = (me + k) % n;
      uint64_t slot = (uint64_t)me * S + s;
      int r = mori_coll_impl_wait_block(c, mori_coll_impl_flag(c, dst, epoch, slot), epoch, mori_team_to_world(c.team, dst),
                                        (uint32_t)slot);
      if (r && !rc) rc = r;
    }
  mori_coll_impl_ar_reduce_range(c, a, epoch, b, e, 0, 0);
  MORI_SYNC_BLOCK();
  return rc;
}

MORI_DEVICE_INLINE int mori_allreduce_item(mori_coll_dev_t c, const mori_allreduce_args_t *a, uint64_t epoch, uint32_t item) {
  if (a->algo == MORI_ALLREDUCE_LL) return mori_coll_impl_ar_ll_item(c, a, epoch, item);
  if (a->algo == MORI_ALLREDUCE_ONESHOT) return mori_coll_impl_ar_oneshot_item(c, a, epoch, item);
  return mori_coll_impl_ar_rsag_item(c, a, epoch, item);
}

#endif
