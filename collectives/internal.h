// SPDX-License-Identifier: MIT
/* The collectives' host side, shared by coll.c (contexts, plans) and the
 * launchers (launch_gpu.cu on GPUs, launch_host.c on the host platform). */
#ifndef MORI_COLLECTIVES_INTERNAL_H
#define MORI_COLLECTIVES_INTERNAL_H

#include <stdbool.h>

#include "mori/collectives.h"
#include "mori/window.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mori_coll {
  mori_comm_t *comm;
  mori_team_t team;
  uint64_t timeout_ns;
  void *memory;
  mori_window_t *win;
  size_t staging_bytes; /* both halves */
  mori_coll_dev_t view; /* made with the workspace */
  uint32_t grid;        /* blocks of every kernel on this context (fixed at creation) */
  uint64_t flag_slots;  /* per parity */
  int device;
  uint64_t finalizes;   /* mori_finalize_count() at creation: a later finalize released the workspace */
  bool check_calls;     /* the members compare every call's signature (agreed at creation) */
  /* The workspace is one window of the whole comm, of one size on every
   * rank: its fixed part is sized for the largest team any rank named,
   * checking calls if any did (ranks of disjoint teams of other sizes). */
  int largest_team;
  bool any_checks;
  /* The epoch the workspace's calls count from (its block counters start
   * here): agreed at create and at each new workspace, above every epoch a
   * kernel of an earlier context of any rank may still write (coll.c). */
  uint64_t epoch_base;
};

/* The grid of every kernel on a context of `device`: the blocks the device
 * keeps resident at once (at most MORI_COLL_MAX_GRID), at most
 * MORI_COLL_MAX_BLOCKS (read when a context is made). Host platform: 1. */
int mori_coll_grid(int device, uint32_t *grid);

/* Collective over the comm: checks `team` (this rank's, resolved) and
 * agrees it with every rank's: MORI_EINVAL naming a rank whose team is no
 * team of the comm, MORI_EMISMATCH naming two members of one team that
 * name different teams or of whom one checks calls and one does not.
 * local_rc (this rank's failure so far) takes part, so every rank fails
 * together. On success, the largest team any rank named and whether any
 * rank checks calls (what sizes the workspace alike on every rank), and the
 * largest epoch_floor any rank gave (where the context's epochs start). */
int mori_coll_agree_team(mori_comm_t *comm, mori_team_t team, bool check_calls, uint64_t epoch_floor, int local_rc,
                         int *largest_team, bool *any_checks, uint64_t *epoch_base);

/* A planned call's signature (call_signature.c), which the members of a
 * context that checks calls compare (mori_coll_check_call). */
/* out_window: the output window's ordinal on the comm (0: not into a window). */
mori_coll_call_sig_t mori_coll_sig_all_to_all(const mori_a2a_args_t *a, uint64_t out_window, uint64_t out_offset);
mori_coll_call_sig_t mori_coll_sig_all_reduce(const mori_allreduce_args_t *a);
mori_coll_call_sig_t mori_coll_sig_all_to_all_v(const mori_a2av_args_t *a, uint64_t out_window);

/* Runs a call: every item, then the epoch. GPU: one kernel on `stream`
 * with at most as many blocks as the device runs at once; host: in the
 * calling thread. */
int mori_coll_launch_all_to_all(const mori_coll_t *c, const mori_a2a_args_t *a, void *stream);
int mori_coll_launch_all_reduce(const mori_coll_t *c, const mori_allreduce_args_t *a, void *stream);
int mori_coll_launch_all_to_all_v(const mori_coll_t *c, const mori_a2av_args_t *a, void *stream);
/* This rank's part of a call it refused: every block runs
 * mori_coll_refuse_block (takes the epoch, marks the call refused in every
 * member's slots, moves nothing). Host: returns 0 once done. */
int mori_coll_launch_refusal(const mori_coll_t *c, void *stream);

enum mori_window_op { MORI_WINDOW_OP_BARRIER, MORI_WINDOW_OP_PUT_SIGNAL, MORI_WINDOW_OP_WAIT_SIGNAL };
/* One window op (arguments already checked) on `stream`, on the window's
 * device; `sync` is the window's synchronisation view (ranks on other
 * nodes). Host platform: in the calling thread, returning the wait's error. */
int mori_launch_window_op(mori_window_t *win, const mori_window_dev_t *view, const mori_window_dev_t *sync, int op, int peer,
                          int channel, uint64_t timeout_ns, void *stream);

#ifdef __cplusplus
}
#endif

#endif
