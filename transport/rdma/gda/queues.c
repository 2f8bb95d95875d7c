// SPDX-License-Identifier: MIT
/* The comm's GPU-posting queue pairs: MORI_NUM_QP_PER_PE RC QPs per peer
 * that has the transport's QPs, each with a CQ of its own (a kernel polls
 * one QP's completions without sorting out another's), as deep as its send
 * queue so it cannot overflow. The provider's mlx5dv_init_obj describes
 * their buffers; the descriptors kernels use (mori_gda_qp_t) hold the
 * device's addresses of them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/platform/platform.h"
#include "transport/rdma/gda/gda_host.h"

static bool power_of_two(uint32_t x) { return x && !(x & (x - 1)); }

/* What kernels need of one QP, checked against what the device layer
 * writes (64-byte WQEs and CQEs, a doorbell register, rings of 2^k). */
static int describe(struct rdma_gda *g, struct ibv_qp *qp, struct ibv_cq *cq, struct mlx5dv_qp *dq, struct mlx5dv_cq *dc,
                    char *why, size_t why_len) {
  struct mlx5dv_obj obj;
  memset(&obj, 0, sizeof(obj));
  memset(dq, 0, sizeof(*dq));
  memset(dc, 0, sizeof(*dc));
  obj.qp.in = qp;
  obj.qp.out = dq;
  obj.cq.in = cq;
  obj.cq.out = dc;
  int err = g->init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ);
  if (err) {
    snprintf(why, why_len, "%s mlx5dv_init_obj failed: %s", g->init_obj_from, strerror(err > 0 ? err : EIO));
    return MORI_ENOTSUP;
  }
  const char *bad = NULL;
  if (!dq->sq.buf || !dq->dbrec || !dc->buf || !dc->dbrec) bad = "a queue or doorbell record is missing";
  else if (!dq->bf.reg) bad = "no doorbell (BlueFlame) register";
  else if (dq->sq.stride != MORI_GDA_WQE_BYTES) bad = "send-queue stride is not 64 bytes";
  else if (!power_of_two(dq->sq.wqe_cnt) || dq->sq.wqe_cnt > MORI_GDA_MAX_WQE_CNT) bad = "send queue is not 2^k <= 32768 deep";
  else if (dc->cqe_size != MORI_GDA_CQE_BYTES) bad = "CQEs are not 64 bytes";
  else if (!power_of_two(dc->cqe_cnt) || dc->cqe_cnt < dq->sq.wqe_cnt) bad = "CQ is not 2^k and as deep as the send queue";
  if (bad) {
    snprintf(why, why_len, "%s mlx5dv_init_obj: %s", g->init_obj_from, bad);
    return MORI_ENOTSUP;
  }
  return 0;
}

