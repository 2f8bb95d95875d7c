// SPDX-License-Identifier: MIT
/* The host platform's launcher: the calling CPU rank runs every item of the
 * call in index order (pushes before the waits that need them, on every
 * rank), then publishes the epoch. */
#include "collectives/internal.h"
#include "mori/device.h"
#include "mori/device/coll.h"

int mori_coll_grid(int device, uint32_t *grid) {
  *grid = 1; /* the calling CPU rank is the one block */
  return 0;
}

/* One call on the calling rank: the members' signatures compared
 * (contexts that check calls; a difference skips the call), begin (block
 * 0's start-of-call step, or NO_BEGIN), every item in index order, then
 * the epoch. A failed item does
 * not stop the rest (the other ranks wait for them); the first failure is
 * kept and the window's state says what went wrong. */
#define NO_BEGIN(d, a, epoch) ((void)0)
#define RUN_CALL(c, a, begin, item)                              \
  do {                                                           \
    mori_coll_dev_t d_ = (c)->view;                              \
    d_.call_start_ns = mori_clock_ns(); /* the call's waits */   \
    uint64_t epoch_ = mori_coll_epoch(d_, 0);                    \
    int rc_ = mori_coll_check_call(d_, &(a)->sig, 0, epoch_);    \
    const int skip_ = rc_; /* a member's call differs */         \
    if (!rc_) begin(d_, (a), epoch_);                            \
    for (uint32_t i_ = 0; !skip_ && i_ < (a)->items; i_++) {     \
      int r_ = item(d_, (a), epoch_, i_);                        \
      if (r_ && !rc_) rc_ = r_;                                  \
    }                                                            \
    mori_coll_finish_block(d_, 0, epoch_);                       \
    return rc_ ? mori_window_check((c)->win) : 0;                \
  } while (0)

int mori_coll_launch_all_to_all(const mori_coll_t *c, const mori_a2a_args_t *a, void *stream) {
  RUN_CALL(c, a, mori_a2a_begin, mori_a2a_item);
}

int mori_coll_launch_all_reduce(const mori_coll_t *c, const mori_allreduce_args_t *a, void *stream) {
  RUN_CALL(c, a, NO_BEGIN, mori_allreduce_item);
}

int mori_coll_launch_all_to_all_v(const mori_coll_t *c, const mori_a2av_args_t *a, void *stream) {
  RUN_CALL(c, a, mori_a2av_begin, mori_a2av_item);
}

int mori_coll_launch_refusal(const mori_coll_t *c, void *stream) {
  (void)stream;
  mori_coll_refuse_block(c->view, 0);
  return 0;
}

int mori_launch_window_op(mori_window_t *win, const mori_window_dev_t *v, const mori_window_dev_t *sync, int op, int peer,
                          int channel, uint64_t timeout_ns, void *stream) {
  int rc;
  bool remote = peer >= 0 && mori_lsa_index(*v, peer) < 0;
  if (op == MORI_WINDOW_OP_BARRIER) {
    rc = mori_world_barrier_block(*v, *sync, (uint32_t)channel, timeout_ns);
  } else if (op == MORI_WINDOW_OP_PUT_SIGNAL) {
    mori_fence_system();
    rc = remote ? mori_remote_signal_put(*v, *sync, peer, (uint32_t)channel, timeout_ns)
                : mori_pad_put(*v, peer, (uint32_t)channel, timeout_ns);
  } else {
    rc = remote ? mori_remote_signal_wait(*v, *sync, peer, (uint32_t)channel, timeout_ns)
                : mori_pad_wait(*v, peer, (uint32_t)channel, timeout_ns);
    mori_fence_system();
  }
  return rc ? mori_window_check(win) : 0;
}
