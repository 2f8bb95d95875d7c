/* rdma transport: RC queue pairs to every peer, set up at comm creation
 * from one allgather of {device present, LID, GID, MTU, one QPN per peer};
 * one memory region per window, its {address, rkey} allgathered at window
 * registration. If any rank has no RDMA device, the transport reaches no
 * peer on any rank (decided together, so the ranks agree). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/internal/error.h"
#include "core/internal/log.h"
#include "core/platform/platform.h"
#include "mori/transport_rdma.h"
#include "transport/rdma/verbs_loader.h"

enum { CQ_DEPTH = 4096, SQ_DEPTH = 1024, MAX_RD_ATOMIC = 16 };

struct rdma_endpoint { /* what each rank publishes; qpn[] follows */
  int32_t has_device;
  int32_t mtu;
  uint32_t lid;
  uint32_t psn;
  uint8_t gid[16];
};

struct rdma_window;

struct rdma_state {
  const struct mori_verbs *v;
  /* Posting and reaping happen on the caller's thread (host API) and on the
   * proxy thread (requests from kernels): one lock for both. */
  pthread_mutex_t lock;
  pthread_t proxy;
  bool proxy_running, stopping;
  struct rdma_window *proxied; /* windows whose rings the proxy serves */
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp **qp; /* per peer; NULL for this rank */
  int rank, size, port, gid_index;
  bool usable;
  uint64_t posted, completed;
  int timeout_ms;
  uint64_t *scratch; /* fetch-and-add results land here */
  struct ibv_mr *scratch_mr;
  char device[64];
};

struct rdma_window {
  struct ibv_mr *mr;
  char *base;
  size_t size; /* what the user asked for: the bounds of every operation */
  uint64_t *addr; /* per peer */
  uint32_t *rkey;
  /* The request ring kernels submit to (host view / device view), the
   * device-memory ticket counter, and the proxy's progress. */
  mori_proxy_ring_t *ring, *ring_dev;
  uint64_t *tickets;
  uint64_t next; /* next ticket the proxy takes */
  struct rdma_window *next_proxied;
};

static int verbs_error(int err, const char *what) {
  return mori_error_set(err > 0 ? -err : MORI_EIO, "rdma: %s failed: %s", what, strerror(err > 0 ? err : errno));
}

static int env_int(const char *name, int fallback) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : fallback;
}

/* Opens the device, PD, CQ and one QP per peer in INIT; fills `me`. */
static int open_local(struct rdma_state *s, struct rdma_endpoint *me, uint32_t *qpn) {
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
  if (!s->ctx) return verbs_error(errno, "ibv_open_device");
  if (!(s->pd = (v->ibv_alloc_pd)(s->ctx))) return verbs_error(errno, "ibv_alloc_pd");
  if (!(s->cq = (v->ibv_create_cq)(s->ctx, CQ_DEPTH, NULL, NULL, 0))) return verbs_error(errno, "ibv_create_cq");
  struct ibv_port_attr port;
  memset(&port, 0, sizeof(port));
  s->port = env_int("MORI_RDMA_PORT", 1);
  /* The exported symbol takes the compat struct, a prefix of ibv_port_attr. */
  int err = (v->ibv_query_port)(s->ctx, (uint8_t)s->port, (struct _compat_ibv_port_attr *)&port);
  if (err) return verbs_error(err, "ibv_query_port");
  if (port.state != IBV_PORT_ACTIVE)
    return mori_error_set(MORI_ENODEV, "rdma: port %d of %s is not active", s->port, s->device);
  union ibv_gid gid;
  s->gid_index = env_int("MORI_RDMA_GID_INDEX", -1);
  if (s->gid_index < 0) s->gid_index = (port.gid_tbl_len > 1 && (v->ibv_query_gid)(s->ctx, (uint8_t)s->port, 1, &gid) == 0) ? 1 : 0;
  if ((err = (v->ibv_query_gid)(s->ctx, (uint8_t)s->port, s->gid_index, &gid)) != 0) return verbs_error(err, "ibv_query_gid");
  s->scratch = calloc(1, 64);
  if (!s->scratch) return mori_error_set(MORI_ENOMEM, "rdma: scratch");
  s->scratch_mr = (v->ibv_reg_mr)(s->pd, s->scratch, 64, IBV_ACCESS_LOCAL_WRITE);
  if (!s->scratch_mr) return verbs_error(errno, "ibv_reg_mr (scratch)");
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
    if (!(s->qp[p] = (v->ibv_create_qp)(s->pd, &init))) return verbs_error(errno, "ibv_create_qp");
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = (uint8_t)s->port,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
    err = (v->ibv_modify_qp)(s->qp[p], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (err) return verbs_error(err, "ibv_modify_qp to INIT");
    qpn[p] = s->qp[p]->qp_num;
  }
  return 0;
}

