// SPDX-License-Identifier: MIT
/* Signals between ranks on different nodes, for a comm whose LSA team is
 * not the whole comm (the barrier across nodes is mori_world_barrier_block
 * in mori/device/barrier.h). `win` is the window's view; `sync` its
 * synchronisation area's (mori_window_sync_view): the area continues, past
 * the LSA barrier's epochs, with per-channel counters indexed by world rank
 * (MORI_REMOTE_* in impl/window__types.h). A rank on another node is told
 * by an atomic add through `sync`'s proxy ring (rdma); what it was told is
 * read with plain acquire loads. Data this rank sent to other nodes
 * through the window's ring is complete before any of them is told: each
 * operation first waits for the window's ring (mori_quiet_window).
 *
 * Channels: [0, MORI_BARRIER_CHANNELS). Timeouts and the abort flag are
 * honoured; a failure leaves a record in the window's mailbox. */
#ifndef MORI_DEVICE_REMOTE_SYNC_H
#define MORI_DEVICE_REMOTE_SYNC_H

#include "mori/device/barrier.h"

/* +1 on `peer`'s count of this rank's signals on `channel`, returning once
 * delivered (or failed: the sender sees it, not only the waiter). */
MORI_DEVICE_INLINE int mori_remote_signal_put(mori_window_dev_t win, mori_window_dev_t sync, int peer, uint32_t channel,
                                              uint64_t timeout_ns);

/* Waits until `peer` has signalled on `channel` more often than this rank
 * has consumed, and consumes one. */
MORI_DEVICE_INLINE int mori_remote_signal_wait(mori_window_dev_t win, mori_window_dev_t sync, int peer, uint32_t channel,
                                               uint64_t timeout_ns);

#include "mori/device/impl/remote_sync__funcs.h"

#endif
