// SPDX-License-Identifier: MIT
/* Synchronisation with ranks on other nodes, for a comm whose LSA team is
 * not the whole comm. `win` is the window's view; `sync` its
 * synchronisation area's (mori_window_sync_view): the area continues, past
 * the LSA barrier's epochs, with per-channel counters indexed by world rank
 * (MORI_REMOTE_* in impl/window__types.h). A rank on another node is told
 * by an atomic add through `sync`'s proxy ring (rdma); what it was told is
 * read here with plain acquire loads. Data this rank sent to other nodes
 * through the window's ring is complete before any of them is told: each
 * operation first waits for the window's ring (mori_quiet_window).
 *
 *   mori_world_barrier_block   the LSA barrier, then every rank of the
 *                              other nodes (block scope; thread 0 talks
 *                              to the other nodes)
 *   mori_remote_signal_put     +1 on `peer`'s count of this rank's signals,
 *                              returning once delivered (or failed)
 *   mori_remote_signal_wait    waits until `peer` has signalled more often
 *                              than this rank has consumed, consumes one
 *
 * Channels: [0, MORI_BARRIER_CHANNELS). Timeouts and the abort flag are
 * honoured; a failure leaves a record in the window's mailbox. */
#ifndef MORI_DEVICE_REMOTE_SYNC_H
#define MORI_DEVICE_REMOTE_SYNC_H

#include "mori/device/barrier.h"

MORI_DEVICE_INLINE uint64_t *mori_remote_word(mori_window_dev_t sync, uint64_t offset) {
  return (uint64_t *)mori_lsa_ptr(sync, sync.lsa_rank, offset);
}

MORI_DEVICE_INLINE int mori_world_barrier_block(mori_window_dev_t win, mori_window_dev_t sync, uint32_t channel,
                                                uint64_t timeout_ns) {
  int rc = mori_barrier_block(win, channel, timeout_ns);
  /* Block-uniform: every thread takes the same branch (some thread's LSA
   * wait may have failed alone). */
  if (MORI_SYNC_BLOCK_OR(rc != MORI_DEVICE_OK)) return rc;
  if (win.lsa_size == win.world_size) return rc;
  if (MORI_THREAD_RANK_BLOCK() == 0) {
    int lsa = win.lsa_size, world = win.world_size, me = win.world_rank;
    rc = mori_quiet_window(win, timeout_ns);
    uint64_t *mine = mori_remote_word(sync, MORI_REMOTE_EPOCH(lsa, world, channel));
    uint64_t epoch = *(volatile uint64_t *)mine + 1;
    /* A round counts once its arrivals are sent (as the LSA barrier's does),
     * so the next barrier lines up with the other nodes even after a timeout. */
    if (!rc) *(volatile uint64_t *)mine = epoch;
    for (int p = 0; p < world && !rc; p++)
      if (mori_lsa_index(win, p) < 0) rc = mori_signal_add(sync, p, MORI_REMOTE_ARRIVED(lsa, world, channel, me), 1);
    for (int p = 0; p < world && !rc; p++)
      if (mori_lsa_index(win, p) < 0)
        rc = mori_wait_word(sync, mori_remote_word(sync, MORI_REMOTE_ARRIVED(lsa, world, channel, p)), MORI_CMP_GE, epoch,
                            timeout_ns, p, channel, 0);
    /* An arrival the proxy could not deliver is this rank's error too. */
    if (!rc) rc = mori_proxy_quiet(sync, timeout_ns);
  }
  MORI_SYNC_BLOCK();
  return rc; /* thread 0's for the other nodes; every failure is also in the mailbox */
}

MORI_DEVICE_INLINE int mori_remote_signal_put(mori_window_dev_t win, mori_window_dev_t sync, int peer, uint32_t channel,
                                              uint64_t timeout_ns) {
  int rc = mori_quiet_window(win, timeout_ns);
  if (!rc) rc = mori_signal_add(sync, peer, MORI_REMOTE_SIGNALED(win.lsa_size, win.world_size, channel, win.world_rank), 1);
  /* Delivered, or a failure the sender sees (not only the waiter's timeout). */
  return rc ? rc : mori_proxy_quiet(sync, timeout_ns);
}

MORI_DEVICE_INLINE int mori_remote_signal_wait(mori_window_dev_t win, mori_window_dev_t sync, int peer, uint32_t channel,
                                               uint64_t timeout_ns) {
  uint64_t *consumed = mori_remote_word(sync, MORI_REMOTE_CONSUMED(win.lsa_size, win.world_size, channel, peer));
  uint64_t next = *(volatile uint64_t *)consumed + 1;
  int rc = mori_wait_word(sync, mori_remote_word(sync, MORI_REMOTE_SIGNALED(win.lsa_size, win.world_size, channel, peer)),
                          MORI_CMP_GE, next, timeout_ns, peer, channel, 0);
  if (!rc) *(volatile uint64_t *)consumed = next;
  return rc;
}

#endif
