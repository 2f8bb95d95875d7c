// SPDX-License-Identifier: MIT
/* MoE dispatch and combine on the device (mori/ep.h's kernels; on the host
 * platform each block is one thread of the calling CPU rank, at most
 * MORI_EP_HOST_MAX_BLOCKS of them: a dispatch grid larger is
 * MORI_DEVICE_EINVAL, since its list scan keeps per-block scratch; combine
 * has none and takes any grid).
 *
 * Pull design. Dispatch's send half stages this rank's tokens (rows,
 * weights, indices, scales) in its own window, lists per destination rank
 * the tokens that go there (each token once per distinct rank among its
 * top-k, ascending), publishes the counts in its header and raises its
 * flag on every rank. The receive half waits for every source's flag,
 * takes the counts in source order (the rows from source s start at the sum
 * of the earlier sources' counts) and gathers the rows from the sources'
 * windows: the output is ordered by (source rank, source token). A fused
 * call with every rank in reach copies this rank's rows to itself first,
 * each block those of its own chunk, once the lower ranks' flags are up.
 * Combine's send half makes this rank's processed rows readable (the
 * registered combine input) and raises its flag; the receive half sums,
 * for each of this rank's tokens, the copies on each distinct destination
 * rank, in fp32 and in rank order (a fused call finishes the tokens with
 * no copy elsewhere before reading any flag). A fused call writes its
 * outputs while other blocks still read its inputs: they must not overlap
 * (mori/ep.h refuses it).
 *
 * Every function is grid scope: every thread of every block of the kernel
 * calls it, with the block's index and the grid size (every block must be
 * resident: the receive half waits for a flag the last block of the send
 * half raises). Returns 0 or the error a wait left in the mailbox. */
#ifndef MORI_DEVICE_EP_DISPATCH_COMBINE_H
#define MORI_DEVICE_EP_DISPATCH_COMBINE_H

#include "mori/device/ep/types.h"

MORI_DEVICE_INLINE int mori_ep_dispatch_grid(const mori_ep_dev_t *e, const mori_ep_args_t *a, uint32_t block, uint32_t grid);
MORI_DEVICE_INLINE int mori_ep_combine_grid(const mori_ep_dev_t *e, const mori_ep_args_t *a, uint32_t block, uint32_t grid);

#include "mori/device/ep/impl/dispatch_combine__funcs.h"

#endif
