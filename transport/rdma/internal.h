// SPDX-License-Identifier: MIT
/* The rdma transport's internal layout, shared by its files:
 *   rdma_env.c     the environment (MORI_RDMA_DEVICES, MORI_NUM_QP_PER_PE, ...)
 *                  and the choice of a device from a device list
 *   rail.c         which peers get queue pairs (full mesh, or rail-only)
 *   queue_pairs.c  device, protection domain, CQ, num_qp RC QPs per peer, connect
 *   post.c         posting work requests, spreading them over a peer's QPs,
 *                  reaping completions, the host API
 *   proxy.c        the thread that serves the request rings kernels submit to
 *   rdma.c         the transport's ops (init, peer caps, segments, fini)
 *   provider.c     who carries the verbs calls (provider.h): libibverbs, or
 *                  a provider the program set (the copy-engine NIC, ce_nic/)
 *   warn_limit.c   warnings that come in floods, a few lines a second
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
#include "transport/rdma/provider.h"
#include "transport/rdma/warn_limit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* At most SQ_DEPTH / 2 work requests are in flight (all peers together), so
 * neither a send queue nor the CQ can overflow. */
enum { CQ_DEPTH = 4096, SQ_DEPTH = 1024, MAX_RD_ATOMIC = 16, MAX_IN_FLIGHT = SQ_DEPTH / 2 };
/* MORI_NUM_QP_PER_PE's bound (beyond it QPs only cost NIC memory), and the
 * most devices a device list picks among. */
enum { RDMA_MAX_QP_PER_PE = 64, RDMA_MAX_DEVICES = 64 };

/* The environment (rdma_env.c). */
struct rdma_config {
  const char *devices_var; /* MORI_RDMA_DEVICES or MORI_RDMA_DEVICE when set, else NULL */
  bool exclude;            /* the list began with '^' */
  char devices[256];       /* comma-separated names, without the '^' */
  int num_qp;              /* MORI_NUM_QP_PER_PE: RC QPs per connected peer */
  int gid_index;           /* MORI_IB_GID_INDEX / MORI_RDMA_GID_INDEX; -1: 1 when the port has it, else 0 */
  int sl, tc;              /* MORI_RDMA_SL (ah_attr.sl), MORI_RDMA_TC (ah_attr.grh.traffic_class) */
  bool rail_only;          /* MORI_ENABLE_RAIL_ONLY */
  int port;                /* MORI_RDMA_PORT */
  int max_msg;             /* MORI_RDMA_MAX_MSG; 0: the port's */
};

/* Work-request ids: the address of the segment the request belongs to
 * (segments are aligned to WR_SEGMENT_ALIGN, so the low 12 bits are free),
 * two flags, and a proxied request's ticket modulo MORI_PROXY_SLOTS. */
enum {
  WR_PROXIED = 1, /* from a ring: its completion counts in the ring */
  WR_PARTIAL = 2, /* a piece of a longer transfer other than the last */
  WR_TICKET_SHIFT = 2,
  WR_FLAGS = 0xfff,
  WR_SEGMENT_ALIGN = 4096,
};
#ifndef __cplusplus
_Static_assert(WR_FLAGS < WR_SEGMENT_ALIGN, "a segment's address leaves the id's low bits free");
#endif

/* What each rank publishes at connection; num_qp QPNs per peer follow
 * (peer-major: [peer * num_qp + i]; 0 for peers it does not connect). */
struct rdma_endpoint {
  int32_t has_device;
  int32_t mtu;
  uint32_t lid;
  uint32_t psn;
  uint8_t gid[16];
};

struct rdma_segment;
struct rdma_gda; /* GPU-initiated posting (gda/gda_host.h) */

