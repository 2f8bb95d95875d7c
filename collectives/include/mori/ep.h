// SPDX-License-Identifier: MIT
/* MoE expert parallelism: dispatch and combine (the MORI-EP interface).
 *
 * Every rank holds num_experts_per_rank experts; expert e lives on rank
 * e / num_experts_per_rank. Dispatch sends each input token once to every
 * distinct rank among its top-k experts (not once per expert), with its
 * top-k weights, indices and optional scales; combine brings each rank's
 * processed copy back to the token's source rank and sums the copies in
 * fp32, in the original token order.
 *
 * Receive order (deterministic): a rank's dispatch output holds the tokens
 * it received ordered by (source rank, source token index); row i's
 * origin is src_token_pos[i] = src_rank * max_num_inp_token_per_rank +
 * src_token_id.
 *
 * All buffers a call writes are owned by the context and have a fixed
 * capacity derived from the config (no host synchronisation, so calls are
 * graph-capturable and may run back to back on one stream). Calls on one
 * context are issued in the same order on every rank.
 *
 * Bad data found on the device (an expert index out of range) is not a
 * crash: the call completes with that token dropped and the next
 * mori_ep_check on every rank reports MORI_EINVAL naming the rank, the
 * token and the index. A dispatch or combine whose arguments one rank
 * refuses is the same (mori_ep_dispatch_refused, mori_ep_combine_refused):
 * reported by every rank that did not refuse that call itself (its own
 * call returned the error).
 *
 * A call that failed once it ran (a wait timed out or was aborted, a proxy
 * request or a launch failed) stops the context on that rank: its ranks may
 * be out of step, so every later call there is refused (MORI_ECANCELED on
 * the host platform; on GPUs the kernel refuses it and mori_ep_check says
 * so), its part still running as refused so that the peers' calls end and
 * name it. Destroy a stopped context and make a new one. */
#ifndef MORI_EP_H
#define MORI_EP_H

#include <stdint.h>

#include "mori/comm.h"
#include "mori/device/coll/types.h"

MORI_EXTERN_C_BEGIN

/* The MORI-EP guide's kernel types. IntraNode and InterNode are built;
 * the others run as InterNode (see docs/ep.md). */
typedef enum mori_ep_kernel_type {
  MORI_EP_INTRA_NODE = 0,
  MORI_EP_INTER_NODE = 1,
  MORI_EP_INTER_NODE_V1 = 2,
  MORI_EP_INTER_NODE_V1_LL = 3,
  MORI_EP_ASYNC_LL = 4,
} mori_ep_kernel_type_t;

/* Token element types (mori_dtype_t's float types and the fp8 formats). */
typedef enum mori_ep_dtype {
  MORI_EP_FLOAT32 = 0,
  MORI_EP_BFLOAT16 = 1,
  MORI_EP_FLOAT16 = 2,
  MORI_EP_FP8_E4M3FN = 3,   /* NVIDIA's float8_e4m3fn */
  MORI_EP_FP8_E4M3FNUZ = 4, /* AMD's float8_e4m3fnuz */
} mori_ep_dtype_t;

typedef struct mori_ep_config {
  mori_ep_dtype_t data_type;          /* dispatch's token type */
  int32_t rank, world_size;           /* must equal the comm's */
  uint32_t hidden_dim;                /* elements per token */
  uint32_t scale_dim;                 /* scales per token (0: none) */
  uint32_t scale_type_size;           /* bytes per scale */
  uint32_t max_token_type_size;       /* bytes of the widest token type used (combine may be wider) */
  uint32_t max_num_inp_token_per_rank;
  uint32_t num_experts_per_rank;
  uint32_t num_experts_per_token;     /* top-k */
  int32_t warp_num_per_block;         /* launch shape; <= 0: chosen */
  int32_t block_num;                  /* host platform: threads of the calling rank per call, up to MORI_EP_HOST_BLOCKS */
  int32_t rdma_block_num;
  int32_t use_external_inp_buf;       /* read by the Python binding only (an input that overlaps the op's outputs:
                                         refused when 1, cloned first when 0); in C, the call's `input` decides:
                                         NULL or the registered buffer is read in place, any other input is copied
                                         into the registered buffer as it is sent */
  mori_ep_kernel_type_t kernel_type;
  int32_t gpu_per_node;               /* <= 0: from the comm's locality */
  int32_t num_qp_per_pe;              /* <= 0: the transport's */
} mori_ep_config_t;

