// SPDX-License-Identifier: MIT
/* MoE dispatch/combine contexts (mori/ep.h): the checks of a config and of
 * each call, the window that holds every buffer, and the launch shape. */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/ep_internal.h"
#include "collectives/epoch_floor.h"
#include "core/base/checked_math.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/trace.h"
#include "core/internal/agreement.h"
#include "core/internal/finalize.h"
#include "core/internal/window_terms.h"
#include "mori/bootstrap.h"
#include "mori/mem.h"
#include "mori/runtime.h"

/* mori_finalize released every window and allocation of the process, the
 * context's buffers too: from then on its calls refuse. */
static bool released(const mori_ep_t *ep) { return ep->finalizes != mori_finalize_count(); }

void mori_ep_config_init(mori_ep_config_t *config) {
  memset(config, 0, sizeof(*config));
  config->data_type = MORI_EP_BFLOAT16;
  config->num_experts_per_token = 8;
  config->warp_num_per_block = -1;
  config->block_num = -1;
  config->rdma_block_num = -1;
  config->use_external_inp_buf = 1;
  config->kernel_type = MORI_EP_INTRA_NODE;
  config->gpu_per_node = -1;
  config->num_qp_per_pe = -1;
}

static uint32_t elem_bytes(int dtype) {
  switch (dtype) {
    case MORI_EP_FLOAT32: return 4;
    case MORI_EP_BFLOAT16:
    case MORI_EP_FLOAT16: return 2;
    case MORI_EP_FP8_E4M3FN:
    case MORI_EP_FP8_E4M3FNUZ: return 1;
    default: return 0;
  }
}

static const char *dtype_name(int dtype) {
  static const char *const names[] = {"float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e4m3fnuz"};
  return dtype >= 0 && dtype <= MORI_EP_FP8_E4M3FNUZ ? names[dtype] : "unknown";
}

/* What this rank can check alone. */
static int check_config(mori_comm_t *comm, const mori_ep_config_t *c) {
  int me = mori_comm_rank(comm), n = mori_comm_size(comm);
  if (c->rank != me || c->world_size != n)
    return mori_error_set(MORI_EINVAL, "ep_create: rank %d of %d: the config says rank %d of world_size %d", me, n, c->rank,
                          c->world_size);
  if (!elem_bytes((int)c->data_type))
    return mori_error_set(MORI_EINVAL, "ep_create: rank %d: data_type %d is not one of mori_ep_dtype_t", me, (int)c->data_type);
  if (c->hidden_dim == 0) return mori_error_set(MORI_EINVAL, "ep_create: rank %d: hidden_dim is 0", me);
  if (c->max_num_inp_token_per_rank == 0)
    return mori_error_set(MORI_EINVAL, "ep_create: rank %d: max_num_inp_token_per_rank is 0", me);
  if (c->num_experts_per_rank == 0) return mori_error_set(MORI_EINVAL, "ep_create: rank %d: num_experts_per_rank is 0", me);
  uint64_t experts = (uint64_t)c->num_experts_per_rank * (uint64_t)n;
  if (c->num_experts_per_token == 0 || c->num_experts_per_token > experts)
    return mori_error_set(MORI_EINVAL, "ep_create: rank %d: top-k (num_experts_per_token) %u is not in [1, %llu] (the experts of %d ranks x %u)",
                          me, c->num_experts_per_token, (unsigned long long)experts, n, c->num_experts_per_rank);
  if (experts > 0x7fffffffull) return mori_error_set(MORI_EINVAL, "ep_create: rank %d: %llu experts overflow int32 indices", me, (unsigned long long)experts);
  if (c->scale_dim && !c->scale_type_size)
    return mori_error_set(MORI_EINVAL, "ep_create: rank %d: scale_dim %u with scale_type_size 0", me, c->scale_dim);
  /* Row sizes are 32-bit in the device view, token positions and counts
   * int32: what would wrap is refused (a scale_dim of 2^30 x 4 bytes wrapped
   * to no scales at all). */
  uint64_t widest = c->max_token_type_size > 4 ? c->max_token_type_size : 4;
  if ((uint64_t)c->hidden_dim * widest > 0xffffffffull)
    return mori_error_set(MORI_EINVAL, "ep_create: rank %d: hidden_dim %u x %llu bytes per element overflows a 32-bit row size",
                          me, c->hidden_dim, (unsigned long long)widest);
  if ((uint64_t)c->scale_dim * c->scale_type_size > 0xffffffffull)
    return mori_error_set(MORI_EINVAL, "ep_create: rank %d: scale_dim %u x scale_type_size %u overflows a 32-bit row size",
                          me, c->scale_dim, c->scale_type_size);
  if ((uint64_t)n * c->max_num_inp_token_per_rank > 0x7fffffffull)
    return mori_error_set(MORI_EINVAL,
                          "ep_create: rank %d: world_size %d x max_num_inp_token_per_rank %u overflows the int32 token "
                          "positions and counts",
                          me, n, c->max_num_inp_token_per_rank);
  if (c->max_token_type_size == 1)
    return mori_error_set(MORI_EINVAL,
                          "ep_create: rank %d: max_token_type_size 1 holds no combine dtype (bfloat16 and float16 take 2 "
                          "bytes); 0 picks the size from data_type",
                          me);
  if (c->max_token_type_size && c->max_token_type_size < elem_bytes((int)c->data_type))
    return mori_error_set(MORI_EINVAL, "ep_create: rank %d: max_token_type_size %u is smaller than data_type %s's %u bytes", me,
                          c->max_token_type_size, dtype_name((int)c->data_type), elem_bytes((int)c->data_type));
  if ((int)c->kernel_type < MORI_EP_INTRA_NODE || (int)c->kernel_type > MORI_EP_ASYNC_LL)
    return mori_error_set(MORI_EINVAL, "ep_create: rank %d: kernel_type %d is not one of mori_ep_kernel_type_t", me,
                          (int)c->kernel_type);
  return 0;
}

