// SPDX-License-Identifier: MIT
/* Which peers get queue pairs: every other rank (a full mesh), or under
 * MORI_ENABLE_RAIL_ONLY the same-rail peers (the same local rank on another
 * node) plus every same-host peer. On a rail-isolated fabric a cross-rail QP
 * never reaches RTR, so the full mesh would hang init for QPs no kernel
 * uses. The rail is "local rank", which equals rank % ranks-per-node only
 * when nodes are equal-sized and ranks node-major contiguous (what the EP
 * kernels' proxy formula assumes): that is checked first, and when it does
 * not hold the full mesh is kept with an error log rather than pairing the
 * wrong ranks. Every rank decides from the same peer table, so the choice
 * is symmetric: both ends of a dropped pair drop it. */
#include <stdio.h>
#include <string.h>

#include "core/base/log.h"
#include "transport/rdma/internal.h"

/* Why the layout is not a node-major grid of equal nodes, or NULL. */
static const char *irregular(mori_comm_t *comm, int size, char *why, size_t cap) {
  int per_node = mori_comm_peer_info(comm, 0)->local_size;
  for (int r = 0; r < size; r++) {
    const mori_peer_info_t *p = mori_comm_peer_info(comm, r);
    if (p->local_size != per_node) {
      snprintf(why, cap, "node sizes are not uniform (rank 0's node has %d ranks, rank %d's has %d)", per_node, r,
               p->local_size);
      return why;
    }
    const mori_peer_info_t *first = mori_comm_peer_info(comm, r - r % per_node);
    if (p->host_hash != first->host_hash || p->local_rank != r % per_node) {
      snprintf(why, cap, "ranks are not node-major contiguous (rank %d is local rank %d of host %s, rank %d of host %s)", r,
               p->local_rank, p->host_id, r - r % per_node, first->host_id);
      return why;
    }
  }
  return NULL;
}

bool rdma_plan_peers(mori_comm_t *comm, int rank, int size, bool rail_only, bool *connect) {
  for (int p = 0; p < size; p++) connect[p] = p != rank;
  if (!rail_only) return false;
  char why[256];
  if (irregular(comm, size, why, sizeof(why))) {
    MORI_LOG(MORI_LOG_ERROR, "rail-only: rank %d: MORI_ENABLE_RAIL_ONLY is set but %s; using the full mesh", rank, why);
    return false;
  }
  const mori_peer_info_t *me = mori_comm_peer_info(comm, rank);
  for (int p = 0; p < size; p++) {
    const mori_peer_info_t *q = mori_comm_peer_info(comm, p);
    /* Same-host peers are never dropped: their loopback never crosses the
     * fabric (it carries traffic only under MORI_DISABLE_P2P). */
    connect[p] = p != rank && (q->host_hash == me->host_hash || q->local_rank == me->local_rank);
  }
  return true;
}

void rdma_report_peers(const struct rdma_state *s, mori_comm_t *comm) {
  const mori_peer_info_t *me = mori_comm_peer_info(comm, s->rank);
  int remote = 0, local = 0;
  char list[256] = "";
  size_t used = 0;
  for (int p = 0; p < s->size; p++) {
    if (!s->connect[p]) continue;
    if (mori_comm_peer_info(comm, p)->host_hash == me->host_hash) {
      local++;
      continue;
    }
    remote++;
    if (used + 16 < sizeof(list)) used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", used ? "," : "", p);
  }
  if (s->rail_only)
    /* The Shmem Guide's confirmation line (cross-node peers), then the
     * same-host peers mori also connects. */
    MORI_INFO("rail-only: rank %d rail %d created QPs to %d peers (%d QPs): %s; and to %d same-host peers (%d QPs)", s->rank,
              me->local_rank, remote, remote * s->num_qp, remote ? list : "none", local, local * s->num_qp);
  else
    MORI_INFO("rdma: rank %d connected to %d peers over %s (%d QP%s each, %d in all)", s->rank, remote + local, s->device,
              s->num_qp, s->num_qp == 1 ? "" : "s", s->qps_created);
}
