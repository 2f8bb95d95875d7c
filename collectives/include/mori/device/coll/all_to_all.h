// SPDX-License-Identifier: MIT
/* All-to-all of equal chunks, completing with per-slice flags inside the
 * same kernel: out[src] on this rank = in[me] on src, for every member src.
 *
 * Work is cut into items, in this order:
 *   [0, (n-1)*S)       push: slice s of the chunk for member me+k (k >= 1)
 *                      into that member's staging (source slot me), then its
 *                      flag;
 *   [(n-1)*S, n*S)     own chunk: slice s copied from in to out locally;
 *   [n*S, (2n-1)*S)    receive: wait for slice s from member me-k, copy it
 *                      from this rank's staging to out.
 * Item i does the same thing on every rank, and a receive waits only for a
 * push (which never waits): a kernel can take items in any order once every
 * block is resident, and a CPU rank takes them in index order. Staging has
 * two halves (parity = epoch & 1): a member one call ahead writes the other
 * half. When the last receive is done, out holds every chunk: the next
 * kernel on the stream can read it, and the next call may run at once.
 *
 * DIRECT (out is symmetric: a window): a push writes straight into the
 * member's out and a receive only waits for the slice's flag, so no byte
 * is staged or copied twice. Writing into another member's out is safe
 * only once that member has started the same call (its earlier kernels,
 * which may read out, are done): every member announces the call it
 * starts (mori_a2a_begin, block 0, before any item) and a push waits for
 * the announcement of the member it writes to. A member therefore never
 * runs ahead by a call, and flags need no second half. */
#ifndef MORI_DEVICE_COLL_ALL_TO_ALL_H
#define MORI_DEVICE_COLL_ALL_TO_ALL_H

#include "mori/device/coll/sync.h"

/* DIRECT: this rank has started call `epoch`, announced to every member.
 * Block 0 runs it before its items (on the host: before any item); other
 * algorithms: nothing. */
MORI_DEVICE_INLINE void mori_a2a_begin(mori_coll_dev_t c, const mori_a2a_args_t *a, uint64_t epoch);

/* One item of the call; block scope. Returns 0 or the error a wait left in
 * the mailbox. */
MORI_DEVICE_INLINE int mori_a2a_item(mori_coll_dev_t c, const mori_a2a_args_t *a, uint64_t epoch, uint32_t item);

#include "mori/device/coll/impl/all_to_all__funcs.h"

#endif
