// SPDX-License-Identifier: MIT
/* The software ConnectX's insides (swcx.h is what a program uses).
 *
 * Objects: every verbs object the transport gets is a wrapper whose first
 * member is the verbs struct it holds, beside the inner provider's object:
 *   - a context (its ops.post_send / ops.poll_cq are ours: verbs.h calls
 *     them inline) with the engine thread;
 *   - a protection domain (memory regions are the inner provider's own:
 *     their keys are what WQEs carry);
 *   - a CQ with an emulated CQE64 ring and doorbell record;
 *   - an RC QP (the inner provider's, same number) with an emulated send
 *     ring, doorbell record and BlueFlame register.
 * Emulated queues live in memory the comm's device reaches: plain memory
 * on the host platform, pinned host memory mapped for the GPU (the same
 * address on both sides) on CUDA and ROCm. With MORI_RDMA_SWCX_QUEUES=device
 * (the default) each send ring and its doorbell record are in device memory
 * instead, as GPU-posting libraries place a NIC's queues; the BlueFlame register
 * and the CQs stay in mapped host memory.
 *
 * The engine (engine.c), per QP, in order:
 *   - learns the producer position: host queues, from the send doorbell
 *     record (dbrec[MLX5_SND_DBR], the 16-bit producer counter of 64-byte
 *     basic blocks; the BlueFlame register is never read); device queues,
 *     from the doorbell register's 8 bytes (the last WQE's control segment
 *     start: its wqe_index and ds, as a ConnectX's doorbell carries them),
 *     then fetches the ring's new blocks with the platform's copy queue;
 *   - parses each new WQE from its bytes (wqe.c, the PRM layout; nothing of
 *     mori's): control segment, remote address, atomic, data and inline
 *     segments, across basic blocks and the ring's end;
 *   - refuses, as a ConnectX does with an error CQE, what it cannot take:
 *     a ds of 0 or one the opcode's segments do not fit, a WQE the
 *     doorbell does not cover, an unknown or unsupported opcode (SEND,
 *     masked atomics, ...), a wqe_index that is not the producer position,
 *     another QP's number (all LOCAL_QP_OP_ERR), an atomic whose data
 *     segment is not 8 bytes or inline data past the segment or the QP's
 *     inline size (LOCAL_LENGTH_ERR); the QP then moves to error;
 *   - posts the WQE on the inner QP (signaled; inline data through a
 *     registered bounce buffer, so any inner provider carries it; a WQE
 *     with a fence mode only once every earlier one of the QP finished,
 *     posted unfenced: engine.c says why);
 *   - turns inner completions into CQE64s in the QP's order, one for each
 *     signaled WQE (CE bits 3:2 >= 2) and for every error; the owner bit,
 *     the opcode (MLX5_CQE_REQ / MLX5_CQE_REQ_ERR) and op_own written last
 *     after a release fence; never over a CQE the consumer has not
 *     consumed (the CQ doorbell record's consumer index): a full CQ
 *     stalls, with a rate-limited warning;
 *   - after an error (a refused WQE, an inner error completion, the QP
 *     moved to error by modify_qp) every later WQE completes with a flush
 *     error CQE (MLX5_CQE_SYNDROME_WR_FLUSH_ERR).
 * A refused or fault-failed WQE moves only the emulated send queue to
 * error; the inner QP (the proxy's verbs) goes on, unlike a ConnectX, whose
 * QP is one.
 *
 * Faults (MORI_RDMA_SWCX_FAULTS, comma-separated, counting the WQEs the
 * engine takes from the rings of one opened device, from 1):
 *   error@N    the N-th WQE is not executed and completes with a remote
 *              access error CQE; its QP moves to error (the rest flush);
 *   late@N:MS  the N-th WQE's completion (and, order kept, every later one
 *              of its QP) is written MS ms after it finished;
 *   stall@N    nothing from the N-th WQE on executes (a stalled NIC),
 *              until its QP is moved to error, which flushes it. */
#ifndef MORI_TRANSPORT_RDMA_SWCX_INTERNAL_H
#define MORI_TRANSPORT_RDMA_SWCX_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "transport/rdma/provider.h"
#include "transport/rdma/swcx/swcx.h"
#include "transport/rdma/warn_limit.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  SWCX_BB = 64,         /* a send basic block (sq.stride) */
  SWCX_CQE = 64,        /* cqe_size */
  SWCX_BF_SIZE = 256,   /* bf.size: each of the two BlueFlame buffers */
  SWCX_MAX_DS = 63,     /* qpn_ds's 6-bit ds: the longest WQE is 63 x 16 bytes */
  SWCX_MAX_SGE = 16,
  SWCX_INLINE_MIN = 64, /* bounce room per WQE at least (the QP's max_inline_data when larger) */
};

