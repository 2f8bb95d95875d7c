// SPDX-License-Identifier: MIT
/* Layouts of the collectives' device side: the context a kernel takes by
 * value and the per-call arguments. See mori/device/coll.h. */
#ifndef MORI_DEVICE_COLL_TYPES_H
#define MORI_DEVICE_COLL_TYPES_H

#include "mori/device/impl/report__funcs.h"
#include "mori/device/team.h"
#include "mori/device/window.h"

/* The most blocks a collective kernel runs (each has an epoch counter). */
#define MORI_COLL_MAX_GRID 1024

/* Calls a member's refusals are remembered for (see refused_offset). One
 * would do (a refusal of a call waits until every member has finished the
 * call before, so nobody still waits in that one); a few are kept as a
 * margin. */
#define MORI_COLL_REFUSALS_KEPT 4

typedef enum mori_dtype {
  MORI_FLOAT32 = 0,
  MORI_BFLOAT16 = 1,
  MORI_FLOAT16 = 2,
} mori_dtype_t;

typedef enum mori_redop {
  MORI_REDOP_SUM = 0,
  MORI_REDOP_AVG = 1, /* the sum divided by the team size */
  MORI_REDOP_MAX = 2,
  MORI_REDOP_MIN = 3,
} mori_redop_t;

/* A collective context on the device: a workspace window and a team whose
 * members are all load/store reachable. Each rank's workspace holds
 *   [0, grid*8)                        one epoch per block (local only)
 *   [flags_offset, +2*flag_slots*8)    flags, one set per parity, written by peers
 *   [ready_offset, ...)                ready slots, then refusal slots (below)
 *   [data_offset, +data_bytes)         staging, two halves (parities); in each,
 *                                      raw data in the first half, LL lines
 *                                      in the second (mori_coll_impl_ll_staging)
 * Every kernel on a context runs `grid` blocks, and block b counts the calls
 * in epochs[b]: it reads its own counter at its start and writes it at its
 * end, so no block waits for another and no atomic sits on the critical
 * path. The counters start at the workspace's base, agreed by the members
 * above every epoch of an earlier context of theirs (a late kernel of one
 * may still write into this memory: its epochs pass for no call here);
 * the first call of a process's first context is epoch 1. A call's epoch picks the parity (epoch & 1) of flags and staging,
 * so a peer can run one call ahead without overwriting what this rank
 * still reads (it cannot run two ahead: every call needs every rank's data). */
typedef struct mori_coll_dev {
  mori_window_dev_t win;
  mori_team_t team;
  uint64_t *epochs;    /* per block: calls this block has finished (device memory) */
  uint32_t grid;       /* blocks of every kernel on this context (1 on the host platform) */
  uint32_t reserved;
  uint64_t flags_offset;
  uint64_t flag_slots; /* u64 flags per parity */
  uint64_t data_offset;
  uint64_t data_bytes; /* both halves */
  uint64_t timeout_ns; /* every wait; 0 waits forever (the abort flag still ends it) */
  /* [ready_offset, +team.size*8): slot j holds the last call member j has
   * started (what a direct all-to-all waits for before it writes into
   * member j's output). */
  uint64_t ready_offset;
  /* [refused_offset, +team.size*MORI_COLL_REFUSALS_KEPT*8): slot
   * j * MORI_COLL_REFUSALS_KEPT + e % MORI_COLL_REFUSALS_KEPT holds e once
   * member j has refused its part of call e (its own arguments were bad):
   * that member's call took the epoch and moved nothing, and a wait of call
   * e that finds the slot ends, naming j, instead of waiting out its
   * timeout. 0: no slots (every wait waits for its flag or the timeout).
   * The word after the slots holds the member's grid (its blocks' epoch
   * counters, which a refusal waits for). */
  uint64_t refused_offset;
  /* When the running call started on this thread (set at the start of each
   * block of a call): every wait of the call counts from it, so the call
   * as a whole ends within the timeout, not each wait. 0: each wait counts
   * from its own start. */
  uint64_t call_start_ns;
  /* Contexts made with MORI_COLL_CHECK_CALLS=1 (agreed by every rank):
   * [calls_offset, +2*team.size*(1+MORI_COLL_SIG_WORDS)*8): per parity,
   * member j's slot holds the last call j started there and its signature
   * (mori_coll_call_sig_t), so every member checks that all gave the same
   * arguments before anything moves. 0: calls are not checked. */
  uint64_t calls_offset;
} mori_coll_dev_t;

/* What every member of a call must give alike (the words are described at
 * MORI_COLL_MISMATCH_CHANNEL). */
typedef struct mori_coll_call_sig {
  uint64_t word[MORI_COLL_SIG_WORDS];
} mori_coll_call_sig_t;

enum mori_a2a_algo {
  MORI_A2A_SLICES = 0, /* slices with a flag each (large chunks) */
  MORI_A2A_LL = 1,     /* every 8 bytes travel with their arrival flag (small chunks) */
  MORI_A2A_DIRECT = 2, /* slices written straight into each member's symmetric output */
};

