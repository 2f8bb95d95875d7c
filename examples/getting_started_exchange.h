// SPDX-License-Identifier: MIT
/* The kernel body of docs/getting-started.md, step 2, written once over the
 * device API: compiled by nvcc / clang (HIP) inside a __global__ kernel, and
 * as plain C for CPU ranks. */
#ifndef MORI_EXAMPLES_GETTING_STARTED_EXCHANGE_H
#define MORI_EXAMPLES_GETTING_STARTED_EXCHANGE_H

#include "mori/device.h"

/* What rank `writer` leaves in rank `reader`'s buffer. */
MORI_HOST_DEVICE int64_t gs_value(int writer, int reader) { return 1000 * (int64_t)writer + reader; }

/* Every thread of one block calls it: thread i writes this rank's value into
 * slot `rank` of peers i, i + threads, ...; then the block makes its stores
 * visible and meets the other ranks at the device barrier (10 s at most). */
MORI_DEVICE_INLINE int gs_exchange(mori_window_dev_t view) {
  int me = view.world_rank, rc = MORI_DEVICE_OK;
  for (int peer = MORI_THREAD_RANK_BLOCK(); peer < view.world_size; peer += MORI_THREAD_COUNT_BLOCK()) {
    int64_t v = gs_value(me, peer);
    int r = mori_put_thread(view, peer, (uint64_t)me * sizeof(int64_t), &v, sizeof(v));
    if (r) rc = r; /* keep going: every thread must reach the barrier */
  }
  mori_quiet();
  MORI_SYNC_BLOCK();
  int r = mori_lsa_barrier_block(view, 0, 10ull * 1000 * 1000 * 1000);
  return rc ? rc : r;
}

#endif
