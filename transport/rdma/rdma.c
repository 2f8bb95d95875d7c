// SPDX-License-Identifier: MIT
/* rdma transport: MORI_NUM_QP_PER_PE RC queue pairs to every peer (or,
 * rail-only, to same-rail and same-host peers: rail.c), set up at comm
 * creation from one allgather of {device present, LID, GID, MTU, the QPNs
 * per peer} after a smaller one that checks the ranks agree on the count;
 * one memory region per segment, its {address, rkey} allgathered at
 * registration. If any rank has no RDMA device, the transport reaches no
 * peer on any rank (decided together, so the ranks agree). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/platform/platform.h"
#include "transport/rdma/internal.h"

static int rdma_fini(void *state) {
  struct rdma_state *s = state;
  if (!s) return 0;
  rdma_stop_proxy(s); /* teardown order: proxy threads first */
  rdma_gda_fini(s);   /* GPU posting's QPs before the PD they live in */
  rdma_close_local(s);
  rdma_warn_limit_flush(&s->failed_warns);
  rdma_warn_limit_flush(&s->refused_warns);
  rdma_warn_limit_flush(&s->proxy_warns);
  pthread_mutex_destroy(&s->lock);
  free(s->qp);
  free(s->qpn);
  free(s->qp_in_flight);
  free(s->connect);
  free(s->qp_failed);
  free(s->next_qp);
  free(s->last_qp);
  free(s->fence_waiting);
  free(s->scratch);
  free(s);
  return 0;
}

/* What every rank must agree on before queue pairs are made: both ends of
 * a pair need the same number of QPs and the same rail rule. */
struct rdma_agreement {
  int32_t num_qp;
  int32_t rail_only;
};

static int agree(mori_comm_t *comm, const struct rdma_state *s) {
  struct rdma_agreement mine = {s->cfg.num_qp, s->cfg.rail_only}, *all = calloc((size_t)s->size, sizeof(mine));
  if (!all) return mori_error_set(MORI_ENOMEM, "rdma: agreement");
  int rc = mori_bootstrap_allgather(mori_comm_bootstrap(comm), &mine, all, sizeof(mine));
  for (int r = 0; !rc && r < s->size; r++) {
    if (all[r].num_qp != mine.num_qp)
      rc = mori_error_set(MORI_EINVAL, "rdma: MORI_NUM_QP_PER_PE is %d on rank %d but %d on rank %d: set it the same on every rank",
                          mine.num_qp, s->rank, all[r].num_qp, r);
    else if (all[r].rail_only != mine.rail_only)
      rc = mori_error_set(MORI_EINVAL, "rdma: MORI_ENABLE_RAIL_ONLY is %s on rank %d but %s on rank %d: set it the same on every rank",
                          mine.rail_only ? "set" : "not set", s->rank, all[r].rail_only ? "set" : "not set", r);
  }
  free(all);
  return rc;
}

static int alloc_tables(struct rdma_state *s) {
  size_t n = (size_t)s->size, slots = n * (size_t)s->num_qp;
  s->qp = calloc(slots, sizeof(*s->qp));
  s->qpn = calloc(slots, sizeof(*s->qpn));
  s->qp_in_flight = calloc(slots, sizeof(*s->qp_in_flight));
  s->connect = calloc(n, sizeof(*s->connect));
  s->qp_failed = calloc(n, sizeof(*s->qp_failed));
  s->next_qp = calloc(n, sizeof(*s->next_qp));
  s->last_qp = calloc(n, sizeof(*s->last_qp));
  s->fence_waiting = calloc(n, sizeof(*s->fence_waiting));
  if (!s->qp || !s->qpn || !s->qp_in_flight || !s->connect || !s->qp_failed || !s->next_qp || !s->last_qp || !s->fence_waiting)
    return mori_error_set(MORI_ENOMEM, "rdma: queue pair tables");
  return 0;
}

/* "1, 3": the ranks without a usable device, for the error of every later
 * operation (the reason of this rank's own, when it is one of them). */
static void describe_unusable(struct rdma_state *s, const char *all, size_t entry, const char *local_why) {
  size_t used = 0;
  used += (size_t)snprintf(s->unusable, sizeof(s->unusable), "no usable device on rank(s) ");
  int listed = 0;
  for (int r = 0; r < s->size && used + 16 < sizeof(s->unusable); r++)
    if (!((const struct rdma_endpoint *)(all + (size_t)r * entry))->has_device)
      used += (size_t)snprintf(s->unusable + used, sizeof(s->unusable) - used, "%s%d", listed++ ? ", " : "", r);
  if (local_why[0] && used < sizeof(s->unusable))
    snprintf(s->unusable + used, sizeof(s->unusable) - used, " (rank %d: %s)", s->rank, local_why);
}