typedef struct mori_ep mori_ep_t;

/* Defaults: bf16, top-8, warp_num_per_block/block_num chosen, external
 * input buffer used, IntraNode. */
MORI_API void mori_ep_config_init(mori_ep_config_t *config);
/* Collective over every rank of `comm`: checks the config (the same on
 * every rank, its rank and world_size the comm's) and makes the context's
 * symmetric buffers. */
MORI_API int mori_ep_create(mori_comm_t *comm, const mori_ep_config_t *config, mori_ep_t **out);
/* This rank's part of a mori_ep_create that a binding's own checks
 * refused (`why`: what was wrong, e.g. "hidden_dim=0; expected a positive
 * int"): it takes part in the create's first step with a failure, so every
 * rank's mori_ep_create fails at once naming this rank and `why`, and no
 * rank is left paired with this rank's next create. Returns that failure
 * (MORI_EINVAL unless the step itself failed otherwise). */
MORI_API int mori_ep_create_refused(mori_comm_t *comm, const char *why);
/* Collective. Waits for the device. NULL is a no-op. */
MORI_API int mori_ep_destroy(mori_ep_t *ep);

/* The context's output buffers (device memory; host memory on the host
 * platform), valid until mori_ep_destroy. Capacities in rows:
 * max_recv_tokens = world_size * max_num_inp_token_per_rank. */
typedef struct mori_ep_buffers {
  uint64_t max_recv_tokens;
  void *dispatch_tokens;        /* [max_recv_tokens, hidden_dim] of data_type */
  float *dispatch_weights;      /* [max_recv_tokens, top-k] */
  void *dispatch_scales;        /* [max_recv_tokens, scale_dim * scale_type_size bytes], or NULL */
  int32_t *dispatch_indices;    /* [max_recv_tokens, top-k] */
  int32_t *recv_num_token;      /* [1]: rows of this call's dispatch output */
  int32_t *src_token_pos;       /* [max_recv_tokens]: row i's origin (see above) */
  void *combine_input;          /* registered combine input: [max_recv_tokens, hidden_dim] of max_token_type_size */
  void *combine_output;         /* [max_num_inp_token_per_rank, hidden_dim] of the combine dtype */
  float *combine_weights;       /* [max_num_inp_token_per_rank, top-k] */
} mori_ep_buffers_t;
MORI_API int mori_ep_buffers(const mori_ep_t *ep, mori_ep_buffers_t *out);

/* Launch shape of one call; <= 0 fields: the config's, else chosen. */
typedef struct mori_ep_launch {
  int32_t block_num, rdma_block_num, warp_per_block;
} mori_ep_launch_t;

/* Dispatch `num_tokens` tokens (<= max_num_inp_token_per_rank): input
 * [num_tokens, hidden_dim] of data_type, weights [num_tokens, top-k] fp32
 * (NULL: none), scales [num_tokens, scale_dim] (NULL: none), indices
 * [num_tokens, top-k] int32 expert ids. Results in mori_ep_buffers.
 * `stream`: CUstream / hipStream_t (ignored on the host platform). */
MORI_API int mori_ep_dispatch(mori_ep_t *ep, const void *input, const float *weights, const void *scales,
                              const int32_t *indices, uint32_t num_tokens, const mori_ep_launch_t *launch,
                              void *stream);
/* The two halves: send publishes this rank's tokens, recv waits for the
 * peers' and fills the outputs. dispatch = send then recv. */
MORI_API int mori_ep_dispatch_send(mori_ep_t *ep, const void *input, const float *weights, const void *scales,
                                   const int32_t *indices, uint32_t num_tokens, const mori_ep_launch_t *launch,
                                   void *stream);
