// SPDX-License-Identifier: MIT
/* Bodies of mori/device/coll/all_to_all_v.h. Internal: mori_coll_impl_* may
 * change between releases. */
#ifndef MORI_DEVICE_COLL_IMPL_ALL_TO_ALL_V_FUNCS_H
#define MORI_DEVICE_COLL_IMPL_ALL_TO_ALL_V_FUNCS_H

#include "mori/device/coll/all_to_all_v.h"
#include "mori/device/coll/sync.h"

/* Line (r, q) of the matrix in `member`'s staging: rows r sends to column
 * q = d * E + e (member d, its expert e). */
MORI_DEVICE_INLINE uint64_t *mori_coll_impl_a2av_line(mori_coll_dev_t c, const mori_a2av_args_t *a, int member, uint64_t epoch,
                                            int r, uint64_t q) {
  uint64_t cols = (uint64_t)c.team.size * a->experts;
  return (uint64_t *)mori_coll_impl_ll_staging(c, member, epoch, ((uint64_t)r * cols + q) * 16);
}

/* Staging bytes the matrix takes per parity. */
MORI_HOST_DEVICE uint64_t mori_coll_impl_a2av_matrix_bytes(int n, uint32_t experts) {
  return (uint64_t)n * (uint64_t)n * experts * 16;
}

/* What a bad split (or offset) is published as: MORI_A2AV_BAD_ROWS (more
 * rows than any output holds; the host refuses outs of as many rows), so
 * every member's range check refuses it (recorded; the record's decoder
 * tells it from a real shortfall by its size) and no row of it is copied,
 * while sums of such entries cannot wrap. */

/* Whether split (or offset) `v` is bad: negative, or more rows than any
 * member's out holds (summed, such counts wrapped past 2^64). */
MORI_HOST_DEVICE int mori_coll_impl_a2av_bad(int64_t v, uint64_t out_rows) { return v < 0 || (uint64_t)v > out_rows; }

/* Block 0, before its items: this member's row, to every member. A bad
 * split or offset is recorded here (a negative one MORI_DEVICE_EINVAL,
 * naming the member it was for and the value; one past out
 * MORI_DEVICE_ERANGE with the rows and out's rows) and published as
 * MORI_A2AV_BAD_ROWS. */
MORI_DEVICE_INLINE void mori_a2av_begin(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch) {
  int n = c.team.size, me = c.team.rank;
  uint64_t E = a->experts, cols = (uint64_t)n * E, flag = (uint64_t)(uint32_t)epoch << 32;
  /* Outside the combine layout this member's rows are placed by summing
   * its splits, so one negative split spoils all of them and it sends
   * nothing (a2av_send): every entry it publishes is then bad, so that
   * every member expecting rows from it reports, rather than returning
   * with the rows missing. */
  int spoiled = 0;
  for (uint64_t q = (uint64_t)MORI_THREAD_RANK_BLOCK(); a->layout != MORI_A2AV_COMBINE && q < cols;
       q += (uint64_t)MORI_THREAD_COUNT_BLOCK())
    spoiled |= mori_coll_impl_a2av_bad(a->in_splits[q], a->out_rows);
  spoiled = MORI_SYNC_BLOCK_OR(spoiled);
  for (uint64_t t = (uint64_t)MORI_THREAD_RANK_BLOCK(); t < (uint64_t)n * cols; t += (uint64_t)MORI_THREAD_COUNT_BLOCK()) {
    int member = (int)(t / cols);
    uint64_t q = t % cols, d = q / E, e = q % E;
    int combine = a->layout == MORI_A2AV_COMBINE;
    int64_t split = a->in_splits[combine ? e * (uint64_t)n + d : q];
    int64_t offset = combine ? a->in_splits[(E + e) * (uint64_t)n + d] : 0;
    uint64_t rows = spoiled ? MORI_A2AV_BAD_ROWS : (uint64_t)split;
    if (mori_coll_impl_a2av_bad(split, a->out_rows) || (combine && (offset < 0 || (uint64_t)offset >= MORI_A2AV_BAD_ROWS))) {
      if (member == me && (split < 0 || offset < 0))
        mori_device_report(c.win, MORI_DEVICE_EINVAL, mori_team_to_world(c.team, (int)d), (uint32_t)e, 0,
                           (uint64_t)(split < 0 ? split : offset), 0);
      else if (member == me)
        mori_device_report(c.win, MORI_DEVICE_ERANGE, mori_team_to_world(c.team, (int)d), 0, 0,
                           (uint64_t)(mori_coll_impl_a2av_bad(split, a->out_rows) ? split : offset), a->out_rows);
      rows = MORI_A2AV_BAD_ROWS;
    }
    mori_store_ll_line(mori_coll_impl_a2av_line(c, a, member, epoch, me, q), (rows & 0xffffffffull) | flag, (rows >> 32) | flag);
  }
}