static uint64_t round256(uint64_t x) { return (x + 255) / 256 * 256; }

/* `at` moved past a buffer of a x b x c bytes (rounded to 256), saturating
 * at UINT64_MAX: every factor is bounded alone (check_config), but their
 * sum over a config's buffers can pass 2^64, and a wrapped total would be
 * a small allocation with offsets far outside it. */
static uint64_t place_after(uint64_t at, uint64_t a, uint64_t b, uint64_t c) {
  size_t ab, bytes, end;
  if (at == UINT64_MAX || mori_mul_overflows(a, b, &ab) || mori_mul_overflows(ab, c, &bytes) ||
      mori_round_up_overflows(bytes, 256, &bytes) || mori_add_overflows(at, bytes, &end) || end == UINT64_MAX)
    return UINT64_MAX;
  return end;
}

/* Offsets of every buffer in the window (see mori_ep_dev_t); returns the
 * bytes per rank and, in *control, the bytes that start zeroed. */
static uint64_t plan_layout(mori_ep_t *ep, uint64_t *control) {
  const mori_ep_config_t *c = &ep->config;
  mori_ep_dev_t *v = &ep->view;
  uint64_t n = (uint64_t)c->world_size, M = c->max_num_inp_token_per_rank, K = c->num_experts_per_token;
  uint64_t R = n * M, H = c->hidden_dim, at = 0;
#define PLACE(field, a, b, c) (v->field = at, at = place_after(at, a, b, c))
  v->hdr_bytes = round256((MORI_EP_HDR_COUNTS + n) * 4);
  PLACE(off_state, sizeof(mori_ep_state_t), 1, 1);
  PLACE(off_dflag, n, 8, 1);
  PLACE(off_cflag, n, 8, 1);
  PLACE(off_hdr, 2, v->hdr_bytes, 1);
  PLACE(off_base, 2, n + 1, 4);
  PLACE(off_ready, 2, 8, 1);
  PLACE(off_cdone, n, 8, 1);
  PLACE(off_chunk_ready, MORI_EP_MAX_GRID, 8, 1);
  *control = at;
  PLACE(off_list, 2 * n, M, 4); /* n, M < 2^31 (check_config) */
  PLACE(off_pos, 2 * M, n, 4);
  PLACE(off_chunk, MORI_EP_MAX_GRID, n + 2, 4);
  PLACE(off_scan, MORI_EP_HOST_MAX_BLOCKS, sizeof(mori_ep_scan_scratch_t), 1);
  PLACE(off_prefix, MORI_EP_MAX_GRID, n + 1, 4);
  PLACE(off_stage_tok, 2 * M, v->token_bytes, 1);
  PLACE(off_stage_w, 2 * M, K, 4);
  PLACE(off_stage_idx, 2 * M, K, 4);
  PLACE(off_stage_scale, 2 * M, v->scale_bytes, 1);
  PLACE(off_out_tok, R, v->token_bytes, 1);
  PLACE(off_out_w, R, K, 4);
  PLACE(off_out_idx, R, K, 4);
  PLACE(off_out_scale, R, v->scale_bytes, 1);
  PLACE(off_recv_num, 4, 1, 1);
  PLACE(off_src_pos, R, 4, 1);
  PLACE(off_comb_in, R, H, ep->comb_elem_bytes); /* H x bytes < 2^32 */
  PLACE(off_comb_w_in, R, K, 4);
  PLACE(off_comb_out, M, H, ep->comb_elem_bytes);
  PLACE(off_comb_w_out, M, K, 4);
  /* Copies of what ranks outside the load/store team publish (remote only). */
  uint64_t remote = v->remote ? 1 : 0, C = v->copies;
  PLACE(off_rhdr, remote * n, v->hdr_bytes, 1);
  PLACE(off_rlist, remote * n, M, 4);
  PLACE(off_rbase, remote * n, 4, 1);
  PLACE(off_fetch, remote * M, C, H * ep->comb_elem_bytes);
  PLACE(off_fetch_w, remote * M, C, K * 4);
#undef PLACE
  return at;
}

/* The window: one allocation per rank, its control part zeroed before any
 * peer can write it (the window's rendezvous comes after). Collective: a
 * rank whose allocation failed still takes part, and every rank fails. */
