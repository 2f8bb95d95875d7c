// SPDX-License-Identifier: MIT
/* The rdma transport's posting: work requests on the peer's queue pairs
 * (signalled, so every one completes into the CQ; several QPs per peer take
 * requests in turn, fenced ops stay behind earlier transfers: internal.h),
 * reaping with a timeout, and the host API (mori_rdma_put/get/atomic_add/
 * quiet). Every request names its segment, which counts what is in flight
 * for it, so a segment is never freed under a request that may still
 * complete. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/platform/platform.h"
#include "transport/rdma/internal.h"

int64_t rdma_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The slot (peer * num_qp + i) of the QP with this number, or -1. A
 * linear scan: a completion is processed under the lock anyway, and the
 * table is at most ranks x MORI_NUM_QP_PER_PE numbers. */
static long slot_of_qp(const struct rdma_state *s, uint32_t qp_num) {
  size_t n = (size_t)s->size * (size_t)s->num_qp;
  for (size_t i = 0; i < n; i++)
    if (s->qp[i] && s->qpn[i] == qp_num) return (long)i;
  return -1;
}

void rdma_segment_free(struct rdma_state *s, struct rdma_segment *w) {
  rdma_gda_window_free(w->device, w->gda_table);
  if (w->mr) (s->v->ibv_dereg_mr)(w->mr);
  if (w->ring) mori_platform_host_free_mapped(w->ring);
  mori_platform_device_free(w->device, w->tickets);
  free(w->addr);
  free(w->rkey);
  free(w->in_flight_to);
  free(w);
}

_Static_assert(((MORI_PROXY_SLOTS - 1) << WR_TICKET_SHIFT) <= WR_FLAGS, "a ring's ticket index fits in a work-request id");

static void ring_advance(struct rdma_segment *w) {
  uint64_t done = w->done_prefix;
  while (w->sealed[done % MORI_PROXY_SLOTS] && w->pieces_out[done % MORI_PROXY_SLOTS] == 0)
    w->sealed[done++ % MORI_PROXY_SLOTS] = 0;
  if (done == w->done_prefix) return;
  w->done_prefix = done;
  __atomic_store_n(&w->ring->done, done, __ATOMIC_RELEASE);
}

void rdma_ring_piece_done(struct rdma_segment *w, uint64_t index) {
  w->pieces_out[index % MORI_PROXY_SLOTS]--;
  ring_advance(w);
}

void rdma_ring_seal(struct rdma_segment *w, uint64_t index) {
  w->sealed[index % MORI_PROXY_SLOTS] = 1;
  ring_advance(w);
}

/* One completion. Caller holds s->lock. */
static void complete(struct rdma_state *s, const struct ibv_wc *wc) {
  struct rdma_segment *w = (struct rdma_segment *)(uintptr_t)(wc->wr_id & ~(uint64_t)WR_FLAGS);
  bool proxied = wc->wr_id & WR_PROXIED, last = !(wc->wr_id & WR_PARTIAL);
  long slot = slot_of_qp(s, wc->qp_num);
  int peer = slot < 0 ? -1 : (int)(slot / s->num_qp);
  s->completed++;
  w->in_flight--;
  if (peer >= 0) {
    w->in_flight_to[peer]--;
    s->qp_in_flight[slot]--;
  }
  if (wc->status != IBV_WC_SUCCESS) {
    const char *status = (s->v->ibv_wc_status_str)(wc->status);
    if (proxied) {
      /* A failed piece fails the QP, so the request's last piece completes
       * flushed and is counted there, once. */
      if (last) __atomic_add_fetch(&w->ring->failed, 1, __ATOMIC_RELEASE);
      rdma_warn_limited(&s->failed_warns, "rdma: a request from a kernel to rank %d failed: %s", peer, status);
    } else if (!s->host_error) {
      s->host_error = MORI_EIO;
      snprintf(s->host_error_text, sizeof(s->host_error_text), "rdma: an operation to rank %d failed: %s (vendor error 0x%x)",
               peer, status, wc->vendor_err);
    }
  }
  /* Taken tickets are within MORI_PROXY_SLOTS of done_prefix: the
   * ticket's index in the id (on every piece) names one. */
  if (proxied) rdma_ring_piece_done(w, (wc->wr_id & WR_FLAGS) >> WR_TICKET_SHIFT);
  if (w->in_flight == 0 && w == s->retired) {
    s->retired = w->next_retired;
    rdma_segment_free(s, w);
  } else if (w->in_flight == 0) {
    for (struct rdma_segment *r = s->retired; r; r = r->next_retired)
      if (r->next_retired == w) {
        r->next_retired = w->next_retired;
        rdma_segment_free(s, w);
        break;
      }
  }
}

