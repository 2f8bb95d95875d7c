// SPDX-License-Identifier: MIT
/* Per comm: GPU posting or the proxy, and why. Each rank probes the steps
 * GPU posting needs, in order, and stops at the first that fails:
 *   1. MORI_RDMA_GDA is not off;
 *   2. the transport's own queue pairs came up;
 *   3. a way to find a QP's queues: the provider's mlx5dv_init_obj (the
 *      software ConnectX), else, for libibverbs, libmlx5's through dlopen
 *      when mlx5dv_is_supported says the device is a ConnectX;
 *   4. GPU-posting QPs and CQs created, described by mlx5dv_init_obj in the
 *      shape the device layer writes (64-byte WQEs and CQEs, a doorbell
 *      register);
 *   5. their queues, doorbell records and doorbell page mapped for the GPU.
 * (GPU memory itself is registered with the NIC as the transport already
 * does for every segment: peer memory or dma-buf, whichever the driver
 * takes.) Both ends of a QP must post from the GPU or neither: the ranks
 * exchange the outcome (and their QP numbers) in one allgather, and GPU
 * posting is chosen only when every rank got through. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "transport/rdma/gda/gda_host.h"

static const char *const mode_names[] = {"auto", "on", "off"};

/* libmlx5's own, for a ConnectX under libibverbs (loaded once, kept). */
static int (*libmlx5_init_obj)(struct mlx5dv_obj *, uint64_t);
static bool (*libmlx5_is_supported)(struct ibv_device *);

static int find_init_obj(struct rdma_state *s, struct rdma_gda *g, char *why, size_t why_len) {
  const mori_rdma_provider_t *p = s->provider;
  if (p->size >= offsetof(mori_rdma_provider_t, mlx5dv_init_obj) + sizeof(p->mlx5dv_init_obj) && p->mlx5dv_init_obj) {
    g->init_obj = p->mlx5dv_init_obj;
    g->init_obj_from = "the provider's";
    return 0;
  }
  if (strcmp(p->name, "libibverbs") != 0) {
    snprintf(why, why_len, "the rdma provider (%s) cannot describe its queues (no mlx5dv_init_obj)", p->name);
    return MORI_ENOTSUP;
  }
  if (!libmlx5_init_obj) {
    void *h = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      snprintf(why, why_len, "libmlx5.so.1 (rdma-core's ConnectX provider) does not load: %s", dlerror());
      return MORI_ENOTSUP;
    }
    *(void **)&libmlx5_is_supported = dlsym(h, "mlx5dv_is_supported");
    *(void **)&libmlx5_init_obj = dlsym(h, "mlx5dv_init_obj");
    if (!libmlx5_is_supported || !libmlx5_init_obj) {
      libmlx5_init_obj = NULL;
      snprintf(why, why_len, "libmlx5.so.1 lacks mlx5dv_init_obj or mlx5dv_is_supported");
      return MORI_ENOTSUP;
    }
  }
  if (!libmlx5_is_supported(s->ctx->device)) {
    snprintf(why, why_len, "%s is not a ConnectX (mlx5dv_is_supported)", s->device);
    return MORI_ENOTSUP;
  }
  g->init_obj = libmlx5_init_obj;
  g->init_obj_from = "libmlx5's";
  return 0;
}

/* What each rank says in the exchange; num_qp QPNs per peer follow. */
struct gda_outcome {
  int32_t ok;
  char why[124];
};

static uint32_t round_up_pow2(uint32_t x) {
  uint32_t p = 16;
  while (p < x) p <<= 1;
  return p;
}

bool rdma_gda_demanded(void) { return mori_env_enum_or("MORI_RDMA_GDA", RDMA_GDA_AUTO) == RDMA_GDA_ON; }