static int make_window(mori_ep_t *ep, int rc) {
  int earlier = rc; /* a failure before this step keeps its own message */
  uint64_t control = 0, total = plan_layout(ep, &control);
  mori_mem_attr_t attr;
  mori_mem_attr_init(&attr);
  attr.device = ep->device;
  void *mem = NULL, *zeros = NULL;
  if (!rc && (total == UINT64_MAX || total > SIZE_MAX)) {
    const mori_ep_config_t *c = &ep->config;
    rc = earlier = mori_error_set(MORI_EINVAL,
                                  "ep_create: rank %d: the config's buffers come to more than 2^64 bytes per rank "
                                  "(world_size %d x max_num_inp_token_per_rank %u receive rows of hidden_dim %u, top-k "
                                  "%u, scales of %u x %u bytes): lower them",
                                  mori_comm_rank(ep->comm), c->world_size, c->max_num_inp_token_per_rank, c->hidden_dim,
                                  c->num_experts_per_token, c->scale_dim, c->scale_type_size);
  }
  if (!rc) rc = mori_mem_alloc(total, &attr, &mem);
  if (!rc && !(zeros = calloc(1, control))) rc = mori_error_set(MORI_ENOMEM, "ep_create: %llu bytes", (unsigned long long)control);
  if (zeros) {
    /* The calls count from the agreed base: the state's epochs, and each
     * source's last finished combine (what the first combine waits for),
     * start there; the flags stay 0, below every call (epoch_floor.c). */
    mori_ep_state_t *st = (mori_ep_state_t *)((char *)zeros + ep->view.off_state);
    st->dispatch_epoch = st->combine_epoch = ep->epoch_base;
    uint64_t *cdone = (uint64_t *)((char *)zeros + ep->view.off_cdone);
    for (int r = 0; r < ep->config.world_size; r++) cdone[r] = ep->epoch_base;
  }
  if (!rc) rc = mori_device_upload(ep->device, mem, zeros, control);
  /* recv_num_token too: a new context has delivered nothing, whatever an
   * earlier owner of the memory left there. */
  const int32_t none = 0;
  if (!rc) rc = mori_device_upload(ep->device, (char *)mem + ep->view.off_recv_num, &none, sizeof(none));
  free(zeros);
  rc = mori_agree(ep->comm, rc, "ep_create: buffers");
  mori_window_t *win = NULL;
  /* Its records name the calls counting from 1 (the base taken off). */
  mori_window_terms_t terms = {.call_base = ep->epoch_base};
  if (!rc) rc = mori_window_create_with_terms(ep->comm, mem, &terms, &win);
  if (rc) {
    mori_mem_free(mem);
    return earlier ? rc : mori_error_context(rc, "ep_create: %llu bytes of buffers per rank", (unsigned long long)total);
  }
  ep->memory = mem;
  ep->win = win;
  ep->view.win = mori_window_device_view(win);
  /* Ranks outside the load/store team are read through the window's proxy
   * (the rdma transport). */
  int base, size;
  mori_comm_lsa(ep->comm, &base, &size, NULL);
  if (ep->view.remote && !ep->view.win.proxy)
    rc = mori_error_set(MORI_EUNREACHABLE,
                        "ep_create: rank %d reaches only ranks [%d, %d) of %d by load/store and no transport gives its window "
                        "a proxy for the others (the rdma transport does)",
                        ep->config.rank, base, base + size, ep->config.world_size);
  if (!rc) rc = mori_ep_launch_prepare(ep);
  rc = mori_agree(ep->comm, rc, "ep_create: every rank reached, the kernels loaded");
  if (rc) {
    mori_window_destroy(win);
    mori_mem_free(mem);
    ep->memory = NULL;
    ep->win = NULL;
    return rc;
  }
  return 0;
}

/* The widest combine element the buffers hold: max_token_type_size, or
 * with 0 data_type's size (at least a half's). */
static uint32_t combine_elem_bytes(const mori_ep_config_t *c) {
  uint32_t es = elem_bytes((int)c->data_type);
  return c->max_token_type_size ? c->max_token_type_size : (es > 2 ? es : 2);
}

/* Where a new context's epochs start (epoch_floor.c): above every epoch a
 * late kernel of an earlier context of this process may still write into
 * the flags, which keep an epoch in 56 bits (MORI_EP_FLAG_EPOCH). */
_Static_assert((MORI_EPOCH_GENERATIONS - 1) * (1ull << MORI_EPOCH_GENERATION_BITS) + (1ull << 31) + (1ull << 39) <=
                   MORI_EP_FLAG_EPOCH,
               "every base, and 2^39 calls past it, fit a flag's epoch");

/* mori_ep_create's first step: each rank's status and proposal (`mine`),
 * gathered into `all` (one per rank). A create refused by a binding
 * (mori_ep_create_refused) takes this same step, failed. */
static int gather_proposals(mori_comm_t *comm, int status, const mori_ep_proposal_t *mine, mori_ep_proposal_t *all) {
  return mori_agree_gather(comm, status, "ep_create: config", mine, all, sizeof(*mine));
}