/* MORI_RDMA_SWCX_QUEUES, in its choices' order. */
enum { SWCX_QUEUES_DEVICE = 0, SWCX_QUEUES_HOST = 1 };

/* The CQ doorbell record's words (the PRM's; mlx5dv.h names only the
 * QP's): the consumer index (low 24 bits) and the arm word. */
enum { SWCX_CQ_SET_CI = 0, SWCX_CQ_ARM_DB = 1 };

/* Vendor syndromes of the CQEs the software ConnectX writes itself (an
 * inner error completion carries the inner provider's vendor_err). */
enum {
  SWCX_VENDOR_REFUSED = 0x5c, /* a WQE it could not take */
  SWCX_VENDOR_FAULT = 0xfa,   /* MORI_RDMA_SWCX_FAULTS */
  SWCX_VENDOR_POST = 0x9e,    /* the inner provider refused the work request */
};

/* ---- wqe.c: one WQE from its bytes ---- */

struct swcx_sge {
  uint64_t addr;
  uint32_t length, lkey;
};

struct swcx_wqe {
  uint8_t opcode, opmod;
  uint16_t index;   /* wqe_index: its first basic block's counter */
  uint32_t qpn;
  uint8_t ds;       /* 16-byte units */
  uint8_t fence;    /* fm_ce_se bits 7:5 */
  uint8_t ce;       /* bits 3:2 */
  bool solicited;   /* bit 1 */
  uint32_t imm_be;  /* as written (big-endian on the wire) */
  uint64_t raddr;
  uint32_t rkey;
  uint64_t swap_add, compare;
  int n_sge;
  struct swcx_sge sge[SWCX_MAX_SGE];
  bool has_inline;
  uint32_t inline_len;
  uint8_t inline_data[SWCX_MAX_DS * 16];
};

/* The control segment's fields a flush or a refusal needs, from the first
 * 16 bytes. */
void swcx_parse_ctrl(const uint8_t *ctrl, struct swcx_wqe *out);
/* Number of basic blocks a WQE of `ds` 16-byte units spans. */
static inline uint32_t swcx_wqe_bbs(uint32_t ds) { return (ds * 16 + SWCX_BB - 1) / SWCX_BB; }
/* Parses the whole WQE (ds*16 bytes at `bytes`, contiguous) whose control
 * segment is already in *w. Returns 0, or the MLX5_CQE_SYNDROME_* a
 * ConnectX would refuse it with; *why says what was wrong. */
int swcx_parse_wqe(const uint8_t *bytes, struct swcx_wqe *w, uint32_t inline_max, const char **why);

/* ---- verbs.c / engine.c: the objects ---- */

struct swcx_context;

struct swcx_cq {
  struct ibv_cq cq; /* first: what the caller holds */
  struct ibv_cq *inner;
  struct swcx_context *c;
  uint32_t cqn;
  uint8_t *ring;      /* cqe_cnt CQE64s */
  uint32_t cqe_cnt;
  __be32 *dbrec;      /* [SWCX_CQ_SET_CI]: the consumer's index */
  void *uar;          /* cq_uar: a page the consumer may write (arming is not emulated) */
  uint32_t produced;  /* CQEs written, a running count (its bit cqe_cnt is the owner bit) */
  uint32_t device_in_flight, budget; /* device WQEs on the inner CQ, and the most allowed */
  bool full;          /* stalled on a full ring (warned once per stretch) */
  /* Inner completions of the proxy path's work requests, for ibv_poll_cq. */
  struct ibv_wc *host;
  size_t host_head, host_n, host_cap;
};

enum swcx_op_state { SWCX_OP_POSTED = 1, SWCX_OP_DONE = 2 };

/* A WQE the engine took, until its CQE is written (or it needed none). */
struct swcx_op {
  uint32_t seq;      /* which op of the QP (the low bits of the inner wr_id) */
  uint16_t index;    /* wqe_counter */
  uint8_t opcode;
  uint8_t state;
  bool signaled;
  bool counted;      /* on the CQ's device_in_flight */
  uint8_t syndrome;  /* 0: success */
  uint8_t vendor;
  uint32_t bytes;
  uint32_t late_ms;  /* late@N */
  int64_t due_ms;    /* when its CQE may be written (late) */
};

