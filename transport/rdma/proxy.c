// SPDX-License-Identifier: MIT
/* The rdma transport's proxy: kernels (and CPU ranks) that need a peer
 * outside the LSA team write requests into their segment's ring; this
 * thread takes them in ticket order, posts them, and moves the ring's done
 * past each request once it has completed (they complete out of order), so
 * mori_proxy_quiet can wait for every request before the tickets it read. It holds the lock only
 * while posting what fits and polling once: when the send queues are full
 * a request stays in its ring until completions make room. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/trace.h"
#include "transport/rdma/internal.h"

static const char OUT_OF_WINDOW[] = "it leaves its window";

/* Whether [off, off + span) lies in the window [wo, wo + ws) of the
 * segment; *rel gets off - wo (modulo 2^64: the offset the kernel gave).
 * Subtractions only: no sum can wrap. */
static bool in_window(uint64_t off, uint64_t span, uint64_t wo, uint64_t ws, uint64_t *rel) {
  *rel = off - wo;
  return off >= wo && *rel <= ws && span <= ws - *rel;
}

/* Why a request cannot be posted at all, or NULL; OUT_OF_WINDOW with the
 * offending offset (into the window) in *bad. The window must lie in the
 * registered segment, and the request in the window, on both sides (the
 * same check as the host API's: a heap chunk holds other windows). */
static const char *refusal(const struct rdma_state *s, const struct rdma_segment *w, const mori_proxy_request_t *q,
                           uint64_t *bad) {
  if (q->peer < 0 || q->peer >= s->size || q->peer == s->rank) return "bad peer";
  bool transfer = q->op == MORI_PROXY_PUT || q->op == MORI_PROXY_GET;
  if (!transfer && q->op != MORI_PROXY_ATOMIC_ADD && q->op != MORI_PROXY_SIGNAL_SET) return "unknown operation";
  if (q->window_offset > w->size || q->window_size > w->size - q->window_offset)
    return "its window lies outside the registered memory";
  uint64_t span = transfer ? q->bytes_or_value : 8;
  if (!in_window(q->dst_offset, span, q->window_offset, q->window_size, bad)) return OUT_OF_WINDOW;
  if (transfer && !in_window(q->src_offset, span, q->window_offset, q->window_size, bad)) return OUT_OF_WINDOW;
  /* Remote atomics need an aligned word (the NIC fails them otherwise), and
   * a signal must not tear. */
  if (!transfer && q->dst_offset % 8 != 0) return "not 8-byte aligned";
  return NULL;
}

/* A request that left its window, for mori_proxy_quiet to put in the
 * window's mailbox: written only when the last one was taken (count ==
 * reported), count bumped after the fields. Only the proxy (under s->lock)
 * writes here. */
static void record_refusal(struct rdma_segment *w, const mori_proxy_request_t *q, uint64_t offset, uint64_t bytes) {
  mori_proxy_refusal_t *f = &w->ring->refused;
  uint32_t count = __atomic_load_n(&f->count, __ATOMIC_RELAXED);
  if (count == __atomic_load_n(&f->reported, __ATOMIC_ACQUIRE)) {
    f->op = q->op;
    f->peer = q->peer;
    f->offset = offset;
    f->bytes = bytes;
    f->window_size = q->window_size;
  }
  __atomic_store_n(&f->count, count + 1, __ATOMIC_RELEASE);
}

static const char *op_name(uint32_t op) {
  switch (op) {
    case MORI_PROXY_PUT: return "put";
    case MORI_PROXY_GET: return "get";
    case MORI_PROXY_ATOMIC_ADD: return "atomic add";
    case MORI_PROXY_SIGNAL_SET: return "signal";
    default: return "request";
  }
}

/* Counts a request as failed (the caller seals it: it is done once the
 * pieces it already posted have completed). */
static void refuse(struct rdma_state *s, struct rdma_segment *w, const mori_proxy_request_t *q, const char *why,
                   uint64_t bad) {
  bool transfer = q->op == MORI_PROXY_PUT || q->op == MORI_PROXY_GET;
  uint64_t span = transfer ? q->bytes_or_value : 8;
  if (why == OUT_OF_WINDOW) {
    record_refusal(w, q, bad, span);
    rdma_warn_limited(&s->refused_warns,
                      "rdma proxy: rank %d refused a %s from a kernel to rank %d: %llu bytes at offset %llu leave the "
                      "%llu-byte window",
                      s->rank, op_name(q->op), q->peer, (unsigned long long)span, (unsigned long long)bad,
                      (unsigned long long)q->window_size);
  } else {
    rdma_warn_limited(&s->refused_warns, "rdma proxy: rank %d refused a %s (op %u) to rank %d (dst %llu, %llu bytes or value): %s",
                      s->rank, op_name(q->op), q->op, q->peer, (unsigned long long)q->dst_offset,
                      (unsigned long long)q->bytes_or_value, why);
  }
  __atomic_add_fetch(&w->ring->failed, 1, __ATOMIC_RELEASE);
}

