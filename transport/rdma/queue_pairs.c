// SPDX-License-Identifier: MIT
/* The rdma transport's queue pairs: open the device (chosen by
 * MORI_RDMA_DEVICES and the local rank), a protection domain, one
 * completion queue and MORI_NUM_QP_PER_PE RC queue pairs per connected peer,
 * moved to INIT; then, with the peer's endpoint, INIT -> RTR -> RTS with the
 * GID index, service level and traffic class of the environment. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "transport/rdma/internal.h"

int rdma_verbs_error(int err, const char *what) {
  return mori_error_set(err > 0 ? -err : MORI_EIO, "rdma: %s failed: %s", what, strerror(err > 0 ? err : errno));
}

/* The device this rank opens: the system's list filtered by
 * MORI_RDMA_DEVICES (rdma_env.c), one per local rank in turn. */
static int open_device(struct rdma_state *s, int local_rank, int gpu) {
  const struct mori_verbs *v = s->v;
  int n = 0;
  struct ibv_device **list = (v->ibv_get_device_list)(&n);
  if (!list || n == 0) {
    if (list) (v->ibv_free_device_list)(list);
    return mori_error_set(MORI_ENODEV, "rdma: no RDMA device");
  }
  const char *names[RDMA_MAX_DEVICES];
  if (n > RDMA_MAX_DEVICES) n = RDMA_MAX_DEVICES;
  for (int i = 0; i < n; i++) names[i] = (v->ibv_get_device_name)(list[i]);
  int chosen = 0;
  int rc = rdma_pick_device(&s->cfg, names, n, local_rank, &chosen);
  if (!rc) {
    snprintf(s->device, sizeof(s->device), "%s", names[chosen]);
    /* A provider that moves data with the GPU's queues puts them on the comm's. */
    const mori_rdma_provider_t *p = s->provider;
    if (p->size >= offsetof(mori_rdma_provider_t, use_device) + sizeof(p->use_device) && p->use_device) p->use_device(gpu);
    if (!(s->ctx = (v->ibv_open_device)(list[chosen]))) rc = rdma_verbs_error(errno, "ibv_open_device");
  }
  (v->ibv_free_device_list)(list);
  return rc;
}