struct swcx_qp {
  struct ibv_qp qp; /* first */
  struct ibv_qp *inner;
  struct swcx_context *c;
  struct swcx_cq *send_cq, *recv_cq;
  uint8_t *sq;       /* wqe_cnt basic blocks (device memory when c->device_queues) */
  uint32_t wqe_cnt;
  __be32 *dbrec;     /* [MLX5_RCV_DBR], [MLX5_SND_DBR] (device memory when c->device_queues) */
  void *bf;          /* bf.reg: two buffers of SWCX_BF_SIZE (mapped host memory) */
  /* Device queues: the ring as fetched (same layout; the engine parses it),
   * fetched up to `fetched`; the last doorbell value taken and the producer
   * position it names. Host queues: sq_read is sq itself. */
  uint8_t *sq_read;
  uint8_t *shadow;
  uint16_t fetched;
  uint64_t doorbell_seen;
  uint16_t doorbell_pi;
  void *rq;          /* rq.buf (receives are not emulated; it only exists) */
  uint32_t rq_cnt;
  uint16_t pos;      /* the next WQE's first basic block (the producer position it must name) */
  bool error;        /* the emulated send queue is in error: WQEs flush */
  enum ibv_qp_state state;
  /* Ops in WQE order: ops[seq % wqe_cnt] for seq in [head, tail). */
  struct swcx_op *ops;
  uint32_t head, tail;
  /* Inline data, copied out of the WQE: bounce + (seq % wqe_cnt) * inline_max. */
  uint8_t *bounce;
  struct ibv_mr *bounce_mr;
  uint32_t inline_max;
  /* The proxy path's wr_ids, by slot (the low bits of its inner wr_id). */
  uint64_t *host_wr_id;
  bool *host_signaled;
  uint32_t *host_free;
  uint32_t host_n_free, host_cap;
};

struct swcx_context {
  struct ibv_context ctx; /* first */
  struct ibv_context *inner;
  const mori_rdma_provider_t *innerp;
  int device;
  /* MORI_RDMA_SWCX_QUEUES=device: send rings and records in device memory,
   * read through `ring_reader` (the platform's copy queue) as a NIC reads
   * GPU memory; host: mapped host memory the engine reads in place. */
  bool device_queues;
  struct mori_platform_queue *ring_reader;
  pthread_mutex_t lock; /* everything below and every object of the context */
  pthread_t engine;
  bool running, stopping;
  struct swcx_qp **qps;
  size_t n_qps, cap_qps;
  struct swcx_cq **cqs;
  size_t n_cqs, cap_cqs;
  /* Faults. */
  uint64_t taken; /* WQEs taken from the rings so far */
  uint64_t error_at, late_at, stall_at;
  uint32_t late_ms;
  bool stalled;
  rdma_warn_limit_t full_warns, refused_warns;
  struct swcx_context *next; /* every open context (mlx5dv_init_obj finds objects through them) */
};

struct swcx_pd {
  struct ibv_pd pd; /* first */
  struct ibv_pd *inner;
};

/* Inner wr_ids: a device op's is SWCX_WR_DEVICE | seq, the proxy path's a
 * slot of its QP's host table. The QP is found by the completion's qp_num. */
#define SWCX_WR_DEVICE (1ull << 63)

/* engine.c */
int swcx_engine_start(struct swcx_context *c);
void swcx_engine_stop(struct swcx_context *c);
/* Polls the inner CQ once and sorts what it gets: device ops marked done,
 * the proxy path's completions queued for ibv_poll_cq. Caller holds c->lock. */
int swcx_drain_inner(struct swcx_context *c, struct swcx_cq *cq);
/* One pass over every QP and CQ (take WQEs, poll, write CQEs); true when
 * it did anything. Caller holds c->lock. */
bool swcx_engine_pass(struct swcx_context *c);
/* MORI_RDMA_SWCX_FAULTS into c; MORI_EINVAL naming the item when malformed. */
int swcx_parse_faults(struct swcx_context *c);
uint8_t swcx_syndrome_of(enum ibv_wc_status status);
int64_t swcx_now_ms(void);

/* verbs.c: the context a QP or CQ of ours belongs to, for mlx5dv_init_obj
 * (NULL: not one of ours). */
struct swcx_qp *swcx_find_qp(struct ibv_qp *qp);
struct swcx_cq *swcx_find_cq(struct ibv_cq *cq);

#ifdef __cplusplus
}
#endif

#endif
