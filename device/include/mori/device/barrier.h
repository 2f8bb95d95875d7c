// SPDX-License-Identifier: MIT
/* Device barriers, named by the ranks they wait for. Block scope: every
 * thread of one block calls, with the same arguments, and every thread
 * returns the same code: 0, or an error after a record was left in the
 * window's mailbox (mori_window_check reports it). Timeouts (0: forever)
 * and the window's abort flag are honoured; nothing traps.
 *
 *   mori_lsa_barrier_block      the LSA team (the load/store peers), over
 *                               the barrier area every window has: each
 *                               round stores the next epoch into every
 *                               peer's slot, no round trips. channel <
 *                               MORI_BARRIER_CHANNELS.
 *   mori_lsa_pad_barrier_block  the LSA team, over the window's signal pad
 *                               with torch's protocol, so the same pads
 *                               serve torch's kernels (torch's own
 *                               backend's barrier; mori's torch backend
 *                               runs the world barrier below, whose
 *                               epochs leave the pads to torch's kernels).
 *   mori_world_barrier_block    every rank of the comm: the LSA barrier,
 *                               then the ranks of the other nodes through
 *                               the proxy of `sync` (mori_window_sync_view);
 *                               the window's own proxy requests are
 *                               complete before the other nodes are told.
 *
 * torch's protocol: the slot for a signal from `src` on `channel` is
 * uint32 index channel * world_size + src of the destination's pad; put =
 * CAS 0 -> 1 (release, system scope), wait = CAS 1 -> 0 (acquire). The pad
 * barrier takes each signal by CAS 1 -> 2 and stores the 0 only once the
 * block holds every peer's (so a timeout names every peer missing); a 2
 * holds off the peer's next put as a 1 does. After a completed barrier
 * every slot is 0 again. A pad barrier needs a signal pad
 * of at least (channel + 1) * world_size * 4 bytes: a channel beyond it is
 * MORI_DEVICE_ECHANNEL with a record in the mailbox, never a write into the
 * memory after the pad (another window's); a window without a pad is
 * MORI_DEVICE_EUNREACHABLE. */
#ifndef MORI_DEVICE_BARRIER_H
#define MORI_DEVICE_BARRIER_H

#include "mori/device/signal.h"

MORI_DEVICE_INLINE int mori_lsa_barrier_block(mori_window_dev_t win, uint32_t channel, uint64_t timeout_ns);

MORI_DEVICE_INLINE int mori_lsa_pad_barrier_block(mori_window_dev_t win, uint32_t channel, uint64_t timeout_ns);

/* Block scope, like the LSA barrier (thread 0 talks to the other nodes;
 * its code for them, every failure also in the mailbox). On a comm that is
 * one LSA team it is mori_lsa_barrier_block. */
MORI_DEVICE_INLINE int mori_world_barrier_block(mori_window_dev_t win, mori_window_dev_t sync, uint32_t channel,
                                                uint64_t timeout_ns);

/* The pad protocol's halves, one thread each. put: sets this rank's slot
 * on `peer` (spins while the previous signal is unconsumed). wait:
 * consumes `peer`'s signal in this rank's pad. A peer outside the comm is
 * MORI_DEVICE_EINVAL. */
MORI_DEVICE_INLINE int mori_pad_put(mori_window_dev_t win, int peer, uint32_t channel, uint64_t timeout_ns);
MORI_DEVICE_INLINE int mori_pad_wait(mori_window_dev_t win, int peer, uint32_t channel, uint64_t timeout_ns);

#include "mori/device/impl/barrier__funcs.h"

#endif