/* INIT -> RTR -> RTS towards `peer`, whose QP for this rank is `qpn`. */
static int connect_qp(struct rdma_state *s, int peer, const struct rdma_endpoint *mine, const struct rdma_endpoint *theirs,
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
  if (err) return verbs_error(err, "ibv_modify_qp to RTR");
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
  if (err) return verbs_error(err, "ibv_modify_qp to RTS");
  return 0;
}

static void close_local(struct rdma_state *s) {
  if (!s->v) return;
  for (int p = 0; s->qp && p < s->size; p++)
    if (s->qp[p]) (s->v->ibv_destroy_qp)(s->qp[p]);
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

static void stop_proxy(struct rdma_state *s);

static int rdma_fini(void *state) {
  struct rdma_state *s = state;
  if (!s) return 0;
  stop_proxy(s); /* teardown order: proxy threads first */
  close_local(s);
  pthread_mutex_destroy(&s->lock);
  free(s->qp);
  free(s->scratch);
  free(s);
  return 0;
}

static int start_proxy(struct rdma_state *s);

static int rdma_init(mori_comm_t *comm, void **state) {
  struct rdma_state *s = calloc(1, sizeof(*s));
  if (!s) return mori_error_set(MORI_ENOMEM, "rdma");
  pthread_mutex_init(&s->lock, NULL);
  s->rank = mori_comm_rank(comm);
  s->size = mori_comm_size(comm);
  s->timeout_ms = mori_bootstrap_default_timeout_ms();
  s->qp = calloc((size_t)s->size, sizeof(*s->qp));
  size_t entry = sizeof(struct rdma_endpoint) + sizeof(uint32_t) * (size_t)s->size;
  char *mine = calloc(1, entry), *all = calloc((size_t)s->size, entry);
  if (!s->qp || !mine || !all) {
    free(mine);
    free(all);
    rdma_fini(s);
    return mori_error_set(MORI_ENOMEM, "rdma: endpoint tables");
  }
  struct rdma_endpoint *me = (struct rdma_endpoint *)mine;
  int local = mori_verbs_load(&s->v);
  if (!local) local = open_local(s, me, (uint32_t *)(mine + sizeof(*me)));
  if (local) {
    MORI_INFO("rdma: rank %d has no usable RDMA device: %s", s->rank, mori_last_error());
    close_local(s);
    memset(mine, 0, entry);
  }
  int rc = mori_bootstrap_allgather(mori_comm_bootstrap(comm), mine, all, entry);
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
      if (p == s->rank) continue;
      const char *theirs = all + (size_t)p * entry;
      uint32_t qpn_for_me = ((const uint32_t *)(theirs + sizeof(struct rdma_endpoint)))[s->rank];
      rc = connect_qp(s, p, me, (const struct rdma_endpoint *)theirs, qpn_for_me);
      if (rc) mori_error_context(rc, "rdma: connecting to rank %d", p);
    }
    /* Every responder is ready before anyone posts. */
    int brc = mori_bootstrap_barrier(mori_comm_bootstrap(comm));
    if (!rc) rc = brc;
    s->usable = rc == 0;
    if (s->usable) MORI_INFO("rdma: rank %d connected to %d peers over %s", s->rank, s->size - 1, s->device);
    if (s->usable) rc = start_proxy(s);
  } else {
    close_local(s);
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

static int rdma_can_reach(void *state, mori_comm_t *comm, int peer, bool *yes) {
  *yes = ((struct rdma_state *)state)->usable;
  return 0;
}

struct window_key {
  int32_t ok;
  uint32_t rkey;
  uint64_t addr;
};

static int rdma_window_register(void *state, mori_window_t *win, void **win_state) {
  struct rdma_state *s = state;
  *win_state = NULL;
  if (!s->usable) return 0;
  mori_comm_t *comm = mori_window_comm(win);
  struct rdma_window *w = calloc(1, sizeof(*w));
  struct window_key mine = {0, 0, 0}, *all = calloc((size_t)s->size, sizeof(*all));
  if (!w || !all) {
    free(w);
    free(all);
    return mori_error_set(MORI_ENOMEM, "rdma: window keys");
  }
  w->base = mori_window_local_ptr(win);
  w->size = mori_window_size(win);
  w->mr = (s->v->ibv_reg_mr)(s->pd, w->base, mori_window_mapped_size(win),
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                  IBV_ACCESS_REMOTE_ATOMIC);
  if (w->mr) mine = (struct window_key){1, w->mr->rkey, (uint64_t)(uintptr_t)w->base};
  else MORI_WARN("rdma: rank %d cannot register %zu bytes at %p: %s", s->rank, w->size, (void *)w->base, strerror(errno));
  int rc = mori_bootstrap_allgather(mori_comm_bootstrap(comm), &mine, all, sizeof(mine));
  for (int r = 0; !rc && r < s->size; r++)
    if (!all[r].ok)
      rc = mori_error_set(MORI_ENOTSUP, "rdma: rank %d could not register the window's memory with its NIC", r);
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
  /* The ring kernels hand their requests for RDMA peers to. */
  if (!rc) rc = mori_platform_host_alloc_mapped(sizeof(mori_proxy_ring_t), (void **)&w->ring, (void **)&w->ring_dev);
  if (!rc) rc = mori_platform_device_alloc(mori_comm_device(comm), sizeof(uint64_t), (void **)&w->tickets);
  if (!rc) rc = mori_platform_memset_zero(w->tickets, sizeof(uint64_t));
  if (rc) {
    if (w->mr) (s->v->ibv_dereg_mr)(w->mr);
    if (w->ring) mori_platform_host_free_mapped(w->ring);
    mori_platform_device_free(w->tickets);
    free(w->addr);
    free(w->rkey);
    free(w);
    return rc;
  }
  pthread_mutex_lock(&s->lock);
  w->next_proxied = s->proxied;
  s->proxied = w;
  pthread_mutex_unlock(&s->lock);
  *win_state = w;
  return 0;
}

static int rdma_device_info(void *state, mori_window_t *win, void *win_state, mori_window_dev_t *dev) {
  struct rdma_window *w = win_state;
  if (!w) return 0;
  dev->proxy = w->ring_dev;
  dev->proxy_tickets = w->tickets;
  return 0;
}

static int quiet(struct rdma_state *s);
static int serve_rings(struct rdma_state *s, bool *worked);

static int rdma_window_deregister(void *state, mori_window_t *win, void *win_state) {
  struct rdma_state *s = state;
  struct rdma_window *w = win_state;
  if (!w) return 0;
  /* The device is idle (core synchronised it): serve what is left in the
   * ring, let everything complete, then stop serving the ring. */
  bool worked = true;
  int rc = 0;
  pthread_mutex_lock(&s->lock);
  while (worked && !rc) rc = serve_rings(s, &worked);
  pthread_mutex_unlock(&s->lock);
  int qrc = quiet(s);
  if (!rc) rc = qrc;
  pthread_mutex_lock(&s->lock);
  for (struct rdma_window **p = &s->proxied; *p; p = &(*p)->next_proxied)
    if (*p == w) {
      *p = w->next_proxied;
      break;
    }
  pthread_mutex_unlock(&s->lock);
  (s->v->ibv_dereg_mr)(w->mr);
  mori_platform_host_free_mapped(w->ring);
  mori_platform_device_free(w->tickets);
  free(w->addr);
  free(w->rkey);
  free(w);
  return rc;
}

const mori_transport_ops_t mori_transport_rdma_ops = {
    .size = sizeof(mori_transport_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "rdma",
    .caps = MORI_TRANSPORT_RDMA,
    .init = rdma_init,
    .can_reach = rdma_can_reach,
    .window_register = rdma_window_register,
    .window_deregister = rdma_window_deregister,
    .device_info = rdma_device_info,
    .fini = rdma_fini,
};

/* ---- host-posted operations ---- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Work-request ids: a host-API operation carries peer << 1; a proxied one
 * the address of its window | 1 (windows are aligned). */
static void complete(struct rdma_state *s, const struct ibv_wc *wc) {
  s->completed++;
  if (wc->wr_id & 1) {
    struct rdma_window *w = (struct rdma_window *)(uintptr_t)(wc->wr_id & ~(uint64_t)1);
    if (wc->status != IBV_WC_SUCCESS) {
      __atomic_add_fetch(&w->ring->failed, 1, __ATOMIC_RELEASE);
      MORI_WARN("rdma: a request from a kernel failed: %s", (s->v->ibv_wc_status_str)(wc->status));
    }
    __atomic_add_fetch(&w->ring->done, 1, __ATOMIC_RELEASE);
  }
}

/* Reaps what has completed; fails on the first failed host-API operation.
 * Caller holds s->lock. */
static int reap_some(struct rdma_state *s) {
  struct ibv_wc wc[32];
  int n = ibv_poll_cq(s->cq, 32, wc);
  if (n < 0) return mori_error_set(MORI_EIO, "rdma: polling the completion queue failed");
  for (int i = 0; i < n; i++) {
    complete(s, &wc[i]);
    if (!(wc[i].wr_id & 1) && wc[i].status != IBV_WC_SUCCESS)
      return mori_error_set(MORI_EIO, "rdma: an operation to rank %d failed: %s (vendor error 0x%x)",
                            (int)(wc[i].wr_id >> 1), (s->v->ibv_wc_status_str)(wc[i].status), wc[i].vendor_err);
  }
  return n;
}

/* Reaps completions until at most `outstanding` remain. Caller holds s->lock. */
static int reap(struct rdma_state *s, uint64_t outstanding) {
  int64_t deadline = now_ms() + s->timeout_ms;
  while (s->posted - s->completed > outstanding) {
    int n = reap_some(s);
    if (n < 0) return n;
    if (n == 0 && now_ms() > deadline)
      return mori_error_set(MORI_ETIMEDOUT, "rdma: %llu operation(s) did not complete within %d ms",
                            (unsigned long long)(s->posted - s->completed), s->timeout_ms);
  }
  return 0;
}

static int quiet(struct rdma_state *s) {
  pthread_mutex_lock(&s->lock);
  int rc = reap(s, 0);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

/* Caller holds s->lock. */
static int post(struct rdma_state *s, int peer, struct ibv_send_wr *wr, uint64_t wr_id) {
  int rc = reap(s, SQ_DEPTH / 2); /* keep the send queue from overflowing */
  if (rc) return rc;
  struct ibv_send_wr *bad = NULL;
  wr->wr_id = wr_id;
  wr->send_flags |= IBV_SEND_SIGNALED;
  int err = ibv_post_send(s->qp[peer], wr, &bad);
  if (err) return mori_error_set(-err, "rdma: posting to rank %d failed: %s", peer, strerror(err));
  s->posted++;
  return 0;
}

static int post_put(struct rdma_state *s, struct rdma_window *w, int peer, uint64_t dst, uint64_t src, uint64_t bytes,
                    uint64_t wr_id) {
  struct ibv_sge sge = {(uint64_t)(uintptr_t)(w->base + src), (uint32_t)bytes, w->mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};
  wr.wr.rdma.remote_addr = w->addr[peer] + dst;
  wr.wr.rdma.rkey = w->rkey[peer];
  return post(s, peer, &wr, wr_id);
}

static int post_get(struct rdma_state *s, struct rdma_window *w, int peer, uint64_t dst, uint64_t src, uint64_t bytes,
                    uint64_t wr_id) {
  struct ibv_sge sge = {(uint64_t)(uintptr_t)(w->base + dst), (uint32_t)bytes, w->mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ};
  wr.wr.rdma.remote_addr = w->addr[peer] + src;
  wr.wr.rdma.rkey = w->rkey[peer];
  return post(s, peer, &wr, wr_id);
}

/* Fenced: it happens after this QP's earlier reads and writes. */
static int post_add(struct rdma_state *s, struct rdma_window *w, int peer, uint64_t offset, uint64_t value,
                    uint64_t wr_id) {
  struct ibv_sge sge = {(uint64_t)(uintptr_t)s->scratch, 8, s->scratch_mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                           .send_flags = IBV_SEND_FENCE};
  wr.wr.atomic.remote_addr = w->addr[peer] + offset;
  wr.wr.atomic.compare_add = value;
  wr.wr.atomic.rkey = w->rkey[peer];
  return post(s, peer, &wr, wr_id);
}

/* The value travels inline (copied at post time): nothing to keep alive. */
static int post_set(struct rdma_state *s, struct rdma_window *w, int peer, uint64_t offset, uint64_t value,
                    uint64_t wr_id) {
  struct ibv_sge sge = {(uint64_t)(uintptr_t)&value, 8, 0};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_INLINE | IBV_SEND_FENCE};
  wr.wr.rdma.remote_addr = w->addr[peer] + offset;
  wr.wr.rdma.rkey = w->rkey[peer];
  return post(s, peer, &wr, wr_id);
}

/* Takes every ready request from every ring and posts it. A request that
 * cannot be posted (bad peer, out of bounds) counts as done and failed.
 * Caller holds s->lock. */
static int serve_rings(struct rdma_state *s, bool *worked) {
  *worked = false;
  for (struct rdma_window *w = s->proxied; w; w = w->next_proxied) {
    for (;;) {
      mori_proxy_request_t *r = &w->ring->slot[w->next % MORI_PROXY_SLOTS];
      if (__atomic_load_n(&r->ready, __ATOMIC_ACQUIRE) != w->next + 1) break;
      mori_proxy_request_t q = *r;
      uint64_t id = (uint64_t)(uintptr_t)w | 1;
      int rc;
      bool in_bounds = q.peer >= 0 && q.peer < s->size && q.peer != s->rank;
      uint64_t span = (q.op == MORI_PROXY_PUT || q.op == MORI_PROXY_GET) ? q.bytes_or_value : 8;
      in_bounds = in_bounds && q.dst_offset <= w->size && span <= w->size - q.dst_offset;
      if (q.op == MORI_PROXY_PUT || q.op == MORI_PROXY_GET) in_bounds = in_bounds && q.src_offset <= w->size && span <= w->size - q.src_offset;
      if (!in_bounds) rc = MORI_EINVAL;
      else if (q.op == MORI_PROXY_PUT) rc = post_put(s, w, q.peer, q.dst_offset, q.src_offset, q.bytes_or_value, id);
      else if (q.op == MORI_PROXY_GET) rc = post_get(s, w, q.peer, q.dst_offset, q.src_offset, q.bytes_or_value, id);
      else if (q.op == MORI_PROXY_ATOMIC_ADD) rc = post_add(s, w, q.peer, q.dst_offset, q.bytes_or_value, id);
      else if (q.op == MORI_PROXY_SIGNAL_SET) rc = post_set(s, w, q.peer, q.dst_offset, q.bytes_or_value, id);
      else rc = MORI_EINVAL;
      if (rc) {
        MORI_WARN("rdma proxy: request %u to rank %d (dst %llu, %llu bytes) refused: %s", q.op, q.peer,
                  (unsigned long long)q.dst_offset, (unsigned long long)q.bytes_or_value,
                  rc == MORI_EINVAL ? "bad peer or out of the window" : mori_last_error());
        __atomic_add_fetch(&w->ring->failed, 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&w->ring->done, 1, __ATOMIC_RELEASE);
      }
      w->next++;
      __atomic_store_n(&w->ring->consumed, w->next, __ATOMIC_RELEASE);
      *worked = true;
    }
  }
  int n = reap_some(s);
  if (n > 0) *worked = true;
  return n < 0 ? n : 0;
}

static void *proxy_main(void *arg) {
  struct rdma_state *s = arg;
  pthread_mutex_lock(&s->lock);
  while (!s->stopping) {
    bool worked = false;
    if (serve_rings(s, &worked) != 0) MORI_WARN("rdma proxy: %s", mori_last_error());
    if (!worked) {
      pthread_mutex_unlock(&s->lock);
      struct timespec pause = {0, 20 * 1000}; /* idle: 20 us */
      nanosleep(&pause, NULL);
      pthread_mutex_lock(&s->lock);
    }
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

static int start_proxy(struct rdma_state *s) {
  int err = pthread_create(&s->proxy, NULL, proxy_main, s);
  if (err) return mori_error_set(-err, "rdma: starting the proxy thread: %s", strerror(err));
  s->proxy_running = true;
  return 0;
}

static void stop_proxy(struct rdma_state *s) {
  if (!s->proxy_running) return;
  pthread_mutex_lock(&s->lock);
  s->stopping = true;
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->proxy, NULL);
  s->proxy_running = false;
}

static int prepare(mori_window_t *win, int peer, size_t remote_offset, size_t local_offset, size_t bytes, const char *op,
                   struct rdma_state **s_out, struct rdma_window **w_out) {
  if (!win) return mori_error_set(MORI_EINVAL, "rdma %s: NULL window", op);
  mori_comm_t *comm = mori_window_comm(win);
  struct rdma_state *s = mori_comm_transport_state(comm, &mori_transport_rdma_ops);
  if (!s) return mori_error_set(MORI_EINVAL, "rdma %s: the comm was created without the rdma transport", op);
  if (!s->usable) return mori_error_set(MORI_EUNREACHABLE, "rdma %s: not every rank has a usable RDMA device", op);
  struct rdma_window *w = mori_window_transport_state(win, &mori_transport_rdma_ops);
  if (peer < 0 || peer >= s->size || peer == s->rank)
    return mori_error_set(MORI_EINVAL, "rdma %s: peer %d (this is rank %d of %d)", op, peer, s->rank, s->size);
  if (remote_offset > w->size || bytes > w->size - remote_offset || local_offset > w->size || bytes > w->size - local_offset)
    return mori_error_set(MORI_ERANGE, "rdma %s to rank %d: %zu bytes at remote offset %zu / local offset %zu leave the %zu-byte window",
                          op, peer, bytes, remote_offset, local_offset, w->size);
  *s_out = s;
  *w_out = w;
  return 0;
}

int mori_rdma_put(mori_window_t *win, int peer, size_t dst_offset, size_t src_offset, size_t bytes) {
  struct rdma_state *s;
  struct rdma_window *w;
  int rc = prepare(win, peer, dst_offset, src_offset, bytes, "put", &s, &w);
  if (rc) return rc;
  pthread_mutex_lock(&s->lock);
  rc = post_put(s, w, peer, dst_offset, src_offset, bytes, (uint64_t)peer << 1);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

int mori_rdma_get(mori_window_t *win, int peer, size_t dst_offset, size_t src_offset, size_t bytes) {
  struct rdma_state *s;
  struct rdma_window *w;
  int rc = prepare(win, peer, src_offset, dst_offset, bytes, "get", &s, &w);
  if (rc) return rc;
  pthread_mutex_lock(&s->lock);
  rc = post_get(s, w, peer, dst_offset, src_offset, bytes, (uint64_t)peer << 1);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

int mori_rdma_atomic_add(mori_window_t *win, int peer, size_t offset, uint64_t value) {
  struct rdma_state *s;
  struct rdma_window *w;
  if (offset % 8) return mori_error_set(MORI_EINVAL, "rdma atomic_add: offset %zu is not 8-byte aligned", offset);
  int rc = prepare(win, peer, offset, 0, 8, "atomic_add", &s, &w);
  if (rc) return rc;
  pthread_mutex_lock(&s->lock);
  rc = post_add(s, w, peer, offset, value, (uint64_t)peer << 1);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

int mori_rdma_quiet(mori_comm_t *comm) {
  struct rdma_state *s = comm ? mori_comm_transport_state(comm, &mori_transport_rdma_ops) : NULL;
  if (!s) return mori_error_set(MORI_EINVAL, "rdma quiet: the comm was created without the rdma transport");
  return quiet(s);
}