MORI_API int mori_ep_dispatch_recv(mori_ep_t *ep, const mori_ep_launch_t *launch, void *stream);
/* A dispatch (or its send half) this rank refuses: a call with bad input
 * on one rank only must not leave the others paired with its next call.
 * mori_ep_dispatch and mori_ep_dispatch_send do this themselves when they
 * refuse a call's input (too many tokens, missing buffers, an input inside
 * the outputs): this rank's part runs with no tokens, marked refused, so
 * every rank's call completes and every other rank's mori_ep_check then
 * reports MORI_EINVAL naming this rank. A binding whose own checks refuse a
 * call calls this instead. A refused send half runs its receive half at
 * once (this rank's outputs are that call's, as the next combine needs):
 * no receive half waits, and the receive half called next does nothing. */
MORI_API int mori_ep_dispatch_refused(mori_ep_t *ep, int send_only, void *stream);

/* Combine the last dispatch: `input` holds this rank's processed rows in
 * its dispatch output's order (NULL: the registered combine_input, which
 * peers read during the call: not to be rewritten for a second combine of
 * one dispatch while a peer may still read the first's) of
 * `dtype` (bf16 or fp32; fp16 allowed); `weights` [rows, top-k] fp32 in
 * the same order (NULL: none). Writes combine_output [num_tokens of the
 * last dispatch, hidden_dim] of `dtype` and combine_weights. A combine
 * before any dispatch of the context is refused (MORI_EINVAL, this rank's
 * part run as refused, as mori_ep_combine_refused), and so is an `input`
 * or `weights` inside the registered combine buffers without starting
 * where they do (the call copies them there, over rows not yet read). */
MORI_API int mori_ep_combine(mori_ep_t *ep, const void *input, mori_ep_dtype_t dtype, const float *weights,
                             const mori_ep_launch_t *launch, void *stream);
MORI_API int mori_ep_combine_send(mori_ep_t *ep, const void *input, mori_ep_dtype_t dtype, const float *weights,
                                  const mori_ep_launch_t *launch, void *stream);
MORI_API int mori_ep_combine_recv(mori_ep_t *ep, const mori_ep_launch_t *launch, void *stream);
/* mori_ep_combine (send_only 0) or mori_ep_combine_send (1), told how many
 * rows `input` and `weights` hold (mori_ep_combine checks none). The rows
 * the dispatch delivered (its own count, which a reset does not clear) are
 * known only on the device, so the call's kernel compares them: when
 * `input` (other than NULL, which means every row of the registered buffer;
 * the buffer's own address is read in place and checked) or `weights`
 * holds fewer, this rank's part runs as refused before reading a row of
 * them. It sends nothing and its flag says so: the peers' combines end and
 * their mori_ep_check names this rank; this rank's mori_ep_check reports
 * MORI_EINVAL with both counts, and its output is not valid. The call
 * itself returns 0 for that (its checks of what the host knows are
 * mori_ep_combine's); a receive half called after such a send half runs
 * and sums nothing. */
MORI_API int mori_ep_combine_rows(mori_ep_t *ep, const void *input, uint64_t input_rows, mori_ep_dtype_t dtype,
                                  const float *weights, uint64_t weights_rows, int send_only,
                                  const mori_ep_launch_t *launch, void *stream);
/* A combine (or its send half) this rank refuses, as mori_ep_dispatch_refused:
 * mori_ep_combine and mori_ep_combine_send do it themselves when they refuse
 * a call's arguments (a dtype the buffers cannot hold, an input inside the
 * outputs). This rank sends nothing and its flag says so: the other ranks'
 * receive halves end at once, sum nothing, and their mori_ep_check reports
 * MORI_EINVAL naming this rank; every rank stays in step. */
MORI_API int mori_ep_combine_refused(mori_ep_t *ep, int send_only, void *stream);

/* Stream-ordered: clears recv_num_token and the per-call state (the
 * MORI-EP guide's reset()). Not needed between calls; refused between a
 * send half and its receive half; does not restart a stopped context. */
MORI_API int mori_ep_reset(mori_ep_t *ep, void *stream);
/* Reports (and clears) what a kernel of this context left: a wait that
 * timed out, bad data (an index out of range), a refused remote op, a
 * stopped context. The first report is kept until read; the message counts
 * those that came after it. */
MORI_API int mori_ep_check(mori_ep_t *ep);
/* The config the context was made with. */
MORI_API const mori_ep_config_t *mori_ep_config(const mori_ep_t *ep);

MORI_EXTERN_C_END

#endif
