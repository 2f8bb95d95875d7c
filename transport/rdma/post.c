/* The rdma transport's posting: work requests on the peer's queue pair
 * (signalled, so every one completes into the CQ), reaping with a timeout,
 * and the host API (mori_rdma_put/get/atomic_add/quiet). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "transport/rdma/internal.h"

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
    struct rdma_segment *w = (struct rdma_segment *)(uintptr_t)(wc->wr_id & ~(uint64_t)1);
    if (wc->status != IBV_WC_SUCCESS) {
      __atomic_add_fetch(&w->ring->failed, 1, __ATOMIC_RELEASE);
      MORI_WARN("rdma: a request from a kernel failed: %s", (s->v->ibv_wc_status_str)(wc->status));
    }
    __atomic_add_fetch(&w->ring->done, 1, __ATOMIC_RELEASE);
  }
}

/* Reaps what has completed; fails on the first failed host-API operation.
 * Caller holds s->lock. */
int rdma_reap_some(struct rdma_state *s) {
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
    int n = rdma_reap_some(s);
    if (n < 0) return n;
    if (n == 0 && now_ms() > deadline)
      return mori_error_set(MORI_ETIMEDOUT, "rdma: %llu operation(s) did not complete within %d ms",
                            (unsigned long long)(s->posted - s->completed), s->timeout_ms);
  }
  return 0;
}

int rdma_quiet(struct rdma_state *s) {
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

int rdma_post_put(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t dst, uint64_t src, uint64_t bytes,
                    uint64_t wr_id) {
  struct ibv_sge sge = {(uint64_t)(uintptr_t)(w->base + src), (uint32_t)bytes, w->mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};
  wr.wr.rdma.remote_addr = w->addr[peer] + dst;
  wr.wr.rdma.rkey = w->rkey[peer];
  return post(s, peer, &wr, wr_id);
}

int rdma_post_get(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t dst, uint64_t src, uint64_t bytes,
                    uint64_t wr_id) {
  struct ibv_sge sge = {(uint64_t)(uintptr_t)(w->base + dst), (uint32_t)bytes, w->mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ};
  wr.wr.rdma.remote_addr = w->addr[peer] + src;
  wr.wr.rdma.rkey = w->rkey[peer];
  return post(s, peer, &wr, wr_id);
}

/* Fenced: it happens after this QP's earlier reads and writes. */
int rdma_post_add(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t offset, uint64_t value,
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
int rdma_post_set(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t offset, uint64_t value,
                    uint64_t wr_id) {
  struct ibv_sge sge = {(uint64_t)(uintptr_t)&value, 8, 0};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_INLINE | IBV_SEND_FENCE};
  wr.wr.rdma.remote_addr = w->addr[peer] + offset;
  wr.wr.rdma.rkey = w->rkey[peer];
  return post(s, peer, &wr, wr_id);
}

/* Offsets come in relative to the window and go out relative to the
 * registered segment, which may be a heap chunk the window sits in (at the
 * same offset on every rank). */
static int prepare(mori_window_t *win, int peer, size_t *remote_offset, size_t *local_offset, size_t bytes, const char *op,
                   struct rdma_state **s_out, struct rdma_segment **w_out) {
  if (!win) return mori_error_set(MORI_EINVAL, "rdma %s: NULL window", op);
  mori_comm_t *comm = mori_window_comm(win);
  struct rdma_state *s = mori_comm_transport_state(comm, &mori_transport_rdma_ops);
  if (!s) return mori_error_set(MORI_EINVAL, "rdma %s: the comm was created without the rdma transport", op);
  if (!s->usable) return mori_error_set(MORI_EUNREACHABLE, "rdma %s: not every rank has a usable RDMA device", op);
  struct rdma_segment *w = mori_window_transport_state(win, &mori_transport_rdma_ops);
  if (peer < 0 || peer >= s->size || peer == s->rank)
    return mori_error_set(MORI_EINVAL, "rdma %s: peer %d (this is rank %d of %d)", op, peer, s->rank, s->size);
  size_t size = mori_window_size(win), base = 0, remote = *remote_offset, local = *local_offset;
  mori_window_segment(win, &base);
  if (remote > size || bytes > size - remote || local > size || bytes > size - local)
    return mori_error_set(MORI_ERANGE, "rdma %s to rank %d: %zu bytes at remote offset %zu / local offset %zu leave the %zu-byte window",
                          op, peer, bytes, remote, local, size);
  *remote_offset = base + remote;
  *local_offset = base + local;
  *s_out = s;
  *w_out = w;
  return 0;
}

int mori_rdma_put(mori_window_t *win, int peer, size_t dst_offset, size_t src_offset, size_t bytes) {
  struct rdma_state *s;
  struct rdma_segment *w;
  int rc = prepare(win, peer, &dst_offset, &src_offset, bytes, "put", &s, &w);
  if (rc) return rc;
  pthread_mutex_lock(&s->lock);
  rc = rdma_post_put(s, w, peer, dst_offset, src_offset, bytes, (uint64_t)peer << 1);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

int mori_rdma_get(mori_window_t *win, int peer, size_t dst_offset, size_t src_offset, size_t bytes) {
  struct rdma_state *s;
  struct rdma_segment *w;
  int rc = prepare(win, peer, &src_offset, &dst_offset, bytes, "get", &s, &w);
  if (rc) return rc;
  pthread_mutex_lock(&s->lock);
  rc = rdma_post_get(s, w, peer, dst_offset, src_offset, bytes, (uint64_t)peer << 1);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

int mori_rdma_atomic_add(mori_window_t *win, int peer, size_t offset, uint64_t value) {
  struct rdma_state *s;
  struct rdma_segment *w;
  if (offset % 8) return mori_error_set(MORI_EINVAL, "rdma atomic_add: offset %zu is not 8-byte aligned", offset);
  size_t unused_local = 0;
  int rc = prepare(win, peer, &offset, &unused_local, 8, "atomic_add", &s, &w);
  if (rc) return rc;
  pthread_mutex_lock(&s->lock);
  rc = rdma_post_add(s, w, peer, offset, value, (uint64_t)peer << 1);
  pthread_mutex_unlock(&s->lock);
  return rc;
}

int mori_rdma_quiet(mori_comm_t *comm) {
  struct rdma_state *s = comm ? mori_comm_transport_state(comm, &mori_transport_rdma_ops) : NULL;
  if (!s) return mori_error_set(MORI_EINVAL, "rdma quiet: the comm was created without the rdma transport");
  return rdma_quiet(s);
}
