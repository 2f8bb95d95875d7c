// SPDX-License-Identifier: MIT
/* Collectives over a team of load/store-reachable ranks, fused into single
 * kernels that synchronise inside (mori/device/coll.h): all-to-all with
 * equal chunks and all-reduce. A context owns a workspace window (staging,
 * flags, the epoch counter); calls are stream-ordered, graph-capturable and
 * may run back to back with no host synchronisation. On the host platform
 * the same item functions run in the calling CPU rank.
 *
 * Buffers (in, out) are any device memory of this rank; they need not be
 * symmetric. Calls on one context must be issued in the same order on every
 * rank, on one stream per rank (the epoch counts calls), with the same
 * sizes. A call with nothing to move (count or bytes 0) launches nothing
 * and takes no epoch. A call one member refuses (its own arguments: in and
 * out overlapping, a size that overflows) returns that member's error, and
 * its part still runs: it takes the call's epoch and moves nothing, so the
 * others' call ends at once and their mori_coll_check reports MORI_EINVAL
 * naming the member; that call's output is not valid anywhere, and the
 * context's later calls stay paired. Every wait of a call counts from the
 * call's start: a call ends within its timeout. A call that timed out (a
 * member that never came, or came late) leaves the members out of step:
 * destroy the context and make a new one. */
#ifndef MORI_COLLECTIVES_H
#define MORI_COLLECTIVES_H

#include "mori/comm.h"
#include "mori/window.h"
#include "mori/device/coll/types.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_coll mori_coll_t;

typedef struct mori_coll_attr {
  /* Members (world ranks); every one must be in this rank's LSA team.
   * size 0: the LSA team. Every member names the same team; a rank outside
   * the team it names takes part in creation only. */
  mori_team_t team;
  /* Staging bytes per rank to start with (grow with mori_coll_reserve). */
  size_t workspace_bytes;
  /* Every wait inside a kernel; 0: the bootstrap timeout. */
  uint64_t timeout_ms;
  /* Nonzero: every call first compares its arguments across the members
   * on the device (kind, sizes, dtype, op, layout, experts, alignment, the
   * output's offset and rows, and the plan they give where members must
   * share it), and a call they differ on moves nothing: every member's
   * mori_coll_check reports MORI_EMISMATCH naming a member and both calls,
   * and later calls stay paired. A call with nothing to move takes part
   * too (one member's 0 beside the others' count is named, not paired with
   * its next call). It costs one exchange among the members per call (a
   * debugging aid, as torch's TORCH_DISTRIBUTED_DEBUG=DETAIL). Also on
   * when MORI_COLL_CHECK_CALLS=1. The members agree on it at creation. */
  int check_calls;
} mori_coll_attr_t;

MORI_API void mori_coll_attr_init(mori_coll_attr_t *attr);
/* Collective over the comm (every rank of it, members or not: the workspace
 * is a window of the comm). Every rank fails alike, naming the rank, when
 * one names no team of the comm (MORI_EINVAL) or two members of one team
 * name different teams (MORI_EMISMATCH). */
MORI_API int mori_coll_create(mori_comm_t *comm, const mori_coll_attr_t *attr, mori_coll_t **out);
/* Local. The workspace goes back to the heap, which reuses it only after
 * this rank's device has finished what was queued before (a device
 * synchronisation); every member must have made the same calls first (a
 * call one member makes after the others destroyed the context pushes
 * into workspaces they gave back). NULL is a no-op. */
MORI_API int mori_coll_destroy(mori_coll_t *coll);
/* Collective: makes the workspace at least `bytes` of staging per rank
 * (a new window when it grows; never while a call may be in flight). */
MORI_API int mori_coll_reserve(mori_coll_t *coll, size_t bytes);

/* Staging bytes per rank the workspace has now. */
MORI_API size_t mori_coll_workspace_bytes(const mori_coll_t *coll);
/* Staging bytes a call needs; a call with too little fails with MORI_ENOMEM
 * and names the size to reserve (its part still runs as a refused call's,
 * so a member that refused it for another reason stays paired). */
MORI_API size_t mori_all_to_all_workspace(const mori_coll_t *coll, size_t bytes_per_rank);
MORI_API size_t mori_all_reduce_workspace(const mori_coll_t *coll, size_t count, mori_dtype_t dtype);

/* out[src * bytes .. ] = src's in[me * bytes ..] for every member src.
 * `stream`: CUstream / hipStream_t (NULL: the default stream; ignored on
 * the host platform, where the call completes before it returns). */
MORI_API int mori_all_to_all(mori_coll_t *coll, const void *in, void *out, size_t bytes_per_rank, void *stream);
/* The same exchange into a symmetric output: `out_win` (a window of this
 * context's comm, every member in it) at byte `out_offset`, the same on
 * every member. Each member's chunk is written straight into its
 * destination's out (no staging, no second copy, no workspace needed), so
 * it is the faster call for symmetric buffers. A call first waits until
 * the member it writes to has started the same call (its earlier work on
 * out is done); every member must make the same kind of call. */
MORI_API int mori_all_to_all_window(mori_coll_t *coll, const void *in, mori_window_t *out_win, size_t out_offset,
                                    size_t bytes_per_rank, void *stream);
