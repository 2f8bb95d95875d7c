// SPDX-License-Identifier: MIT
/* A call's signature (the words are described at MORI_COLL_MISMATCH_CHANNEL):
 * what the members of a context that checks calls compare on the device
 * before anything moves. Made from the planned arguments, so a tuning
 * variable set differently on one member (another algorithm, other
 * slices) is found as well as a different count, dtype or op. */
#include <stdbool.h>

#include "collectives/internal.h"

static uint64_t call_word(uint64_t kind, uint32_t variant, uint32_t dtype, uint32_t algo, uint64_t size) {
  if (size > MORI_COLL_SIG_SIZE_MASK) size = MORI_COLL_SIG_SIZE_MASK; /* no buffer is that large */
  return kind << 60 | (uint64_t)(variant & 15u) << 56 | (uint64_t)(dtype & 15u) << 52 | (uint64_t)(algo & 15u) << 48 | size;
}

/* Which window and where in it: members that write their peers' outputs
 * into different windows at the same offset would each land in a window
 * the others do not read. The ordinal's low 16 bits (a program that makes
 * more windows than that may miss a difference, never see a false one). */
static uint64_t offset_word(uint64_t out_window, uint64_t out_offset) {
  return (out_window & 0xffffu) << 48 | (out_offset & MORI_COLL_SIG_SIZE_MASK);
}

static uint64_t plan_word(uint64_t pieces, uint64_t each) {
  if (each > MORI_COLL_SIG_SIZE_MASK) each = MORI_COLL_SIG_SIZE_MASK;
  return (pieces & 0xffffu) << 48 | each;
}

mori_coll_call_sig_t mori_coll_sig_all_to_all(const mori_a2a_args_t *a, uint64_t out_window, uint64_t out_offset) {
  mori_coll_call_sig_t s = {{0}};
  /* An empty call plans nothing the members share (its algorithm is
   * whatever a member's variables would pick) and writes nowhere: its kind
   * and size alone are compared (not the window, which the caller's checks
   * have not even tied to the context's comm for it, nor the offset). */
  bool empty = a->bytes == 0;
  s.word[MORI_COLL_SIG_CALL] = call_word(MORI_COLL_SIG_ALL_TO_ALL, out_window != 0, 0, empty ? 0 : a->algo, a->bytes);
  s.word[MORI_COLL_SIG_PLAN] = empty ? 0 : plan_word(a->slices, a->slice);
  s.word[MORI_COLL_SIG_OFFSET] = empty ? 0 : offset_word(out_window, out_offset);
  return s;
}

mori_coll_call_sig_t mori_coll_sig_all_reduce(const mori_allreduce_args_t *a) {
  mori_coll_call_sig_t s = {{0}};
  bool empty = a->count == 0;
  s.word[MORI_COLL_SIG_CALL] = call_word(MORI_COLL_SIG_ALL_REDUCE, a->op, a->dtype, empty ? 0 : a->algo, a->count);
  /* LL lines carry their own flags at places that follow from the count
   * alone: how a member groups them into items is its own. */
  if (!empty && a->algo != MORI_ALLREDUCE_LL) s.word[MORI_COLL_SIG_PLAN] = plan_word(a->slices, a->slice_elems);
  return s;
}

mori_coll_call_sig_t mori_coll_sig_all_to_all_v(const mori_a2av_args_t *a, uint64_t out_window) {
  mori_coll_call_sig_t s = {{0}};
  s.word[MORI_COLL_SIG_CALL] = call_word(MORI_COLL_SIG_ALL_TO_ALL_V, a->layout, 0, 0, a->row_bytes);
  uint64_t align = a->align > 0xffffffffull ? 0xffffffffull : a->align;
  s.word[MORI_COLL_SIG_MORE] = (uint64_t)a->experts << 32 | align;
  s.word[MORI_COLL_SIG_PLAN] = plan_word(a->pieces, 0);
  /* A member writes each peer's rows into its own out window at its own
   * offset, bounded by its own idea of the rows out holds: all three must
   * be every member's. */
  s.word[MORI_COLL_SIG_OFFSET] = offset_word(out_window, a->out_offset);
  s.word[MORI_COLL_SIG_ROWS] = a->out_rows;
  return s;
}