/* Processes every completion one poll returns: none is dropped, whatever
 * failed before it in the batch. Returns how many, or an error when the
 * poll itself fails. Caller holds s->lock. */
int rdma_reap_some(struct rdma_state *s) {
  struct ibv_wc wc[32];
  int n = ibv_poll_cq(s->cq, 32, wc);
  if (n < 0) return mori_error_set(MORI_EIO, "rdma: polling the completion queue failed");
  for (int i = 0; i < n; i++) complete(s, &wc[i]);
  return n;
}

static void pause_briefly(void) {
  struct timespec t = {0, 5 * 1000}; /* 5 us: completions come in microseconds */
  nanosleep(&t, NULL);
}

/* "rank 3 (2), rank 7 (1)": the peers with work in flight and how much.
 * Caller holds s->lock. */
static void ranks_in_flight(const struct rdma_state *s, const struct rdma_segment *w, char *out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (int p = 0; p < s->size; p++) {
    uint64_t n = 0;
    if (w) n = w->in_flight_to[p];
    else
      for (int i = 0; i < s->num_qp; i++) n += s->qp_in_flight[(size_t)p * (size_t)s->num_qp + (size_t)i];
    if (n && used + 32 < cap) used += (size_t)snprintf(out + used, cap - used, "%srank %d (%llu)", used ? ", " : "", p, (unsigned long long)n);
  }
}

int rdma_wait_in_flight(struct rdma_state *s, struct rdma_segment *w, uint64_t in_flight, int64_t deadline_ms) {
  for (;;) {
    pthread_mutex_lock(&s->lock);
    int n = rdma_reap_some(s);
    uint64_t left = w ? w->in_flight : s->posted - s->completed;
    bool late = n == 0 && left > in_flight && rdma_now_ms() > deadline_ms;
    char who[256] = "";
    if (late) ranks_in_flight(s, w, who, sizeof(who));
    pthread_mutex_unlock(&s->lock);
    if (n < 0) return n;
    if (left <= in_flight) return 0;
    /* A peer that died (its node gone) never answers: name it. */
    if (late)
      return mori_error_set(MORI_ETIMEDOUT, "rdma: %llu operation(s) did not complete within %d ms; waiting on %s",
                            (unsigned long long)left, s->timeout_ms, who);
    if (n == 0) pause_briefly();
  }
}

int rdma_wait_progress(struct rdma_state *s, int64_t deadline_ms, const char *what, int peer) {
  pthread_mutex_lock(&s->lock);
  int n = rdma_reap_some(s);
  pthread_mutex_unlock(&s->lock);
  if (n != 0) return n < 0 ? n : 0;
  if (rdma_now_ms() > deadline_ms)
    return mori_error_set(MORI_ETIMEDOUT, "rdma: %s to rank %d could not be posted within %d ms (earlier work did not complete)",
                          what, peer, s->timeout_ms);
  pause_briefly();
  return 0;
}