/* all-to-all of `bytes` per team member: out[src] = src's in[me]. Items
 * come in three runs of (n - 1) * slices, slices and (n - 1) * slices. */
typedef struct mori_a2a_args {
  const char *in;
  char *out;
  uint64_t bytes;  /* per member */
  uint64_t slice;  /* bytes per slice (SLICES: a multiple of 16; LL: of 8) */
  uint32_t slices; /* per member */
  uint32_t items;  /* (2n - 1) * slices */
  uint32_t algo;   /* mori_a2a_algo */
  uint32_t kind_end[3]; /* items [0, e0) push, [e0, e1) own chunk, [e1, e2) receive */
  uint32_t threads;     /* per block, chosen with the plan */
  uint32_t share[2];    /* blocks per kind (mori_coll_share_blocks) */
  /* DIRECT: the output window (out is its local memory at out_offset). */
  mori_window_dev_t out_win;
  uint64_t out_offset;
  mori_coll_call_sig_t sig; /* checked when the context checks calls */
} mori_a2a_args_t;

/* all-to-all with sizes that live on the device (MoE dispatch/combine):
 * rows of row_bytes move from each member to each member (and, in the
 * expert layouts, to or from each of a member's E local experts), landing
 * in a symmetric out (out_win at out_offset, out_rows rows) in the layout's
 * order; out_splits_offsets receives the rows and where they start. Items:
 * (n - 1) * P pushes, P own pieces, (n - 1) * P receives; what one member
 * sends another travels in P pieces. */
enum mori_a2av_layout {
  MORI_A2AV_RANKS = 0,    /* all_to_all_vdev: in and out packed in member order */
  MORI_A2AV_EXPERTS = 1,  /* all_to_all_vdev_2d (dispatch): in member-major, out expert-major */
  MORI_A2AV_COMBINE = 2,  /* all_to_all_vdev_2d_offset (combine): in expert-major at given offsets, out member-major */
};

typedef struct mori_a2av_args {
  const char *in;
  /* RANKS: n rows per member. EXPERTS: n * E, member-major (d * E + e).
   * COMBINE: 2 x (E * n), expert-major (e * n + d): rows, then where they
   * start in `in`. */
  const int64_t *in_splits;
  /* RANKS: 2 x n (rows from member r, start). EXPERTS: 2 x (E * n), expert-
   * major (e * n + r). COMBINE: 2 x (n * E), member-major (r * E + e). */
  int64_t *out_splits_offsets;
  char *out;                   /* out_win's local memory at out_offset */
  mori_window_dev_t out_win;
  uint64_t out_offset;
  uint64_t out_rows;  /* rows out holds on every member */
  uint64_t row_bytes;
  uint64_t align;     /* EXPERTS: each expert's rows start on a multiple of this (>= 1) */
  uint32_t layout;    /* mori_a2av_layout */
  uint32_t experts;   /* E: local experts per member (1 for RANKS) */
  uint32_t pieces;    /* P */
  uint32_t items;
  uint32_t kind_end[3];
  uint32_t threads;
  uint32_t share[2];
  mori_coll_call_sig_t sig; /* checked when the context checks calls */
} mori_a2av_args_t;

enum mori_allreduce_algo {
  MORI_ALLREDUCE_LL = 0,      /* one shot; every 8 bytes travel with their arrival flag */
  MORI_ALLREDUCE_RS_AG = 1,   /* reduce-scatter + all-gather in slices, each with a flag */
  MORI_ALLREDUCE_ONESHOT = 2, /* every member's whole input pushed in flagged slices; each reduces all */
};

typedef struct mori_allreduce_args {
  const void *in;
  void *out;
  uint64_t count;      /* elements */
  uint32_t dtype;      /* mori_dtype_t */
  uint32_t op;         /* mori_redop_t */
  uint32_t algo;       /* mori_allreduce_algo */
  uint32_t items;
  /* LL: lines (8 bytes of data each) per item. */
  uint64_t lines_per_item;
  /* RS_AG: elements per part (a multiple of 8), per slice, slices per part.
   * ONESHOT: one part (the whole buffer), cut into slices the same way. */
  uint64_t part_elems;
  uint64_t slice_elems;
  uint32_t slices;
  /* The kinds of items: LL [0, e0) write, [e0, e1) read; RS_AG [0, e0) push,
   * [e0, e1) reduce, [e1, e2) gather; ONESHOT [0, e0) push, [e0, e1) reduce. */
  uint32_t kind_end[3];
  uint32_t threads; /* per block, chosen with the plan */
  uint32_t share[2]; /* blocks per kind (mori_coll_share_blocks) */
  mori_coll_call_sig_t sig; /* checked when the context checks calls */
} mori_allreduce_args_t;

#endif