int mori_ep_create(mori_comm_t *comm, const mori_ep_config_t *config, mori_ep_t **out) {
  if (!comm || !config || !out) return mori_error_set(MORI_EINVAL, "ep_create: comm, config and out are required");
  MORI_TRACE_SCOPE("ep_create");
  *out = NULL;
  int rc = check_config(comm, config);
  /* The same config on every rank (the rank field aside): each rank sends
   * its own and compares. */
  int n = mori_comm_size(comm), me = mori_comm_rank(comm);
  mori_ep_proposal_t mine;
  memset(&mine, 0, sizeof(mine)); /* padding too: the whole struct is sent */
  mine.config = *config;
  mine.epoch_floor = mori_epoch_floor_propose();
  mori_ep_proposal_t *all = calloc((size_t)n, sizeof(*all));
  /* What each rank may choose for itself: its rank and its launch shape
   * (every call may give its own too). */
  mine.config.rank = 0;
  mine.config.warp_num_per_block = mine.config.block_num = mine.config.rdma_block_num = mine.config.use_external_inp_buf = 0;
  /* 0 means the size data_type needs: ranks that say 0 and that size agree. */
  mine.config.max_token_type_size = combine_elem_bytes(config);
  /* Any value <= 0 means "the default" (the comm's locality, the
   * transport's): -1 (mori_ep_config_init) and 0 (a zeroed config) agree. */
  if (mine.config.gpu_per_node <= 0) mine.config.gpu_per_node = -1;
  if (mine.config.num_qp_per_pe <= 0) mine.config.num_qp_per_pe = -1;
  /* Without memory for the table this rank still takes the step, failed
   * (the peers are in it; a failed step writes no table): every rank
   * fails there naming it, at once instead of at the timeout. */
  if (!all && !rc) rc = mori_error_set(MORI_ENOMEM, "ep_create: rank %d's table of %d configs", me, n);
  int arc = gather_proposals(comm, rc, &mine, all);
  if (arc) {
    free(all);
    return arc;
  }
  for (int r = 0; r < n && !rc; r++) {
    /* The fields the buffers' layout and the routing depend on, by name. */
#define MORI_EP_SAME(field)                                                                                              \
  if (!rc && all[r].config.field != mine.config.field)                                                                   \
  rc = mori_error_set(MORI_EINVAL, "ep_create: rank %d's config differs from rank %d's in " #field " (%lld vs %lld)", r, \
                      me, (long long)all[r].config.field, (long long)mine.config.field)
    MORI_EP_SAME(data_type);
    MORI_EP_SAME(world_size);
    MORI_EP_SAME(hidden_dim);
    MORI_EP_SAME(scale_dim);
    MORI_EP_SAME(scale_type_size);
    MORI_EP_SAME(max_token_type_size);
    MORI_EP_SAME(max_num_inp_token_per_rank);
    MORI_EP_SAME(num_experts_per_rank);
    MORI_EP_SAME(num_experts_per_token);
    MORI_EP_SAME(kernel_type);
    MORI_EP_SAME(gpu_per_node);
    MORI_EP_SAME(num_qp_per_pe);
#undef MORI_EP_SAME
  }
  /* The context's epochs start at the largest floor any rank proposed. */
  uint64_t epoch_base = 0;
  for (int r = 0; r < n; r++)
    if (all[r].epoch_floor > epoch_base) epoch_base = all[r].epoch_floor;
  mori_epoch_floor_taken(epoch_base);
  free(all);
  mori_ep_t *ep = calloc(1, sizeof(*ep));
  if (!ep && !rc) rc = mori_error_set(MORI_ENOMEM, "ep_create: rank %d's context (%zu bytes)", me, sizeof(*ep));
  if (ep) {
    ep->finalizes = mori_finalize_count();
    ep->comm = comm;
    ep->config = *config;
    ep->epoch_base = epoch_base;
    ep->device = mori_comm_device(comm);
    ep->auto_shape = mori_env_enum_or("MORI_EP_LAUNCH_CONFIG_MODE", 0) == 1;
    ep->host_blocks = (int)mori_env_int_or("MORI_EP_HOST_BLOCKS", 1);
    int sms = 0, drc = ep->auto_shape ? mori_ep_device_info(ep->device, ep->arch, sizeof(ep->arch), &sms) : 0;
    if (drc && !rc) rc = drc;
    uint32_t es = elem_bytes((int)config->data_type);
    ep->comb_elem_bytes = combine_elem_bytes(config);
    mori_ep_dev_t *v = &ep->view;
    v->rank = me;
    v->world_size = n;
    v->hidden_dim = config->hidden_dim;
    v->top_k = config->num_experts_per_token;
    v->experts_per_rank = config->num_experts_per_rank;
    v->max_tokens = config->max_num_inp_token_per_rank;
    v->token_bytes = config->hidden_dim * es;
    v->scale_bytes = config->scale_dim * config->scale_type_size;
    int base, size;
    mori_comm_lsa(comm, &base, &size, NULL);
    v->remote = size != n;
    v->copies = config->num_experts_per_token < (uint32_t)n ? config->num_experts_per_token : (uint32_t)n;
    v->comb_elem_bytes = ep->comb_elem_bytes;
    v->timeout_ns = (uint64_t)mori_bootstrap_timeout_ms(mori_comm_bootstrap(comm)) * 1000000ull;
  }
  if (!ep) {
    (void)mori_agree(comm, rc, "ep_create: buffers"); /* the peers are in that step */
    return rc;
  }
  int wrc = make_window(ep, rc);
  if (wrc) {
    free(ep);
    return wrc;
  }
  *out = ep;
  return 0;
}

int mori_ep_create_refused(mori_comm_t *comm, const char *why) {
  if (!comm) return mori_error_set(MORI_EINVAL, "ep_create_refused: comm is required");
  mori_error_set(MORI_EINVAL, "ep_create: rank %d refused the config: %s", mori_comm_rank(comm),
                 why && *why ? why : "(no reason given)");
  /* The first step of mori_ep_create, with this rank's failure: every
   * rank's create returns from it. */
  mori_ep_proposal_t mine;
  memset(&mine, 0, sizeof(mine));
  /* No table: a step this rank fails writes none (and needs no memory). */
  int rc = gather_proposals(comm, MORI_EINVAL, &mine, NULL);
  return rc ? rc : mori_error_set(MORI_EINVAL, "ep_create_refused: the step did not fail");
}

int mori_ep_destroy(mori_ep_t *ep) {
  if (!ep) return 0;
  int rc = mori_ep_device_wait(ep->device); /* the caller's streams may be non-blocking ones */
  /* No peer may still read this rank's buffers. A peer may still be in a
   * call's wait that fails only after the context's timeout (a call this
   * rank skipped, or whose part failed, left it waiting), so this step
   * waits that long beyond the comm's own limit: else one failed call
   * made destroy, and the comm's every later step, fail on the rank that
   * came first. (On one host; across hosts the bootstrap's timeout bounds
   * the step.) */
  uint64_t grace_ms = ep->view.timeout_ns / 1000000ull;
  int arc = mori_agree_grace(ep->comm, rc, "ep_destroy", grace_ms > INT_MAX ? INT_MAX : (int)grace_ms);
  if (!rc) rc = arc;
  if (!released(ep)) { /* else mori_finalize released them */
    int wrc = mori_window_destroy(ep->win);
    if (!rc) rc = wrc;
    mori_mem_free(ep->memory);
  }
  free(ep);
  return rc;
}

static int check_call(const mori_ep_t *ep, const char *what);

int mori_ep_buffers(const mori_ep_t *ep, mori_ep_buffers_t *out) {
  if (!ep || !out) return mori_error_set(MORI_EINVAL, "ep_buffers: NULL argument");
  int crc = check_call(ep, "ep_buffers");
  if (crc) return crc;
  char *base = (char *)ep->memory;
  const mori_ep_dev_t *v = &ep->view;
  memset(out, 0, sizeof(*out));
  out->max_recv_tokens = (uint64_t)ep->config.world_size * ep->config.max_num_inp_token_per_rank;
  out->dispatch_tokens = base + v->off_out_tok;
  out->dispatch_weights = (float *)(base + v->off_out_w);
  out->dispatch_scales = v->scale_bytes ? base + v->off_out_scale : NULL;
  out->dispatch_indices = (int32_t *)(base + v->off_out_idx);
  out->recv_num_token = (int32_t *)(base + v->off_recv_num);
  out->src_token_pos = (int32_t *)(base + v->off_src_pos);
  out->combine_input = base + v->off_comb_in;
  out->combine_output = base + v->off_comb_out;
  out->combine_weights = (float *)(base + v->off_comb_w_out);
  return 0;
}