static int rdma_init(mori_comm_t *comm, void **state) {
  struct rdma_state *s = calloc(1, sizeof(*s));
  if (!s) return mori_error_set(MORI_ENOMEM, "rdma");
  pthread_mutex_init(&s->lock, NULL);
  s->failed_warns = (rdma_warn_limit_t)RDMA_WARN_LIMIT_INIT("failed requests from kernels");
  s->refused_warns = (rdma_warn_limit_t)RDMA_WARN_LIMIT_INIT("refused requests from kernels");
  s->proxy_warns = (rdma_warn_limit_t)RDMA_WARN_LIMIT_INIT("proxy errors");
  s->rank = mori_comm_rank(comm);
  s->size = mori_comm_size(comm);
  /* How long a quiet, a post waiting for room or a deregister waits for
   * completions: MORI_RDMA_TIMEOUT_MS when set, else the caller's deadline,
   * the timeout of the bootstrap the comm was made over. */
  s->timeout_ms = mori_bootstrap_timeout_ms(mori_comm_bootstrap(comm));
  int rc = mori_env_ms("MORI_RDMA_TIMEOUT_MS", &s->timeout_ms);
  if (!rc) rc = rdma_config_read(&s->cfg);
  s->num_qp = s->cfg.num_qp;
  if (!rc) rc = alloc_tables(s);
  if (!rc) rc = agree(comm, s);
  if (rc) {
    rdma_fini(s);
    return rc;
  }
  s->rail_only = rdma_plan_peers(comm, s->rank, s->size, s->cfg.rail_only, s->connect);
  size_t entry = sizeof(struct rdma_endpoint) + sizeof(uint32_t) * (size_t)s->size * (size_t)s->num_qp;
  char *mine = calloc(1, entry), *all = calloc((size_t)s->size, entry);
  if (!mine || !all) {
    free(mine);
    free(all);
    rdma_fini(s);
    return mori_error_set(MORI_ENOMEM, "rdma: endpoint tables");
  }
  struct rdma_endpoint *me = (struct rdma_endpoint *)mine;
  char local_why[160] = "";
  int local = mori_rdma_provider(&s->provider);
  if (!local) s->v = s->provider->verbs;
  if (!local) local = rdma_open_local(s, mori_comm_peer_info(comm, s->rank)->local_rank, mori_comm_device(comm), me, (uint32_t *)(mine + sizeof(*me)));
  if (local) {
    snprintf(local_why, sizeof(local_why), "%s", mori_last_error());
    MORI_INFO("rdma: rank %d has no usable RDMA device: %s", s->rank, local_why);
    rdma_close_local(s);
    memset(mine, 0, entry);
  }
  rc = mori_bootstrap_allgather(mori_comm_bootstrap(comm), mine, all, entry);
  if (rc) {
    free(mine);
    free(all);
    rdma_fini(s);
    return mori_error_context(rc, "rdma: exchanging endpoints");
  }
  bool everyone = true;
  for (int r = 0; r < s->size; r++) everyone &= ((struct rdma_endpoint *)(all + (size_t)r * entry))->has_device != 0;
  if (everyone) {
    for (int p = 0; p < s->size && !rc; p++) {
      if (!s->connect[p]) continue;
      const char *theirs = all + (size_t)p * entry;
      const uint32_t *qpn_for_me = (const uint32_t *)(theirs + sizeof(struct rdma_endpoint)) + (size_t)s->rank * (size_t)s->num_qp;
      rc = rdma_connect_peer(s, p, me, (const struct rdma_endpoint *)theirs, qpn_for_me);
    }
    /* GPU posting or the proxy (collective: every rank calls it). */
    int grc = rdma_gda_init(s, comm, rc == 0, me, all, entry);
    if (!rc) rc = grc;
    /* Every responder is ready before anyone posts. */
    int brc = mori_bootstrap_barrier(mori_comm_bootstrap(comm));
    if (!rc) rc = brc;
    s->usable = rc == 0;
    if (s->usable) rdma_memory_plan(s->provider, rdma_dmabuf_ops(), s->memory_how, sizeof(s->memory_how));
    if (s->usable) rdma_report_peers(s, comm);
    if (s->usable) rc = rdma_start_proxy(s);
  } else {
    describe_unusable(s, all, entry, local_why);
    rdma_close_local(s);
    /* Every rank is here (the outcome is the gathered one): with GPU
     * posting demanded, every rank fails, naming what is missing. */
    if (rdma_gda_demanded())
      rc = mori_error_set(MORI_ENOTSUP, "rdma: MORI_RDMA_GDA=on, but GPU posting needs an RDMA device on every rank: %s",
                          s->unusable);
  }
  free(mine);
  free(all);
  if (rc) {
    rdma_fini(s);
    return rc;
  }
  *state = s;
  return 0;
}