struct rdma_state {
  const mori_rdma_provider_t *provider; /* taken at init: a later mori_rdma_use_provider does not change it */
  const struct mori_verbs *v;           /* provider->verbs */
  pthread_mutex_t lock;
  pthread_t proxy;
  bool proxy_running, stopping;
  bool proxy_held; /* test hook: the proxy takes nothing from the rings */
  struct rdma_segment *proxied; /* segments whose rings the proxy serves */
  struct rdma_segment *retired; /* deregistered with work in flight: freed when it completes, or at fini */
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct rdma_config cfg;
  /* num_qp QPs per connected peer, peer-major: [peer * num_qp + i]. NULL
   * for this rank and for peers rail-only does not connect. */
  int num_qp;
  struct ibv_qp **qp;
  uint32_t *qpn;          /* its number (a completion names its QP: that maps it back to the peer) */
  uint32_t *qp_in_flight; /* work requests posted on it and not completed */
  bool *connect;          /* per peer: it has QPs */
  bool *qp_failed;        /* per peer: its QPs were moved to error after work to it never completed */
  uint32_t *next_qp;      /* per peer: round robin over its QPs, one request each */
  int *last_qp;           /* per peer: the QP of the latest transfer (a fenced op goes there) */
  bool *fence_waiting;    /* per peer: a fenced op waits for the other QPs to drain */
  int qps_created;
  bool rail_only;         /* MORI_ENABLE_RAIL_ONLY in effect (the layout allowed it) */
  int rank, size, port, gid_index;
  bool usable;
  char unusable[256];     /* why not, for the errors of operations */
  uint64_t max_msg;    /* the port's largest message: longer transfers go in pieces */
  uint64_t posted, completed;
  /* The first failed host-API operation since the last quiet reported one. */
  int host_error;
  char host_error_text[256];
  int timeout_ms;
  /* Warnings that come in floods (a dead peer's flushed requests, a
   * kernel's bad requests), rate-limited per comm. */
  rdma_warn_limit_t failed_warns, refused_warns, proxy_warns;
  struct rdma_gda *gda; /* GPU posting: chosen or not, and why (NULL: not probed) */
  uint64_t *scratch; /* fetch-and-add results land here */
  struct ibv_mr *scratch_mr;
  char device[64];
  /* How segments are registered with the NIC (register.c): the plan until
   * the first registration, then the path the latest one took; logged
   * (INFO) when it changes. Under lock. */
  char memory_how[320];
  bool memory_registered;
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
  /* Requests complete out of order (several peers, several QPs), but a
   * kernel's quiet waits for every ticket below the count it read: the
   * ring's `done` is the first ticket not yet complete. A ticket is
   * complete once it is sealed (its last piece posted, or the request
   * refused) and none of its pieces is in flight; per ticket %
   * MORI_PROXY_SLOTS. At most MORI_PROXY_SLOTS tickets are taken and not
   * complete at once: the proxy takes no more until `done` moves, so one
   * request that never completes (a peer that stopped) holds back the
   * ring's requests to every peer from then on, until the kernel's submit
   * or quiet times out. */
  uint64_t done_prefix;
  uint32_t pieces_out[MORI_PROXY_SLOTS];
  uint8_t sealed[MORI_PROXY_SLOTS];
  uint64_t piece; /* bytes of request `next` already posted (a transfer longer than max_msg) */
  int piece_qp;   /* the QP (index within the peer's) request `next`'s pieces go on */
  /* Work requests posted for this segment and not completed, in total and
   * per peer: the segment's memory and ring stay until they complete. */
  uint64_t in_flight;
  uint32_t *in_flight_to;
  int device;
  struct mori_gda_window *gda_table; /* device memory: the window's GPU-posting table, or NULL */
  struct rdma_segment *next_proxied, *next_retired;
};

/* rdma_env.c */
/* The transport's variables into *c; an unparsable or out-of-range value
 * is the error of core/base/env.h naming the variable and the value. */
int rdma_config_read(struct rdma_config *c);
/* The device this rank opens among `names` (the system's list): the
 * candidates are the include list's devices in its order, or all less the
 * exclude list's; local rank i takes candidate i modulo their number.
 * MORI_ENODEV with a message naming the list and the present devices. */
int rdma_pick_device(const struct rdma_config *c, const char *const *names, int n, int local_rank, int *chosen);

/* describe.c. A comm handed to a public entry point: 0 when live, else
 * MORI_EINVAL naming `call` (NULL, or destroyed). */
int rdma_comm_arg(const mori_comm_t *comm, const char *call);

/* rail.c. Fills connect[peer]; returns whether rail-only is in effect. */
bool rdma_plan_peers(mori_comm_t *comm, int rank, int size, bool rail_only, bool *connect);
/* The per-rank line saying which peers got QPs (the Shmem Guide's
 * "rail-only: rank R rail L created QPs to N peers (Q QPs): ..."). */
void rdma_report_peers(const struct rdma_state *s, mori_comm_t *comm);

/* queue_pairs.c */
/* Opens the device (chosen among the present ones for this local rank),
 * PD, CQ and num_qp QPs in INIT per peer with connect[peer]; fills `me` and
 * qpn[peer * num_qp + i]. `gpu`: the comm's device, handed to a provider
 * that asks for it (use_device). */
int rdma_open_local(struct rdma_state *s, int local_rank, int gpu, struct rdma_endpoint *me, uint32_t *qpn);
/* INIT -> RTR -> RTS for every QP to `peer`; theirs_qpn: the peer's QPNs
 * for this rank (num_qp of them). */
/* INIT -> RTR -> RTS of one QP whose remote end is `qpn` (GPU posting's
 * QPs are connected with it too). */
int rdma_connect_qp(struct rdma_state *s, struct ibv_qp *qp, const struct rdma_endpoint *mine, const struct rdma_endpoint *theirs,
                    uint32_t qpn);
int rdma_connect_peer(struct rdma_state *s, int peer, const struct rdma_endpoint *mine, const struct rdma_endpoint *theirs,
                      const uint32_t *theirs_qpn);
/* Moves every QP to `peer` to the error state: everything posted on them
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
/* One poll; when it finds nothing, a pause, or MORI_ETIMEDOUT past the
 * deadline (naming `what`). Not locked. For callers retrying a post that
 * said MORI_EAGAIN. */