/* All-to-all with sizes on the device (torch's all_to_all_vdev; MoE
 * dispatch/combine), one kernel, graph-capturable. in_splits (n int64,
 * device): rows for each member, packed in member order in `in`. What
 * arrives is packed in member order into the symmetric out (`out_win` at
 * `out_offset`, room for `out_rows` rows on every member);
 * out_splits_offsets (2 x n int64, device) receives the rows from each
 * member and the row where they start. Rows are `row_bytes` long. A chunk
 * that would not fit is not written: the next mori_coll_check reports
 * MORI_ERANGE with the rows needed. A call that ends before every
 * member's splits arrived (timeout, abort, a member that refused it)
 * leaves out_splits_offsets as it was. Needs mori_all_to_all_v_workspace
 * bytes of staging. */
MORI_API int mori_all_to_all_v(mori_coll_t *coll, const void *in, const int64_t *in_splits, mori_window_t *out_win,
                               size_t out_offset, size_t out_rows, size_t row_bytes, int64_t *out_splits_offsets,
                               void *stream);
/* MoE dispatch (torch's all_to_all_vdev_2d), E = `experts` local experts
 * per member: in_splits (n * E int64, member-major: d * E + e) rows for
 * member d's expert e, packed in that order in `in`; out is expert-major —
 * expert e's rows from members 0..n-1 together, each expert taking its
 * rows rounded up to `align` and at least `align` rows (torch's contract);
 * out_splits_offsets (2 x E * n, index e * n + r) gets rows and start of
 * each (expert, source). */
MORI_API int mori_all_to_all_v_experts(mori_coll_t *coll, const void *in, const int64_t *in_splits, uint32_t experts,
                                       size_t align, mori_window_t *out_win, size_t out_offset, size_t out_rows,
                                       size_t row_bytes, int64_t *out_splits_offsets, void *stream);
/* MoE combine (torch's all_to_all_vdev_2d_offset), the way back:
 * in_splits_offsets (2 x E * n, expert-major e * n + d, as a dispatch left
 * them) gives the rows for member d from expert e and where they start in
 * `in`; out is member-major — member r's rows for its experts 0..E-1 in
 * order, members in order; out_splits_offsets (2 x n * E, index r * E + e)
 * gets rows and start of each (source, expert). */
MORI_API int mori_all_to_all_v_combine(mori_coll_t *coll, const void *in, const int64_t *in_splits_offsets,
                                       uint32_t experts, mori_window_t *out_win, size_t out_offset, size_t out_rows,
                                       size_t row_bytes, int64_t *out_splits_offsets, void *stream);
/* Staging the variable all-to-alls need with E experts per member (1 for
 * mori_all_to_all_v). */
MORI_API size_t mori_all_to_all_v_workspace(const mori_coll_t *coll, uint32_t experts);
/* out[i] = op over members of in[i]; in may equal out. */
MORI_API int mori_all_reduce(mori_coll_t *coll, const void *in, void *out, size_t count, mori_dtype_t dtype,
                             mori_redop_t op, void *stream);

/* This rank's part of the context's next call, made by a caller whose own
 * checks refused that call on this rank before it could make it (a buffer
 * on another device, a type that does not match): as for a call mori's own
 * checks refuse, the part takes the call's epoch and moves nothing, so the
 * members' call ends at once, their mori_coll_check naming this rank, and
 * the context's later calls stay paired. Only for a call that has
 * something to move (one of 0 elements or bytes takes no epoch on the
 * others), or any call of a context that checks calls (there every call
 * takes its epoch). A rank outside the team, or a context without a workspace,
 * takes part in no call: 0, nothing done. Stream-ordered, like a call. */
MORI_API int mori_coll_refuse(mori_coll_t *coll, void *stream);

/* Whether the context checks its calls (mori_coll_attr_t.check_calls or
 * MORI_COLL_CHECK_CALLS, agreed at creation): there a call with nothing to
 * move takes its epoch too, so a caller refusing one calls
 * mori_coll_refuse for it as well. 0 for NULL. */
MORI_API int mori_coll_checks_calls(const mori_coll_t *coll);

/* The device view, for kernels that fuse collectives with their own work.
 * A fused kernel's call is not checked in a context that checks calls (its
 * signature is mori's to build, from the planned arguments): every member
 * makes that call from a fused kernel, since a member that makes it
 * through this API waits for signatures the kernel never gives, until its
 * timeout. */
MORI_API mori_coll_dev_t mori_coll_device_view(const mori_coll_t *coll);
/* Reports (and clears) an error a kernel of this context left in the
 * mailbox: a wait that timed out (who waited for whom, on which slot), a
 * call a member refused (which member), an output too small (the rows
 * needed), a negative split, members that gave a call different arguments
 * (a context that checks calls: MORI_EMISMATCH naming both calls). */
MORI_API int mori_coll_check(mori_coll_t *coll);
/* The team the context runs over. */
MORI_API mori_team_t mori_coll_team(const mori_coll_t *coll);
/* The comm the context was made on. */
MORI_API mori_comm_t *mori_coll_comm(const mori_coll_t *coll);

MORI_EXTERN_C_END

#endif