int rdma_serve_ring(struct rdma_state *s, struct rdma_segment *w, bool *worked, bool *left) {
  *left = false;
  for (;;) {
    mori_proxy_request_t *r = &w->ring->slot[w->next % MORI_PROXY_SLOTS];
    if (__atomic_load_n(&r->ready, __ATOMIC_ACQUIRE) != w->next + 1) return 0;
    if (w->next - w->done_prefix >= MORI_PROXY_SLOTS) { /* sealed[], pieces_out[] hold no more: wait for completions */
      *left = true;
      return 0;
    }
    mori_proxy_request_t q = *r;
    MORI_TRACE_SCOPE("proxy_request", MORI_TA("op", q.op), MORI_TA("peer", q.peer), MORI_TA("bytes", q.bytes_or_value));
    uint64_t bad = 0;
    const char *why = refusal(s, w, &q, &bad);
    int rc = 0;
    bool finished = true;
    uint64_t flags = WR_PROXIED | (w->next % MORI_PROXY_SLOTS) << WR_TICKET_SHIFT;
    if (!why) {
      if (q.op == MORI_PROXY_PUT || q.op == MORI_PROXY_GET) {
        uint64_t len = 0;
        int opcode = q.op == MORI_PROXY_PUT ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
        uint64_t remote = q.op == MORI_PROXY_PUT ? q.dst_offset : q.src_offset;
        uint64_t local = q.op == MORI_PROXY_PUT ? q.src_offset : q.dst_offset;
        rc = rdma_post_piece(s, w, q.peer, opcode, remote, local, q.bytes_or_value, w->piece, flags, &len);
        if (!rc) {
          w->piece += len;
          finished = w->piece >= q.bytes_or_value;
        }
      } else if (q.op == MORI_PROXY_ATOMIC_ADD) {
        rc = rdma_post_add(s, w, q.peer, q.dst_offset, q.bytes_or_value, flags);
      } else {
        rc = rdma_post_set(s, w, q.peer, q.dst_offset, q.bytes_or_value, flags);
      }
    }
    if (rc == MORI_EAGAIN) { /* the send queues are full: this request waits in its ring */
      *left = true;
      return 0;
    }
    *worked = true;
    if (!why && !rc) w->pieces_out[w->next % MORI_PROXY_SLOTS]++;
    if (why || rc) {
      /* Pieces already posted complete on their own (the request is done
       * once they have); the last one never will be posted. */
      refuse(s, w, &q, why ? why : mori_last_error(), bad);
      finished = true;
    }
    if (!finished) continue;
    rdma_ring_seal(w, w->next);
    w->piece = 0;
    w->next++;
    __atomic_store_n(&w->ring->consumed, w->next, __ATOMIC_RELEASE);
  }
}

/* Takes every ready request from every ring that fits, posts it, polls the
 * CQ once. Caller holds s->lock. */
int rdma_serve_rings(struct rdma_state *s, bool *worked) {
  *worked = false;
  if (!s->proxy_held)
    for (struct rdma_segment *w = s->proxied; w; w = w->next_proxied) {
      bool left;
      rdma_serve_ring(s, w, worked, &left);
    }
  int n = rdma_reap_some(s);
  if (n > 0) *worked = true;
  return n < 0 ? n : 0;
}

/* After the last request or completion the proxy keeps polling (yielding
 * the CPU between polls) for this long before it sleeps between polls: a
 * kernel that waits on a completion pays the poll interval each round trip,
 * and a sleep costs ~60 us more than asked (timer slack). */
enum { PROXY_BUSY_NS = 2 * 1000 * 1000, PROXY_IDLE_SLEEP_NS = 20 * 1000 };

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void *proxy_main(void *arg) {
  struct rdma_state *s = arg;
  int64_t last_work = now_ns();
  for (;;) {
    pthread_mutex_lock(&s->lock);
    bool stop = s->stopping, worked = false;
    if (!stop && rdma_serve_rings(s, &worked) != 0) rdma_warn_limited(&s->proxy_warns, "rdma proxy: %s", mori_last_error());
    pthread_mutex_unlock(&s->lock);
    if (stop) return NULL;
    if (worked) {
      last_work = now_ns();
    } else if (now_ns() - last_work < PROXY_BUSY_NS) {
      sched_yield();
    } else {
      struct timespec pause = {0, PROXY_IDLE_SLEEP_NS};
      nanosleep(&pause, NULL);
    }
  }
}

int rdma_start_proxy(struct rdma_state *s) {
  int err = pthread_create(&s->proxy, NULL, proxy_main, s);
  if (err) return mori_error_set(-err, "rdma: starting the proxy thread: %s", strerror(err));
  s->proxy_running = true;
  return 0;
}

void rdma_stop_proxy(struct rdma_state *s) {
  if (!s->proxy_running) return;
  pthread_mutex_lock(&s->lock);
  s->stopping = true;
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->proxy, NULL);
  s->proxy_running = false;
}

void rdma_hold_proxy(struct rdma_state *s, bool hold) {
  pthread_mutex_lock(&s->lock);
  s->proxy_held = hold;
  pthread_mutex_unlock(&s->lock);
}
