// SPDX-License-Identifier: MIT
/* GPU-initiated RDMA: kernels (and CPU ranks on the host platform) write the
 * NIC's work requests and poll its completions themselves, through the
 * window's GPU-posting table (win.gda, set by the rdma transport when it
 * chose GPU posting for the comm; NULL otherwise, and the proxy serves the
 * window). The device API (mori/device/put.h, signal.h, remote_sync.h)
 * routes a peer outside the LSA team here when win.gda reaches it.
 *
 * Every call may be made by any number of threads of any kernels at once:
 * send-queue slots are claimed with atomics in device memory, doorbells
 * are rung in claim order, completions are claimed the same way. Nothing
 * here takes a lock or makes a system call on a GPU. A full queue and
 * quiet honour the window's abort flag and timeout_ns (0: none) and leave
 * a mailbox record instead of hanging. The waits a claimant makes after
 * its claim (its doorbell behind the earlier claimants', a poller's turn at
 * the CQ) end by themselves and so only at the timeout (at least
 * MORI_GDA_TURN_TIMEOUT_NS: a caller's short timeout does not give a QP up
 * while an earlier claimant is merely descheduled), which marks the QP
 * abandoned (MORI_GDA_QP_ABANDONED: later calls for that peer's QP,
 * quiets included, return MORI_DEVICE_EIO; record channel
 * MORI_GDA_TURN_CHANNEL). On AMD GPUs two lanes of one wavefront must not post to
 * the same QP (one would wait for the other, which cannot run meanwhile).
 * An error completion marks its QP failed and leaves a record
 * (code MORI_DEVICE_EIO, the peer, channel MORI_GDA_CQE_ERROR_CHANNEL + the
 * QP's index, expected = the NIC's syndrome, seen = the vendor syndrome);
 * later calls for that peer return MORI_DEVICE_EIO, other peers are served.
 *
 * An atomic or a signal set on one of several QPs of a peer first waits
 * for the others' claims to complete and returns MORI_DEVICE_EIO without
 * posting when one of them failed: the peer never sees a signal whose data
 * did not arrive.
 *
 * Offsets are into the window on both sides; local buffers (a put's
 * source, a get's destination, a fetch's result) must lie in this rank's
 * window (not only in the memory the transport registered, which windows
 * carved from one heap chunk share). */
#ifndef MORI_DEVICE_GDA_H
#define MORI_DEVICE_GDA_H

#include "mori/device/impl/gda__types.h"
#include "mori/device/impl/proxy__types.h"
#include "mori/device/impl/report__funcs.h"

/* The longest single RDMA transfer; longer puts and gets go in pieces. */
#define MORI_GDA_MAX_PIECE (1ull << 30)
/* How long the device API's posts wait for room in a send queue, and for their turn. */
#define MORI_GDA_POST_TIMEOUT_NS (10ull * 1000 * 1000 * 1000)
/* The least a claimant waits for its turn (see above) before it gives the QP up. */
#define MORI_GDA_TURN_TIMEOUT_NS (1000ull * 1000 * 1000)

/* Whether GPU posting reaches `peer` from this window. */
MORI_DEVICE_INLINE int mori_gda_reaches(mori_window_dev_t win, int peer);

/* put: local src -> peer's window at dst_offset; get: peer's window at
 * src_offset -> local dst. Posted, not completed (quiet completes them). */
MORI_DEVICE_INLINE int mori_gda_put(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes,
                                    uint64_t timeout_ns);
MORI_DEVICE_INLINE int mori_gda_get(mori_window_dev_t win, int peer, void *dst, uint64_t src_offset, uint64_t bytes,
                                    uint64_t timeout_ns);
/* 64-bit word at the peer's offset (8-byte aligned) = value / += value,
 * ordered after every earlier put and get to the peer. atomic_add with a
 * `result` (in this rank's window) fetches the old value and returns once
 * it is there. */
MORI_DEVICE_INLINE int mori_gda_signal_set(mori_window_dev_t win, int peer, uint64_t offset, uint64_t value,
                                           uint64_t timeout_ns);
MORI_DEVICE_INLINE int mori_gda_atomic_add(mori_window_dev_t win, int peer, uint64_t offset, uint64_t value, uint64_t *result,
                                           uint64_t timeout_ns);
/* A put and a signal set the receiver sees only after the data. */
MORI_DEVICE_INLINE int mori_gda_put_signal(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes,
                                           uint64_t signal_offset, uint64_t signal_value, uint64_t timeout_ns);
/* Batches with one doorbell: n puts from one thread, or one put per lane
 * of a warp (the lanes present call it together). */
MORI_DEVICE_INLINE int mori_gda_put_batch(mori_window_dev_t win, int peer, uint32_t n, const uint64_t *dst_offset,
                                          const void *const *src, const uint64_t *bytes, uint64_t timeout_ns);
MORI_DEVICE_INLINE int mori_gda_put_warp(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes,
                                         uint64_t timeout_ns);
/* Completion of everything posted so far (to one peer, or to all). */
MORI_DEVICE_INLINE int mori_gda_quiet_peer(mori_window_dev_t win, int peer, uint64_t timeout_ns);
MORI_DEVICE_INLINE int mori_gda_quiet(mori_window_dev_t win, uint64_t timeout_ns);
MORI_DEVICE_INLINE int mori_gda_fence(mori_window_dev_t win, int peer, uint64_t timeout_ns);

#include "mori/device/impl/gda__funcs.h"

#endif