static int create_qp(struct rdma_state *s, size_t at) {
  const struct mori_verbs *v = s->v;
  struct ibv_qp_init_attr init = {
      .send_cq = s->cq,
      .recv_cq = s->cq,
      .cap = {.max_send_wr = SQ_DEPTH, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 64},
      .qp_type = IBV_QPT_RC,
  };
  if (!(s->qp[at] = (v->ibv_create_qp)(s->pd, &init))) return rdma_verbs_error(errno, "ibv_create_qp");
  s->qps_created++;
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = (uint8_t)s->port,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
  int err = (v->ibv_modify_qp)(s->qp[at], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (err) return rdma_verbs_error(err, "ibv_modify_qp to INIT");
  s->qpn[at] = s->qp[at]->qp_num;
  return 0;
}

int rdma_open_local(struct rdma_state *s, int local_rank, int gpu, struct rdma_endpoint *me, uint32_t *qpn) {
  const struct mori_verbs *v = s->v;
  int err = open_device(s, local_rank, gpu);
  if (err) return err;
  if (!(s->pd = (v->ibv_alloc_pd)(s->ctx))) return rdma_verbs_error(errno, "ibv_alloc_pd");
  if (!(s->cq = (v->ibv_create_cq)(s->ctx, CQ_DEPTH, NULL, NULL, 0))) return rdma_verbs_error(errno, "ibv_create_cq");
  struct ibv_port_attr port;
  memset(&port, 0, sizeof(port));
  s->port = s->cfg.port;
  /* The exported symbol takes the compat struct, a prefix of ibv_port_attr. */
  err = (v->ibv_query_port)(s->ctx, (uint8_t)s->port, (struct _compat_ibv_port_attr *)&port);
  if (err) return rdma_verbs_error(err, "ibv_query_port");
  if (port.state != IBV_PORT_ACTIVE)
    return mori_error_set(MORI_ENODEV, "rdma: port %d of %s is not active", s->port, s->device);
  /* Transfers longer than the port's largest message go in pieces (an SGE
   * length is 32 bits: a longer one cast down would send a truncated
   * message without a word). MORI_RDMA_MAX_MSG may lower it. */
  s->max_msg = port.max_msg_sz ? port.max_msg_sz : (1u << 30);
  if (s->cfg.max_msg > 0 && (uint64_t)s->cfg.max_msg < s->max_msg) s->max_msg = (uint64_t)s->cfg.max_msg;
  union ibv_gid gid;
  s->gid_index = s->cfg.gid_index;
  if (s->gid_index < 0) s->gid_index = (port.gid_tbl_len > 1 && (v->ibv_query_gid)(s->ctx, (uint8_t)s->port, 1, &gid) == 0) ? 1 : 0;
  if ((err = (v->ibv_query_gid)(s->ctx, (uint8_t)s->port, s->gid_index, &gid)) != 0)
    return mori_error_set(err > 0 ? -err : MORI_EIO, "rdma: GID index %d of %s port %d cannot be read (MORI_IB_GID_INDEX): %s",
                          s->gid_index, s->device, s->port, strerror(err > 0 ? err : EIO));
  s->scratch = calloc(1, 64);
  if (!s->scratch) return mori_error_set(MORI_ENOMEM, "rdma: scratch");
  s->scratch_mr = (v->ibv_reg_mr)(s->pd, s->scratch, 64, IBV_ACCESS_LOCAL_WRITE);
  if (!s->scratch_mr) return rdma_verbs_error(errno, "ibv_reg_mr (scratch)");
  uint32_t psn = 0;
  if (getrandom(&psn, sizeof(psn), 0) != sizeof(psn)) psn = (uint32_t)time(NULL);
  me->has_device = 1;
  me->mtu = port.active_mtu;
  me->lid = port.lid;
  me->psn = psn & 0xffffff;
  memcpy(me->gid, gid.raw, 16);
  for (int p = 0; p < s->size; p++) {
    if (!s->connect[p]) continue;
    for (int i = 0; i < s->num_qp; i++) {
      size_t at = (size_t)p * (size_t)s->num_qp + (size_t)i;
      if ((err = create_qp(s, at)) != 0) return mori_error_context(err, "rdma: queue pair %d of %d to rank %d", i, s->num_qp, p);
      qpn[at] = s->qpn[at];
    }
  }
  return 0;
}

/* INIT -> RTR -> RTS of one QP, whose remote end is `qpn`. */
int rdma_connect_qp(struct rdma_state *s, struct ibv_qp *qp, const struct rdma_endpoint *mine,
                      const struct rdma_endpoint *theirs, uint32_t qpn) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = (enum ibv_mtu)(mine->mtu < theirs->mtu ? mine->mtu : theirs->mtu);
  a.dest_qp_num = qpn;
  a.rq_psn = theirs->psn;
  a.max_dest_rd_atomic = MAX_RD_ATOMIC;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  memcpy(a.ah_attr.grh.dgid.raw, theirs->gid, 16);
  a.ah_attr.grh.sgid_index = (uint8_t)s->gid_index;
  a.ah_attr.grh.hop_limit = 64;
  /* MORI_RDMA_TC / MORI_RDMA_SL: the fabric's QoS class for this traffic
   * (RoCE: the DSCP/ECN byte of the IP header; IB: the service level). */
  a.ah_attr.grh.traffic_class = (uint8_t)s->cfg.tc;
  a.ah_attr.sl = (uint8_t)s->cfg.sl;
  a.ah_attr.dlid = (uint16_t)theirs->lid;
  a.ah_attr.port_num = (uint8_t)s->port;
  int err = (s->v->ibv_modify_qp)(qp, &a,
                                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (err) return rdma_verbs_error(err, "ibv_modify_qp to RTR");
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = mine->psn;
  a.max_rd_atomic = MAX_RD_ATOMIC;
  err = (s->v->ibv_modify_qp)(qp, &a,
                              IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                  IBV_QP_MAX_QP_RD_ATOMIC);
  if (err) return rdma_verbs_error(err, "ibv_modify_qp to RTS");
  return 0;
}

int rdma_connect_peer(struct rdma_state *s, int peer, const struct rdma_endpoint *mine, const struct rdma_endpoint *theirs,
                      const uint32_t *theirs_qpn) {
  for (int i = 0; i < s->num_qp; i++) {
    int rc = rdma_connect_qp(s, s->qp[(size_t)peer * (size_t)s->num_qp + (size_t)i], mine, theirs, theirs_qpn[i]);
    if (rc) return mori_error_context(rc, "rdma: queue pair %d of %d to rank %d", i, s->num_qp, peer);
  }
  return 0;
}

int rdma_fail_qp(struct rdma_state *s, int peer) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_ERR;
  s->qp_failed[peer] = true;
  int rc = 0;
  /* All of the peer's QPs: a fenced op waits for the others to drain, so
   * one QP left alive would hold work forever. */
  for (int i = 0; i < s->num_qp; i++) {
    struct ibv_qp *qp = s->qp[(size_t)peer * (size_t)s->num_qp + (size_t)i];
    int err = qp ? (s->v->ibv_modify_qp)(qp, &a, IBV_QP_STATE) : 0;
    if (err && !rc) rc = rdma_verbs_error(err, "ibv_modify_qp to ERR");
  }
  return rc;
}

void rdma_close_local(struct rdma_state *s) {
  if (!s->v) return;
  size_t n = (size_t)s->size * (size_t)s->num_qp;
  for (size_t i = 0; s->qp && i < n; i++)
    if (s->qp[i]) (s->v->ibv_destroy_qp)(s->qp[i]);
  /* With the QPs gone nothing completes any more: what was retired with
   * work in flight can go (before the PD, which its MR holds). */
  while (s->retired) {
    struct rdma_segment *w = s->retired;
    s->retired = w->next_retired;
    rdma_segment_free(s, w);
  }
  if (s->scratch_mr) (s->v->ibv_dereg_mr)(s->scratch_mr);
  if (s->cq) (s->v->ibv_destroy_cq)(s->cq);
  if (s->pd) (s->v->ibv_dealloc_pd)(s->pd);
  if (s->ctx) (s->v->ibv_close_device)(s->ctx);
  if (s->qp) memset(s->qp, 0, sizeof(*s->qp) * n);
  s->scratch_mr = NULL;
  s->qps_created = 0;
  s->cq = NULL;
  s->pd = NULL;
  s->ctx = NULL;
}