const mori_ep_config_t *mori_ep_config(const mori_ep_t *ep) { return ep ? &ep->config : NULL; }

/* The launch shape: the call's, else the config's, else (AUTO) the table's,
 * else every resident block with 16 warps each (0 blocks: the launcher's
 * resident count). */
static mori_ep_shape_t choose_shape(const mori_ep_t *ep, const mori_ep_launch_t *launch, uint32_t tokens) {
  mori_ep_shape_t s = {0, 0};
  if (launch && launch->block_num > 0) s.blocks = (uint32_t)launch->block_num;
  else if (ep->config.block_num > 0) s.blocks = (uint32_t)ep->config.block_num;
  if (launch && launch->warp_per_block > 0) s.warps = (uint32_t)launch->warp_per_block;
  else if (ep->config.warp_num_per_block > 0) s.warps = (uint32_t)ep->config.warp_num_per_block;
  if ((!s.blocks || !s.warps) && ep->auto_shape) {
    mori_ep_shape_t t;
    if (mori_ep_table_shape(ep->arch, ep->config.world_size, (int)ep->config.data_type, tokens, ep->config.hidden_dim, &t)) {
      if (!s.blocks) s.blocks = t.blocks;
      if (!s.warps) s.warps = t.warps;
    }
  }
  if (!s.warps) s.warps = 16;
  return s;
}

static int check_call(const mori_ep_t *ep, const char *what) {
  if (!ep) return mori_error_set(MORI_EINVAL, "%s: NULL context", what);
  if (released(ep))
    return mori_error_set(MORI_EINVAL, "%s: mori_finalize released the context's buffers: destroy it and make a new one", what);
  return 0;
}

/* The halves come in pairs: a send half's receive half next, nothing else
 * between them (a call in between would move the parity the receive half
 * reads, or wait for a flag the pending half never raises). `recv_of`: the
 * send half this call is the receive half of (NULL: a call that starts
 * something new). */
static int check_halves(const mori_ep_t *ep, const char *what, const char *recv_of) {
  if (recv_of && (!ep->waiting || strcmp(ep->waiting, recv_of) != 0))
    return mori_error_set(MORI_EINVAL, "%s: rank %d: no ep_%s is waiting for this receive half%s%s%s", what, ep->config.rank,
                          recv_of, ep->waiting ? " (ep_" : "", ep->waiting ? ep->waiting : "", ep->waiting ? " is)" : "");
  if (!recv_of && ep->waiting)
    return mori_error_set(MORI_EINVAL, "%s: rank %d: ep_%s is still waiting for its receive half; call it first", what,
                          ep->config.rank, ep->waiting);
  return 0;
}

/* A fused call's blocks write their outputs while other blocks still read
 * the call's inputs (this rank's own rows go first), so an input inside
 * the outputs it would overwrite is refused: `name` of `bytes` at p against
 * this context's window bytes [from, to). */
static int check_apart(const mori_ep_t *ep, const char *what, const char *name, const void *p, uint64_t bytes, uint64_t from,
                       uint64_t to, const char *outputs) {
  uintptr_t a = (uintptr_t)p, lo = (uintptr_t)ep->memory + from, hi = (uintptr_t)ep->memory + to;
  if (!p || !bytes || a >= hi || (a < lo && lo - a >= bytes)) return 0;
  return mori_error_set(MORI_EINVAL,
                        "%s: rank %d: the %s (%llu bytes at %p) overlaps this context's %s, which the call writes while it "
                        "reads its inputs; pass a copy, or make the call in its two halves",
                        what, ep->config.rank, name, (unsigned long long)bytes, p, outputs);
}

/* `p` (`bytes` of it) lies in the registered buffer at offset `off` (`size`
 * bytes) that the call copies it into, without starting where the buffer
 * does: the copy would overwrite rows before it reads them (a shifted
 * slice of the buffer). The buffer itself is read in place. */
static int check_not_shifted(const mori_ep_t *ep, const char *what, const char *name, const void *p, uint64_t bytes,
                             uint64_t off, uint64_t size, const char *buffer) {
  uintptr_t a = (uintptr_t)p, lo = (uintptr_t)ep->memory + off, hi = lo + size;
  if (!p || !bytes || a == lo || a >= hi || (a < lo && lo - a >= bytes)) return 0;
  return mori_error_set(MORI_EINVAL,
                        "%s: rank %d: the %s (%llu bytes at %p) overlaps this context's %s (at %p) without starting "
                        "there: the call copies it into that buffer, over rows it has not read yet; pass the buffer "
                        "itself (its rows read in place) or a copy",
                        what, ep->config.rank, name, (unsigned long long)bytes, p, buffer, (void *)lo);
}