int rdma_quiet(struct rdma_state *s) {
  int rc = rdma_wait_in_flight(s, NULL, 0, rdma_now_ms() + s->timeout_ms);
  pthread_mutex_lock(&s->lock);
  int failed = s->host_error;
  char text[sizeof(s->host_error_text)];
  memcpy(text, s->host_error_text, sizeof(text));
  s->host_error = 0;
  pthread_mutex_unlock(&s->lock);
  /* A failure is the first thing to report: it may be why work is left. */
  if (failed) return mori_error_set(failed, "%s", text);
  return rc;
}

/* Why `peer` cannot be posted to at all (MORI_EUNREACHABLE), or 0. */
static int unreachable(const struct rdma_state *s, int peer) {
  if (!s->connect[peer])
    return mori_error_set(MORI_EUNREACHABLE,
                          "rdma: rank %d has no queue pair to rank %d: MORI_ENABLE_RAIL_ONLY connects only same-rail peers "
                          "(the same local rank on another node) and same-host peers",
                          s->rank, peer);
  if (s->qp_failed[peer])
    return mori_error_set(MORI_EUNREACHABLE,
                          "rdma: the queue pairs from rank %d to rank %d were moved to error (earlier work to it never completed)",
                          s->rank, peer);
  return 0;
}

int rdma_peek_qp(const struct rdma_state *s, int peer) {
  return s->fence_waiting[peer] ? s->last_qp[peer] : (int)(s->next_qp[peer] % (uint32_t)s->num_qp);
}

int rdma_next_qp(struct rdma_state *s, int peer) {
  /* While a fenced op waits for the peer's other QPs to drain, new
   * transfers join its QP instead of refilling them (ahead of the op, which
   * stays behind them too): under steady traffic the op is not starved. */
  if (s->fence_waiting[peer]) return s->last_qp[peer];
  int q = (int)(s->next_qp[peer]++ % (uint32_t)s->num_qp);
  s->last_qp[peer] = q;
  return q;
}

/* On the peer's QP `q`. Caller holds s->lock. */
static int post(struct rdma_state *s, struct rdma_segment *w, int peer, int q, struct ibv_send_wr *wr, uint64_t flags) {
  int rc = unreachable(s, peer);
  if (rc) return rc;
  if (s->posted - s->completed >= MAX_IN_FLIGHT) return MORI_EAGAIN;
  size_t slot = (size_t)peer * (size_t)s->num_qp + (size_t)q;
  struct ibv_send_wr *bad = NULL;
  wr->wr_id = (uint64_t)(uintptr_t)w | flags;
  wr->send_flags |= IBV_SEND_SIGNALED;
  int err = ibv_post_send(s->qp[slot], wr, &bad);
  if (err) return mori_error_set(err > 0 ? -err : MORI_EIO, "rdma: posting to rank %d failed: %s", peer, strerror(err > 0 ? err : EIO));
  s->posted++;
  w->in_flight++;
  w->in_flight_to[peer]++;
  s->qp_in_flight[slot]++;
  return 0;
}

/* The QP a fenced op to `peer` goes on (the latest transfer's), or
 * MORI_EAGAIN while another of the peer's QPs has work in flight: the fence
 * orders the op after its own QP's earlier work only, so the other QPs must
 * have completed theirs (RC completion: the data is placed at the peer). A
 * peer the op cannot reach says so first. Caller holds s->lock. */
static int fenced_qp(struct rdma_state *s, int peer, int *q) {
  int rc = unreachable(s, peer);
  if (rc) return rc;
  *q = s->last_qp[peer];
  s->fence_waiting[peer] = false;
  for (int i = 0; i < s->num_qp; i++)
    if (i != *q && s->qp_in_flight[(size_t)peer * (size_t)s->num_qp + (size_t)i]) s->fence_waiting[peer] = true;
  return s->fence_waiting[peer] ? MORI_EAGAIN : 0;
}