int rdma_gda_init(struct rdma_state *s, mori_comm_t *comm, bool connected, const struct rdma_endpoint *me, const char *all,
                  size_t entry) {
  struct rdma_gda *g = calloc(1, sizeof(*g));
  if (!g) return mori_error_set(MORI_ENOMEM, "rdma gda");
  s->gda = g;
  g->mode = mori_env_enum_or("MORI_RDMA_GDA", RDMA_GDA_AUTO);
  g->depth = round_up_pow2((uint32_t)mori_env_int_or("MORI_RDMA_GDA_DEPTH", 512));
  g->map.device = mori_comm_device(comm);
  char why[192] = "";
  int local = MORI_ENOTSUP;
  if (g->mode == RDMA_GDA_OFF) snprintf(why, sizeof(why), "MORI_RDMA_GDA=off");
  else if (!connected) snprintf(why, sizeof(why), "the transport's queue pairs did not come up");
  else if ((local = find_init_obj(s, g, why, sizeof(why))) == 0) {
    local = rdma_gda_create_queues(s, g, why, sizeof(why));
    if (local && !why[0]) snprintf(why, sizeof(why), "%s", mori_last_error());
  }
  /* The exchange: outcome and QP numbers, from every rank. */
  size_t qpns = (size_t)s->size * (size_t)s->num_qp, stride = sizeof(struct gda_outcome) + qpns * sizeof(uint32_t);
  char *mine = calloc(1, stride), *every = calloc((size_t)s->size, stride);
  if (!mine || !every) {
    free(mine);
    free(every);
    return mori_error_set(MORI_ENOMEM, "rdma gda: exchange");
  }
  struct gda_outcome *o = (struct gda_outcome *)mine;
  o->ok = local == 0;
  snprintf(o->why, sizeof(o->why), "%s", why);
  uint32_t *q = (uint32_t *)(mine + sizeof(*o));
  for (size_t i = 0; local == 0 && i < qpns; i++) q[i] = g->qp[i] ? g->qp[i]->qp_num : 0;
  int rc = mori_bootstrap_allgather(mori_comm_bootstrap(comm), mine, every, stride);
  int missing = -1;
  for (int r = 0; !rc && r < s->size && missing < 0; r++)
    if (!((struct gda_outcome *)(every + (size_t)r * stride))->ok) missing = r;
  if (!rc && missing < 0) {
    /* Each rank connects its own ends, which can still fail: a second
     * exchange, so that no rank posts from the GPU to one that took the
     * proxy (every rank takes it then, naming the first that failed). */
    struct gda_outcome c;
    memset(&c, 0, sizeof(c));
    c.ok = rdma_gda_connect_queues(s, g, me, all, entry, (const uint32_t *)(every + sizeof(*o)), stride) == 0;
    if (!c.ok) snprintf(c.why, sizeof(c.why), "%s", mori_last_error());
    rc = mori_bootstrap_allgather(mori_comm_bootstrap(comm), &c, every, sizeof(c));
    for (int r = 0; !rc && r < s->size && missing < 0; r++)
      if (!((struct gda_outcome *)(every + (size_t)r * sizeof(c)))->ok) missing = r;
    if (rc) {
      /* reported below */
    } else if (missing >= 0) {
      snprintf(g->why, sizeof(g->why), "rank %d: %s", missing, ((struct gda_outcome *)(every + (size_t)missing * sizeof(c)))->why);
      /* the proxy still serves: the QPs stay unused */
    } else {
      g->enabled = true;
      size_t n = (size_t)s->size * (size_t)s->num_qp, used = 0;
      for (size_t i = 0; i < n; i++) used += g->qp[i] != NULL;
      snprintf(g->why, sizeof(g->why),
               "every rank maps its QPs' queues and doorbell for the GPU (%s mlx5dv_init_obj, %u work requests per QP, "
               "send queues in %s memory)",
               g->init_obj_from, g->depth,
               g->queues_in_device == 0 ? "host" : g->queues_in_device == used ? "device" : "device and host");
    }
  } else if (!rc) {
    if (missing == s->rank) snprintf(g->why, sizeof(g->why), "%s", why);
    else snprintf(g->why, sizeof(g->why), "rank %d: %s", missing, ((struct gda_outcome *)(every + (size_t)missing * stride))->why);
  }
  free(mine);
  free(every);
  if (rc) return mori_error_context(rc, "rdma gda: exchanging the GPU-posting outcome");
  if (!g->enabled) rdma_gda_destroy_queues(s, g);
  MORI_INFO("rdma: rank %d %s (MORI_RDMA_GDA=%s): %s", s->rank, g->enabled ? "posts from the GPU" : "posts through the proxy",
            mode_names[g->mode], g->why);
  if (!g->enabled && g->mode == RDMA_GDA_ON)
    return mori_error_set(MORI_ENOTSUP, "rdma: MORI_RDMA_GDA=on, but GPU-initiated posting is not possible on rank %d: %s",
                          s->rank, g->why);
  return 0;
}

void rdma_gda_fini(struct rdma_state *s) {
  if (!s->gda) return;
  rdma_gda_destroy_queues(s, s->gda);
  free(s->gda);
  s->gda = NULL;
}

int mori_rdma_gda_status(const mori_comm_t *comm, int *enabled, char *why, size_t why_len) {
  if (enabled) *enabled = 0;
  if (why_len) why[0] = '\0';
  int rc = rdma_comm_arg(comm, "rdma gda_status");
  if (rc) return rc;
  const struct rdma_state *s = mori_comm_transport_state(comm, &mori_transport_rdma_ops);
  if (!s) return mori_error_set(MORI_EINVAL, "rdma: the comm does not hold the rdma transport");
  if (!s->gda) {
    snprintf(why, why_len, "%s", s->unusable[0] ? s->unusable : "no usable RDMA device");
    return 0;
  }
  if (enabled) *enabled = s->gda->enabled;
  snprintf(why, why_len, "%s", s->gda->why);
  return 0;
}
