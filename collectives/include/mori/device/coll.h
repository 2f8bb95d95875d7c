// SPDX-License-Identifier: MIT
/* Device-side collectives: all-to-all and all-reduce that synchronise inside
 * the kernel (completion rides with the data: per-slice flags, or LL lines
 * that carry their own flag), team-scoped, graph-capturable (the epoch lives
 * in device memory), never trapping (a wait that times out leaves a record
 * in the workspace window's mailbox). For HIP, CUDA and plain C (CPU ranks).
 *
 * Each call is a list of items (see all_to_all.h, all_reduce.h); a kernel
 * of exactly ctx.grid blocks runs them with:
 *
 *     uint64_t epoch = mori_coll_epoch(ctx, blockIdx.x);
 *     uint32_t first, stride, last;
 *     mori_coll_block_range(ctx.grid, blockIdx.x, args.kind_end, args.share, &first, &stride, &last);
 *     for (uint32_t i = first; i < last; i += stride)
 *       mori_a2a_item(ctx, &args, epoch, i);
 *     mori_coll_finish_block(ctx, blockIdx.x, epoch);
 *
 * (every block of the grid, even one without items, counts the call; block
 * 0 first runs mori_a2a_begin / mori_a2av_begin for those calls), so
 * that users can fuse a collective with their own work in one kernel. The
 * grid is no larger than the device keeps resident at once: the waits of
 * one block are met by pushes of others.
 * mori/collectives.h launches these kernels for you. */
#ifndef MORI_DEVICE_COLL_H
#define MORI_DEVICE_COLL_H

#include "mori/device/coll/all_reduce.h"
#include "mori/device/coll/all_to_all.h"
#include "mori/device/coll/all_to_all_v.h"

#endif
