// SPDX-License-Identifier: MIT
/* What `mori_info` asks the rdma transport about a comm: the NIC this rank
 * opened, its rail, and for each peer whether queue pairs reach it or why
 * not (the reason a rank has no usable device travels in s->unusable); and
 * how its memory is registered (dma-buf or ibv_reg_mr, register.c). */
#include <pthread.h>
#include <stdio.h>

#include "core/base/error.h"
#include "mori/transport_rdma.h"
#include "transport/rdma/internal.h"

int mori_rdma_peer_status(const mori_comm_t *comm, int peer, char *nic, size_t nic_len, int *rail, char *why, size_t why_len) {
  if (nic_len) nic[0] = '\0';
  if (why_len) why[0] = '\0';
  if (rail) *rail = -1;
  int rc = rdma_comm_arg(comm, "rdma peer_status");
  if (rc) return rc;
  const struct rdma_state *s = mori_comm_transport_state(comm, &mori_transport_rdma_ops);
  if (!s) return mori_error_set(MORI_EINVAL, "rdma: the comm does not hold the rdma transport");
  if (peer < 0 || peer >= s->size) return mori_error_set(MORI_EINVAL, "rdma: peer %d is not in [0, %d)", peer, s->size);
  if (s->usable) snprintf(nic, nic_len, "%s", s->device);
  if (rail && s->rail_only) *rail = mori_comm_peer_info(comm, s->rank)->local_rank;
  if (!s->usable) {
    snprintf(why, why_len, "%s", s->unusable[0] ? s->unusable : "no usable RDMA device");
    return 0;
  }
  if (peer == s->rank) {
    snprintf(why, why_len, "this rank");
    return 0;
  }
  if (s->qp_failed[peer]) {
    snprintf(why, why_len, "its queue pairs were moved to error after work to it never completed");
    return 0;
  }
  if (!s->connect[peer]) {
    snprintf(why, why_len, "MORI_ENABLE_RAIL_ONLY: rank %d is on another rail", peer);
    return 0;
  }
  return 1;
}

int mori_rdma_memory_status(const mori_comm_t *comm, char *how, size_t how_len) {
  if (how_len) how[0] = '\0';
  int rc = rdma_comm_arg(comm, "rdma memory_status");
  if (rc) return rc;
  struct rdma_state *s = mori_comm_transport_state(comm, &mori_transport_rdma_ops);
  if (!s) return mori_error_set(MORI_EINVAL, "rdma: the comm does not hold the rdma transport");
  if (!s->usable) return 0;
  pthread_mutex_lock(&s->lock);
  snprintf(how, how_len, "%s", s->memory_how);
  pthread_mutex_unlock(&s->lock);
  return 0;
}

int rdma_comm_arg(const mori_comm_t *comm, const char *call) {
  if (!comm) return mori_error_set(MORI_EINVAL, "%s: NULL comm", call);
  return mori_comm_check_live(comm, call);
}
