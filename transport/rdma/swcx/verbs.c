// SPDX-License-Identifier: MIT
/* The software ConnectX's verbs table (see internal.h): each call goes to
 * the inner provider; contexts, PDs, CQs and QPs come back wrapped, CQs and
 * QPs with their emulated ConnectX queues, which mlx5dv_init_obj
 * describes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/platform/platform.h"
#include "transport/rdma/swcx/internal.h"

static const mori_rdma_provider_t *_Atomic inner_provider;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct swcx_context *contexts;
static uint32_t next_cqn = 0x400;

static struct swcx_context *context_of(struct ibv_context *ctx) { return (struct swcx_context *)ctx; }

static uint32_t pow2_at_least(uint64_t n) {
  uint32_t p = 1;
  while (p < n && p < (1u << 30)) p <<= 1;
  return p;
}

/* Memory the comm's device reaches at the same address as the host:
 * pinned and mapped on a GPU platform, plain on the host platform. */
static int alloc_mapped(struct swcx_context *c, size_t size, void **out) {
  void *host = NULL, *dev = NULL;
  int rc = mori_platform_host_alloc_mapped(c->device, size, &host, &dev);
  if (rc) return mori_error_context(rc, "software ConnectX: %zu bytes of queue memory for device %d", size, c->device);
  if (host != dev) {
    mori_platform_host_free_mapped(host);
    return mori_error_set(MORI_ENOTSUP,
                          "software ConnectX: device %d sees mapped host memory at another address (%p, host %p); the "
                          "queues must have one address for both",
                          c->device, dev, host);
  }
  memset(host, 0, size);
  *out = host;
  return 0;
}

static void free_mapped(void *p) {
  if (p) mori_platform_host_free_mapped(p);
}

/* A send ring or doorbell record: device memory (zeroed) with device
 * queues, else mapped host memory. */
static int alloc_queue(struct swcx_context *c, size_t size, void **out) {
  if (!c->device_queues) return alloc_mapped(c, size, out);
  int rc = mori_platform_device_alloc(c->device, size, out);
  if (!rc && (rc = mori_platform_memset_zero(c->device, *out, size)) != 0) {
    mori_platform_device_free(c->device, *out);
    *out = NULL;
  }
  return rc ? mori_error_context(rc, "software ConnectX: %zu bytes of device memory for a send queue on device %d", size, c->device) : 0;
}

static void free_queue(struct swcx_context *c, void *p) {
  if (!p) return;
  if (c->device_queues) mori_platform_device_free(c->device, p);
  else free_mapped(p);
}

/* ---- devices and contexts ---- */

static struct ibv_device **get_device_list(int *n) {
  const mori_rdma_provider_t *p = inner_provider;
  return (p->verbs->ibv_get_device_list)(n);
}
static void free_device_list(struct ibv_device **list) { (inner_provider->verbs->ibv_free_device_list)(list); }
static const char *get_device_name(struct ibv_device *dev) { return (inner_provider->verbs->ibv_get_device_name)(dev); }

static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);

static _Thread_local int next_device = -1;

static void use_device(int device) {
  next_device = device;
  const mori_rdma_provider_t *p = inner_provider;
  if (p->size >= offsetof(mori_rdma_provider_t, use_device) + sizeof(p->use_device) && p->use_device) p->use_device(device);
}

