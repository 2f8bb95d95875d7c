/* The rdma transport's internal layout, shared by its files:
 *   queue_pairs.c  device, protection domain, CQ, one RC QP per peer, connect
 *   post.c         posting work requests, reaping completions, the host API
 *   proxy.c        the thread that serves the request rings kernels submit to
 *   rdma.c         the transport's ops (init, peer caps, segments, fini)
 *
 * Locking: s->lock guards the queue pairs, the counters and the segment
 * lists. It is held only for work that never waits (posting, one poll of
 * the CQ); every wait (for room in the send queue, for completions) drops
 * it between polls, so the proxy thread and host callers never stall each
 * other for a timeout. */
#ifndef MORI_TRANSPORT_RDMA_INTERNAL_H
#define MORI_TRANSPORT_RDMA_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "mori/device/impl/proxy__types.h"
#include "mori/transport_rdma.h"
#include "transport/rdma/verbs_loader.h"

#ifdef __cplusplus
extern "C" {
#endif

/* At most SQ_DEPTH / 2 work requests are in flight (all peers together), so
 * neither a send queue nor the CQ can overflow. */
enum { CQ_DEPTH = 4096, SQ_DEPTH = 1024, MAX_RD_ATOMIC = 16, MAX_IN_FLIGHT = SQ_DEPTH / 2 };

/* Work-request ids: the address of the segment the request belongs to
 * (segments are malloc'ed, so the low bits are free) and two flags. */
enum {
  WR_PROXIED = 1, /* from a ring: its completion counts in the ring */
  WR_PARTIAL = 2, /* a piece of a longer transfer other than the last */
  WR_FLAGS = 3,
};

/* What each rank publishes at connection; one QPN per peer follows. */
struct rdma_endpoint {
  int32_t has_device;
  int32_t mtu;
  uint32_t lid;
  uint32_t psn;
  uint8_t gid[16];
};

struct rdma_segment;

struct rdma_state {
  const struct mori_verbs *v;
  pthread_mutex_t lock;
  pthread_t proxy;
  bool proxy_running, stopping;
  bool proxy_held; /* test hook: the proxy takes nothing from the rings */
  struct rdma_segment *proxied; /* segments whose rings the proxy serves */
  struct rdma_segment *retired; /* deregistered with work in flight: freed when it completes, or at fini */
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp **qp;  /* per peer; NULL for this rank */
  uint32_t *qpn;       /* per peer: its QP's number (a completion names its QP) */
  bool *qp_failed;     /* per peer: moved to error after work to it never completed */
  int rank, size, port, gid_index;
  bool usable;
  uint64_t max_msg;    /* the port's largest message: longer transfers go in pieces */
  uint64_t posted, completed;
  /* The first failed host-API operation since the last quiet reported one. */
  int host_error;
  char host_error_text[256];
  int timeout_ms;
  uint64_t *scratch; /* fetch-and-add results land here */
  struct ibv_mr *scratch_mr;
  char device[64];
};

struct rdma_segment {
  struct ibv_mr *mr;
  char *base;
  size_t size;    /* usable bytes: the bounds of every operation */
  uint64_t *addr; /* per peer */
  uint32_t *rkey;
  /* The request ring kernels submit to (host view / device view), the
   * device-memory ticket counter, and the proxy's progress. */
  mori_proxy_ring_t *ring, *ring_dev;
  uint64_t *tickets;
  uint64_t next;  /* next ticket the proxy takes */
  uint64_t piece; /* bytes of request `next` already posted (a transfer longer than max_msg) */
  /* Work requests posted for this segment and not completed, in total and
   * per peer: the segment's memory and ring stay until they complete. */
  uint64_t in_flight;
  uint32_t *in_flight_to;
  int device;
  struct rdma_segment *next_proxied, *next_retired;
};

/* queue_pairs.c */
int rdma_open_local(struct rdma_state *s, struct rdma_endpoint *me, uint32_t *qpn);
int rdma_connect_qp(struct rdma_state *s, int peer, const struct rdma_endpoint *mine, const struct rdma_endpoint *theirs,
                    uint32_t qpn);
/* Moves the QP to `peer` to the error state: everything posted on it
 * completes (flushed) and nothing more is accepted. Caller holds s->lock. */
int rdma_fail_qp(struct rdma_state *s, int peer);
void rdma_close_local(struct rdma_state *s);

/* post.c. "locked": the caller holds s->lock. Posting never waits:
 * MORI_EAGAIN says the send queues are full (reap, then post again). */
int rdma_reap_some(struct rdma_state *s); /* locked; processes every completion it polls */
/* Waits, dropping the lock between polls, until at most `in_flight` work
 * requests of `w` (NULL: of every segment) are outstanding or the deadline
 * (CLOCK_MONOTONIC ms) passes: MORI_ETIMEDOUT then. Not locked. */
int rdma_wait_in_flight(struct rdma_state *s, struct rdma_segment *w, uint64_t in_flight, int64_t deadline_ms);
int rdma_quiet(struct rdma_state *s);
/* Posts the piece of a put (opcode IBV_WR_RDMA_WRITE) or get (READ) that
 * starts `done` bytes into the transfer: at most max_msg bytes; *len gets
 * its length. flags: WR_PROXIED or 0. Locked. */
int rdma_post_piece(struct rdma_state *s, struct rdma_segment *w, int peer, int opcode, uint64_t remote, uint64_t local,
                    uint64_t bytes, uint64_t done, uint64_t flags, uint64_t *len);
int rdma_post_add(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t offset, uint64_t value,
                  uint64_t flags); /* locked */
int rdma_post_set(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t offset, uint64_t value,
                  uint64_t flags); /* locked */
/* Frees a segment nothing is in flight for. Locked. */
void rdma_segment_free(struct rdma_state *s, struct rdma_segment *w);
int64_t rdma_now_ms(void);

/* proxy.c */
int rdma_serve_rings(struct rdma_state *s, bool *worked); /* locked */
/* Serves `w`'s ring as far as the send queues allow; *left: a ready
 * request remains. Locked. */
int rdma_serve_ring(struct rdma_state *s, struct rdma_segment *w, bool *worked, bool *left);
int rdma_start_proxy(struct rdma_state *s);
void rdma_stop_proxy(struct rdma_state *s);
/* Test hook: while held, the proxy takes no request from any ring (a
 * stalled consumer). */
void rdma_hold_proxy(struct rdma_state *s, bool hold);

int rdma_verbs_error(int err, const char *what);
int rdma_env_int(const char *name, int fallback);

#ifdef __cplusplus
}
#endif

#endif
