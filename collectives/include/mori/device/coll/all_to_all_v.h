/* All-to-all with sizes on the device (torch's all_to_all_vdev: MoE
 * dispatch and combine), in one kernel and straight into a symmetric out.
 *
 * Every member starts by writing its row of the split matrix (how many rows
 * it sends to each member) into every member's staging, as LL lines that
 * carry the call's epoch (mori_a2av_begin, block 0, before any item). An
 * item first waits for the whole matrix: from it a member knows where its
 * rows land in each destination (after those of the members before it) and
 * where each source's rows land in its own out. A row arriving from a
 * member also says that member has started the call, so its out is free to
 * be written: no other handshake. Items:
 *   [0, (n-1)*P)       push piece j of the chunk for member me+k straight
 *                      into its out, then the piece's flag;
 *   [(n-1)*P, n*P)     own chunk, piece j, copied locally (piece 0 also
 *                      writes out_splits_offsets);
 *   [n*P, (2n-1)*P)    wait for piece j from member me-k.
 * The matrix lives in the staging half of the call's parity: a member one
 * call ahead writes the other half. A chunk that would not fit in the
 * destination's out is not written; the pusher leaves MORI_DEVICE_ERANGE in
 * the mailbox (what was needed, what fits) and still raises its flags, so
 * no member waits for it. */
#ifndef MORI_DEVICE_COLL_ALL_TO_ALL_V_H
#define MORI_DEVICE_COLL_ALL_TO_ALL_V_H

#include "mori/device/coll/sync.h"

/* Line (r, q) of the matrix in `member`'s staging: rows r sends to q. */
MORI_DEVICE_INLINE uint64_t *mori_a2av_line(mori_coll_dev_t c, int member, uint64_t epoch, int r, int q) {
  return (uint64_t *)mori_coll_staging(c, member, epoch, ((uint64_t)r * (uint64_t)c.team.size + (uint64_t)q) * 16);
}

/* Staging bytes the matrix takes per parity. */
MORI_HOST_DEVICE uint64_t mori_a2av_matrix_bytes(int n) { return (uint64_t)n * (uint64_t)n * 16; }

/* Block 0, before its items: this member's row, to every member. */
MORI_DEVICE_INLINE void mori_a2av_begin(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch) {
  int n = c.team.size, me = c.team.rank;
  uint64_t flag = (uint64_t)(uint32_t)epoch << 32;
  for (int t = MORI_THREAD_RANK_BLOCK(); t < n * n; t += MORI_THREAD_COUNT_BLOCK()) {
    int member = t / n, q = t % n;
    uint64_t rows = (uint64_t)a->in_splits[q];
    mori_store_ll_line(mori_a2av_line(c, member, epoch, me, q), (rows & 0xffffffffull) | flag, (rows >> 32) | flag);
  }
}

/* Entry (r, q), once the matrix has arrived. */
MORI_DEVICE_INLINE uint64_t mori_a2av_entry(mori_coll_dev_t c, uint64_t epoch, int r, int q) {
  uint64_t lo, hi;
  mori_load_ll_line(mori_a2av_line(c, c.team.rank, epoch, r, q), &lo, &hi);
  return (lo & 0xffffffffull) | (hi << 32);
}

/* Until every line of the matrix carries this call's epoch (block scope).
 * A wait that times out or is aborted leaves its record and returns. */
MORI_DEVICE_INLINE int mori_a2av_wait_matrix(mori_coll_dev_t c, uint64_t epoch) {
  int n = c.team.size, rc = MORI_DEVICE_OK;
  for (int t = MORI_THREAD_RANK_BLOCK(); t < n * n && !rc; t += MORI_THREAD_COUNT_BLOCK()) {
    uint64_t rows;
    rc = mori_coll_wait_ll_line(c, mori_a2av_line(c, c.team.rank, epoch, t / n, t % n), epoch,
                                mori_team_to_world(c.team, t / n), (uint32_t)t, &rows);
  }
  MORI_SYNC_BLOCK();
  return rc;
}

/* Bytes [*begin, *end) of piece j of a chunk of `bytes`: P nearly equal
 * pieces whose bounds fall on 16 bytes (vector copies) but the last. */