static int close_device(struct ibv_context *ctx) {
  struct swcx_context *c = context_of(ctx);
  swcx_engine_stop(c);
  pthread_mutex_lock(&registry_lock);
  for (struct swcx_context **p = &contexts; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  pthread_mutex_unlock(&registry_lock);
  rdma_warn_limit_flush(&c->full_warns);
  rdma_warn_limit_flush(&c->refused_warns);
  if (c->ring_reader) mori_platform_queue_destroy(c->ring_reader);
  int rc = (c->innerp->verbs->ibv_close_device)(c->inner);
  pthread_mutex_destroy(&c->lock);
  free(c->qps);
  free(c->cqs);
  free(c);
  return rc;
}

static struct ibv_context *open_device(struct ibv_device *dev) {
  const mori_rdma_provider_t *p = inner_provider;
  int device = next_device;
  next_device = -1;
  struct swcx_context *c = calloc(1, sizeof(*c));
  if (!c) {
    errno = ENOMEM;
    return NULL;
  }
  c->innerp = p;
  c->full_warns = (rdma_warn_limit_t)RDMA_WARN_LIMIT_INIT("software ConnectX full-CQ warnings");
  c->refused_warns = (rdma_warn_limit_t)RDMA_WARN_LIMIT_INIT("software ConnectX refused-WQE warnings");
  pthread_mutex_init(&c->lock, NULL);
  int rc = swcx_parse_faults(c);
  if (!rc && device < 0) rc = mori_platform_current_device(&device);
  c->device = device;
  c->device_queues = mori_env_enum_or("MORI_RDMA_SWCX_QUEUES", SWCX_QUEUES_DEVICE) == SWCX_QUEUES_DEVICE;
  if (!rc && c->device_queues) rc = mori_platform_queue_create(device, &c->ring_reader);
  if (rc) {
    MORI_WARN("software ConnectX: %s", mori_last_error());
    if (c->ring_reader) mori_platform_queue_destroy(c->ring_reader);
    pthread_mutex_destroy(&c->lock);
    free(c);
    errno = EINVAL;
    return NULL;
  }
  if (!(c->inner = (p->verbs->ibv_open_device)(dev))) {
    int err = errno;
    if (c->ring_reader) mori_platform_queue_destroy(c->ring_reader);
    pthread_mutex_destroy(&c->lock);
    free(c);
    errno = err;
    return NULL;
  }
  c->ctx.device = dev;
  c->ctx.cmd_fd = c->inner->cmd_fd;
  c->ctx.async_fd = c->inner->async_fd;
  c->ctx.num_comp_vectors = c->inner->num_comp_vectors;
  c->ctx.ops.post_send = post_send;
  c->ctx.ops.poll_cq = poll_cq;
  if ((rc = swcx_engine_start(c)) != 0) {
    MORI_WARN("software ConnectX: %s", mori_last_error());
    (p->verbs->ibv_close_device)(c->inner);
    if (c->ring_reader) mori_platform_queue_destroy(c->ring_reader);
    pthread_mutex_destroy(&c->lock);
    free(c);
    errno = ENOMEM;
    return NULL;
  }
  pthread_mutex_lock(&registry_lock);
  c->next = contexts;
  contexts = c;
  pthread_mutex_unlock(&registry_lock);
  return &c->ctx;
}

static int query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr) {
  struct swcx_context *c = context_of(ctx);
  return (c->innerp->verbs->ibv_query_port)(c->inner, port, attr);
}

static int query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid) {
  struct swcx_context *c = context_of(ctx);
  return (c->innerp->verbs->ibv_query_gid)(c->inner, port, index, gid);
}

static const char *wc_status_str(enum ibv_wc_status status) { return (inner_provider->verbs->ibv_wc_status_str)(status); }

/* ---- protection domains and memory regions (the inner provider's) ---- */

static struct ibv_pd *alloc_pd(struct ibv_context *ctx) {
  struct swcx_context *c = context_of(ctx);
  struct swcx_pd *pd = calloc(1, sizeof(*pd));
  if (!pd) {
    errno = ENOMEM;
    return NULL;
  }
  if (!(pd->inner = (c->innerp->verbs->ibv_alloc_pd)(c->inner))) {
    int err = errno;
    free(pd);
    errno = err;
    return NULL;
  }
  pd->pd.context = ctx;
  pd->pd.handle = pd->inner->handle;
  return &pd->pd;
}

static int dealloc_pd(struct ibv_pd *pd) {
  struct swcx_pd *p = (struct swcx_pd *)pd;
  int rc = (context_of(pd->context)->innerp->verbs->ibv_dealloc_pd)(p->inner);
  if (!rc) free(p);
  return rc;
}

