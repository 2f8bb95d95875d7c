// SPDX-License-Identifier: MIT
/* The software ConnectX's engine (see internal.h): a thread per opened
 * device that takes WQEs from the send rings as their doorbell records
 * advance, executes them on the inner QPs and writes their completions
 * into the CQE rings as a ConnectX does. */
#include <endian.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/platform/platform.h"
#include "transport/rdma/swcx/internal.h"

int64_t swcx_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One item of MORI_RDMA_SWCX_FAULTS: error@N, late@N:MS or stall@N. */
static int take_fault(void *ctx, const char *value, const char *item) {
  struct swcx_context *c = ctx;
  unsigned long long n = 0;
  unsigned ms = 0;
  char kind[8] = "", tail = 0;
  int got = sscanf(item, "%7[a-z]@%llu:%u%c", kind, &n, &ms, &tail);
  bool ok = n > 0 && ((got == 2 && (!strcmp(kind, "error") || !strcmp(kind, "stall"))) ||
                      (got == 3 && !strcmp(kind, "late") && ms > 0));
  if (!ok)
    return mori_error_set(MORI_EINVAL, "MORI_RDMA_SWCX_FAULTS=\"%s\": \"%s\" is not error@N, late@N:MS or stall@N (N, MS >= 1)",
                          value, item);
  if (!strcmp(kind, "error")) c->error_at = n;
  else if (!strcmp(kind, "stall")) c->stall_at = n;
  else c->late_at = n, c->late_ms = ms;
  return 0;
}

int swcx_parse_faults(struct swcx_context *c) { return mori_env_each_item("MORI_RDMA_SWCX_FAULTS", take_fault, c); }

uint8_t swcx_syndrome_of(enum ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return 0;
    case IBV_WC_LOC_LEN_ERR: return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
    case IBV_WC_LOC_QP_OP_ERR: return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    case IBV_WC_LOC_PROT_ERR: return MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
    case IBV_WC_WR_FLUSH_ERR: return MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
    case IBV_WC_MW_BIND_ERR: return MLX5_CQE_SYNDROME_MW_BIND_ERR;
    case IBV_WC_BAD_RESP_ERR: return MLX5_CQE_SYNDROME_BAD_RESP_ERR;
    case IBV_WC_LOC_ACCESS_ERR: return MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR;
    case IBV_WC_REM_INV_REQ_ERR: return MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR;
    case IBV_WC_REM_ACCESS_ERR: return MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
    case IBV_WC_REM_OP_ERR: return MLX5_CQE_SYNDROME_REMOTE_OP_ERR;
    case IBV_WC_RETRY_EXC_ERR: return MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR;
    case IBV_WC_RNR_RETRY_EXC_ERR: return MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR;
    case IBV_WC_REM_ABORT_ERR: return MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR;
    default: return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR; /* no closer syndrome; vendor_err_synd carries the inner's */
  }
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* ---- taking WQEs ---- */

/* n basic blocks from `first` on, across the ring's end, into out. */
static void copy_bbs(const struct swcx_qp *q, uint16_t first, uint32_t n, uint8_t *out) {
  for (uint32_t i = 0; i < n; i++)
    memcpy(out + (size_t)i * SWCX_BB, q->sq_read + (size_t)((uint32_t)(uint16_t)(first + i) & (q->wqe_cnt - 1)) * SWCX_BB,
           SWCX_BB);
}

/* The producer position the device has published. Host queues: the send
 * doorbell record. Device queues: the doorbell register's last value (the
 * control segment's first 8 bytes of the last WQE rung: its wqe_index and
 * ds name the position after it); a value that would put the producer
 * behind the last doorbell taken, or more than a ring ahead of what was
 * taken, is not a doorbell this QP's producer wrote in order, and is
 * ignored. */
static uint16_t producer_position(struct swcx_qp *q) {
  if (!q->c->device_queues) return (uint16_t)be32toh(__atomic_load_n(&q->dbrec[MLX5_SND_DBR], __ATOMIC_ACQUIRE));
  uint64_t v = __atomic_load_n((uint64_t *)q->bf, __ATOMIC_ACQUIRE);
  if (v == q->doorbell_seen) return q->doorbell_pi;
  uint8_t ctrl[16] = {0};
  memcpy(ctrl, &v, sizeof(v));
  struct swcx_wqe w;
  swcx_parse_ctrl(ctrl, &w);
  uint16_t pi = (uint16_t)(w.index + (w.ds ? swcx_wqe_bbs(w.ds) : 1));
  if ((uint16_t)(pi - q->pos) > q->wqe_cnt || (uint16_t)(pi - q->doorbell_pi) > q->wqe_cnt) return q->doorbell_pi;
  q->doorbell_seen = v;
  q->doorbell_pi = pi;
  return pi;
}

