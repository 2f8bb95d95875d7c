// SPDX-License-Identifier: MIT
/* MoE dispatch/combine's host side, shared by ep.c (contexts, checks, launch
 * shapes) and the launchers (ep_launch_gpu.cu on GPUs, ep_launch_host.c on
 * the host platform). */
#ifndef MORI_COLLECTIVES_EP_INTERNAL_H
#define MORI_COLLECTIVES_EP_INTERNAL_H

#include "mori/device/ep/types.h"
#include "mori/ep.h"
#include "mori/window.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mori_ep {
  mori_comm_t *comm;
  mori_ep_config_t config;
  void *memory;
  mori_window_t *win;
  mori_ep_dev_t view;
  uint32_t comb_elem_bytes;  /* the widest combine element the buffers hold */
  uint32_t last_num_tokens;  /* of the last dispatch (what combine returns) */
  /* A dispatch (or its refusal) ran: a combine reverses one. Kept by
   * reset, which clears the count, not the routing. */
  int dispatched;
  uint32_t comb_dtype;       /* of the last combine_send */
  uint32_t comb_has_weights;
  const char *waiting; /* the send half ("dispatch_send", "combine_send") waiting for its receive half, or NULL */
  /* The send half this rank refused last ("dispatch_send", "combine_send"):
   * its receive half ran with it, so the receive half called next does
   * nothing; any other call forgets it. NULL: none. */
  const char *refused_half;
  /* A call of this context failed (a wait timed out or was aborted, a
   * launch failed): its ranks may be out of step, so every later call is
   * refused (its part runs as refused: the peers' calls end naming this
   * rank) until the context is destroyed. The device keeps the same state
   * (mori_ep_state_t.stopped) for failures the host does not see. */
  int stopped;
  int device;
  int auto_shape;  /* MORI_EP_LAUNCH_CONFIG_MODE=auto, read when the context was made */
  int host_blocks; /* host platform: MORI_EP_HOST_BLOCKS, read when the context was made */
  char arch[32];   /* the device's, for the launch table */
  uint64_t finalizes; /* mori_finalize_count() at creation: a later finalize released the buffers */
  /* The epoch the calls count from (the state's epochs start here): agreed
   * at creation, above every epoch a kernel of an earlier context of any
   * rank may still write (epoch_floor.c). */
  uint64_t epoch_base;
};

/* What each rank brings to mori_ep_create's first step (one per rank in
 * its table): the fields that must agree, and its epoch floor (where the
 * context's epochs start: the largest any rank brings). */
typedef struct mori_ep_proposal {
  mori_ep_config_t config;
  uint64_t epoch_floor;
} mori_ep_proposal_t;

/* A launch shape asked for: blocks and warps per block (> 0). The GPU
 * launcher clamps blocks to what the device keeps resident at once (every
 * block must run for the receive half's waits to be met). */
typedef struct mori_ep_shape {
  uint32_t blocks, warps;
} mori_ep_shape_t;

/* Runs one call: GPU: one kernel on `stream`; host: in the calling thread
 * (returning the error a wait left). */
int mori_ep_launch_dispatch(const mori_ep_t *ep, const mori_ep_args_t *a, mori_ep_shape_t shape, void *stream);
int mori_ep_launch_combine(const mori_ep_t *ep, const mori_ep_args_t *a, mori_ep_shape_t shape, void *stream);
/* At creation: loads the kernels into the device's context and measures
 * what the launcher needs (GPU), so that no first launch loads a module
 * while another kernel of the context spins (CUDA's lazy loading may wait
 * for it) or while a stream is being captured. Host platform: nothing. */
int mori_ep_launch_prepare(const mori_ep_t *ep);
/* Waits for everything queued on the device (any stream). */
int mori_ep_device_wait(int device);
/* recv_num_token := 0, stream-ordered. */
int mori_ep_launch_reset(const mori_ep_t *ep, void *stream);
/* The device's architecture ("sm_90", "gfx942"; "host") and its number of
 * multiprocessors (1 on the host platform), for the launch table. */
int mori_ep_device_info(int device, char *arch, size_t arch_size, int *sms);

/* The shape AUTO mode picks for a call (ep_launch_table.c); 0 when the
 * table has no row for it. */
int mori_ep_table_shape(const char *arch, int world_size, int dtype, uint32_t tokens, uint32_t hidden,
                        mori_ep_shape_t *out);

#ifdef __cplusplus
}
#endif

#endif