/* The inner region itself: its keys are what WQEs name. */
static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access) {
  struct swcx_pd *p = (struct swcx_pd *)pd;
  return (context_of(pd->context)->innerp->verbs->ibv_reg_mr)(p->inner, addr, length, access);
}

/* The inner provider's dma-buf registration, where it has one (a dma-buf
 * region is an inner region like any other); else EOPNOTSUPP, as
 * libibverbs answers for a device that cannot. */
static struct ibv_mr *reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  struct swcx_pd *p = (struct swcx_pd *)pd;
  const mori_rdma_provider_t *inner = context_of(pd->context)->innerp;
  __typeof__(inner->ibv_reg_dmabuf_mr) reg = mori_rdma_provider_reg_dmabuf_mr(inner);
  if (!reg) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  return reg(p->inner, offset, length, iova, fd, access);
}

static int dereg_mr(struct ibv_mr *mr) {
  /* The region is the inner provider's; its context says which one. */
  const mori_rdma_provider_t *p = inner_provider;
  pthread_mutex_lock(&registry_lock);
  for (struct swcx_context *c = contexts; c; c = c->next)
    if (c->inner == mr->context) p = c->innerp;
  pthread_mutex_unlock(&registry_lock);
  return (p->verbs->ibv_dereg_mr)(mr);
}

/* ---- completion queues ---- */

/* The context's lists of CQs and QPs (what the engine walks): arrays of
 * pointers, doubled when full. room_for_one returns the array (of `elem`-
 * byte entries) with room for one more, grown with *cap updated, or NULL
 * when it cannot grow (the array is then unchanged). SWCX_DROP_ONE removes
 * `item` if it is there, the last entry taking its place. */
static void *room_for_one(void *array, size_t n, size_t *cap, size_t elem, size_t first_cap) {
  if (n < *cap) return array;
  size_t grown_cap = *cap ? 2 * *cap : first_cap;
  void *grown = realloc(array, grown_cap * elem);
  if (grown) *cap = grown_cap;
  return grown;
}

#define SWCX_DROP_ONE(array, n, item) \
  do {                                \
    for (size_t i_ = 0; i_ < (n); i_++) \
      if ((array)[i_] == (item)) {    \
        (array)[i_] = (array)[--(n)]; \
        break;                        \
      }                               \
  } while (0)

static void free_cq(struct swcx_cq *q) {
  free_mapped(q->ring);
  free_mapped(q->dbrec);
  free_mapped(q->uar);
  free(q->host);
  free(q);
}

static struct ibv_cq *create_cq(struct ibv_context *ctx, int cqe, void *user, struct ibv_comp_channel *channel, int vector) {
  struct swcx_context *c = context_of(ctx);
  if (cqe < 1) {
    errno = EINVAL;
    return NULL;
  }
  struct swcx_cq *q = calloc(1, sizeof(*q));
  if (!q) {
    errno = ENOMEM;
    return NULL;
  }
  q->c = c;
  /* As libmlx5: a power of two above the entries asked for. */
  q->cqe_cnt = pow2_at_least((uint64_t)cqe + 1);
  q->budget = (uint32_t)cqe;
  int rc = alloc_mapped(c, (size_t)q->cqe_cnt * SWCX_CQE, (void **)&q->ring);
  if (!rc) rc = alloc_mapped(c, 64, (void **)&q->dbrec);
  if (!rc) rc = alloc_mapped(c, 4096, &q->uar);
  if (rc) {
    MORI_WARN("%s", mori_last_error());
    free_cq(q);
    errno = ENOMEM;
    return NULL;
  }
  /* Every CQE reads as not yet written in the first pass: the opcode
   * invalid (as libmlx5 initialises a CQ) and the owner bit 1 (the first
   * pass's CQEs carry 0), whichever of the two a consumer tests. */
  for (uint32_t i = 0; i < q->cqe_cnt; i++) q->ring[(size_t)i * SWCX_CQE + SWCX_CQE - 1] = (MLX5_CQE_INVALID << 4) | MLX5_CQE_OWNER_MASK;
  /* The inner CQ holds the proxy path's completions and the device ops'
   * (at most `cqe` of each). */
  if (!(q->inner = (c->innerp->verbs->ibv_create_cq)(c->inner, 2 * cqe, user, channel, vector))) {
    int err = errno;
    free_cq(q);
    errno = err;
    return NULL;
  }
  q->cq.context = ctx;
  q->cq.cqe = cqe;
  q->cq.cq_context = user;
  pthread_mutex_lock(&c->lock);
  q->cqn = __atomic_fetch_add(&next_cqn, 1, __ATOMIC_RELAXED);
  struct swcx_cq **cqs = room_for_one(c->cqs, c->n_cqs, &c->cap_cqs, sizeof(*cqs), 8);
  if (cqs) {
    c->cqs = cqs;
    c->cqs[c->n_cqs++] = q;
  }
  pthread_mutex_unlock(&c->lock);
  if (cqs) return &q->cq;
  (c->innerp->verbs->ibv_destroy_cq)(q->inner);
  free_cq(q);
  errno = ENOMEM;
  return NULL;
}