/* Device queues: fetches the ring's blocks [q->fetched, upto) into the
 * shadow (one or two copies, the second across the ring's end). */
static int fetch_ring(struct swcx_context *c, struct swcx_qp *q, uint16_t upto) {
  uint32_t n = (uint16_t)(upto - q->fetched), first = q->fetched & (q->wqe_cnt - 1);
  if (!n) return 0;
  if (n > q->wqe_cnt)
    return mori_error_set(MORI_EINVAL, "software ConnectX: QP 0x%x: fetching %u blocks of a %u-block ring", q->qp.qp_num, n,
                          q->wqe_cnt);
  uint32_t head = n < q->wqe_cnt - first ? n : q->wqe_cnt - first;
  int rc = mori_platform_queue_copy(c->ring_reader, q->shadow + (size_t)first * SWCX_BB, q->sq + (size_t)first * SWCX_BB,
                                    (size_t)head * SWCX_BB);
  if (!rc && n > head) rc = mori_platform_queue_copy(c->ring_reader, q->shadow, q->sq, (size_t)(n - head) * SWCX_BB);
  if (!rc) rc = mori_platform_queue_wait(c->ring_reader);
  if (rc) return rc;
  q->fetched = upto;
  return 0;
}

static struct swcx_op *new_op(struct swcx_qp *q, const struct swcx_wqe *w, uint16_t index) {
  struct swcx_op *op = &q->ops[q->tail % q->wqe_cnt];
  memset(op, 0, sizeof(*op));
  op->seq = q->tail++;
  op->index = index;
  op->opcode = w->opcode;
  op->signaled = w->ce >= 2; /* CQ_UPDATE: a CQE always (0, 1: on error only) */
  return op;
}

static void fail_op(struct swcx_qp *q, struct swcx_op *op, uint8_t syndrome, uint8_t vendor) {
  op->state = SWCX_OP_DONE;
  op->syndrome = syndrome;
  op->vendor = vendor;
  op->due_ms = op->late_ms ? swcx_now_ms() + op->late_ms : 0;
  q->error = true;
}

static void refuse(struct swcx_context *c, struct swcx_qp *q, struct swcx_op *op, uint8_t syndrome, const char *why) {
  rdma_warn_limited(&c->refused_warns, "software ConnectX: QP 0x%x refuses the WQE at index %u (opcode 0x%x): %s", q->qp.qp_num,
                    op->index, op->opcode, why);
  fail_op(q, op, syndrome, SWCX_VENDOR_REFUSED);
}

/* Posts a parsed WQE on the inner QP. */
static void execute(struct swcx_context *c, struct swcx_qp *q, struct swcx_op *op, const struct swcx_wqe *w) {
  if (w->opcode == MLX5_OPCODE_NOP) {
    op->state = SWCX_OP_DONE;
    op->due_ms = op->late_ms ? swcx_now_ms() + op->late_ms : 0;
    return;
  }
  struct ibv_sge sge[SWCX_MAX_SGE];
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = SWCX_WR_DEVICE | op->seq;
  wr.send_flags = IBV_SEND_SIGNALED;
  /* (A fence was kept by take_wqes: nothing earlier is outstanding.) */
  if (w->solicited) wr.send_flags |= IBV_SEND_SOLICITED;
  uint64_t bytes = 0;
  if (w->has_inline) {
    uint8_t *slot = q->bounce + (size_t)(op->seq % q->wqe_cnt) * q->inline_max;
    memcpy(slot, w->inline_data, w->inline_len);
    sge[0] = (struct ibv_sge){(uint64_t)(uintptr_t)slot, w->inline_len, q->bounce_mr->lkey};
    wr.num_sge = w->inline_len ? 1 : 0;
    bytes = w->inline_len;
  } else {
    for (int i = 0; i < w->n_sge; i++) {
      sge[i] = (struct ibv_sge){w->sge[i].addr, w->sge[i].length, w->sge[i].lkey};
      bytes += w->sge[i].length;
    }
    wr.num_sge = w->n_sge;
  }
  wr.sg_list = sge;
  switch (w->opcode) {
    case MLX5_OPCODE_RDMA_WRITE_IMM:
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.imm_data = w->imm_be;
      break;
    case MLX5_OPCODE_RDMA_READ: wr.opcode = IBV_WR_RDMA_READ; break;
    case MLX5_OPCODE_ATOMIC_CS: wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP; break;
    case MLX5_OPCODE_ATOMIC_FA: wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD; break;
    default: wr.opcode = IBV_WR_RDMA_WRITE; break;
  }
  if (w->opcode == MLX5_OPCODE_ATOMIC_CS || w->opcode == MLX5_OPCODE_ATOMIC_FA) {
    wr.wr.atomic.remote_addr = w->raddr;
    wr.wr.atomic.rkey = w->rkey;
    wr.wr.atomic.compare_add = w->opcode == MLX5_OPCODE_ATOMIC_CS ? w->compare : w->swap_add;
    wr.wr.atomic.swap = w->swap_add;
  } else {
    wr.wr.rdma.remote_addr = w->raddr;
    wr.wr.rdma.rkey = w->rkey;
  }
  op->bytes = (uint32_t)bytes;
  int err = ibv_post_send(q->inner, &wr, &bad);
  if (err) {
    rdma_warn_limited(&c->refused_warns, "software ConnectX: QP 0x%x: %s refused the WQE at index %u (opcode 0x%x): %s",
                      q->qp.qp_num, c->innerp->name, op->index, op->opcode, strerror(err > 0 ? err : EIO));
    fail_op(q, op, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, SWCX_VENDOR_POST);
    return;
  }
  op->state = SWCX_OP_POSTED;
  op->counted = true;
  q->send_cq->device_in_flight++;
}

