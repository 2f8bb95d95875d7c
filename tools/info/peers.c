// SPDX-License-Identifier: MIT
/* The part of `mori_info` that needs a comm: one made with every transport
 * and handle library libmori.so holds — over the launcher's bootstrap under
 * MORI_INFO_COMM, else over a bootstrap of this rank alone — says which
 * transports initialise, why rdma reaches nobody, and (collective) how each
 * rank reaches each peer and why, gathered to rank 0. */
#include <stdlib.h>
#include <string.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "mori/handle_fabric.h"
#include "mori/handle_legacy_ipc.h"
#include "mori/handle_posix_fd.h"
#include "mori/plugin.h"
#include "mori/transport_p2p.h"
#include "mori/transport_rdma.h"
#include "mori/transport_sdma.h"
#include "tools/info/report.h"

/* A bootstrap of one rank: every collective is a copy. */
static int self_allgather(void *state, const void *send, void *recv, size_t bytes) {
  memcpy(recv, send, bytes);
  return 0;
}
static int self_barrier(void *state) { return 0; }
static int self_bcast(void *state, void *buf, size_t bytes, int root) { return 0; }
static int self_fini(void *state) { return 0; }
static const mori_bootstrap_ops_t self_ops = {
    .size = sizeof(mori_bootstrap_ops_t),
    .abi_version = MORI_BOOTSTRAP_ABI_VERSION,
    .name = "mori_info:self",
    .allgather = self_allgather,
    .barrier = self_barrier,
    .bcast = self_bcast,
    .fini = self_fini,
};

static const mori_transport_ops_t *const transports[INFO_TRANSPORTS] = {
    &mori_transport_p2p_ops,
    &mori_transport_sdma_ops,
    &mori_transport_rdma_ops,
};
static const mori_handle_ops_t *const handles[] = {
    &mori_handle_fabric_ops,
    &mori_handle_posix_fd_ops,
    &mori_handle_legacy_ipc_ops,
};

void info_caps_text(uint32_t caps, char *out, size_t len) {
  static const struct {
    uint32_t bit;
    const char *name;
  } names[] = {{MORI_CAP_LOAD_STORE, "load_store"},
               {MORI_CAP_COPY_ENGINE, "copy_engine"},
               {MORI_CAP_RDMA, "rdma"},
               {MORI_CAP_REMOTE_ATOMICS, "remote_atomics"}};
  size_t used = 0;
  if (len) out[0] = '\0';
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if ((caps & names[i].bit) && used < len)
      used += (size_t)snprintf(out + used, len - used, "%s%s", used ? "," : "", names[i].name);
}

/* Appends to row->why whether rdma reaches `peer` (through row->nic) or
 * why not. */
static void rdma_status(mori_comm_t *comm, int peer, info_peer_t *row) {
  char why[160];
  int rail;
  int reaches = mori_rdma_peer_status(comm, peer, row->nic, sizeof(row->nic), &rail, why, sizeof(why));
  if (reaches < 0) snprintf(why, sizeof(why), "%s", mori_last_error());
  size_t used = strlen(row->why);
  if (reaches > 0) {
    snprintf(row->why + used, sizeof(row->why) - used, ": RDMA through %s", row->nic);
  } else {
    row->nic[0] = '\0';
    snprintf(row->why + used, sizeof(row->why) - used, "; not reachable by rdma: %s", why);
  }
}

static void describe_peer(mori_comm_t *comm, int peer, info_peer_t *row) {
  int rank = mori_comm_rank(comm), base, size;
  mori_comm_lsa(comm, &base, &size, NULL);
  const mori_peer_info_t *me = mori_comm_peer_info(comm, rank), *them = mori_comm_peer_info(comm, peer);
  memset(row, 0, sizeof(*row));
  row->rank = rank;
  row->peer = peer;
  row->lsa_base = base;
  row->lsa_size = size;
  row->in_lsa = peer >= base && peer < base + size;
  row->caps = mori_comm_peer_caps(comm, peer);
  snprintf(row->host, sizeof(row->host), "%s", them->host_id);
  const mori_transport_ops_t *t = mori_comm_transport_for(comm, peer), *ce = mori_comm_copy_engine_for(comm, peer);
  if (t) snprintf(row->transport, sizeof(row->transport), "%s", t->name);
  if (ce) snprintf(row->copy_engine, sizeof(row->copy_engine), "%s", ce->name);
  /* The rail is this rank's (rail-only pairs same-rail peers). */
  char nic[sizeof(row->nic)], ignored[8];
  row->rail = -1;
  (void)mori_rdma_peer_status(comm, peer, nic, sizeof(nic), &row->rail, ignored, sizeof(ignored));
  if (peer == rank) {
    snprintf(row->why, sizeof(row->why), "this rank");
    return;
  }
  if (row->in_lsa) {
    snprintf(row->why, sizeof(row->why), "in the LSA team: same host, its memory is mapped (load/store)");
    return;
  }
  bool p2p_off = mori_env_bool_or("MORI_DISABLE_P2P", false);
  bool mappable = false;
  if (them->host_hash != me->host_hash)
    snprintf(row->why, sizeof(row->why), "on another host (%s)", them->host_id);
  else if (p2p_off)
    snprintf(row->why, sizeof(row->why), "same host, but MORI_DISABLE_P2P is set");
  else if (mori_comm_peer_mappable(comm, peer, &mappable) == 0 && !mappable)
    snprintf(row->why, sizeof(row->why), "same host, but the platform grants no peer access between the devices");
  else
    snprintf(row->why, sizeof(row->why), "same host, but the load/store teams differ in size across ranks (the LSA team is this rank)");
  rdma_status(comm, peer, row);
  mori_clear_error();
}

