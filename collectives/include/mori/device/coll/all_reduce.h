// SPDX-License-Identifier: MIT
/* All-reduce inside one kernel, two algorithms (the host picks by size):
 *
 * LL (small messages): one shot. Every 8 bytes of input travel to every
 * member as a 16-byte line {4 data bytes, flag, 4 data bytes, flag}, the
 * flag being the call's epoch: a reader spins on the line itself, so the
 * data carries its own arrival and there is no separate barrier or flag
 * round. Items: [0, W) write a run of lines to every member (this one
 * included); [W, 2W) read the same run from every member's line and reduce
 * in rank order.
 *
 * RS_AG (large messages): the buffer is cut into n parts (part p reduced by
 * member p) and each part into S slices, each with a flag. Items:
 *   [0, (n-1)*S)       push slice s of part me+k to member me+k's staging;
 *   [(n-1)*S, n*S)     reduce slice s of my part (own input + every member's
 *                      staged copy, in rank order), write it to out, push it
 *                      to every member's all-gather staging;
 *   [n*S, (2n-1)*S)    wait for slice s of member me-k's part, copy to out.
 * A reduce waits only for pushes, an all-gather copy only for reduces: a
 * kernel can take items in any order once its blocks are resident, a CPU
 * rank in index order. Both algorithms give the same bits on every rank
 * (fp32 accumulation in rank order) and the same bits as a sequential
 * reduction in rank order. */
#ifndef MORI_DEVICE_COLL_ALL_REDUCE_H
#define MORI_DEVICE_COLL_ALL_REDUCE_H

#include "mori/device/coll/sync.h"

/* One item of the call (LL, RS_AG or ONESHOT by a->algo); block scope.
 * Returns 0 or the error a wait left in the mailbox. */
MORI_DEVICE_INLINE int mori_allreduce_item(mori_coll_dev_t c, const mori_allreduce_args_t *a, uint64_t epoch, uint32_t item);

#include "mori/device/coll/impl/all_reduce__funcs.h"

#endif