/* Entry (r, d, e): rows member r sends to member d's expert e, once the
 * matrix has arrived. */
MORI_DEVICE_INLINE uint64_t mori_coll_impl_a2av_entry(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch, int r, int d,
                                            uint64_t e) {
  uint64_t lo, hi;
  mori_load_ll_line(mori_coll_impl_a2av_line(c, a, c.team.rank, epoch, r, (uint64_t)d * a->experts + e), &lo, &hi);
  return (lo & 0xffffffffull) | (hi << 32);
}

/* Until every line of the matrix carries this call's epoch (block scope).
 * A wait that times out or is aborted leaves its record and returns. */
MORI_DEVICE_INLINE int mori_coll_impl_a2av_wait_matrix(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch) {
  int n = c.team.size, rc = MORI_DEVICE_OK;
  uint64_t cols = (uint64_t)n * a->experts;
  for (uint64_t t = (uint64_t)MORI_THREAD_RANK_BLOCK(); t < (uint64_t)n * cols && !rc;
       t += (uint64_t)MORI_THREAD_COUNT_BLOCK()) {
    uint64_t rows;
    rc = mori_coll_impl_wait_ll_line(c, mori_coll_impl_a2av_line(c, a, c.team.rank, epoch, (int)(t / cols), t % cols), epoch,
                                mori_team_to_world(c.team, (int)(t / cols)), (uint32_t)t, &rows);
  }
  MORI_SYNC_BLOCK();
  return rc;
}

/* Where expert e's rows start in member d's out (EXPERTS): each earlier
 * expert takes its rows from all members rounded up to `align`, and at
 * least `align` rows even when it got none (torch's contract: grouped GEMMs
 * take no empty bins). */
MORI_DEVICE_INLINE uint64_t mori_coll_impl_a2av_expert_start(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch, int d,
                                                   uint64_t e) {
  uint64_t start = 0;
  for (uint64_t x = 0; x < e; x++) {
    uint64_t total = 0;
    for (int r = 0; r < c.team.size; r++) total += mori_coll_impl_a2av_entry(c, a, epoch, r, d, x);
    total = (total + a->align - 1) / a->align * a->align;
    start += total > a->align ? total : a->align;
  }
  return start;
}

/* Row where member r's segment for member d's expert e starts in d's out. */
MORI_DEVICE_INLINE uint64_t mori_coll_impl_a2av_out_row(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch, int r, int d,
                                              uint64_t e) {
  uint64_t at = 0;
  if (a->layout == MORI_A2AV_EXPERTS) {
    at = mori_coll_impl_a2av_expert_start(c, a, epoch, d, e);
    for (int k = 0; k < r; k++) at += mori_coll_impl_a2av_entry(c, a, epoch, k, d, e);
  } else { /* member-major: (r, e) after every earlier member's rows and (r, e' < e) */
    for (int k = 0; k < r; k++)
      for (uint64_t x = 0; x < a->experts; x++) at += mori_coll_impl_a2av_entry(c, a, epoch, k, d, x);
    for (uint64_t x = 0; x < e; x++) at += mori_coll_impl_a2av_entry(c, a, epoch, r, d, x);
  }
  return at;
}

