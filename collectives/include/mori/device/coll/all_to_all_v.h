// SPDX-License-Identifier: MIT
/* All-to-all with sizes on the device (torch's all_to_all_vdev and, for
 * MoE with E local experts per member, all_to_all_vdev_2d (dispatch) and
 * all_to_all_vdev_2d_offset (combine)), in one kernel and straight into a
 * symmetric out.
 *
 * Every member starts by writing its row of the split matrix — the rows it
 * sends to each (member, expert), in (d * E + e) order — into every
 * member's staging, as LL lines that carry the call's epoch
 * (mori_a2av_begin, block 0, before any item). An item first waits for the
 * whole matrix: from it a member knows where each of its segments lands in
 * each destination's out and where each source's rows land in its own. A
 * row arriving from a member also says that member has started the call,
 * so its out is free to be written: no other handshake. Items:
 *   [0, (n-1)*P)       push piece j of what goes to member me+k straight
 *                      into its out, then the piece's flag;
 *   [(n-1)*P, n*P)     own rows, piece j, copied locally (piece 0 also
 *                      writes out_splits_offsets);
 *   [n*P, (2n-1)*P)    wait for piece j from member me-k.
 * What one member sends another is E segments (one per expert) taken in
 * expert order; piece j is a byte range of their concatenation, copied
 * segment by segment. Layouts (where segment (d, e) of member me starts):
 *   RANKS     in: member order; out of d: member order.
 *   EXPERTS   in: (d, e) order; out of d: expert-major — expert e's rows from
 *             members 0..n-1 together; each expert takes its rows rounded
 *             up to `align`, and at least `align` rows.
 *   COMBINE   in: at the offsets given (expert-major, as a dispatch left
 *             them); out of d: member-major, (me, e) after (me, e-1).
 * The matrix lives in the staging half of the call's parity: a member one
 * call ahead writes the other half. A segment that would not fit in the
 * destination's out is not written; the pusher leaves MORI_DEVICE_ERANGE
 * in the mailbox (what was needed, what fits) and still raises its flags,
 * so no member waits for it, and so does a receiver whose rows overflow. */
#ifndef MORI_DEVICE_COLL_ALL_TO_ALL_V_H
#define MORI_DEVICE_COLL_ALL_TO_ALL_V_H

#include "mori/device/coll/sync.h"

/* Block 0, before its items: this member's row of the split matrix, to
 * every member. */
MORI_DEVICE_INLINE void mori_a2av_begin(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch);

/* One item of the call; block scope. Returns 0, MORI_DEVICE_ERANGE (rows
 * that would not fit, recorded in the mailbox) or the error a wait left. */
MORI_DEVICE_INLINE int mori_a2av_item(mori_coll_dev_t c, const mori_a2av_args_t *a, uint64_t epoch, uint32_t item);

#include "mori/device/coll/impl/all_to_all_v__funcs.h"

#endif