/* A dispatch's input, checked (0, or the error set). */
static int check_dispatch(const mori_ep_t *ep, const void *input, const float *weights, const void *scales,
                          const int32_t *indices, uint32_t num_tokens, uint32_t phases, const char *what) {
  int rc = 0;
  const mori_ep_config_t *c = &ep->config;
  if (num_tokens > c->max_num_inp_token_per_rank)
    return mori_error_set(MORI_EINVAL, "%s: rank %d dispatches %u tokens, more than max_num_inp_token_per_rank %u", what,
                          c->rank, num_tokens, c->max_num_inp_token_per_rank);
  if (num_tokens && (!input || !indices))
    return mori_error_set(MORI_EINVAL, "%s: rank %d: input and indices are required for %u tokens", what, c->rank, num_tokens);
  if (phases == (MORI_EP_PHASE_SEND | MORI_EP_PHASE_RECV)) {
    const mori_ep_dev_t *v = &ep->view;
    uint64_t T = num_tokens, K = c->num_experts_per_token, lo = v->off_out_tok, hi = v->off_comb_in;
    const char *outs = "dispatch outputs";
    if ((rc = check_apart(ep, what, "input", input, T * v->token_bytes, lo, hi, outs)) ||
        (rc = check_apart(ep, what, "weights", weights, T * K * 4, lo, hi, outs)) ||
        (rc = check_apart(ep, what, "scales", scales, T * v->scale_bytes, lo, hi, outs)) ||
        (rc = check_apart(ep, what, "indices", indices, T * K * 4, lo, hi, outs)))
      return rc;
  }
  return 0;
}

/* A call that failed once launched (host platform: a wait timed out or
 * was aborted; GPUs: the launch itself) stops the context. */
static int note_failure(mori_ep_t *ep, int rc) {
  if (rc) ep->stopped = 1;
  return rc;
}

/* The refusal of every call of a stopped context. */
static int stopped(const mori_ep_t *ep, const char *what) {
  return mori_error_set(MORI_ECANCELED,
                        "%s: rank %d: an earlier call of this context failed (its error said why), so its ranks may be "
                        "out of step; every later call is refused (the peers' calls end naming this rank): destroy the "
                        "context and make a new one",
                        what, ep->config.rank);
}

/* This rank's part of a call whose arguments it refused (`refusal`, the
 * error already set), so that a call refused on some ranks only keeps every
 * rank in step. Dispatch: no tokens, the header marked refused; combine:
 * nothing sent, its flag marked refused; the peers' calls complete and
 * their mori_ep_check names this rank. A refused send half runs its
 * receive half at once: this rank's outputs (what the peers sent it, where
 * the next combine finds its rows) are then this call's, whether or not the
 * receive half is called, which then does nothing. Returns the refusal with
 * its message. */
static int refuse(mori_ep_t *ep, int combine, int refusal, void *stream, uint32_t phases) {
  char why[512];
  snprintf(why, sizeof(why), "%s", mori_last_error());
  if (!combine) {
    ep->last_num_tokens = 0;
    ep->dispatched = 1;
  }
  mori_ep_args_t a = {.num_tokens = ep->last_num_tokens,
                      .phases = MORI_EP_PHASE_SEND | MORI_EP_PHASE_RECV,
                      .dtype = combine ? (uint32_t)MORI_EP_BFLOAT16 : 0,
                      .refused = 1};
  mori_ep_shape_t shape = choose_shape(ep, NULL, a.num_tokens);
  int rc = combine ? mori_ep_launch_combine(ep, &a, shape, stream) : mori_ep_launch_dispatch(ep, &a, shape, stream);
  if (rc) MORI_WARN("%s; and this rank's part of the call could not run: %s", why, mori_last_error());
  ep->refused_half = phases != MORI_EP_PHASE_SEND ? NULL : combine ? "combine_send" : "dispatch_send";
  return mori_error_set(refusal, "%s", why);
}

/* mori_ep_dispatch_refused and mori_ep_combine_refused: a binding's own
 * checks refused the call. */
static int refused_by_caller(mori_ep_t *ep, int combine, int send_only, void *stream) {
  const char *what = combine ? "ep_combine_refused" : "ep_dispatch_refused";
  int rc = check_call(ep, what);
  if (!rc) rc = check_halves(ep, what, NULL);
  if (rc) return rc;
  mori_error_set(MORI_EINVAL, "%s: rank %d refused this call", combine ? "ep_combine" : "ep_dispatch", ep->config.rank);
  return refuse(ep, combine, MORI_EINVAL, stream, send_only ? MORI_EP_PHASE_SEND : MORI_EP_PHASE_SEND | MORI_EP_PHASE_RECV);
}

int mori_ep_dispatch_refused(mori_ep_t *ep, int send_only, void *stream) { return refused_by_caller(ep, 0, send_only, stream); }
int mori_ep_combine_refused(mori_ep_t *ep, int send_only, void *stream) { return refused_by_caller(ep, 1, send_only, stream); }

static int send_dispatch(mori_ep_t *ep, const void *input, const float *weights, const void *scales, const int32_t *indices,
                         uint32_t num_tokens, const mori_ep_launch_t *launch, void *stream, uint32_t phases,
                         const char *what) {
  int rc = check_call(ep, what);
  if (!rc) rc = check_halves(ep, what, NULL);
  if (rc) return rc;
  ep->refused_half = NULL;
  MORI_TRACE_SCOPE(what, MORI_TA("tokens", num_tokens));
  rc = ep->stopped ? stopped(ep, what) : check_dispatch(ep, input, weights, scales, indices, num_tokens, phases, what);
  if (rc) return refuse(ep, 0, rc, stream, phases);
  mori_ep_args_t a = {
      .input = input, .weights = weights, .scales = scales, .indices = indices, .num_tokens = num_tokens, .phases = phases};
  ep->last_num_tokens = num_tokens;
  ep->dispatched = 1;
  rc = note_failure(ep, mori_ep_launch_dispatch(ep, &a, choose_shape(ep, launch, num_tokens), stream));
  if (!rc && phases == MORI_EP_PHASE_SEND) ep->waiting = "dispatch_send";
  return rc;
}

int mori_ep_dispatch(mori_ep_t *ep, const void *input, const float *weights, const void *scales, const int32_t *indices,
                     uint32_t num_tokens, const mori_ep_launch_t *launch, void *stream) {
  return send_dispatch(ep, input, weights, scales, indices, num_tokens, launch, stream,
                       MORI_EP_PHASE_SEND | MORI_EP_PHASE_RECV, "ep_dispatch");
}