int rdma_wait_progress(struct rdma_state *s, int64_t deadline_ms, const char *what, int peer);
int rdma_quiet(struct rdma_state *s);
/* Several QPs per peer: each request (a transfer, all its pieces) goes on
 * the peer's next QP in turn. A fenced op (atomic add, signal set) must
 * stay behind every earlier transfer to the peer: it goes on the QP of the
 * latest one, fenced (the NIC orders it after that QP's earlier work), and
 * is posted only when the peer's other QPs have nothing in flight
 * (MORI_EAGAIN until then: the caller reaps and tries again). */
/* The QP index the next request to `peer` goes on (peek), and taking it
 * once the request's first piece is posted (next). Locked. */
int rdma_peek_qp(const struct rdma_state *s, int peer);
int rdma_next_qp(struct rdma_state *s, int peer);
/* Posts the piece of a put (opcode IBV_WR_RDMA_WRITE) or get (READ) that
 * starts `done` bytes into the transfer on the peer's QP `q`: at most
 * max_msg bytes; *len gets its length. flags: 0 (the host API), or WR_PROXIED
 * with the ticket's slot at WR_TICKET_SHIFT (a ring's request). Locked. */
int rdma_post_piece_on(struct rdma_state *s, struct rdma_segment *w, int peer, int q, int opcode, uint64_t remote,
                       uint64_t local, uint64_t bytes, uint64_t done, uint64_t flags, uint64_t *len);
/* The same for the request a ring's proxy is serving: its first piece
 * (done == 0) takes the peer's next QP, the others follow it (w->piece_qp). */
int rdma_post_piece(struct rdma_state *s, struct rdma_segment *w, int peer, int opcode, uint64_t remote, uint64_t local,
                    uint64_t bytes, uint64_t done, uint64_t flags, uint64_t *len);
int rdma_post_add(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t offset, uint64_t value,
                  uint64_t flags); /* locked; fenced */
int rdma_post_set(struct rdma_state *s, struct rdma_segment *w, int peer, uint64_t offset, uint64_t value,
                  uint64_t flags); /* locked; fenced */
/* Frees a segment nothing is in flight for. Locked. */
void rdma_segment_free(struct rdma_state *s, struct rdma_segment *w);
/* Ring request `index` (its ticket % MORI_PROXY_SLOTS) of `w`: a piece of
 * it completed (rdma_ring_piece_done), or it will post no more pieces
 * (rdma_ring_seal). Either moves the ring's done past every complete
 * ticket, in order. Locked. */
void rdma_ring_piece_done(struct rdma_segment *w, uint64_t index);
void rdma_ring_seal(struct rdma_segment *w, uint64_t index);
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

/* register.c: a segment's memory registered with the NIC, GPU memory
 * through dma-buf where the platform exports it and the provider has
 * ibv_reg_dmabuf_mr, else ibv_reg_mr (peer memory; host memory on the host
 * platform). The platform's steps, replaceable by tests: */
struct rdma_dmabuf_ops {
  int (*export_fd)(int device, void *ptr, size_t size, int *fd, uint64_t *offset); /* 0, or an error with a message */
  int (*close_fd)(int fd);
  bool gpu_memory; /* false: host memory, registered with ibv_reg_mr, no dma-buf asked for */
};
/* The ops in effect: a test's (rdma_use_dmabuf_ops; NULL: none), else the
 * platform's (mori_platform_dmabuf_export; GPU memory unless the platform
 * is the host). */
const struct rdma_dmabuf_ops *rdma_dmabuf_ops(void);
void rdma_use_dmabuf_ops(const struct rdma_dmabuf_ops *ops);
/* The region, or NULL with errno from ibv_reg_mr; `how` says which path
 * registered it and, for ibv_reg_mr on GPU memory, why not dma-buf. */
struct ibv_mr *rdma_reg_memory(const mori_rdma_provider_t *p, struct ibv_pd *pd, void *base, size_t len, int device,
                               int access, const struct rdma_dmabuf_ops *ops, char *how, size_t how_len);
/* What rdma_reg_memory will do, before anything is registered. */
void rdma_memory_plan(const mori_rdma_provider_t *p, const struct rdma_dmabuf_ops *ops, char *how, size_t how_len);

/* MORI_RDMA_GDA=on: GPU posting demanded (a comm without it fails). */
bool rdma_gda_demanded(void);
/* gda/ (GPU-initiated posting, gda/gda_host.h). rdma_gda_init: collective,
 * at comm creation once the transport's QPs are connected (`connected`:
 * they are; me/all/entry: the endpoint exchange): chooses GPU posting or
 * the proxy, sets s->gda, logs one INFO line; an error only for
 * MORI_RDMA_GDA=on when GPU posting is not possible (naming the step and
 * rank), or for running out of memory. rdma_gda_fini: its QPs to error,
 * then released. rdma_gda_window: the segment's table in device memory
 * (NULL when the comm does not post from the GPU). */
int rdma_gda_init(struct rdma_state *s, mori_comm_t *comm, bool connected, const struct rdma_endpoint *me, const char *all,
                  size_t entry);
void rdma_gda_fini(struct rdma_state *s);
int rdma_gda_window(struct rdma_state *s, struct rdma_segment *w, struct mori_gda_window **table_dev);
void rdma_gda_window_free(int device, struct mori_gda_window *table_dev);

#ifdef __cplusplus
}
#endif

#endif
