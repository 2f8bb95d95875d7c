/* The rdma transport's internal layout, shared by its files:
 *   queue_pairs.c  device, protection domain, CQ, one RC QP per peer, connect
 *   post.c         posting work requests, reaping completions, the host API
 *   proxy.c        the thread that serves the request rings kernels submit to
 *   rdma.c         the transport's ops (init, peer caps, segments, fini) */
#ifndef MORI_TRANSPORT_RDMA_INTERNAL_H
#define MORI_TRANSPORT_RDMA_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "mori/device/impl/proxy__types.h"
#include "mori/transport_rdma.h"
#include "transport/rdma/verbs_loader.h"

enum { CQ_DEPTH = 4096, SQ_DEPTH = 1024, MAX_RD_ATOMIC = 16 };

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
  /* Posting and reaping happen on the caller's thread (host API) and on the
   * proxy thread (requests from kernels): one lock for both. */
  pthread_mutex_t lock;
  pthread_t proxy;
  bool proxy_running, stopping;
  struct rdma_segment *proxied; /* segments whose rings the proxy serves */
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
  uint64_t next; /* next ticket the proxy takes */
  int device;
  struct rdma_segment *next_proxied;
};

/* queue_pairs.c */
int rdma_open_local(struct rdma_state *s, struct rdma_endpoint *me, uint32_t *qpn);
int rdma_connect_qp(struct rdma_state *s, int peer, const struct rdma_endpoint *mine, const struct rdma_endpoint *theirs,
                    uint32_t qpn);
void rdma_close_local(struct rdma_state *s);

/* post.c (callers hold s->lock where marked) */
int rdma_reap_some(struct rdma_state *s);                 /* locked */
int rdma_quiet(struct rdma_state *s);
int rdma_post_put(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t dst, uint64_t src, uint64_t bytes,
                  uint64_t wr_id);                        /* locked */
int rdma_post_get(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t dst, uint64_t src, uint64_t bytes,
                  uint64_t wr_id);                        /* locked */
int rdma_post_add(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t offset, uint64_t value,
                  uint64_t wr_id);                        /* locked */
int rdma_post_set(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t offset, uint64_t value,
                  uint64_t wr_id);                        /* locked */

/* proxy.c */
int rdma_serve_rings(struct rdma_state *s, bool *worked); /* locked */
int rdma_start_proxy(struct rdma_state *s);
void rdma_stop_proxy(struct rdma_state *s);

int rdma_verbs_error(int err, const char *what);

#endif