int mori_ep_dispatch_send(mori_ep_t *ep, const void *input, const float *weights, const void *scales, const int32_t *indices,
                          uint32_t num_tokens, const mori_ep_launch_t *launch, void *stream) {
  return send_dispatch(ep, input, weights, scales, indices, num_tokens, launch, stream, MORI_EP_PHASE_SEND,
                       "ep_dispatch_send");
}

/* A receive phase's call: checked (its send half is the one waiting), on
 * the tokens of the last dispatch. *ran: the refused send half ran it
 * already (nothing to launch). */
static int recv_args(mori_ep_t *ep, const char *what, const char *recv_of, mori_ep_args_t *a, int *ran) {
  int rc = check_call(ep, what);
  *ran = !rc && !ep->waiting && ep->refused_half && strcmp(ep->refused_half, recv_of) == 0;
  ep->refused_half = NULL;
  if (rc || *ran) return rc;
  if ((rc = check_halves(ep, what, recv_of)) != 0) return rc;
  ep->waiting = NULL;
  *a = (mori_ep_args_t){.num_tokens = ep->last_num_tokens, .phases = MORI_EP_PHASE_RECV};
  return 0;
}

int mori_ep_dispatch_recv(mori_ep_t *ep, const mori_ep_launch_t *launch, void *stream) {
  mori_ep_args_t a;
  int ran = 0, rc = recv_args(ep, "ep_dispatch_recv", "dispatch_send", &a, &ran);
  if (rc || ran) return rc;
  MORI_TRACE_SCOPE("ep_dispatch_recv");
  return note_failure(ep, mori_ep_launch_dispatch(ep, &a, choose_shape(ep, launch, a.num_tokens), stream));
}

/* A combine's checks of this rank's arguments. */
static int check_combine(const mori_ep_t *ep, const void *input, mori_ep_dtype_t dtype, const float *weights, uint32_t phases,
                         const char *what) {
  if (dtype != MORI_EP_FLOAT32 && dtype != MORI_EP_BFLOAT16 && dtype != MORI_EP_FLOAT16)
    return mori_error_set(MORI_EINVAL, "%s: rank %d: combine dtype %s (%d) is not float32, bfloat16 or float16", what,
                          ep->config.rank, dtype_name((int)dtype), (int)dtype);
  if (elem_bytes((int)dtype) > ep->comb_elem_bytes)
    return mori_error_set(MORI_EINVAL, "%s: rank %d: combine dtype %s takes %u bytes, the buffers hold %u (max_token_type_size)",
                          what, ep->config.rank, dtype_name((int)dtype), elem_bytes((int)dtype), ep->comb_elem_bytes);
  int rc = 0;
  const mori_ep_dev_t *v = &ep->view;
  uint64_t R = (uint64_t)ep->config.world_size * ep->config.max_num_inp_token_per_rank, K = ep->config.num_experts_per_token;
  if ((rc = check_not_shifted(ep, what, "input", input, R * ep->config.hidden_dim * elem_bytes((int)dtype), v->off_comb_in,
                              R * ep->config.hidden_dim * ep->comb_elem_bytes, "registered combine input")) != 0 ||
      (rc = check_not_shifted(ep, what, "weights", weights, R * K * 4, v->off_comb_w_in, R * K * 4,
                              "registered combine weights")) != 0)
    return rc;
  if (phases == (MORI_EP_PHASE_SEND | MORI_EP_PHASE_RECV)) {
    const char *outs = "combine outputs";
    if ((rc = check_apart(ep, what, "input", input, R * ep->config.hidden_dim * elem_bytes((int)dtype), v->off_comb_out,
                          v->off_rhdr, outs)) == 0)
      rc = check_apart(ep, what, "weights", weights, R * K * 4, v->off_comb_out, v->off_rhdr, outs);
  }
  return rc;
}

/* rows: NULL, or the rows the caller's input and weights hold ([0], [1]),
 * which the kernel checks against the rows the dispatch delivered. */
static int send_combine(mori_ep_t *ep, const void *input, mori_ep_dtype_t dtype, const float *weights,
                        const mori_ep_launch_t *launch, void *stream, uint32_t phases, const char *what,
                        const uint64_t *rows) {
  int rc = check_call(ep, what);
  if (!rc) rc = check_halves(ep, what, NULL);
  if (rc) return rc;
  ep->refused_half = NULL;
  MORI_TRACE_SCOPE(what, MORI_TA("dtype", dtype));
  if (ep->stopped)
    rc = stopped(ep, what);
  else if ((rc = check_combine(ep, input, dtype, weights, phases, what)) == 0 && !ep->dispatched)
    rc = mori_error_set(MORI_EINVAL, "%s: rank %d: no dispatch to combine (a combine returns the rows of the last "
                        "dispatch to their senders; call mori_ep_dispatch first)", what, ep->config.rank);
  if (rc)
    return refuse(ep, 1, rc, stream, phases);
  mori_ep_args_t a = {.input = input,
                      .weights = weights,
                      .num_tokens = ep->last_num_tokens,
                      .phases = phases,
                      .dtype = (uint32_t)dtype,
                      .has_weights = weights != NULL,
                      .rows_known = rows != NULL,
                      .input_rows = rows ? rows[0] : 0,
                      .weights_rows = rows ? rows[1] : 0};
  ep->comb_dtype = a.dtype;
  ep->comb_has_weights = a.has_weights;
  rc = note_failure(ep, mori_ep_launch_combine(ep, &a, choose_shape(ep, launch, ep->last_num_tokens), stream));
  if (!rc && phases == MORI_EP_PHASE_SEND) ep->waiting = "combine_send";
  return rc;
}

