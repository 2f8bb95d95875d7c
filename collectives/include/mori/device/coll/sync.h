// SPDX-License-Identifier: MIT
/* The frame of every collective kernel (see mori/device/coll.h): take the
 * call's epoch, find the block's items, and publish the epoch when the
 * block is done. */
#ifndef MORI_DEVICE_COLL_SYNC_H
#define MORI_DEVICE_COLL_SYNC_H

#include "mori/device/coll/types.h"

/* The epoch of the call about to run, for block `block` (< c.grid). */
MORI_DEVICE_INLINE uint64_t mori_coll_epoch(mori_coll_dev_t c, uint32_t block);

/* How a call's blocks share its kinds of items (at most three: e.g. push,
 * reduce, receive), decided on the host once per call from the args'
 * kind_end: share[0] blocks for kind 0, share[1] for kind 1, the rest of
 * the grid for kind 2. share[0] == grid means no split. */
MORI_HOST_DEVICE void mori_coll_share_blocks(uint32_t grid, const uint32_t end[3], uint32_t share[2]);

/* Which items block `block` runs: first, first + stride, ... below last. */
MORI_HOST_DEVICE void mori_coll_block_range(uint32_t grid, uint32_t block, const uint32_t end[3], const uint32_t share[2],
                                            uint32_t *first, uint32_t *stride, uint32_t *last);

/* Contexts that check calls (c.calls_offset): block 0 gives every other
 * member this rank's signature of call `epoch`, and every block waits for
 * every other member's and compares (a context of one member has nobody to
 * differ from and checks nothing). Returns nonzero (the same in every thread of the
 * block) when the call must not run: a member's signature differs (a
 * MORI_DEVICE_EMISMATCH record names it and the word), a member refused
 * the call, a member is already at a later call (the members are out of
 * step: a MORI_DEVICE_EMISMATCH record on MORI_COLL_OUT_OF_STEP_CHANNEL),
 * or the wait timed out or was aborted (the usual records). A
 * difference is seen by every member (each differs from someone) and a
 * refusal too, so all skip the call alike and take its epoch; a timeout
 * may end one member's check and not a late member's, which then waits
 * in the call's items until its own timeout. 0 at once when the context
 * does not check calls or has one member. */
MORI_DEVICE_INLINE int mori_coll_check_call(mori_coll_dev_t c, const mori_coll_call_sig_t *sig, uint32_t block, uint64_t epoch);

/* The block is done with the call: it records the epoch, for its next call
 * (stream-ordered after this one) to take the next. */
MORI_DEVICE_INLINE void mori_coll_finish_block(mori_coll_dev_t c, uint32_t block, uint64_t epoch);

/* This rank's part of a call it refused (its own arguments were bad): the
 * call's epoch is taken and nothing moves, and the members' waits in that
 * call end at once with a record naming this rank (MORI_EINVAL). A fused
 * kernel that finds its own arguments bad runs this in every block instead
 * of the call, so the context's calls stay paired. */
MORI_DEVICE_INLINE void mori_coll_refuse_block(mori_coll_dev_t c, uint32_t block);

#include "mori/device/coll/impl/sync__funcs.h"

#endif