static void describe_transports(info_report_t *r, mori_comm_t *comm) {
  for (int i = 0; i < INFO_TRANSPORTS; i++) {
    info_transport_t *t = &r->transports[i];
    t->name = transports[i]->name;
    if (!comm) {
      t->available = false;
      snprintf(t->detail, sizeof(t->detail), "unknown: no comm could be made (%s)", r->comm_error);
      continue;
    }
    /* Every listed transport initialised, or the comm would have failed. */
    t->available = true;
  }
  if (!comm) return;
  /* rdma: the comm holds it even when no rank has a device; it then reaches
   * nobody, and says why. */
  info_transport_t *rdma = &r->transports[2];
  char nic[32], why[INFO_TEXT - 32];
  int rail = -1, self = mori_comm_rank(comm);
  int peer = r->size > 1 ? (self + 1) % r->size : self;
  int rc = mori_rdma_peer_status(comm, peer, nic, sizeof(nic), &rail, why, sizeof(why));
  if (rc < 0 || !nic[0]) {
    rdma->available = false;
    snprintf(rdma->detail, sizeof(rdma->detail), "%s", rc < 0 ? mori_last_error() : why);
  } else {
    /* How kernels reach it: GPU-initiated posting or the proxy, and why. */
    int gda = 0;
    char gda_why[INFO_TEXT - 96] = "";
    (void)mori_rdma_gda_status(comm, &gda, gda_why, sizeof(gda_why));
    /* And how its memory is registered: dma-buf or ibv_reg_mr, and why. */
    char memory[INFO_TEXT / 2] = "";
    (void)mori_rdma_memory_status(comm, memory, sizeof(memory));
    snprintf(rdma->detail, sizeof(rdma->detail), "NIC %s; kernels %s (%s); memory: %s", nic,
             gda ? "post to it themselves" : "go through the proxy", gda_why, memory[0] ? memory : "unknown");
  }
  int lsa_size;
  mori_comm_lsa(comm, NULL, &lsa_size, NULL);
  snprintf(r->transports[0].detail, sizeof(r->transports[0].detail), "load/store within the LSA team (%d rank%s)", lsa_size,
           lsa_size == 1 ? "" : "s");
  snprintf(r->transports[1].detail, sizeof(r->transports[1].detail), "copy engines within the LSA team (%d rank%s)", lsa_size,
           lsa_size == 1 ? "" : "s");
  mori_clear_error();
}

int info_gather_comm(info_report_t *r, bool collective) {
  mori_bootstrap_t *bs = NULL;
  int rc = collective ? mori_bootstrap_tcp_from_env(&bs) : mori_bootstrap_create(&self_ops, NULL, 0, 1, &bs);
  mori_comm_t *comm = NULL;
  if (!rc) {
    mori_comm_attr_t attr;
    mori_comm_attr_init(&attr);
    attr.bootstrap = bs;
    attr.handles = handles;
    attr.num_handles = (int)(sizeof(handles) / sizeof(handles[0]));
    attr.transports = transports;
    attr.num_transports = INFO_TRANSPORTS;
    rc = mori_comm_create(&attr, &comm);
  }
  if (rc) {
    snprintf(r->comm_error, sizeof(r->comm_error), "%s", mori_last_error());
    describe_transports(r, NULL);
    mori_bootstrap_destroy(bs);
    return collective ? rc : 0;
  }
  r->comm_made = true;
  r->rank = mori_comm_rank(comm);
  r->size = mori_comm_size(comm);
  r->handle_type = mori_comm_handle_type(comm);
  describe_transports(r, comm);
  if (collective) {
    info_peer_t *mine = calloc((size_t)r->size, sizeof(*mine));
    r->peers = calloc((size_t)r->size * (size_t)r->size, sizeof(*r->peers));
    if (!mine || !r->peers) {
      rc = mori_error_set(MORI_ENOMEM, "mori_info: rank %d: the peer table of %d ranks", r->rank, r->size);
    } else {
      for (int p = 0; p < r->size; p++) describe_peer(comm, p, &mine[p]);
      rc = mori_comm_allgather(comm, mine, r->peers, (size_t)r->size * sizeof(*mine));
    }
    free(mine);
    r->with_peers = rc == 0;
  }
  mori_comm_destroy(comm);
  mori_bootstrap_destroy(bs);
  return rc;
}