/* Row where this member's segment for member d's expert e starts in `in`. */
MORI_DEVICE_INLINE uint64_t mori_coll_impl_a2av_in_row(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch, int d,
                                             uint64_t e) {
  int n = c.team.size, me = c.team.rank;
  if (a->layout == MORI_A2AV_COMBINE) return (uint64_t)a->in_splits[(uint64_t)(a->experts + e) * (uint64_t)n + (uint64_t)d];
  uint64_t from = 0;
  for (int q = 0; q < d; q++)
    for (uint64_t x = 0; x < a->experts; x++) from += mori_coll_impl_a2av_entry(c, a, epoch, me, q, x);
  for (uint64_t x = 0; x < e; x++) from += mori_coll_impl_a2av_entry(c, a, epoch, me, d, x);
  return from;
}

/* The row after the last that lands in member d's out. */
MORI_DEVICE_INLINE uint64_t mori_coll_impl_a2av_out_end(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch, int d) {
  uint64_t last = a->experts - 1, end = 0;
  if (a->layout == MORI_A2AV_EXPERTS) end = mori_coll_impl_a2av_expert_start(c, a, epoch, d, last);
  for (int r = 0; r < c.team.size; r++)
    for (uint64_t x = a->layout == MORI_A2AV_EXPERTS ? last : 0; x <= last; x++) end += mori_coll_impl_a2av_entry(c, a, epoch, r, d, x);
  return end;
}

/* Bytes [*begin, *end) of piece j of a chunk of `bytes`: P nearly equal
 * pieces whose bounds fall on 16 bytes (vector copies) but the last. */
MORI_HOST_DEVICE void mori_coll_impl_a2av_piece(uint64_t bytes, uint32_t P, uint32_t j, uint64_t *begin, uint64_t *end) {
  uint64_t b = bytes / P * j / 16 * 16, e = j + 1 == P ? bytes : bytes / P * (j + 1) / 16 * 16;
  *begin = b < bytes ? b : bytes;
  *end = e < bytes ? e : bytes;
}

/* Piece j of what this member sends member dst (dst == me: the local
 * copy), once the matrix is here: segment by segment (one per expert) into
 * dst's out where the layout puts it. Returns MORI_DEVICE_ERANGE
 * (recorded) when a segment would not fit. */
MORI_DEVICE_INLINE int mori_coll_impl_a2av_send(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch, int dst, uint32_t j) {
  int me = c.team.rank, rc = MORI_DEVICE_OK;
  uint64_t rb = a->row_bytes, total = 0;
  /* A negative split of this member's (recorded by begin) spoils where
   * every later segment starts in `in` (the splits are summed): nothing is
   * sent. begin then published every entry of this member bad, so its
   * first entry tells. In the combine layout each segment's start is
   * given, and only the bad segment itself is skipped (below). */
  if (a->layout != MORI_A2AV_COMBINE && mori_coll_impl_a2av_entry(c, a, epoch, me, 0, 0) >= MORI_A2AV_BAD_ROWS)
    return MORI_DEVICE_EINVAL;
  for (uint64_t e = 0; e < a->experts; e++) total += mori_coll_impl_a2av_entry(c, a, epoch, me, dst, e);
  uint64_t pb, pe, seg = 0;
  mori_coll_impl_a2av_piece(total * rb, a->pieces, j, &pb, &pe);
  for (uint64_t e = 0; e < a->experts && seg < pe; e++) {
    uint64_t rows = mori_coll_impl_a2av_entry(c, a, epoch, me, dst, e), len = rows * rb;
    uint64_t b = pb > seg ? pb : seg, end = pe < seg + len ? pe : seg + len;
    if (b < end) {
      uint64_t at = mori_coll_impl_a2av_out_row(c, a, epoch, me, dst, e);
      if (rows > a->out_rows || at > a->out_rows - rows) { /* at + rows, without wrapping */
        if (MORI_THREAD_RANK_BLOCK() == 0)
          mori_device_report(c.win, MORI_DEVICE_ERANGE, mori_team_to_world(c.team, dst), 0, 0, at + rows, a->out_rows);
        rc = MORI_DEVICE_ERANGE;
      } else {
        uint64_t to = at * rb + (b - seg);
        const char *src = a->in + mori_coll_impl_a2av_in_row(c, a, epoch, dst, e) * rb + (b - seg);
        char *target = dst == me ? a->out + to
                                 : (char *)mori_peer_ptr(a->out_win, mori_team_to_world(c.team, dst), a->out_offset + to);
        mori_copy_cooperative(target, src, end - b, MORI_THREAD_RANK_BLOCK(), MORI_THREAD_COUNT_BLOCK());
      }
    }
    seg += len;
  }
  return rc;
}