/* Every other rank with queue pairs (all of them, or under rail-only the
 * same-rail and same-host ones), once every rank has a device: RDMA and
 * 64-bit atomics. A peer without QPs reports nothing, so routes and teams
 * never send it to rdma. */
static int rdma_peer_caps(void *state, mori_comm_t *comm, int peer, uint32_t *caps) {
  struct rdma_state *s = state;
  *caps = (s->usable && s->connect[peer]) ? MORI_CAP_RDMA | MORI_CAP_REMOTE_ATOMICS : 0;
  return 0;
}

static int rdma_queue_pairs(void *state, int peer) {
  const struct rdma_state *s = state;
  return (s && s->usable && peer >= 0 && peer < s->size && s->connect[peer]) ? s->num_qp : 0;
}

struct segment_key {
  int32_t ok;
  uint32_t rkey;
  uint64_t addr;
};

static int rdma_segment_register(void *state, mori_segment_t *seg, void **seg_state) {
  struct rdma_state *s = state;
  *seg_state = NULL;
  if (!s->usable) return 0;
  mori_comm_t *comm = mori_segment_comm(seg);
  /* Aligned: work-request ids keep flags and a ticket in the low bits. */
  size_t w_bytes = (sizeof(struct rdma_segment) + WR_SEGMENT_ALIGN - 1) / WR_SEGMENT_ALIGN * WR_SEGMENT_ALIGN;
  struct rdma_segment *w = aligned_alloc(WR_SEGMENT_ALIGN, w_bytes);
  if (w) memset(w, 0, sizeof(*w));
  struct segment_key mine = {0, 0, 0}, *all = calloc((size_t)s->size, sizeof(*all));
  if (!w || !all) {
    free(w);
    free(all);
    return mori_error_set(MORI_ENOMEM, "rdma: segment keys");
  }
  w->base = mori_segment_local_base(seg);
  w->size = mori_segment_size(seg);
  w->device = mori_comm_device(comm);
  w->in_flight_to = calloc((size_t)s->size, sizeof(*w->in_flight_to));
  if (!w->in_flight_to) {
    free(w);
    free(all);
    return mori_error_set(MORI_ENOMEM, "rdma: segment counters");
  }
  /* Legacy IPC memory has no flat span (stride 0): its range is registered.
   * GPU memory through dma-buf where it can (register.c). */
  char how[sizeof(s->memory_how)];
  w->mr = rdma_reg_memory(s->provider, s->pd, w->base, mori_segment_stride(seg) ? mori_segment_stride(seg) : w->size,
                          w->device,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
                          rdma_dmabuf_ops(), how, sizeof(how));
  if (w->mr) {
    pthread_mutex_lock(&s->lock);
    bool changed = !s->memory_registered || strcmp(s->memory_how, how) != 0;
    if (changed) snprintf(s->memory_how, sizeof(s->memory_how), "%s", how);
    s->memory_registered = true;
    pthread_mutex_unlock(&s->lock);
    if (changed) MORI_INFO("rdma: rank %d registers memory with %s: %s", s->rank, s->device, how);
  }
  if (w->mr) mine = (struct segment_key){1, w->mr->rkey, (uint64_t)(uintptr_t)w->base};
  else MORI_WARN("rdma: rank %d cannot register %zu bytes at %p: %s (%s)", s->rank, w->size, (void *)w->base, strerror(errno), how);
  int rc = mori_bootstrap_allgather(mori_comm_bootstrap(comm), &mine, all, sizeof(mine));
  for (int r = 0; !rc && r < s->size; r++)
    if (!all[r].ok)
      rc = mori_error_set(MORI_ENOTSUP, "rdma: rank %d could not register the segment's memory with its NIC", r);
  if (!rc) {
    w->addr = calloc((size_t)s->size, sizeof(uint64_t));
    w->rkey = calloc((size_t)s->size, sizeof(uint32_t));
    if (!w->addr || !w->rkey) rc = mori_error_set(MORI_ENOMEM, "rdma: key table");
    for (int r = 0; !rc && r < s->size; r++) {
      w->addr[r] = all[r].addr;
      w->rkey[r] = all[r].rkey;
    }
  }
  free(all);
  /* GPU posting's table for the window, when the comm posts from the GPU. */
  if (!rc) rc = rdma_gda_window(s, w, &w->gda_table);
  /* The ring kernels hand their requests for RDMA peers to. */
  if (!rc) rc = mori_platform_host_alloc_mapped(w->device, sizeof(mori_proxy_ring_t), (void **)&w->ring, (void **)&w->ring_dev);
  if (!rc) rc = mori_platform_device_alloc(mori_comm_device(comm), sizeof(uint64_t), (void **)&w->tickets);
  if (!rc) rc = mori_platform_memset_zero(w->device, w->tickets, sizeof(uint64_t));
  if (rc) {
    rdma_segment_free(s, w);
    return rc;
  }
  pthread_mutex_lock(&s->lock);
  w->next_proxied = s->proxied;
  s->proxied = w;
  pthread_mutex_unlock(&s->lock);
  *seg_state = w;
  return 0;
}