static int destroy_cq(struct ibv_cq *cq) {
  struct swcx_cq *q = (struct swcx_cq *)cq;
  struct swcx_context *c = q->c;
  pthread_mutex_lock(&c->lock);
  SWCX_DROP_ONE(c->cqs, c->n_cqs, q);
  pthread_mutex_unlock(&c->lock);
  int rc = (c->innerp->verbs->ibv_destroy_cq)(q->inner);
  free_cq(q);
  return rc;
}

/* ---- queue pairs ---- */

static void free_qp(struct swcx_qp *q) {
  if (q->bounce_mr) (q->c->innerp->verbs->ibv_dereg_mr)(q->bounce_mr);
  free(q->bounce);
  free_queue(q->c, q->sq);
  free_queue(q->c, q->dbrec);
  free_mapped(q->shadow);
  free_mapped(q->bf);
  free_mapped(q->rq);
  free(q->ops);
  free(q->host_wr_id);
  free(q->host_signaled);
  free(q->host_free);
  free(q);
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr) {
  struct swcx_context *c = context_of(pd->context);
  if (attr->qp_type != IBV_QPT_RC || !attr->send_cq || !attr->recv_cq) {
    errno = EINVAL;
    return NULL;
  }
  struct swcx_qp *q = calloc(1, sizeof(*q));
  if (!q) {
    errno = ENOMEM;
    return NULL;
  }
  q->c = c;
  q->send_cq = (struct swcx_cq *)attr->send_cq;
  q->recv_cq = (struct swcx_cq *)attr->recv_cq;
  /* The ring holds max_send_wr of the largest WQE the QP's caps allow (as
   * libmlx5 sizes it), in 64-byte basic blocks, a power of two. */
  uint32_t max_sge = attr->cap.max_send_sge ? attr->cap.max_send_sge : 1;
  if (max_sge > SWCX_MAX_SGE) {
    free(q);
    errno = EINVAL;
    return NULL;
  }
  uint32_t inline_room = (4 + attr->cap.max_inline_data + 15) & ~15u;
  uint32_t data_room = 16 * max_sge > inline_room ? 16 * max_sge : inline_room;
  uint32_t largest = 32 + (data_room > 32 ? data_room : 32); /* control + remote address + data, or an atomic's 64 */
  uint64_t wrs = attr->cap.max_send_wr ? attr->cap.max_send_wr : 1;
  q->wqe_cnt = pow2_at_least(wrs * swcx_wqe_bbs((largest + 15) / 16));
  if (q->wqe_cnt > 0x8000) { /* the 16-bit producer counter must tell a full ring from an empty one */
    MORI_WARN("software ConnectX: %llu send WQEs of up to %u bytes do not fit a 32768-block ring", (unsigned long long)wrs, largest);
    free(q);
    errno = EINVAL;
    return NULL;
  }
  q->inline_max = attr->cap.max_inline_data > SWCX_INLINE_MIN ? (attr->cap.max_inline_data + 63) & ~63u : SWCX_INLINE_MIN;
  q->rq_cnt = pow2_at_least(attr->cap.max_recv_wr ? attr->cap.max_recv_wr : 1);
  int rc = alloc_queue(c, (size_t)q->wqe_cnt * SWCX_BB, (void **)&q->sq);
  if (!rc) rc = alloc_queue(c, 64, (void **)&q->dbrec);
  /* Pinned: a copy engine writes it (ROCm's refuses memory its runtime
   * does not know). */
  if (!rc && c->device_queues) rc = alloc_mapped(c, (size_t)q->wqe_cnt * SWCX_BB, (void **)&q->shadow);
  q->sq_read = c->device_queues ? q->shadow : q->sq;
  if (!rc) rc = alloc_mapped(c, 2 * SWCX_BF_SIZE, &q->bf);
  if (!rc) rc = alloc_mapped(c, (size_t)q->rq_cnt * 16, &q->rq);
  q->ops = calloc(q->wqe_cnt, sizeof(*q->ops));
  q->bounce = calloc(q->wqe_cnt, q->inline_max);
  if (!rc && (!q->ops || !q->bounce)) rc = mori_error_set(MORI_ENOMEM, "software ConnectX: QP bookkeeping");
  if (rc) {
    MORI_WARN("%s", mori_last_error());
    free_qp(q);
    errno = ENOMEM;
    return NULL;
  }
  struct swcx_pd *p = (struct swcx_pd *)pd;
  q->bounce_mr = (c->innerp->verbs->ibv_reg_mr)(p->inner, q->bounce, (size_t)q->wqe_cnt * q->inline_max, IBV_ACCESS_LOCAL_WRITE);
  if (!q->bounce_mr) {
    int err = errno;
    MORI_WARN("software ConnectX: registering a QP's inline bounce buffer with %s failed", c->innerp->name);
    free_qp(q);
    errno = err ? err : ENOMEM;
    return NULL;
  }
  /* The inner QP takes the proxy path's requests and the device ops (at
   * most one per basic block of the ring). */
  struct ibv_qp_init_attr inner = *attr;
  inner.send_cq = q->send_cq->inner;
  inner.recv_cq = q->recv_cq->inner;
  inner.cap.max_send_wr = attr->cap.max_send_wr + q->wqe_cnt;
  if (!(q->inner = (c->innerp->verbs->ibv_create_qp)(p->inner, &inner))) {
    int err = errno;
    free_qp(q);
    errno = err;
    return NULL;
  }
  attr->cap = inner.cap;
  attr->cap.max_send_wr -= q->wqe_cnt;
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->qp.srq = NULL;
  q->qp.qp_num = q->inner->qp_num;
  q->qp.qp_type = IBV_QPT_RC;
  q->qp.state = IBV_QPS_RESET;
  q->qp.handle = q->inner->handle;
  q->state = IBV_QPS_RESET;
  pthread_mutex_lock(&c->lock);
  struct swcx_qp **qps = room_for_one(c->qps, c->n_qps, &c->cap_qps, sizeof(*qps), 16);
  if (qps) {
    c->qps = qps;
    c->qps[c->n_qps++] = q;
  }
  pthread_mutex_unlock(&c->lock);
  if (qps) return &q->qp;
  (c->innerp->verbs->ibv_destroy_qp)(q->inner);
  free_qp(q);
  errno = ENOMEM;
  return NULL;
}

