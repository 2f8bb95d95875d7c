// SPDX-License-Identifier: MIT
/* Layouts of MoE dispatch/combine's device side (mori/ep.h): the context a
 * kernel takes by value and the arguments of one call. */
#ifndef MORI_DEVICE_EP_TYPES_H
#define MORI_DEVICE_EP_TYPES_H

#include "mori/device/window.h"

/* The most blocks and threads per block an EP kernel runs with. */
#define MORI_EP_MAX_GRID 1024
#define MORI_EP_MAX_THREADS 1024
/* The most blocks of a call on the host platform (one thread each). */
#define MORI_EP_HOST_MAX_BLOCKS 8

/* A flag word: the epoch in its low 56 bits (what the waits compare); a
 * combine flag also carries the sender's dtype + 1 in bits 56-59 (the
 * receivers read its rows as that type: one that differs is refused) and
 * MORI_EP_FLAG_REFUSED from a rank that refused that combine. */
#define MORI_EP_FLAG_EPOCH ((1ull << 56) - 1)
#define MORI_EP_FLAG_DTYPE_SHIFT 56
#define MORI_EP_FLAG_REFUSED (1ull << 62)

/* bad_count in mori_ep_state_t: a refused dispatch (-1) or combine (-2), a
 * combine whose dtype differs from a peer's (-3: bad_index is the peer's,
 * bad_slot this rank's), this rank's own context stopped by a failed call
 * (-4: bad_rank is this rank), a combine given too few rows (-5, below). */
#define MORI_EP_REFUSED_DISPATCH (-1)
#define MORI_EP_REFUSED_COMBINE (-2)
#define MORI_EP_COMBINE_DTYPE_MISMATCH (-3)
#define MORI_EP_STOPPED (-4)
/* (-5) This rank's combine input (bad_slot 0) or weights (1) held fewer
 * rows (bad_index) than its dispatch delivered (bad_token): the call ran
 * as refused, before reading any. */
#define MORI_EP_COMBINE_ROWS (-5)

/* Header a rank publishes per call (int32 words, in its own memory, one per
 * parity): bad-index record, token count, then its rows for each rank. */
enum {
  MORI_EP_HDR_BAD_COUNT = 0, /* tokens dropped for an expert index out of range; -1: the rank refused its call */
  MORI_EP_HDR_BAD_TOKEN = 1, /* the first of them */
  MORI_EP_HDR_BAD_SLOT = 2,  /* its top-k slot */
  MORI_EP_HDR_BAD_INDEX = 3, /* and the index found there */
  MORI_EP_HDR_TOKENS = 4,
  MORI_EP_HDR_COUNTS = 8, /* [world]: tokens sent to each rank */
};

/* Each rank's own bookkeeping (local, never read by peers). */
typedef struct mori_ep_state {
  uint64_t dispatch_epoch; /* dispatch calls whose send half finished */
  uint64_t combine_epoch;
  uint64_t combine_bad_epoch; /* the last combine whose peer refusal or dtype mismatch was reported: the first
                                 block to see one reports it, once (any block may, not only one that waits) */
  uint32_t done[4];        /* blocks past a point of the running kernel: dispatch mid/end, combine mid/end
                              (the end counters also count failed blocks, MORI_EP_DONE_FAILED) */
  uint32_t scan_failed;    /* blocks of the running dispatch whose lists are incomplete (a wait failed) */
  uint32_t send_failed;    /* blocks of the running combine send whose wait for the last readers failed */
  uint32_t stopped;        /* a kernel of this context failed a step: its ranks are out of step, and every
                              later call runs as refused, so that the peers' calls end naming this rank */
  int32_t bad_seen;        /* a bad-index record arrived (cleared by mori_ep_check) */
  int32_t bad_more;        /* reports that came while one was kept (cleared with it) */
  int32_t bad_rank, bad_token, bad_slot, bad_index, bad_count;
} mori_ep_state_t;