static int rdma_device_info(void *state, mori_segment_t *seg, void *seg_state, mori_window_dev_t *dev) {
  struct rdma_segment *w = seg_state;
  if (!w) return 0;
  dev->proxy = w->ring_dev;
  dev->proxy_tickets = w->tickets;
  dev->gda = w->gda_table; /* NULL: the proxy serves every RDMA peer */
  return 0;
}

/* The device is idle (core synchronised it before deregistering): serve
 * what is left in the ring, stop serving it, and wait for everything in
 * flight for the segment. Work that does not complete in time has its
 * queue pairs moved to error, which flushes it; a segment with work still
 * in flight after that is retired, not freed: the last completion (or fini,
 * once the QPs are gone) frees it. A completion never finds freed memory. */
static int rdma_segment_deregister(void *state, mori_segment_t *seg, void *seg_state) {
  struct rdma_state *s = state;
  struct rdma_segment *w = seg_state;
  if (!w) return 0;
  int64_t deadline = rdma_now_ms() + s->timeout_ms;
  int rc = 0;
  for (;;) {
    bool worked = false, left = false;
    pthread_mutex_lock(&s->lock);
    rdma_serve_ring(s, w, &worked, &left);
    int n = rdma_reap_some(s);
    pthread_mutex_unlock(&s->lock);
    if (n < 0) rc = n;
    if (n < 0 || !left) break;
    if (rdma_now_ms() > deadline) {
      rc = mori_error_set(MORI_ETIMEDOUT, "rdma: requests in a deregistered segment's ring could not be posted within %d ms",
                          s->timeout_ms);
      break;
    }
    if (!worked && n == 0) sched_yield();
  }
  pthread_mutex_lock(&s->lock);
  for (struct rdma_segment **p = &s->proxied; *p; p = &(*p)->next_proxied)
    if (*p == w) {
      *p = w->next_proxied;
      break;
    }
  pthread_mutex_unlock(&s->lock);
  int wrc = rdma_wait_in_flight(s, w, 0, deadline);
  if (wrc) {
    char peers[256] = "";
    size_t used = 0;
    pthread_mutex_lock(&s->lock);
    for (int p = 0; p < s->size; p++) {
      if (p == s->rank || !w->in_flight_to[p]) continue;
      if (used + 16 < sizeof(peers)) used += (size_t)snprintf(peers + used, sizeof(peers) - used, "%s%d", used ? ", " : "", p);
      if (rdma_fail_qp(s, p) != 0) MORI_WARN("%s", mori_last_error());
    }
    uint64_t left = w->in_flight;
    pthread_mutex_unlock(&s->lock);
    MORI_WARN("rdma: deregistering a segment: %llu request(s) to rank(s) %s did not complete within %d ms; their queue "
              "pairs are moved to error",
              (unsigned long long)left, peers, s->timeout_ms);
    /* Flushed requests complete at once; a bounded wait for them. */
    rdma_wait_in_flight(s, w, 0, rdma_now_ms() + 1000);
    if (!rc)
      rc = mori_error_set(MORI_ETIMEDOUT,
                          "rdma: %llu request(s) of a deregistered segment to rank(s) %s did not complete within %d ms; "
                          "those ranks are unreachable over rdma from now on",
                          (unsigned long long)left, peers, s->timeout_ms);
  }
  pthread_mutex_lock(&s->lock);
  if (w->in_flight == 0) {
    rdma_segment_free(s, w);
  } else {
    w->next_retired = s->retired;
    s->retired = w;
  }
  pthread_mutex_unlock(&s->lock);
  return rc;
}

const mori_transport_ops_t mori_transport_rdma_ops = {
    .size = sizeof(mori_transport_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "rdma",
    .init = rdma_init,
    .peer_caps = rdma_peer_caps,
    .segment_register = rdma_segment_register,
    .segment_deregister = rdma_segment_deregister,
    .device_info = rdma_device_info,
    .fini = rdma_fini,
    .queue_pairs = rdma_queue_pairs,
};