MORI_HOST_DEVICE void mori_a2av_piece(uint64_t bytes, uint32_t P, uint32_t j, uint64_t *begin, uint64_t *end) {
  uint64_t b = bytes / P * j / 16 * 16, e = j + 1 == P ? bytes : bytes / P * (j + 1) / 16 * 16;
  *begin = b < bytes ? b : bytes;
  *end = e < bytes ? e : bytes;
}

/* Piece j of this member's chunk for member dst (dst == me: the local
 * copy), once the matrix is here: into dst's out after the rows of the
 * members before this one. Returns MORI_DEVICE_ERANGE (recorded) when they
 * would not fit. */
MORI_DEVICE_INLINE int mori_a2av_send(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch, int dst, uint32_t j) {
  int me = c.team.rank;
  uint64_t rows = mori_a2av_entry(c, epoch, me, dst), from = 0, at = 0;
  for (int q = 0; q < dst; q++) from += mori_a2av_entry(c, epoch, me, q);
  for (int r = 0; r < me; r++) at += mori_a2av_entry(c, epoch, r, dst);
  if (at + rows > a->out_rows) {
    if (MORI_THREAD_RANK_BLOCK() == 0 && j == 0)
      mori_device_report(c.win, MORI_DEVICE_ERANGE, mori_team_to_world(c.team, dst), 0, 0, at + rows, a->out_rows);
    return MORI_DEVICE_ERANGE;
  }
  uint64_t b, e;
  mori_a2av_piece(rows * a->row_bytes, a->pieces, j, &b, &e);
  const char *src = a->in + from * a->row_bytes + b;
  char *target = dst == me ? a->out + at * a->row_bytes + b
                           : (char *)mori_peer_ptr(a->out_win, mori_team_to_world(c.team, dst),
                                                   a->out_offset + at * a->row_bytes + b);
  mori_copy_cooperative(target, src, e - b, MORI_THREAD_RANK_BLOCK(), MORI_THREAD_COUNT_BLOCK());
  return MORI_DEVICE_OK;
}

/* Piece 0 of the own chunk: rows from each member and where they start;
 * MORI_DEVICE_ERANGE (recorded) when they do not all fit in out. */
MORI_DEVICE_INLINE int mori_a2av_write_splits(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch) {
  int n = c.team.size, me = c.team.rank;
  for (int r = MORI_THREAD_RANK_BLOCK(); r < n; r += MORI_THREAD_COUNT_BLOCK()) {
    uint64_t offset = 0;
    for (int k = 0; k < r; k++) offset += mori_a2av_entry(c, epoch, k, me);
    a->out_splits_offsets[r] = (int64_t)mori_a2av_entry(c, epoch, r, me);
    a->out_splits_offsets[n + r] = (int64_t)offset;
  }
  uint64_t total = 0;
  for (int r = 0; r < n; r++) total += mori_a2av_entry(c, epoch, r, me);
  if (total <= a->out_rows) return MORI_DEVICE_OK;
  if (MORI_THREAD_RANK_BLOCK() == 0)
    mori_device_report(c.win, MORI_DEVICE_ERANGE, mori_team_to_world(c.team, me), 0, 0, total, a->out_rows);
  return MORI_DEVICE_ERANGE;
}

/* One item of the call; block scope. */
MORI_DEVICE_INLINE int mori_a2av_item(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch, uint32_t item) {
  int n = c.team.size, me = c.team.rank;
  uint32_t P = a->pieces, j = item % P;
  int rc = mori_a2av_wait_matrix(c, epoch);
  if (item < a->kind_end[0]) {
    int dst = (me + 1 + (int)(item / P)) % n;
    int r = rc ? rc : mori_a2av_send(c, a, epoch, dst, j);
    mori_coll_signal_block(mori_coll_flag(c, dst, epoch, (uint64_t)me * P + j), epoch);
    return rc ? rc : r;
  }
  if (item < a->kind_end[1]) {
    if (!rc) rc = mori_a2av_send(c, a, epoch, me, j);
    if (j == 0) {
      int r = mori_a2av_write_splits(c, a, epoch);
      if (!rc) rc = r;
    }
    MORI_SYNC_BLOCK();
    return rc;
  }
  int src = (me - 1 - (int)((item - a->kind_end[1]) / P) + n) % n;
  int r = mori_coll_wait_block(c, mori_coll_flag(c, me, epoch, (uint64_t)src * P + j), epoch,
                               mori_team_to_world(c.team, src), (uint32_t)((uint64_t)src * P + j));
  return rc ? rc : r;
}

#endif
