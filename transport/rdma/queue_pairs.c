/* The rdma transport's queue pairs: open the device (MORI_RDMA_DEVICE or the
 * first), a protection domain, one completion queue and one RC queue pair
 * per peer, moved to INIT; then, with the peer's endpoint, INIT -> RTR ->
 * RTS. */
#include <errno.h>
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

/* A whole number >= 0 from the environment, else `fallback` (with a
 * warning when the variable is set to something else). */
int rdma_env_int(const char *name, int fallback) {
  const char *s = getenv(name);
  if (!s || !*s) return fallback;
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < 0 || v > INT32_MAX) {
    MORI_WARN("rdma: %s=\"%s\" is not a whole number from 0 to %d; using %d", name, s, INT32_MAX, fallback);
    return fallback;
  }
  return (int)v;
}

/* Opens the device, PD, CQ and one QP per peer in INIT; fills `me`. */
int rdma_open_local(struct rdma_state *s, struct rdma_endpoint *me, uint32_t *qpn) {
  const struct mori_verbs *v = s->v;
  int n = 0;
  struct ibv_device **list = (v->ibv_get_device_list)(&n);
  if (!list || n == 0) {
    if (list) (v->ibv_free_device_list)(list);
    return mori_error_set(MORI_ENODEV, "rdma: no RDMA device");
  }
  const char *want = getenv("MORI_RDMA_DEVICE");
  struct ibv_device *dev = NULL;
  for (int i = 0; i < n && !dev; i++)
    if (!want || !strcmp(want, (v->ibv_get_device_name)(list[i]))) dev = list[i];
  if (!dev) {
    (v->ibv_free_device_list)(list);
    return mori_error_set(MORI_ENODEV, "rdma: no RDMA device named %s", want);
  }
  snprintf(s->device, sizeof(s->device), "%s", (v->ibv_get_device_name)(dev));
  s->ctx = (v->ibv_open_device)(dev);
  (v->ibv_free_device_list)(list);
  if (!s->ctx) return rdma_verbs_error(errno, "ibv_open_device");
  if (!(s->pd = (v->ibv_alloc_pd)(s->ctx))) return rdma_verbs_error(errno, "ibv_alloc_pd");
  if (!(s->cq = (v->ibv_create_cq)(s->ctx, CQ_DEPTH, NULL, NULL, 0))) return rdma_verbs_error(errno, "ibv_create_cq");
  struct ibv_port_attr port;
  memset(&port, 0, sizeof(port));
  s->port = rdma_env_int("MORI_RDMA_PORT", 1);
  /* The exported symbol takes the compat struct, a prefix of ibv_port_attr. */
  int err = (v->ibv_query_port)(s->ctx, (uint8_t)s->port, (struct _compat_ibv_port_attr *)&port);
  if (err) return rdma_verbs_error(err, "ibv_query_port");
  if (port.state != IBV_PORT_ACTIVE)
    return mori_error_set(MORI_ENODEV, "rdma: port %d of %s is not active", s->port, s->device);
  /* Transfers longer than the port's largest message go in pieces (an SGE
   * length is 32 bits: a longer one cast down would send a truncated
   * message without a word). MORI_RDMA_MAX_MSG may lower it. */
  s->max_msg = port.max_msg_sz ? port.max_msg_sz : (1u << 30);
  int cap = rdma_env_int("MORI_RDMA_MAX_MSG", 0);
  if (cap > 0 && (uint64_t)cap < s->max_msg) s->max_msg = (uint64_t)cap;
  union ibv_gid gid;
  s->gid_index = rdma_env_int("MORI_RDMA_GID_INDEX", -1);
  if (s->gid_index < 0) s->gid_index = (port.gid_tbl_len > 1 && (v->ibv_query_gid)(s->ctx, (uint8_t)s->port, 1, &gid) == 0) ? 1 : 0;
  if ((err = (v->ibv_query_gid)(s->ctx, (uint8_t)s->port, s->gid_index, &gid)) != 0) return rdma_verbs_error(err, "ibv_query_gid");
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
    if (p == s->rank) continue;
    struct ibv_qp_init_attr init = {
        .send_cq = s->cq,
        .recv_cq = s->cq,
        .cap = {.max_send_wr = SQ_DEPTH, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 64},
        .qp_type = IBV_QPT_RC,
    };
    if (!(s->qp[p] = (v->ibv_create_qp)(s->pd, &init))) return rdma_verbs_error(errno, "ibv_create_qp");
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = (uint8_t)s->port,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
    err = (v->ibv_modify_qp)(s->qp[p], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (err) return rdma_verbs_error(err, "ibv_modify_qp to INIT");
    qpn[p] = s->qp[p]->qp_num;
    s->qpn[p] = s->qp[p]->qp_num;
  }
  return 0;
}

/* INIT -> RTR -> RTS towards `peer`, whose QP for this rank is `qpn`. */
int rdma_connect_qp(struct rdma_state *s, int peer, const struct rdma_endpoint *mine, const struct rdma_endpoint *theirs,
                      uint32_t qpn) {
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
  a.ah_attr.dlid = (uint16_t)theirs->lid;
  a.ah_attr.port_num = (uint8_t)s->port;
  int err = (s->v->ibv_modify_qp)(s->qp[peer], &a,
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
  err = (s->v->ibv_modify_qp)(s->qp[peer], &a,
                              IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                  IBV_QP_MAX_QP_RD_ATOMIC);
  if (err) return rdma_verbs_error(err, "ibv_modify_qp to RTS");
  return 0;
}

int rdma_fail_qp(struct rdma_state *s, int peer) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_ERR;
  s->qp_failed[peer] = true;
  int err = (s->v->ibv_modify_qp)(s->qp[peer], &a, IBV_QP_STATE);
  return err ? rdma_verbs_error(err, "ibv_modify_qp to ERR") : 0;
}

void rdma_close_local(struct rdma_state *s) {
  if (!s->v) return;
  for (int p = 0; s->qp && p < s->size; p++)
    if (s->qp[p]) (s->v->ibv_destroy_qp)(s->qp[p]);
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
  memset(s->qp, 0, sizeof(*s->qp) * (size_t)s->size);
  s->scratch_mr = NULL;
  s->cq = NULL;
  s->pd = NULL;
  s->ctx = NULL;
}