/* Whether every op taken from the QP so far has finished. */
static bool all_finished(const struct swcx_qp *q) {
  for (uint32_t s = q->head; s != q->tail; s++)
    if (q->ops[s % q->wqe_cnt].state == SWCX_OP_POSTED) return false;
  return true;
}

/* Takes what the doorbell record covers: executes it, or (the send queue
 * in error) flushes it. Returns whether it took any. A fenced WQE (fence
 * mode set) is taken only once every earlier one has finished, and goes to
 * the inner QP unfenced: that is at least what the fence promises (earlier
 * reads and atomics complete first), and Soft-RoCE's own fence left a
 * fenced atomic posted with no completion ever, success or error (about one
 * run in four of gda_swcx_verbs_test at 8 ranks: a world barrier's
 * arrival lost, every rank timing out). */
static bool take_wqes(struct swcx_context *c, struct swcx_qp *q) {
  uint16_t db = producer_position(q);
  bool took = false;
  if (c->device_queues && db != q->fetched && fetch_ring(c, q, db) != 0) {
    /* Nothing taken: tried again on the next pass. */
    rdma_warn_limited(&c->refused_warns, "software ConnectX: QP 0x%x: fetching its send ring from device memory failed: %s",
                      q->qp.qp_num, mori_last_error());
    return false;
  }
  static _Thread_local uint8_t bytes[SWCX_MAX_DS * 16 + SWCX_BB];
  static _Thread_local struct swcx_wqe w;
  while (q->pos != db && q->tail - q->head < q->wqe_cnt) {
    uint32_t avail = (uint16_t)(db - q->pos);
    uint8_t ctrl[16];
    memcpy(ctrl, q->sq_read + (size_t)(q->pos & (q->wqe_cnt - 1)) * SWCX_BB, sizeof(ctrl));
    swcx_parse_ctrl(ctrl, &w);
    uint32_t nbb = w.ds ? swcx_wqe_bbs(w.ds) : 1;
    bool sane = w.ds && nbb <= avail && nbb <= q->wqe_cnt;
    if (q->error) {
      /* Flushed: a CQE for every WQE, executed or not. */
      struct swcx_op *op = new_op(q, &w, q->pos);
      op->state = SWCX_OP_DONE;
      op->syndrome = MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
      q->pos = (uint16_t)(q->pos + (sane ? nbb : 1));
      took = true;
      continue;
    }
    if (c->stalled || q->send_cq->device_in_flight >= q->send_cq->budget) break;
    if (w.fence && !all_finished(q)) break;
    uint64_t n = c->taken + 1;
    if (c->stall_at && n >= c->stall_at) {
      c->stalled = true;
      MORI_WARN("software ConnectX: WQE %llu (QP 0x%x, index %u) and every later one stall (MORI_RDMA_SWCX_FAULTS)",
                (unsigned long long)n, q->qp.qp_num, q->pos);
      break;
    }
    c->taken = n;
    took = true;
    struct swcx_op *op = new_op(q, &w, q->pos);
    if (c->late_at == n) op->late_ms = c->late_ms;
    char why[160];
    if (w.index != q->pos) {
      snprintf(why, sizeof(why), "its wqe_index %u is not the producer position %u", w.index, q->pos);
      refuse(c, q, op, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, why);
    } else if (w.qpn != q->qp.qp_num) {
      snprintf(why, sizeof(why), "it names QP 0x%x", w.qpn);
      refuse(c, q, op, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, why);
    } else if (!w.ds) {
      refuse(c, q, op, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, "ds is 0");
    } else if (nbb > avail) {
      snprintf(why, sizeof(why), "ds %u spans %u basic blocks; the doorbell record covers %u", w.ds, nbb, avail);
      refuse(c, q, op, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, why);
    } else {
      copy_bbs(q, q->pos, nbb, bytes);
      const char *reason = "";
      int syndrome = swcx_parse_wqe(bytes, &w, q->inline_max, &reason);
      if (syndrome) {
        refuse(c, q, op, (uint8_t)syndrome, reason);
      } else if (c->error_at == n) {
        MORI_WARN("software ConnectX: WQE %llu (QP 0x%x, index %u) completes with a remote access error (MORI_RDMA_SWCX_FAULTS)",
                  (unsigned long long)n, q->qp.qp_num, q->pos);
        fail_op(q, op, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, SWCX_VENDOR_FAULT);
      } else {
        execute(c, q, op, &w);
      }
    }
    q->pos = (uint16_t)(q->pos + (sane ? nbb : 1));
  }
  return took;
}