static int destroy_qp(struct ibv_qp *qp) {
  struct swcx_qp *q = (struct swcx_qp *)qp;
  struct swcx_context *c = q->c;
  pthread_mutex_lock(&c->lock);
  SWCX_DROP_ONE(c->qps, c->n_qps, q);
  /* Its device ops on the inner CQ will never be sorted now. */
  for (uint32_t s = q->head; s != q->tail; s++) {
    struct swcx_op *op = &q->ops[s % q->wqe_cnt];
    if (op->counted) q->send_cq->device_in_flight--;
  }
  pthread_mutex_unlock(&c->lock);
  int rc = (c->innerp->verbs->ibv_destroy_qp)(q->inner);
  free_qp(q);
  return rc;
}

static int modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
  struct swcx_qp *q = (struct swcx_qp *)qp;
  int rc = (q->c->innerp->verbs->ibv_modify_qp)(q->inner, attr, mask);
  if (rc || !(mask & IBV_QP_STATE)) return rc;
  pthread_mutex_lock(&q->c->lock);
  q->state = attr->qp_state;
  q->qp.state = attr->qp_state;
  if (attr->qp_state == IBV_QPS_ERR) q->error = true; /* what is in the ring, and what comes, flushes */
  pthread_mutex_unlock(&q->c->lock);
  return 0;
}