int rdma_gda_create_queues(struct rdma_state *s, struct rdma_gda *g, char *why, size_t why_len) {
  const struct mori_verbs *v = s->v;
  size_t n = (size_t)s->size * (size_t)s->num_qp;
  g->qp = calloc(n, sizeof(*g->qp));
  g->cq = calloc(n, sizeof(*g->cq));
  g->desc = calloc(n, sizeof(*g->desc));
  g->sink = calloc(n, sizeof(*g->sink));
  if (!g->qp || !g->cq || !g->desc || !g->sink) return mori_error_set(MORI_ENOMEM, "rdma gda: queue tables");
  if (!(g->sink_mr = (v->ibv_reg_mr)(s->pd, g->sink, n * sizeof(*g->sink), IBV_ACCESS_LOCAL_WRITE))) {
    snprintf(why, why_len, "registering the atomics' sink: %s", strerror(errno));
    return MORI_ENOTSUP;
  }
  struct mlx5dv_qp *dq = calloc(n, sizeof(*dq));
  struct mlx5dv_cq *dc = calloc(n, sizeof(*dc));
  if (!dq || !dc) {
    free(dq);
    free(dc);
    return mori_error_set(MORI_ENOMEM, "rdma gda: queue descriptions");
  }
  int rc = 0;
  for (int p = 0; p < s->size && !rc; p++) {
    if (!s->connect[p]) continue;
    for (int i = 0; i < s->num_qp && !rc; i++) {
      size_t at = (size_t)p * (size_t)s->num_qp + (size_t)i;
      if (!(g->cq[at] = (v->ibv_create_cq)(s->ctx, (int)g->depth, NULL, NULL, 0))) {
        snprintf(why, why_len, "ibv_create_cq of %u entries: %s", g->depth, strerror(errno));
        rc = MORI_ENOTSUP;
        break;
      }
      struct ibv_qp_init_attr init = {
          .send_cq = g->cq[at],
          .recv_cq = g->cq[at],
          .cap = {.max_send_wr = g->depth, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1,
                  .max_inline_data = MORI_GDA_MAX_INLINE},
          .qp_type = IBV_QPT_RC,
          .sq_sig_all = 0, /* selective signalling: the device asks per WQE */
      };
      if (!(g->qp[at] = (v->ibv_create_qp)(s->pd, &init))) {
        snprintf(why, why_len, "ibv_create_qp (%u work requests): %s", g->depth, strerror(errno));
        rc = MORI_ENOTSUP;
        break;
      }
      struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = (uint8_t)s->port,
                              .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
      int err = (v->ibv_modify_qp)(g->qp[at], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      if (err) {
        snprintf(why, why_len, "ibv_modify_qp to INIT: %s", strerror(err));
        rc = MORI_ENOTSUP;
        break;
      }
      if ((rc = describe(g, g->qp[at], g->cq[at], &dq[at], &dc[at], why, why_len)) != 0) break;
      rc = rdma_gda_map_add(&g->map, dq[at].sq.buf, (size_t)dq[at].sq.wqe_cnt * dq[at].sq.stride, false);
      if (!rc) rc = rdma_gda_map_add(&g->map, dq[at].dbrec, 2 * sizeof(uint32_t), false);
      if (!rc) rc = rdma_gda_map_add(&g->map, dc[at].buf, (size_t)dc[at].cqe_cnt * dc[at].cqe_size, false);
      if (!rc) rc = rdma_gda_map_add(&g->map, dc[at].dbrec, sizeof(uint32_t), false);
      if (!rc) rc = rdma_gda_map_add(&g->map, dq[at].bf.reg, sizeof(uint64_t), true);
      if (rc) snprintf(why, why_len, "%s", mori_last_error());
    }
  }
  if (!rc && (rc = rdma_gda_map_commit(&g->map)) != 0) snprintf(why, why_len, "%s", mori_last_error());
  for (int p = 0; p < s->size && !rc; p++) {
    if (!s->connect[p]) continue;
    for (int i = 0; i < s->num_qp; i++) {
      size_t at = (size_t)p * (size_t)s->num_qp + (size_t)i;
      mori_gda_qp_t *d = &g->desc[at];
      d->sq_buf = rdma_gda_map_dev(&g->map, dq[at].sq.buf);
      d->sq_dbrec = rdma_gda_map_dev(&g->map, &dq[at].dbrec[MLX5_SND_DBR]);
      d->bf_reg = rdma_gda_map_dev(&g->map, dq[at].bf.reg);
      d->wqe_cnt = dq[at].sq.wqe_cnt;
      d->qpn = g->qp[at]->qp_num;
      d->cq_buf = rdma_gda_map_dev(&g->map, dc[at].buf);
      d->cq_dbrec = rdma_gda_map_dev(&g->map, dc[at].dbrec);
      d->cqe_cnt = dc[at].cqe_cnt;
      d->family = MORI_GDA_FAMILY_MLX5;
      d->sq_in_device = rdma_gda_map_in_device(&g->map, dq[at].sq.buf) && rdma_gda_map_in_device(&g->map, dq[at].dbrec);
      if (d->sq_in_device) g->queues_in_device++;
      d->sink_addr = (uint64_t)(uintptr_t)&g->sink[at];
      d->sink_lkey = g->sink_mr->lkey;
      d->peer = p;
    }
  }
  free(dq);
  free(dc);
  return rc;
}

int rdma_gda_connect_queues(struct rdma_state *s, struct rdma_gda *g, const struct rdma_endpoint *me, const char *all,
                            size_t entry, const uint32_t *their_qpns, size_t their_stride) {
  for (int p = 0; p < s->size; p++) {
    if (!s->connect[p]) continue;
    const struct rdma_endpoint *theirs = (const struct rdma_endpoint *)(all + (size_t)p * entry);
    const uint32_t *qpn = (const uint32_t *)((const char *)their_qpns + (size_t)p * their_stride) + (size_t)s->rank * (size_t)s->num_qp;
    for (int i = 0; i < s->num_qp; i++) {
      int rc = rdma_connect_qp(s, g->qp[(size_t)p * (size_t)s->num_qp + (size_t)i], me, theirs, qpn[i]);
      if (rc) return mori_error_context(rc, "rdma gda: GPU-posting queue pair %d of %d to rank %d", i, s->num_qp, p);
    }
  }
  size_t n = (size_t)s->size * (size_t)s->num_qp;
  int rc = mori_platform_device_alloc(g->map.device, n * sizeof(*g->desc), (void **)&g->desc_dev);
  if (!rc) rc = mori_platform_upload(g->map.device, g->desc_dev, g->desc, n * sizeof(*g->desc));
  return rc;
}

/* The device is idle (the comm's windows are gone): QPs to error, so the
 * NIC stops touching the queues and every buffer behind them, then
 * destroyed, before the mappings and the memory go. */
void rdma_gda_destroy_queues(struct rdma_state *s, struct rdma_gda *g) {
  size_t n = (size_t)s->size * (size_t)s->num_qp;
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_ERR;
  for (size_t i = 0; g->qp && i < n; i++)
    if (g->qp[i]) (s->v->ibv_modify_qp)(g->qp[i], &a, IBV_QP_STATE);
  rdma_gda_map_release(&g->map);
  for (size_t i = 0; g->qp && i < n; i++)
    if (g->qp[i]) (s->v->ibv_destroy_qp)(g->qp[i]);
  for (size_t i = 0; g->cq && i < n; i++)
    if (g->cq[i]) (s->v->ibv_destroy_cq)(g->cq[i]);
  if (g->sink_mr) (s->v->ibv_dereg_mr)(g->sink_mr);
  if (g->desc_dev) mori_platform_device_free(g->map.device, g->desc_dev);
  free(g->qp);
  free(g->cq);
  free(g->desc);
  free(g->sink);
  g->qp = NULL;
  g->cq = NULL;
  g->desc = NULL;
  g->sink = NULL;
  g->sink_mr = NULL;
  g->desc_dev = NULL;
}