/* ---- completions ---- */

static void push_host(struct swcx_cq *cq, const struct ibv_wc *wc) {
  if (cq->host_n == cq->host_cap) {
    size_t cap = cq->host_cap ? 2 * cq->host_cap : 64;
    struct ibv_wc *grown = malloc(cap * sizeof(*grown));
    if (!grown) {
      MORI_WARN("software ConnectX: no memory for a completion; it is lost");
      return;
    }
    for (size_t i = 0; i < cq->host_n; i++) grown[i] = cq->host[(cq->host_head + i) % cq->host_cap];
    free(cq->host);
    cq->host = grown;
    cq->host_cap = cap;
    cq->host_head = 0;
  }
  cq->host[(cq->host_head + cq->host_n) % cq->host_cap] = *wc;
  cq->host_n++;
}

/* The QP a completion names; NULL when it is gone. Caller holds c->lock. */
static struct swcx_qp *qp_by_num(struct swcx_context *c, uint32_t qpn) {
  for (size_t i = 0; i < c->n_qps; i++)
    if (c->qps[i]->qp.qp_num == qpn) return c->qps[i];
  return NULL;
}

static void sort(struct swcx_context *c, struct swcx_cq *cq, struct ibv_wc *wc) {
  struct swcx_qp *q = qp_by_num(c, wc->qp_num);
  if (!q) return; /* its QP is gone */
  if (wc->wr_id & SWCX_WR_DEVICE) {
    uint32_t seq = (uint32_t)wc->wr_id;
    struct swcx_op *op = &q->ops[seq % q->wqe_cnt];
    if (op->seq != seq || op->state != SWCX_OP_POSTED) return;
    op->state = SWCX_OP_DONE;
    op->due_ms = op->late_ms ? swcx_now_ms() + op->late_ms : 0;
    if (op->counted) q->send_cq->device_in_flight--;
    op->counted = false;
    if (wc->status != IBV_WC_SUCCESS) {
      op->syndrome = swcx_syndrome_of(wc->status);
      op->vendor = (uint8_t)wc->vendor_err;
      q->error = true;
    }
    return;
  }
  uint64_t slot = wc->wr_id;
  if (slot >= q->host_cap) return;
  bool signaled = q->host_signaled[slot];
  wc->wr_id = q->host_wr_id[slot];
  q->host_free[q->host_n_free++] = (uint32_t)slot;
  if (signaled || wc->status != IBV_WC_SUCCESS) push_host(cq, wc);
}

int swcx_drain_inner(struct swcx_context *c, struct swcx_cq *cq) {
  int total = 0;
  for (;;) {
    struct ibv_wc wc[32];
    int n = ibv_poll_cq(cq->inner, 32, wc);
    if (n < 0) return mori_error_set(MORI_EIO, "software ConnectX: polling %s's completion queue failed", c->innerp->name);
    for (int i = 0; i < n; i++) sort(c, cq, &wc[i]);
    total += n;
    if (n < 32) return total;
  }
}

