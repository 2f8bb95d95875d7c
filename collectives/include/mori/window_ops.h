// SPDX-License-Identifier: MIT
/* Stream-ordered synchronisation on a window's load/store team: one small
 * kernel per call on GPUs (on the host platform the calling CPU rank runs
 * it in place). These are what torch's SymmetricMemory handle methods map
 * to, and what C programs use between their own kernels.
 *
 * timeout_ns == 0 waits up to the window's bound for untimed waits
 * (mori_window_untimed_wait_ns: MORI_UNTIMED_WAIT_MS, default 10 minutes;
 * 0 there: forever), and the window's abort flag ends any wait. A
 * wait that times out never traps: it leaves a record in the window's
 * mailbox, which mori_window_check reports (who waited for whom, on which
 * channel, for how long).
 *
 * A rank whose barrier timed out had arrived: ranks that arrive at that
 * round later pass it. A timeout that leaves ranks in different rounds of
 * a channel (ranks that called different channels, or a rank that gave up
 * before a peer's earlier round) leaves that channel out of step for good:
 * its later rounds pass on some ranks and time out on others. After a
 * timed-out window op, use another channel or make a new window. */
#ifndef MORI_WINDOW_OPS_H
#define MORI_WINDOW_OPS_H

#include "mori/window.h"

MORI_EXTERN_C_BEGIN

/* Barrier among every rank of the window's comm on `channel` (<
 * MORI_BARRIER_CHANNELS): within the LSA team the device API's epoch
 * barrier (mori_lsa_barrier_block) on the window's barrier area, epochs
 * kept in device memory, so a captured graph replays correctly; across
 * nodes every other rank too, through the rdma transport, or the call is
 * refused naming the rank it cannot reach (never a barrier of half the
 * comm). Orders every rank's earlier work on its stream before every
 * rank's later work. */
MORI_API int mori_window_barrier(mori_window_t *win, int channel, uint64_t timeout_ns, void *stream);
/* torch's signal-pad protocol: sets this rank's slot of `channel` in
 * `peer`'s pad (after the stream's earlier writes; spins while the previous
 * signal is unconsumed), and consumes `peer`'s signal in this rank's pad. */
MORI_API int mori_window_put_signal(mori_window_t *win, int peer, int channel, uint64_t timeout_ns, void *stream);
MORI_API int mori_window_wait_signal(mori_window_t *win, int peer, int channel, uint64_t timeout_ns, void *stream);

MORI_EXTERN_C_END

#endif