int rdma_post_piece(struct rdma_state *s, struct rdma_segment *w, int peer, int opcode, uint64_t remote, uint64_t local,
                    uint64_t bytes, uint64_t done, uint64_t flags, uint64_t *len) {
  if (!s->connect[peer]) return unreachable(s, peer);
  /* The QP is taken when the first piece is posted: a request that waits
   * for room (MORI_EAGAIN) takes none. */
  int q = done == 0 ? rdma_peek_qp(s, peer) : w->piece_qp;
  int rc = rdma_post_piece_on(s, w, peer, q, opcode, remote, local, bytes, done, flags, len);
  if (!rc && done == 0) w->piece_qp = rdma_next_qp(s, peer);
  return rc;
}

int rdma_post_piece_on(struct rdma_state *s, struct rdma_segment *w, int peer, int q, int opcode, uint64_t remote,
                       uint64_t local, uint64_t bytes, uint64_t done, uint64_t flags, uint64_t *len) {
  uint64_t piece = bytes - done < s->max_msg ? bytes - done : s->max_msg;
  /* max_msg fits the SGE's 32-bit length (the port reports it as 32 bits). */
  struct ibv_sge sge = {(uint64_t)(uintptr_t)(w->base + local + done), (uint32_t)piece, w->mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = (enum ibv_wr_opcode)opcode};
  wr.wr.rdma.remote_addr = w->addr[peer] + remote + done;
  wr.wr.rdma.rkey = w->rkey[peer];
  int rc = post(s, w, peer, q, &wr, flags | (done + piece < bytes ? WR_PARTIAL : 0));
  if (!rc) *len = piece;
  return rc;
}

/* Fenced: it happens after every earlier read and write to the peer. */
int rdma_post_add(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t offset, uint64_t value, uint64_t flags) {
  int q = 0, rc = fenced_qp(s, peer, &q);
  if (rc) return rc;
  struct ibv_sge sge = {(uint64_t)(uintptr_t)s->scratch, 8, s->scratch_mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                           .send_flags = IBV_SEND_FENCE};
  wr.wr.atomic.remote_addr = w->addr[peer] + offset;
  wr.wr.atomic.compare_add = value;
  wr.wr.atomic.rkey = w->rkey[peer];
  return post(s, w, peer, q, &wr, flags);
}

/* The value travels inline (copied at post time): nothing to keep alive.
 * Fenced like an add. */
int rdma_post_set(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t offset, uint64_t value, uint64_t flags) {
  int q = 0, rc = fenced_qp(s, peer, &q);
  if (rc) return rc;
  struct ibv_sge sge = {(uint64_t)(uintptr_t)&value, 8, 0};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_INLINE | IBV_SEND_FENCE};
  wr.wr.rdma.remote_addr = w->addr[peer] + offset;
  wr.wr.rdma.rkey = w->rkey[peer];
  return post(s, w, peer, q, &wr, flags);
}

/* Offsets come in relative to the window and go out relative to the
 * registered segment, which may be a heap chunk the window sits in (at the
 * same offset on every rank). */