/* A context on the device. Every buffer is at an offset of one window
 * (the same on every rank); P: per parity (epoch & 1), so that a rank one
 * call ahead never writes what a peer still reads.
 *   state                          mori_ep_state_t (local)
 *   dflag[world], cflag[world]     u64 epochs written by each source rank
 *   cdone[world]                   u64: the last combine each rank finished reading this rank's rows for
 *   hdr[2]                         the header above (hdr_bytes each)
 *   base[2][world + 1]             where each source's rows start in this rank's dispatch output
 *   list[2][world][max_tokens]     i32: tokens this rank sends each rank, ascending
 *   pos[2][max_tokens][world]      i32: a token's place in list[d], or -1
 *   chunk_ready[MORI_EP_MAX_GRID]  u64: the dispatch epoch whose chunk counts block b has published
 *   chunk[MORI_EP_MAX_GRID][world + 2]  u32: block b's counts per destination, bad count, first bad token
 *   scan[MORI_EP_HOST_MAX_BLOCKS]  mori_ep_scan_scratch_t per block (host platform; shared memory on GPUs)
 *   prefix[MORI_EP_MAX_GRID][world + 1]  u32 scratch, one row per block
 *   stage_{tok,w,idx,scale}[2]     this rank's input rows, staged for pulls
 *   out_*, recv_num, src_pos       dispatch outputs
 *   comb_in, comb_w_in             combine input rows and weights (registered)
 *   comb_out, comb_w_out           combine outputs
 * When some rank is outside this rank's load/store team (`remote`), what
 * is read from it arrives through the window's proxy (rdma gets) first:
 *   ready[2]                       u64: block 0 has fetched the remote headers (dispatch, combine)
 *   rhdr[world], rlist[world][max_tokens], rbase[world]  copies of remote headers, lists, bases
 *   fetch[max_tokens][copies], fetch_w  remote copies of combine rows and weights (copies = min(top-k, world)) */
typedef struct mori_ep_dev {
  mori_window_dev_t win;
  int32_t rank, world_size;
  uint32_t hidden_dim, top_k;
  uint32_t experts_per_rank, max_tokens;
  uint32_t token_bytes; /* hidden_dim * the dispatch type's size */
  uint32_t scale_bytes; /* scale_dim * scale_type_size */
  uint64_t timeout_ns;
  uint64_t hdr_bytes;
  uint64_t off_state, off_dflag, off_cflag, off_hdr, off_base, off_list, off_pos, off_scan, off_prefix;
  uint64_t off_stage_tok, off_stage_w, off_stage_idx, off_stage_scale;
  uint64_t off_out_tok, off_out_w, off_out_idx, off_out_scale, off_recv_num, off_src_pos;
  uint64_t off_comb_in, off_comb_w_in, off_comb_out, off_comb_w_out;
  uint32_t remote;          /* some rank is reached through the proxy only */
  uint32_t copies;          /* min(top-k, world): most distinct destinations of a token */
  uint32_t comb_elem_bytes; /* the widest combine element */
  uint32_t reserved;
  uint64_t off_ready, off_rhdr, off_rlist, off_rbase, off_fetch, off_fetch_w;
  uint64_t off_cdone;
  uint64_t off_chunk, off_chunk_ready;
} mori_ep_dev_t;

/* Destinations a scan pass handles at once (bits of a vote mask), and the
 * most warps a block has (MORI_EP_MAX_THREADS / the narrowest warp). */
#define MORI_EP_SCAN_DESTS 64
#define MORI_EP_SCAN_WARPS 32

/* Scratch of a block's part of the scan (dispatch's lists): shared memory
 * on GPUs, the block's slot of the window's scan area on the host platform
 * (one thread: one warp). */
typedef struct mori_ep_scan_scratch {
  uint32_t warp_at[MORI_EP_SCAN_WARPS][MORI_EP_SCAN_DESTS]; /* a warp's count, then where its tokens start */
  uint32_t total[MORI_EP_SCAN_DESTS];                       /* tokens listed so far per destination */
  uint32_t bad_count, bad_first;
} mori_ep_scan_scratch_t;

enum { MORI_EP_PHASE_SEND = 1, MORI_EP_PHASE_RECV = 2 };

/* One call. Dispatch: input/weights/scales/indices of num_tokens tokens.
 * Combine: input rows in dispatch-output order (NULL or comb_in: the
 * registered buffer), weights (NULL: none), dtype (0 fp32, 1 bf16, 2 fp16),
 * num_tokens of the dispatch being combined. */
typedef struct mori_ep_args {
  const void *input;
  const float *weights;
  const void *scales;
  const int32_t *indices;
  uint32_t num_tokens;
  uint32_t phases; /* MORI_EP_PHASE_* */
  uint32_t dtype;
  uint32_t has_weights; /* combine: the send half was given weights (the receive half sums them) */
  /* This rank refused its call. Dispatch: no tokens, the header says so.
   * Combine: nothing sent, and its flag carries MORI_EP_FLAG_REFUSED, so
   * the peers' receive halves end at once, write nothing and record it. */
  uint32_t refused;
  /* Combine: the caller said how many rows its input and weights hold
   * (mori_ep_combine_rows). The rows the dispatch delivered are known only
   * on the device, so the kernel compares: fewer (an input other than
   * NULL, the registered buffer's address included, or weights) and the
   * call runs as refused before reading them, MORI_EP_COMBINE_ROWS on this
   * rank. */
  uint32_t rows_known;
  uint64_t input_rows, weights_rows;
} mori_ep_args_t;

#endif