/* ---- the proxy path's posting and polling ---- */

static int take_host_slot(struct swcx_qp *q, uint32_t *slot) {
  if (!q->host_n_free) {
    uint32_t cap = q->host_cap ? 2 * q->host_cap : 256;
    uint64_t *ids = realloc(q->host_wr_id, cap * sizeof(*ids));
    if (!ids) return ENOMEM;
    q->host_wr_id = ids;
    bool *sig = realloc(q->host_signaled, cap * sizeof(*sig));
    if (!sig) return ENOMEM;
    q->host_signaled = sig;
    uint32_t *fr = realloc(q->host_free, cap * sizeof(*fr));
    if (!fr) return ENOMEM;
    q->host_free = fr;
    for (uint32_t i = q->host_cap; i < cap; i++) q->host_free[q->host_n_free++] = cap - 1 - (i - q->host_cap);
    q->host_cap = cap;
  }
  *slot = q->host_free[--q->host_n_free];
  return 0;
}

/* Every request goes to the inner QP signaled, with a slot of ours as its
 * wr_id; the caller's id (and whether it asked for a completion) comes
 * back in poll_cq. */
static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  struct swcx_qp *q = (struct swcx_qp *)qp;
  struct swcx_context *c = q->c;
  pthread_mutex_lock(&c->lock);
  int err = 0;
  for (; wr; wr = wr->next) {
    uint32_t slot = 0;
    if ((err = take_host_slot(q, &slot)) != 0) break;
    struct ibv_send_wr one = *wr, *inner_bad = NULL;
    one.next = NULL;
    one.wr_id = slot;
    one.send_flags |= IBV_SEND_SIGNALED;
    q->host_wr_id[slot] = wr->wr_id;
    q->host_signaled[slot] = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
    if ((err = ibv_post_send(q->inner, &one, &inner_bad)) != 0) {
      q->host_free[q->host_n_free++] = slot;
      break;
    }
  }
  pthread_mutex_unlock(&c->lock);
  if (err) *bad = wr;
  return err;
}

static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  struct swcx_cq *q = (struct swcx_cq *)cq;
  pthread_mutex_lock(&q->c->lock);
  int rc = swcx_drain_inner(q->c, q);
  int got = 0;
  while (rc >= 0 && got < n && q->host_n) {
    wc[got++] = q->host[q->host_head];
    q->host_head = (q->host_head + 1) % q->host_cap;
    q->host_n--;
  }
  pthread_mutex_unlock(&q->c->lock);
  return rc < 0 ? rc : got;
}

/* ---- mlx5dv_init_obj ---- */

struct swcx_qp *swcx_find_qp(struct ibv_qp *qp) {
  struct swcx_qp *found = NULL;
  pthread_mutex_lock(&registry_lock);
  for (struct swcx_context *c = contexts; c && !found; c = c->next) {
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n_qps && !found; i++)
      if (&c->qps[i]->qp == qp) found = c->qps[i];
    pthread_mutex_unlock(&c->lock);
  }
  pthread_mutex_unlock(&registry_lock);
  return found;
}

struct swcx_cq *swcx_find_cq(struct ibv_cq *cq) {
  struct swcx_cq *found = NULL;
  pthread_mutex_lock(&registry_lock);
  for (struct swcx_context *c = contexts; c && !found; c = c->next) {
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n_cqs && !found; i++)
      if (&c->cqs[i]->cq == cq) found = c->cqs[i];
    pthread_mutex_unlock(&c->lock);
  }
  pthread_mutex_unlock(&registry_lock);
  return found;
}