int mori_ep_combine(mori_ep_t *ep, const void *input, mori_ep_dtype_t dtype, const float *weights,
                    const mori_ep_launch_t *launch, void *stream) {
  return send_combine(ep, input, dtype, weights, launch, stream, MORI_EP_PHASE_SEND | MORI_EP_PHASE_RECV, "ep_combine", NULL);
}

int mori_ep_combine_send(mori_ep_t *ep, const void *input, mori_ep_dtype_t dtype, const float *weights,
                         const mori_ep_launch_t *launch, void *stream) {
  return send_combine(ep, input, dtype, weights, launch, stream, MORI_EP_PHASE_SEND, "ep_combine_send", NULL);
}

int mori_ep_combine_rows(mori_ep_t *ep, const void *input, uint64_t input_rows, mori_ep_dtype_t dtype, const float *weights,
                         uint64_t weights_rows, int send_only, const mori_ep_launch_t *launch, void *stream) {
  const uint64_t rows[2] = {input_rows, weights_rows};
  return send_only ? send_combine(ep, input, dtype, weights, launch, stream, MORI_EP_PHASE_SEND, "ep_combine_send", rows)
                   : send_combine(ep, input, dtype, weights, launch, stream, MORI_EP_PHASE_SEND | MORI_EP_PHASE_RECV,
                                  "ep_combine", rows);
}

int mori_ep_combine_recv(mori_ep_t *ep, const mori_ep_launch_t *launch, void *stream) {
  mori_ep_args_t a;
  int ran = 0, rc = recv_args(ep, "ep_combine_recv", "combine_send", &a, &ran);
  if (rc || ran) return rc;
  MORI_TRACE_SCOPE("ep_combine_recv");
  a.dtype = ep->comb_dtype;
  a.has_weights = ep->comb_has_weights;
  return note_failure(ep, mori_ep_launch_combine(ep, &a, choose_shape(ep, launch, a.num_tokens), stream));
}

/* Between a send half and its receive half it is refused like any call;
 * a refused send half's receive half stays done. */
int mori_ep_reset(mori_ep_t *ep, void *stream) {
  int rc = check_call(ep, "ep_reset");
  if (!rc) rc = check_halves(ep, "ep_reset", NULL);
  return rc ? rc : mori_ep_launch_reset(ep, stream);
}

int mori_ep_check(mori_ep_t *ep) {
  int rc = check_call(ep, "ep_check");
  if (rc) return rc;
  /* The record is written by kernels on the caller's streams, which may be
   * non-blocking ones the copy below does not wait for: a record read
   * half-written, or a clear landing after a new report, would lose it. */
  if ((rc = mori_ep_device_wait(ep->device)) != 0) return rc;
  mori_ep_state_t st;
  char *state = (char *)ep->memory + ep->view.off_state;
  rc = mori_device_copy(ep->device, &st, state, sizeof(st));
  if (rc) return rc;
  int wrc = mori_window_check(ep->win);
  if (st.bad_seen) {
    /* A kernel's wait record read above goes with this report, not lost. */
    char more[640] = "";
    int used = st.bad_more ? snprintf(more, sizeof(more), "; and %d later report(s) of this rank, not kept", st.bad_more) : 0;
    if (wrc && used >= 0 && (size_t)used < sizeof(more))
      snprintf(more + used, sizeof(more) - (size_t)used, "; also: %s", mori_last_error());
    int32_t zero[2] = {0, 0}; /* bad_seen, bad_more */
    rc = mori_device_upload(ep->device, state + offsetof(mori_ep_state_t, bad_seen), zero, sizeof(zero));
    if (rc) return rc;
    if (st.bad_count == MORI_EP_STOPPED)
      return mori_error_set(MORI_ECANCELED,
                            "ep: rank %d: a kernel of this context failed a step (a wait timed out or was aborted: its "
                            "record says which), so its ranks may be out of step; every call since ran as refused (the "
                            "peers' calls end naming this rank): destroy the context and make a new one%s",
                            ep->config.rank, more);
    if (st.bad_count == MORI_EP_COMBINE_ROWS)
      return mori_error_set(MORI_EINVAL,
                            "ep: rank %d's combine %s holds %d rows, fewer than the %d its last dispatch delivered: "
                            "the call ran as refused before reading them (nothing sent; the peers' combines end naming "
                            "this rank), its output is not valid%s",
                            ep->config.rank, st.bad_slot ? "weights" : "input", st.bad_index, st.bad_token, more);
    if (st.bad_count == MORI_EP_COMBINE_DTYPE_MISMATCH)
      return mori_error_set(MORI_EINVAL,
                            "ep: rank %d's combine sent %s rows, rank %d's combines %s: nothing of that call was summed "
                            "(every rank must combine in the same dtype)%s",
                            st.bad_rank, dtype_name(st.bad_index), ep->config.rank, dtype_name(st.bad_slot), more);
    if (st.bad_count == MORI_EP_REFUSED_COMBINE)
      return mori_error_set(MORI_EINVAL,
                            "ep: rank %d refused its part of a combine (its own error says why): nothing of that call "
                            "was summed, its output is not valid (seen on rank %d)%s",
                            st.bad_rank, ep->config.rank, more);
    if (st.bad_count < 0)
      return mori_error_set(MORI_EINVAL,
                            "ep: rank %d refused its part of a dispatch (its own error says why): none of its tokens were "
                            "sent in that call (seen on rank %d)%s",
                            st.bad_rank, ep->config.rank, more);
    return mori_error_set(MORI_EINVAL,
                          "ep: rank %d's token %d has expert index %d in top-k slot %d, outside [0, %llu): %d token(s) of "
                          "that rank were dropped (seen on rank %d)%s",
                          st.bad_rank, st.bad_token, st.bad_index, st.bad_slot,
                          (unsigned long long)ep->config.world_size * ep->config.num_experts_per_rank, st.bad_count,
                          ep->config.rank, more);
  }
  return wrc;
}