/* One CQE64, op_own last. */
static void write_cqe(struct swcx_cq *cq, const struct swcx_qp *q, const struct swcx_op *op) {
  uint8_t *cqe = cq->ring + (size_t)(cq->produced & (cq->cqe_cnt - 1)) * SWCX_CQE;
  uint8_t owner = (cq->produced & cq->cqe_cnt) ? 1 : 0;
  memset(cqe, 0, SWCX_CQE - 1);
  uint8_t op_own;
  if (op->syndrome) {
    cqe[54] = op->vendor;   /* vendor_err_synd */
    cqe[55] = op->syndrome; /* syndrome */
    op_own = (uint8_t)(MLX5_CQE_REQ_ERR << 4 | owner);
  } else {
    put_be32(cqe + 44, op->bytes); /* byte_cnt */
    op_own = (uint8_t)(MLX5_CQE_REQ << 4 | owner);
  }
  put_be32(cqe + 56, (uint32_t)op->opcode << 24 | (q->qp.qp_num & 0xffffff)); /* sop_drop_qpn / s_wqe_opcode_qpn */
  cqe[60] = (uint8_t)(op->index >> 8);                                         /* wqe_counter */
  cqe[61] = (uint8_t)op->index;
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&cqe[63], op_own, __ATOMIC_RELEASE);
  cq->produced++;
}

/* Writes the QP's finished ops' CQEs, in WQE order. */
static bool emit(struct swcx_context *c, struct swcx_qp *q) {
  struct swcx_cq *cq = q->send_cq;
  bool wrote = false;
  int64_t now = -1;
  while (q->head != q->tail) {
    struct swcx_op *op = &q->ops[q->head % q->wqe_cnt];
    if (op->state != SWCX_OP_DONE) break;
    if (op->late_ms) {
      if (now < 0) now = swcx_now_ms();
      if (now < op->due_ms) break;
    }
    if (op->signaled || op->syndrome) {
      uint32_t ci = be32toh(__atomic_load_n(&cq->dbrec[SWCX_CQ_SET_CI], __ATOMIC_ACQUIRE)) & 0xffffff;
      uint32_t unconsumed = (cq->produced - ci) & 0xffffff;
      if (unconsumed >= cq->cqe_cnt) {
        if (!cq->full)
          rdma_warn_limited(&c->full_warns,
                            "software ConnectX: CQ 0x%x is full (%u CQEs not consumed; consumer index %u): completions wait",
                            cq->cqn, unconsumed, ci);
        cq->full = true;
        break;
      }
      cq->full = false;
      write_cqe(cq, q, op);
    }
    q->head++;
    wrote = true;
  }
  return wrote;
}

bool swcx_engine_pass(struct swcx_context *c) {
  bool worked = false;
  for (size_t i = 0; i < c->n_qps; i++) worked |= take_wqes(c, c->qps[i]);
  for (size_t i = 0; i < c->n_cqs; i++) {
    int n = swcx_drain_inner(c, c->cqs[i]);
    if (n < 0) MORI_WARN("%s", mori_last_error());
    worked |= n > 0;
  }
  for (size_t i = 0; i < c->n_qps; i++) worked |= emit(c, c->qps[i]);
  return worked;
}

/* ---- the thread ---- */

static void *run(void *arg) {
  struct swcx_context *c = arg;
  unsigned idle = 0;
  while (!__atomic_load_n(&c->stopping, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&c->lock);
    bool worked = swcx_engine_pass(c);
    pthread_mutex_unlock(&c->lock);
    idle = worked ? 0 : idle + 1;
    /* Busy while there is work, then ever longer naps: ranks share cores. */
    if (idle == 0) continue;
    if (idle < 64) {
      sched_yield();
    } else {
      struct timespec t = {0, idle < 4096 ? 20 * 1000 : 200 * 1000};
      nanosleep(&t, NULL);
    }
  }
  return NULL;
}

int swcx_engine_start(struct swcx_context *c) {
  c->stopping = false;
  int err = pthread_create(&c->engine, NULL, run, c);
  if (err) return mori_error_set(-err, "software ConnectX: starting its engine: %s", strerror(err));
  c->running = true;
  return 0;
}

void swcx_engine_stop(struct swcx_context *c) {
  if (!c->running) return;
  __atomic_store_n(&c->stopping, true, __ATOMIC_RELEASE);
  pthread_join(c->engine, NULL);
  c->running = false;
}