/* Piece 0 of the own rows: rows from each (member, expert) and where they
 * start, in the layout's order; MORI_DEVICE_ERANGE (recorded) when they do
 * not all fit in out. */
MORI_DEVICE_INLINE int mori_coll_impl_a2av_write_splits(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch) {
  int n = c.team.size, me = c.team.rank;
  uint64_t E = a->experts, count = (uint64_t)n * E;
  for (uint64_t i = (uint64_t)MORI_THREAD_RANK_BLOCK(); i < count; i += (uint64_t)MORI_THREAD_COUNT_BLOCK()) {
    /* Index i in the layout's order: expert-major (e * n + r) for EXPERTS,
     * member-major (r * E + e) otherwise. */
    int r = (int)(a->layout == MORI_A2AV_EXPERTS ? i % (uint64_t)n : i / E);
    uint64_t e = a->layout == MORI_A2AV_EXPERTS ? i / (uint64_t)n : i % E;
    a->out_splits_offsets[i] = (int64_t)mori_coll_impl_a2av_entry(c, a, epoch, r, me, e);
    a->out_splits_offsets[count + i] = (int64_t)mori_coll_impl_a2av_out_row(c, a, epoch, r, me, e);
  }
  uint64_t end = mori_coll_impl_a2av_out_end(c, a, epoch, me);
  if (end <= a->out_rows) return MORI_DEVICE_OK;
  if (MORI_THREAD_RANK_BLOCK() == 0)
    mori_device_report(c.win, MORI_DEVICE_ERANGE, mori_team_to_world(c.team, me), 0, 0, end, a->out_rows);
  return MORI_DEVICE_ERANGE;
}

/* One item of the call; block scope. */
MORI_DEVICE_INLINE int mori_a2av_item(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch, uint32_t item) {
  int n = c.team.size, me = c.team.rank;
  uint32_t P = a->pieces, j = item % P;
  int rc = mori_coll_impl_a2av_wait_matrix(c, a, epoch);
  if (item < a->kind_end[0]) {
    int dst = (me + 1 + (int)(item / P)) % n;
    int r = rc ? rc : mori_coll_impl_a2av_send(c, a, epoch, dst, j);
    mori_coll_impl_signal_block(mori_coll_impl_flag(c, dst, epoch, (uint64_t)me * P + j), epoch);
    return rc ? rc : r;
  }
  if (item < a->kind_end[1]) {
    /* The splits are written only once the whole matrix is here: after a
     * failed wait its lines are partly an older call's, and
     * out_splits_offsets is left as it was. */
    int matrix = rc;
    if (!rc) rc = mori_coll_impl_a2av_send(c, a, epoch, me, j);
    if (j == 0 && matrix == MORI_DEVICE_OK) {
      int r = mori_coll_impl_a2av_write_splits(c, a, epoch);
      if (!rc) rc = r;
    }
    MORI_SYNC_BLOCK();
    return rc;
  }
  int src = (me - 1 - (int)((item - a->kind_end[1]) / P) + n) % n;
  int r = mori_coll_impl_wait_block(c, mori_coll_impl_flag(c, me, epoch, (uint64_t)src * P + j), epoch,
                               mori_team_to_world(c.team, src), (uint32_t)((uint64_t)src * P + j));
  return rc ? rc : r;
}

#endif