static int prepare(mori_window_t *win, int peer, size_t *remote_offset, size_t *local_offset, size_t bytes, const char *op,
                   struct rdma_state **s_out, struct rdma_segment **w_out) {
  if (!win) return mori_error_set(MORI_EINVAL, "rdma %s: NULL window", op);
  char call[24];
  snprintf(call, sizeof(call), "rdma %s", op);
  int live = mori_window_check_live(win, call);
  if (live) return live;
  mori_comm_t *comm = mori_window_comm(win);
  struct rdma_state *s = mori_comm_transport_state(comm, &mori_transport_rdma_ops);
  if (!s) return mori_error_set(MORI_EINVAL, "rdma %s: the comm was created without the rdma transport", op);
  if (!s->usable) return mori_error_set(MORI_EUNREACHABLE, "rdma %s: not every rank has a usable RDMA device: %s", op, s->unusable);
  struct rdma_segment *w = mori_window_transport_state(win, &mori_transport_rdma_ops);
  if (!w) return mori_error_set(MORI_EINVAL, "rdma %s: the window is not registered with the rdma transport", op);
  if (peer < 0 || peer >= s->size || peer == s->rank)
    return mori_error_set(MORI_EINVAL, "rdma %s: peer %d (this is rank %d of %d)", op, peer, s->rank, s->size);
  if (!s->connect[peer]) return mori_error_context(unreachable(s, peer), "rdma %s", op);
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

/* A put or get of any length: pieces of at most the port's largest message,
 * each posted when the send queues have room (waiting without the lock). */
static int transfer(struct rdma_state *s, struct rdma_segment *w, int peer, int opcode, uint64_t remote, uint64_t local,
                    uint64_t bytes) {
  int64_t deadline = rdma_now_ms() + s->timeout_ms;
  uint64_t done = 0;
  int q = -1; /* every piece on the QP the first one took */
  do {
    uint64_t len = 0;
    pthread_mutex_lock(&s->lock);
    bool first = q < 0;
    if (first) q = rdma_peek_qp(s, peer);
    int rc = rdma_post_piece_on(s, w, peer, q, opcode, remote, local, bytes, done, 0, &len);
    if (!rc && first) rdma_next_qp(s, peer);
    if (rc && first) q = -1;
    pthread_mutex_unlock(&s->lock);
    if (rc == MORI_EAGAIN) rc = rdma_wait_in_flight(s, NULL, MAX_IN_FLIGHT - 1, deadline);
    else done += len;
    if (rc) return mori_error_context(rc, "rdma: %llu of %llu bytes to rank %d posted", (unsigned long long)done,
                                      (unsigned long long)bytes, peer);
  } while (done < bytes);
  return 0;
}

int mori_rdma_put(mori_window_t *win, int peer, size_t dst_offset, size_t src_offset, size_t bytes) {
  struct rdma_state *s;
  struct rdma_segment *w;
  int rc = prepare(win, peer, &dst_offset, &src_offset, bytes, "put", &s, &w);
  return rc ? rc : transfer(s, w, peer, IBV_WR_RDMA_WRITE, dst_offset, src_offset, bytes);
}

int mori_rdma_get(mori_window_t *win, int peer, size_t dst_offset, size_t src_offset, size_t bytes) {
  struct rdma_state *s;
  struct rdma_segment *w;
  int rc = prepare(win, peer, &src_offset, &dst_offset, bytes, "get", &s, &w);
  return rc ? rc : transfer(s, w, peer, IBV_WR_RDMA_READ, src_offset, dst_offset, bytes);
}

int mori_rdma_atomic_add(mori_window_t *win, int peer, size_t offset, uint64_t value) {
  struct rdma_state *s;
  struct rdma_segment *w;
  if (offset % 8) return mori_error_set(MORI_EINVAL, "rdma atomic_add: offset %zu is not 8-byte aligned", offset);
  size_t unused_local = 0;
  int rc = prepare(win, peer, &offset, &unused_local, 8, "atomic_add", &s, &w);
  if (rc) return rc;
  int64_t deadline = rdma_now_ms() + s->timeout_ms;
  for (;;) {
    pthread_mutex_lock(&s->lock);
    rc = rdma_post_add(s, w, peer, offset, value, 0);
    pthread_mutex_unlock(&s->lock);
    if (rc != MORI_EAGAIN) return rc;
    /* Full send queues, or earlier transfers to the peer on its other QPs
     * still in flight (the add stays behind them). */
    if ((rc = rdma_wait_progress(s, deadline, "an atomic add", peer)) != 0) {
      pthread_mutex_lock(&s->lock);
      s->fence_waiting[peer] = false; /* given up: transfers spread again */
      pthread_mutex_unlock(&s->lock);
      return rc;
    }
  }
}

int mori_rdma_quiet(mori_comm_t *comm) {
  int rc = rdma_comm_arg(comm, "rdma quiet");
  if (rc) return rc;
  struct rdma_state *s = mori_comm_transport_state(comm, &mori_transport_rdma_ops);
  if (!s) return mori_error_set(MORI_EINVAL, "rdma quiet: the comm was created without the rdma transport");
  return rdma_quiet(s);
}