static int init_obj(struct mlx5dv_obj *obj, uint64_t obj_type) {
  if (obj_type & ~(uint64_t)(MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ)) return EOPNOTSUPP;
  if (obj_type & MLX5DV_OBJ_QP) {
    struct swcx_qp *q = swcx_find_qp(obj->qp.in);
    if (!q || !obj->qp.out) return EINVAL;
    struct mlx5dv_qp *out = obj->qp.out;
    out->dbrec = q->dbrec;
    out->sq.buf = q->sq;
    out->sq.wqe_cnt = q->wqe_cnt;
    out->sq.stride = SWCX_BB;
    out->rq.buf = q->rq;
    out->rq.wqe_cnt = q->rq_cnt;
    out->rq.stride = 16;
    out->bf.reg = q->bf;
    out->bf.size = SWCX_BF_SIZE;
    out->comp_mask = 0; /* none of the optional fields */
  }
  if (obj_type & MLX5DV_OBJ_CQ) {
    struct swcx_cq *q = swcx_find_cq(obj->cq.in);
    if (!q || !obj->cq.out) return EINVAL;
    struct mlx5dv_cq *out = obj->cq.out;
    out->buf = q->ring;
    out->dbrec = q->dbrec;
    out->cqe_cnt = q->cqe_cnt;
    out->cqe_size = SWCX_CQE;
    out->cq_uar = q->uar;
    out->cqn = q->cqn;
    out->comp_mask = 0;
  }
  return 0;
}

/* ---- the provider ---- */

static const struct mori_verbs table = {
    .ibv_get_device_list = get_device_list,
    .ibv_free_device_list = free_device_list,
    .ibv_get_device_name = get_device_name,
    .ibv_open_device = open_device,
    .ibv_close_device = close_device,
    .ibv_alloc_pd = alloc_pd,
    .ibv_dealloc_pd = dealloc_pd,
    .ibv_reg_mr = reg_mr,
    .ibv_dereg_mr = dereg_mr,
    .ibv_create_cq = create_cq,
    .ibv_destroy_cq = destroy_cq,
    .ibv_create_qp = create_qp,
    .ibv_destroy_qp = destroy_qp,
    .ibv_modify_qp = modify_qp,
    .ibv_query_port = query_port,
    .ibv_query_gid = query_gid,
    .ibv_wc_status_str = wc_status_str,
};

static char provider_name[96] = "software ConnectX";

static const mori_rdma_provider_t provider = {
    .size = sizeof(mori_rdma_provider_t),
    .name = provider_name,
    .verbs = &table,
    .use_device = use_device,
    .mlx5dv_init_obj = init_obj,
    .ibv_reg_dmabuf_mr = reg_dmabuf_mr,
};

static int wrap(const mori_rdma_provider_t *inner, const mori_rdma_provider_t **out) {
  if (!inner) {
    const mori_rdma_provider_t *current = NULL;
    int rc = mori_rdma_provider(&current);
    if (rc) return rc;
    /* Already installed: wrap what it wraps. */
    inner = current == &provider ? inner_provider : current;
    if (!inner) return mori_error_set(MORI_EINVAL, "software ConnectX: no inner provider");
  }
  if (inner == &provider) return mori_error_set(MORI_EINVAL, "software ConnectX: it cannot wrap itself");
  snprintf(provider_name, sizeof(provider_name), "software ConnectX over %s", inner->name ? inner->name : "?");
  inner_provider = inner;
  *out = &provider;
  return 0;
}

const mori_rdma_provider_t *mori_swcx_provider(const mori_rdma_provider_t *inner) {
  const mori_rdma_provider_t *p = NULL;
  return wrap(inner, &p) ? NULL : p;
}

int mori_swcx_install(const mori_rdma_provider_t *inner) {
  const mori_rdma_provider_t *p = NULL;
  int rc = wrap(inner, &p);
  return rc ? rc : mori_rdma_use_provider(p);
}
