// SPDX-License-Identifier: MIT
/* Bodies of mori/device/gda.h: claiming send-queue slots, writing WQEs,
 * ringing doorbells in order, polling completions, for any NIC family. The
 * family's own part (encoders, doorbell, CQE format) sits behind the small
 * table below: one switch per step, one case per family.
 *
 * Ordering without locks. A claimant takes [r, r + n) of the send queue
 * with a compare-and-swap on qp->reserved, and only while the queue has
 * room (r + n - completed <= wqe_cnt), so a slot is never handed out twice
 * and a claim never waits for room once made (a claim taken before there
 * is room could be neither given back nor rung once a later claim stood
 * behind it, should its wait fail); it writes its WQEs, waits until
 * qp->rung == r (its turn: the claimants before it have rung; a wait that
 * only they end, mori_gda_wait_turn), rings and sets rung = r + n. The
 * claim's and rung's atomics are at GPU scope: only this GPU's kernels
 * move those counters, and a system-scope release would wait for the
 * poster's earlier stores to the queues to arrive, a PCIe round trip
 * each; the doorbell's own releases are system-scope for a queue in host
 * memory, GPU-scope for one in device memory. What the writers read of a
 * QP (mori_gda_qp_desc) and the claim's words (failure flag, `reserved`,
 * `completed`, `rung`) are loaded together before the claim: after an acquire, or a
 * branch, every load goes back to L2, one round trip each. Completions: a poller claims CQE ci with a
 * compare-and-swap on qp->cq_claimed once the CQE is ready, writes the
 * CQ's consumer index in claim order, then raises qp->completed to the
 * completed WQE + 1 (the last WQE of every claim asks for a completion,
 * and a completion of WQE k completes every earlier one on the QP): room
 * in the send queue never runs ahead of room in the CQ. */
#ifndef MORI_DEVICE_IMPL_GDA_FUNCS_H
#define MORI_DEVICE_IMPL_GDA_FUNCS_H

#include "mori/device/gda.h"
#include "mori/device/impl/gda_mlx5__funcs.h"

/* ---- the family table ---- */

/* Flags of a WQE, family-neutral (each family maps them). */
#define MORI_GDA_SIGNALED 1u /* ask for a completion */
#define MORI_GDA_FENCED 2u   /* after the QP's earlier work */

MORI_HOST_DEVICE uint8_t mori_gda_mlx5_flags(uint32_t flags) {
  return (uint8_t)(((flags & MORI_GDA_SIGNALED) ? MORI_MLX5_CTRL_CQ_UPDATE : 0) | ((flags & MORI_GDA_FENCED) ? MORI_MLX5_CTRL_FENCE : 0));
}

MORI_DEVICE_INLINE uint8_t *mori_gda_wqe_at(const mori_gda_qp_t *qp, uint64_t index) {
  return qp->sq_buf + (size_t)(index & (qp->wqe_cnt - 1)) * MORI_GDA_WQE_BYTES;
}

/* What the writers and the doorbell read of a QP (fixed after setup), in
 * registers: taken before the claim, whose acquire would send each of
 * these loads back to L2 one after the other. The counters are not copied. */
MORI_DEVICE_INLINE mori_gda_qp_t mori_gda_qp_desc(const mori_gda_qp_t *qp) {
  mori_gda_qp_t d = {0};
  d.sq_buf = qp->sq_buf;
  d.sq_dbrec = qp->sq_dbrec;
  d.bf_reg = qp->bf_reg;
  d.wqe_cnt = qp->wqe_cnt;
  d.qpn = qp->qpn;
  d.family = qp->family;
  d.sq_in_device = qp->sq_in_device;
  return d;
}

/* The writers return the WQE's doorbell value (the family's; for mlx5 the
 * control segment's first 8 bytes), which mori_gda_ring hands the NIC.
 * get = 0: write local -> remote; get = 1: read remote -> local.
 * mori_gda_encode_rdma builds WQE `index` at `wqe` (the ring's slot, or a
 * 64-byte buffer a warp then stores whole: mori_gda_put_warp). */
MORI_DEVICE_INLINE uint64_t mori_gda_encode_rdma(const mori_gda_qp_t *qp, void *wqe, uint64_t index, int get, uint32_t flags,
                                             uint64_t raddr, uint32_t rkey, uint64_t laddr, uint32_t lkey, uint32_t len) {
  switch (qp->family) {
    case MORI_GDA_FAMILY_MLX5:
      return mori_mlx5_wqe_rdma(wqe, (uint16_t)index, qp->qpn,
                         (uint8_t)(get ? MORI_MLX5_OPCODE_RDMA_READ : MORI_MLX5_OPCODE_RDMA_WRITE), mori_gda_mlx5_flags(flags),
                         raddr, rkey, laddr, lkey, len);
    default: return 0;
  }
}

MORI_DEVICE_INLINE uint64_t mori_gda_write_rdma(const mori_gda_qp_t *qp, uint64_t index, int get, uint32_t flags, uint64_t raddr,
                                            uint32_t rkey, uint64_t laddr, uint32_t lkey, uint32_t len) {
  return mori_gda_encode_rdma(qp, mori_gda_wqe_at(qp, index), index, get, flags, raddr, rkey, laddr, lkey, len);
}

MORI_DEVICE_INLINE uint64_t mori_gda_write_inline(const mori_gda_qp_t *qp, uint64_t index, uint32_t flags, uint64_t raddr,
                                              uint32_t rkey, const void *data, uint32_t len) {
  switch (qp->family) {
    case MORI_GDA_FAMILY_MLX5:
      return mori_mlx5_wqe_write_inline(mori_gda_wqe_at(qp, index), (uint16_t)index, qp->qpn, mori_gda_mlx5_flags(flags), raddr, rkey,
                                 data, len);
    default: return 0;
  }
}

MORI_DEVICE_INLINE uint64_t mori_gda_write_fetch_add(const mori_gda_qp_t *qp, uint64_t index, uint32_t flags, uint64_t raddr,
                                                 uint32_t rkey, uint64_t add, uint64_t laddr, uint32_t lkey) {
  switch (qp->family) {
    case MORI_GDA_FAMILY_MLX5:
      return mori_mlx5_wqe_fetch_add(mori_gda_wqe_at(qp, index), (uint16_t)index, qp->qpn, mori_gda_mlx5_flags(flags), raddr, rkey,
                              add, laddr, lkey);
    default: return 0;
  }
}

MORI_DEVICE_INLINE void mori_gda_family_ring(const mori_gda_qp_t *qp, uint64_t next, uint64_t last_doorbell) {
  switch (qp->family) {
    case MORI_GDA_FAMILY_MLX5: mori_mlx5_ring(qp, next, last_doorbell); break;
    default: break;
  }
}

MORI_DEVICE_INLINE int mori_gda_family_cqe_ready(const mori_gda_qp_t *qp, const uint8_t *cqe, uint64_t ci) {
  switch (qp->family) {
    case MORI_GDA_FAMILY_MLX5: return mori_mlx5_cqe_ready(cqe, ci, qp->cqe_cnt);
    default: return 0;
  }
}

MORI_DEVICE_INLINE void mori_gda_family_cqe_decode(const mori_gda_qp_t *qp, const uint8_t *cqe, mori_gda_cqe_t *out) {
  switch (qp->family) {
    case MORI_GDA_FAMILY_MLX5: mori_mlx5_cqe_decode(cqe, out); break;
    default: out->error = 1; break;
  }
}

MORI_DEVICE_INLINE void mori_gda_family_cq_consumed(const mori_gda_qp_t *qp, uint64_t ci) {
  switch (qp->family) {
    case MORI_GDA_FAMILY_MLX5: mori_mlx5_cq_consumed(qp, ci); break;
    default: break;
  }
}

/* ---- the family-neutral layer ---- */

MORI_DEVICE_INLINE mori_gda_qp_t *mori_gda_qp_of(const mori_gda_window_t *g, int peer, int i) {
  return &g->qp[(size_t)peer * (size_t)g->num_qp + (size_t)i];
}

MORI_DEVICE_INLINE int mori_gda_reaches(mori_window_dev_t win, int peer) {
  const mori_gda_window_t *g = win.gda;
  return g && peer >= 0 && peer < g->world_size && mori_gda_qp_of(g, peer, 0)->wqe_cnt != 0;
}

/* Raises *p to at least v (device memory). */
MORI_DEVICE_INLINE void mori_gda_atomic_max_u64(uint64_t *p, uint64_t v) {
  uint64_t cur = mori_atomic_load_acquire_u64(p);
  while (cur < v) {
    uint64_t seen = mori_atomic_cas_u64(p, cur, v);
    if (seen == cur) break;
    cur = seen;
  }
}

/* Sets `bits` in the QP's failure word (keeping the marks it has). */
MORI_DEVICE_INLINE void mori_gda_mark_failed(mori_gda_qp_t *qp, uint32_t bits) {
  uint32_t cur = *(volatile uint32_t *)&qp->failed;
  for (uint32_t seen; (cur & bits) != bits; cur = seen)
    if ((seen = mori_atomic_cas_u32(&qp->failed, cur, cur | bits)) == cur) break;
}

/* Marks the QP abandoned (keeping the error completion's mark). */
MORI_DEVICE_INLINE void mori_gda_abandon(mori_gda_qp_t *qp) { mori_gda_mark_failed(qp, MORI_GDA_QP_ABANDONED); }

/* What a call that found `qp` failed returns, MORI_DEVICE_EIO, after
 * leaving the QP's error completion's record in the caller's window: the
 * poller that took that completion left it in its own window, and the QPs
 * are the comm's, shared by every window (a mailbox keeps its first unread
 * record, so a window's failing calls leave one until the host reads it).
 * A QP only abandoned has no completion to name; its record was left by the
 * turn that gave up. */
MORI_DEVICE_INLINE int mori_gda_failed(mori_window_dev_t win, mori_gda_qp_t *qp, int qp_index) {
  mori_fence_system(); /* the failure mark was read before: the details it guards after it */
  uint64_t d = mori_atomic_load_acquire_u64(&qp->error_detail);
  if (d)
    (void)mori_device_report(win, MORI_DEVICE_EIO, qp->peer, MORI_GDA_CQE_ERROR_CHANNEL + (uint32_t)qp_index,
                             (d >> 32) & 0xffffu, (d >> 48) & 0xffu, d & 0xffffffffu);
  return MORI_DEVICE_EIO;
}

/* What a claimant checks at each spin of a wait it makes after its claim:
 * for the claims before it to ring (mori_gda_ring, ring = 1), or for the
 * pollers before it to consume their CQEs (mori_gda_poll_one, ring = 0).
 * Such a wait ends by itself: every claimant finishes its turn without
 * waiting for anything but the claimants before it. So an abort does not
 * end it: a turn given up leaves the QP's counters where no later claim
 * can pass, and the QPs are the comm's, shared by every window. Only the
 * timeout does, as a guard against a claimant that never comes back (a
 * kernel killed mid-post); it leaves the usual record and marks the QP
 * abandoned, so every later claim and ring turn on it fails at once
 * (MORI_DEVICE_EIO) rather than after a timeout of its own. (A poller's
 * turn goes on: the WQEs already rung still complete, and their CQEs are
 * consumed in order.) */
MORI_DEVICE_INLINE int mori_gda_wait_turn(mori_window_dev_t win, mori_gda_qp_t *qp, int ring, int qp_index, uint32_t spin,
                                          uint64_t *start, uint64_t timeout_ns, uint64_t expected, uint64_t seen) {
  if (spin == 0) *start = mori_clock_ns();
  if ((spin & MORI_WAIT_LOOK_MASK) != MORI_WAIT_LOOK_MASK) return MORI_DEVICE_OK;
  /* Abandoned: a turn before this one was given up, so this one never comes. */
  if (*(volatile uint32_t *)&qp->failed & MORI_GDA_QP_ABANDONED) return MORI_DEVICE_EIO;
  /* A turn waits only for claimants already past their claim, a few
   * stores away from done: a caller's short timeout (a quiet of 10 us) is
   * not a reason to give the QP up while one of them is descheduled. */
  if (timeout_ns && timeout_ns < MORI_GDA_TURN_TIMEOUT_NS) timeout_ns = MORI_GDA_TURN_TIMEOUT_NS;
  uint64_t waited = mori_clock_since(*start);
  if (!timeout_ns || waited <= timeout_ns) return MORI_DEVICE_OK;
  mori_gda_abandon(qp);
  uint32_t channel = MORI_GDA_TURN_CHANNEL + (ring ? 0u : MORI_GDA_CHANNEL_QPS) + (uint32_t)qp_index;
  return mori_device_report(win, MORI_DEVICE_ETIMEDOUT, qp->peer, channel, waited, expected, seen);
}

/* Takes at most one ready completion of `qp`: 1 when one was taken (by
 * this thread or, meanwhile, another), 0 when none is ready, or a negative
 * code (its turn to consume the CQE timed out, or the QP was abandoned). The
 * first error completion of a QP marks it failed and leaves a mailbox
 * record naming the peer and the syndrome; the flushed ones after it only
 * complete their requests. */
MORI_DEVICE_INLINE int mori_gda_poll_one(mori_window_dev_t win, mori_gda_qp_t *qp, int qp_index, uint64_t timeout_ns) {
  uint64_t ci = mori_atomic_load_acquire_u64(&qp->cq_claimed);
  const uint8_t *cqe = qp->cq_buf + (size_t)(ci & (qp->cqe_cnt - 1)) * MORI_GDA_CQE_BYTES;
  if (!mori_gda_family_cqe_ready(qp, cqe, ci)) return 0;
  if (mori_atomic_cas_u64(&qp->cq_claimed, ci, ci + 1) != ci) return 1;
  mori_fence_system(); /* the CQE's fields after its owner bit */
  mori_gda_cqe_t c = {0}; /* every field set, whatever the family's decoder fills */
  mori_gda_family_cqe_decode(qp, cqe, &c);
  /* The 64-bit index of the completed WQE: near `completed` (at most a
   * queue's depth either way), so a signed 16-bit distance finds it. */
  uint64_t base = mori_atomic_load_acquire_u64(&qp->completed);
  uint64_t wqe = base + (uint64_t)(int64_t)(int16_t)(uint16_t)(c.wqe_counter - (uint16_t)base);
  if (c.error) {
    /* The first error completion's details, then the QP's mark (beside an
     * abandoned mark), and the record. */
    if (mori_atomic_cas_u64(&qp->error_detail, 0, MORI_GDA_ERROR_DETAIL(c.wqe_counter, c.syndrome, c.vendor_syndrome)) == 0) {
      mori_gda_mark_failed(qp, 0x100u | (c.syndrome & 0xffu));
      mori_device_report(win, MORI_DEVICE_EIO, qp->peer, MORI_GDA_CQE_ERROR_CHANNEL + (uint32_t)qp_index, c.wqe_counter,
                         c.syndrome, c.vendor_syndrome);
    }
  }
  /* The consumer index moves in claim order (the NIC reads it as a count). */
  uint64_t start = 0, seen = 0;
  for (uint32_t spin = 0; (seen = mori_atomic_load_acquire_u64(&qp->cq_consumed)) != ci; spin++) {
    int rc = mori_gda_wait_turn(win, qp, 0, qp_index, spin, &start, timeout_ns, ci, seen);
    if (rc != MORI_DEVICE_OK) return rc;
  }
  mori_gda_family_cq_consumed(qp, ci + 1);
  mori_atomic_store_release_u64(&qp->cq_consumed, ci + 1);
  /* Only now the WQEs count as completed: their room in the send queue is
   * what lets claimants post more signaled WQEs, whose CQEs need the CQ
   * entries the consumer index has just released (raised before it, a
   * claimant could post past the CQ's depth: an overflow on a ConnectX). */
  mori_gda_atomic_max_u64(&qp->completed, wqe + 1);
  return 1;
}

/* What a claim reads of a QP: its failure flag and counters. */
typedef struct mori_gda_claim_words {
  uint32_t failed;
  uint64_t reserved, completed, rung;
} mori_gda_claim_words_t;

/* The claim's words as relaxed loads in flight at once, one round trip to
 * L2 (an acquire, or a branch between them, would send them one after the
 * other); a caller issues them beside its other loads of the QP, and the
 * fence after a successful claim makes each an acquire. */
MORI_DEVICE_INLINE mori_gda_claim_words_t mori_gda_claim_load(mori_gda_qp_t *qp) {
  mori_gda_claim_words_t w;
  w.failed = *(volatile uint32_t *)&qp->failed;
  w.reserved = mori_load_volatile_u64(&qp->reserved);
  w.completed = mori_load_volatile_u64(&qp->completed);
  w.rung = mori_load_volatile_u64(&qp->rung);
  return w;
}

/* Claims n consecutive WQEs of `qp` (wqe_cnt deep), starting from the
 * words `w` read of it: a compare-and-swap on `reserved`, made only while
 * the queue has room, so a claim never waits once made (read again after
 * a lost race, and while the queue is full: it then polls its CQ, under
 * the timeout and abort rules of every device wait). Returns the first
 * index (>= 0) or a negative code; *rung_seen: the QP's `rung` as read
 * with the claim, for mori_gda_ring; *start: the call's clock (0, or the
 * start of its earlier waits: the call's waits end within timeout_ns
 * together). */
MORI_DEVICE_INLINE int64_t mori_gda_claim(mori_window_dev_t win, mori_gda_qp_t *qp, int qp_index, uint32_t n, uint32_t wqe_cnt,
                                          mori_gda_claim_words_t w, uint64_t timeout_ns, uint64_t *rung_seen,
                                          uint64_t *start) {
  if (n == 0 || n > wqe_cnt) return MORI_DEVICE_EINVAL;
  /* Every round counts toward the timeout, a lost race and a completion
   * taken too: a claim of many WQEs that single ones keep beating to each
   * freed slot still ends. */
  for (uint32_t spin = 0;; spin++, w = mori_gda_claim_load(qp)) {
    if (w.failed) return mori_gda_failed(win, qp, qp_index);
    if (w.reserved + n - w.completed <= wqe_cnt) {
      /* Relaxed: nothing before it is published through `reserved`. */
      if (mori_atomic_cas_relaxed_device_u64(&qp->reserved, w.reserved, w.reserved + n) == w.reserved) {
        /* This claimant's WQE stores stay after the completion that freed
         * their slots (`completed`), and its doorbell after the doorbells
         * of the claims before it when `rung` already showed them. */
        mori_fence_acq_rel_device();
        *rung_seen = w.rung;
        return (int64_t)w.reserved;
      }
      /* another claimant moved it: look again */
    } else {
      int got = mori_gda_poll_one(win, qp, qp_index, timeout_ns);
      if (got < 0) return got;
      if (!got) mori_pause();
    }
    /* expected: the completions room needs (0: there was room, the races were lost) */
    uint64_t need = w.reserved + n - w.completed > wqe_cnt ? w.reserved + n - wqe_cnt : 0;
    int rc = mori_wait_check(win, spin, start, timeout_ns, qp->peer, MORI_GDA_FULL_CHANNEL + (uint32_t)qp_index, need,
                             w.completed);
    if (rc != MORI_DEVICE_OK) return rc;
  }
}

/* mori_gda_claim with the QP's depth and words read now (together). */
MORI_DEVICE_INLINE int64_t mori_gda_reserve(mori_window_dev_t win, mori_gda_qp_t *qp, int qp_index, uint32_t n,
                                            uint64_t timeout_ns, uint64_t *rung_seen, uint64_t *start) {
  uint32_t wqe_cnt = qp->wqe_cnt;
  return mori_gda_claim(win, qp, qp_index, n, wqe_cnt, mori_gda_claim_load(qp), timeout_ns, rung_seen, start);
}

/* Rings the doorbell for the claim [first, first + n) once every earlier
 * claim has rung (doorbell records only grow); last_doorbell: what the
 * writer of WQE first + n - 1 returned; desc: mori_gda_qp_desc(qp);
 * rung_seen: what mori_gda_reserve read of `rung` (when it is `first`
 * already, no wait: the claim's fence made that read an acquire).
 * Each claimant's doorbell follows the one before it: its release is
 * cumulative over what it acquired from `rung`. */
MORI_DEVICE_INLINE int mori_gda_ring(mori_window_dev_t win, mori_gda_qp_t *qp, const mori_gda_qp_t *desc, int qp_index,
                                     uint64_t first, uint32_t n, uint64_t last_doorbell, uint64_t rung_seen, uint64_t timeout_ns) {
  uint64_t start = 0, seen = rung_seen;
  for (uint32_t spin = 0; seen != first; spin++) {
    if ((seen = mori_atomic_load_acquire_device_u64(&qp->rung)) == first) break;
    int rc = mori_gda_wait_turn(win, qp, 1, qp_index, spin, &start, timeout_ns, first, seen);
    if (rc != MORI_DEVICE_OK) return rc;
  }
  mori_gda_family_ring(desc, first + n, last_doorbell);
  mori_atomic_store_release_device_u64(&qp->rung, first + n);
  return MORI_DEVICE_OK;
}

/* Waits until the WQEs of `qp` before `target` have completed (*start: the
 * call's clock, as for mori_gda_claim). */
MORI_DEVICE_INLINE int mori_gda_wait_completed(mori_window_dev_t win, mori_gda_qp_t *qp, int qp_index, uint64_t target,
                                               uint64_t timeout_ns, uint64_t *start) {
  uint64_t done = 0;
  for (uint32_t spin = 0; (done = mori_atomic_load_acquire_u64(&qp->completed)) < target;) {
    int got = mori_gda_poll_one(win, qp, qp_index, timeout_ns);
    if (got < 0) return got;
    if (got) continue;
    /* On an abandoned QP the claims never rung never complete: wait only
     * for the rung ones (the NIC may still be reading their memory). */
    if ((*(volatile uint32_t *)&qp->failed & MORI_GDA_QP_ABANDONED) && done >= mori_atomic_load_acquire_device_u64(&qp->rung))
      return MORI_DEVICE_EIO;
    int rc = mori_wait_check(win, spin++, start, timeout_ns, qp->peer, MORI_GDA_QUIET_CHANNEL + (uint32_t)qp_index, target, done);
    if (rc != MORI_DEVICE_OK) return rc;
    mori_pause();
  }
  return MORI_DEVICE_OK;
}

/* The peer's QP the next request goes on (round robin). */
MORI_DEVICE_INLINE int mori_gda_pick_qp(const mori_gda_window_t *g, int peer) {
  if (g->num_qp == 1) return 0;
  return (int)(mori_atomic_add_u32(&g->next_qp[peer], 1) % (uint32_t)g->num_qp);
}

/* A refused request (outside the window or the registered memory): the
 * mailbox record the proxy's refusals leave (MORI_PROXY_REFUSED_CHANNEL). */
MORI_DEVICE_INLINE int mori_gda_refuse(mori_window_dev_t win, uint32_t op, int peer, uint64_t offset, uint64_t bytes) {
  return mori_device_report(win, MORI_DEVICE_ERANGE, peer, MORI_PROXY_REFUSED_CHANNEL + op, win.size, offset, bytes);
}

/* The registered address of local bytes [p, p + bytes) in the segment
 * [base, base + size), or 0. */
MORI_DEVICE_INLINE uint64_t mori_gda_local_in(uint64_t base, uint64_t size, const void *p, uint64_t bytes) {
  uint64_t a = (uint64_t)(uintptr_t)p;
  if (a < base || a - base > size || bytes > size - (a - base)) return 0;
  return a;
}

/* The registered address of local window bytes [p, p + bytes), or 0: the
 * window's own part of the registered segment (windows carved from one
 * heap chunk share its registration), so a get never lands in a neighbour. */
MORI_DEVICE_INLINE uint64_t mori_gda_local_win(uint64_t local_base, mori_window_dev_t win, const void *p, uint64_t bytes) {
  return mori_gda_local_in(local_base + win.segment_offset, win.size, p, bytes);
}

MORI_DEVICE_INLINE uint64_t mori_gda_local_addr(mori_window_dev_t win, const void *p, uint64_t bytes) {
  return mori_gda_local_win(win.gda->local_base, win, p, bytes);
}

MORI_DEVICE_INLINE int mori_gda_check_remote(mori_window_dev_t win, uint32_t op, int peer, uint64_t offset, uint64_t bytes) {
  if (offset > win.size || bytes > win.size - offset) return mori_gda_refuse(win, op, peer, offset, bytes);
  return MORI_DEVICE_OK;
}

MORI_DEVICE_INLINE uint64_t mori_gda_remote_addr(mori_window_dev_t win, int peer, uint64_t offset) {
  return win.gda->remote_base[peer] + win.segment_offset + offset;
}

/* One transfer (put or get) of at most MORI_GDA_MAX_PIECE bytes, on QP q. */
MORI_DEVICE_INLINE int mori_gda_post_rdma(mori_window_dev_t win, int peer, int q, int get, uint64_t remote_offset,
                                          uint64_t laddr, uint32_t len, uint64_t timeout_ns, uint64_t *start) {
  const mori_gda_window_t *g = win.gda;
  mori_gda_qp_t *qp = mori_gda_qp_of(g, peer, q);
  const mori_gda_qp_t d = mori_gda_qp_desc(qp);
  uint64_t raddr = mori_gda_remote_addr(win, peer, remote_offset);
  uint32_t rkey = g->rkey[peer], lkey = g->lkey;
  uint64_t rung = 0;
  int64_t at = mori_gda_reserve(win, qp, q, 1, timeout_ns, &rung, start);
  if (at < 0) return (int)at;
  uint64_t db = mori_gda_write_rdma(&d, (uint64_t)at, get, MORI_GDA_SIGNALED, raddr, rkey, laddr, lkey, len);
  return mori_gda_ring(win, qp, &d, q, (uint64_t)at, 1, db, rung, timeout_ns);
}

MORI_DEVICE_INLINE int mori_gda_transfer(mori_window_dev_t win, int peer, int get, uint64_t remote_offset, void *local,
                                         uint64_t bytes, uint64_t timeout_ns) {
  const mori_gda_window_t *g = win.gda;
  if (!g) return MORI_DEVICE_EUNREACHABLE;
  /* Loads in two round trips before the claim's compare-and-swap: the
   * window's table (every word at once), then the QP's descriptor, the
   * peer's segment and key and the claim's words; the checks come after
   * them (a branch between loads would wait for each). */
  const mori_gda_window_t t = *g;
  if (peer < 0 || peer >= t.world_size) return MORI_DEVICE_EUNREACHABLE;
  int q = t.num_qp == 1 ? 0 : (int)(mori_atomic_add_u32(&t.next_qp[peer], 1) % (uint32_t)t.num_qp);
  mori_gda_qp_t *qp = &t.qp[(size_t)peer * (size_t)t.num_qp + (size_t)q];
  const mori_gda_qp_t d = mori_gda_qp_desc(qp);
  uint64_t rbase = t.remote_base[peer];
  uint32_t rkey = t.rkey[peer], lkey = t.lkey;
  mori_gda_claim_words_t w = mori_gda_claim_load(qp);
  if (d.wqe_cnt == 0) return MORI_DEVICE_EUNREACHABLE; /* a peer has all its QPs or none */
  uint32_t op = get ? MORI_PROXY_GET : MORI_PROXY_PUT;
  int rc = mori_gda_check_remote(win, op, peer, remote_offset, bytes);
  if (rc) return rc;
  uint64_t laddr = mori_gda_local_win(t.local_base, win, local, bytes);
  if (!laddr) return MORI_DEVICE_EINVAL;
  if (bytes == 0) return MORI_DEVICE_OK;
  uint64_t start = 0; /* one clock for the pieces' claims */
  if (bytes <= MORI_GDA_MAX_PIECE) {
    uint64_t rung = 0;
    int64_t at = mori_gda_claim(win, qp, q, 1, d.wqe_cnt, w, timeout_ns, &rung, &start);
    if (at < 0) return (int)at;
    uint64_t db = mori_gda_write_rdma(&d, (uint64_t)at, get, MORI_GDA_SIGNALED, rbase + win.segment_offset + remote_offset, rkey,
                                      laddr, lkey, (uint32_t)bytes);
    return mori_gda_ring(win, qp, &d, q, (uint64_t)at, 1, db, rung, timeout_ns);
  }
  for (uint64_t done = 0; done < bytes;) {
    uint64_t len = bytes - done < MORI_GDA_MAX_PIECE ? bytes - done : MORI_GDA_MAX_PIECE;
    rc = mori_gda_post_rdma(win, peer, q, get, remote_offset + done, laddr + done, (uint32_t)len, timeout_ns, &start);
    if (rc) return rc;
    done += len;
  }
  return MORI_DEVICE_OK;
}

MORI_DEVICE_INLINE int mori_gda_put(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes,
                                    uint64_t timeout_ns) {
  return mori_gda_transfer(win, peer, 0, dst_offset, (void *)src, bytes, timeout_ns);
}

MORI_DEVICE_INLINE int mori_gda_get(mori_window_dev_t win, int peer, void *dst, uint64_t src_offset, uint64_t bytes,
                                    uint64_t timeout_ns) {
  return mori_gda_transfer(win, peer, 1, src_offset, dst, bytes, timeout_ns);
}

/* Waits until the peer's QPs other than `keep` have completed what was
 * claimed on them so far (an ordered op then goes on `keep`, fenced);
 * *start: the call's clock. */
MORI_DEVICE_INLINE int mori_gda_drain_others(mori_window_dev_t win, int peer, int keep, uint64_t timeout_ns,
                                             uint64_t *start) {
  const mori_gda_window_t *g = win.gda;
  for (int i = 0; i < g->num_qp; i++) {
    if (i == keep) continue;
    mori_gda_qp_t *qp = mori_gda_qp_of(g, peer, i);
    int rc = mori_gda_wait_completed(win, qp, i, mori_atomic_load_acquire_u64(&qp->reserved), timeout_ns, start);
    if (rc) return rc;
    /* Completed is not delivered: a request that failed there (its record
     * is left) must not be followed by the ordered op, or the peer would
     * see a signal whose data never came. */
    if (*(volatile uint32_t *)&qp->failed) return mori_gda_failed(win, qp, i);
  }
  return MORI_DEVICE_OK;
}

MORI_DEVICE_INLINE int mori_gda_check_word(mori_window_dev_t win, uint32_t op, int peer, uint64_t offset) {
  if (!mori_gda_reaches(win, peer)) return MORI_DEVICE_EUNREACHABLE;
  /* A remote atomic on an unaligned word fails on the NIC (or tears). */
  if ((offset + win.segment_offset) % 8 != 0) return MORI_DEVICE_EINVAL;
  return mori_gda_check_remote(win, op, peer, offset, 8);
}

MORI_DEVICE_INLINE int mori_gda_signal_set(mori_window_dev_t win, int peer, uint64_t offset, uint64_t value,
                                           uint64_t timeout_ns) {
  int rc = mori_gda_check_word(win, MORI_PROXY_SIGNAL_SET, peer, offset);
  if (rc) return rc;
  const mori_gda_window_t *g = win.gda;
  int q = mori_gda_pick_qp(g, peer);
  uint64_t start = 0; /* one clock for the drain and the claim */
  if ((rc = mori_gda_drain_others(win, peer, q, timeout_ns, &start)) != 0) return rc;
  mori_gda_qp_t *qp = mori_gda_qp_of(g, peer, q);
  const mori_gda_qp_t d = mori_gda_qp_desc(qp);
  uint64_t raddr = mori_gda_remote_addr(win, peer, offset);
  uint32_t rkey = g->rkey[peer];
  uint64_t rung = 0;
  int64_t at = mori_gda_reserve(win, qp, q, 1, timeout_ns, &rung, &start);
  if (at < 0) return (int)at;
  uint64_t db = mori_gda_write_inline(&d, (uint64_t)at, MORI_GDA_SIGNALED | MORI_GDA_FENCED, raddr, rkey, &value, 8);
  return mori_gda_ring(win, qp, &d, q, (uint64_t)at, 1, db, rung, timeout_ns);
}

/* result: NULL (the old value is not wanted) or where it goes, in this
 * rank's registered window memory; fetching waits for the completion. */
MORI_DEVICE_INLINE int mori_gda_atomic_add(mori_window_dev_t win, int peer, uint64_t offset, uint64_t value, uint64_t *result,
                                           uint64_t timeout_ns) {
  int rc = mori_gda_check_word(win, MORI_PROXY_ATOMIC_ADD, peer, offset);
  if (rc) return rc;
  const mori_gda_window_t *g = win.gda;
  uint64_t laddr = 0;
  uint32_t lkey = 0;
  if (result) {
    if (!(laddr = mori_gda_local_addr(win, result, 8)) || laddr % 8) return MORI_DEVICE_EINVAL;
    lkey = g->lkey;
  }
  int q = mori_gda_pick_qp(g, peer);
  uint64_t start = 0; /* one clock for the drain and the claim */
  if ((rc = mori_gda_drain_others(win, peer, q, timeout_ns, &start)) != 0) return rc;
  mori_gda_qp_t *qp = mori_gda_qp_of(g, peer, q);
  if (!result) {
    laddr = qp->sink_addr;
    lkey = qp->sink_lkey;
  }
  const mori_gda_qp_t d = mori_gda_qp_desc(qp);
  uint64_t raddr = mori_gda_remote_addr(win, peer, offset);
  uint32_t rkey = g->rkey[peer];
  uint64_t rung = 0;
  int64_t at = mori_gda_reserve(win, qp, q, 1, timeout_ns, &rung, &start);
  if (at < 0) return (int)at;
  uint64_t db = mori_gda_write_fetch_add(&d, (uint64_t)at, MORI_GDA_SIGNALED | MORI_GDA_FENCED, raddr, rkey, value, laddr, lkey);
  if ((rc = mori_gda_ring(win, qp, &d, q, (uint64_t)at, 1, db, rung, timeout_ns)) != 0) return rc;
  if (!result) return MORI_DEVICE_OK;
  if ((rc = mori_gda_wait_completed(win, qp, q, (uint64_t)at + 1, timeout_ns, &start)) != 0) return rc;
  if (*(volatile uint32_t *)&qp->failed) return mori_gda_failed(win, qp, q);
  mori_fence_system();
  return MORI_DEVICE_OK;
}

/* A put, then a signal set on the same QP, fenced behind it: the receiver
 * sees the signal only once the data is there. One claim of two WQEs, one
 * doorbell. The put must fit one piece (MORI_GDA_MAX_PIECE). */
MORI_DEVICE_INLINE int mori_gda_put_signal(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes,
                                           uint64_t signal_offset, uint64_t signal_value, uint64_t timeout_ns) {
  int rc = mori_gda_check_word(win, MORI_PROXY_SIGNAL_SET, peer, signal_offset);
  if (!rc) rc = mori_gda_check_remote(win, MORI_PROXY_PUT, peer, dst_offset, bytes);
  if (rc) return rc;
  const mori_gda_window_t *g = win.gda;
  uint64_t laddr = mori_gda_local_addr(win, src, bytes);
  if (!laddr || bytes > MORI_GDA_MAX_PIECE) return MORI_DEVICE_EINVAL;
  int q = mori_gda_pick_qp(g, peer);
  uint64_t start = 0; /* one clock for the drain and the claim */
  if ((rc = mori_gda_drain_others(win, peer, q, timeout_ns, &start)) != 0) return rc;
  mori_gda_qp_t *qp = mori_gda_qp_of(g, peer, q);
  const mori_gda_qp_t d = mori_gda_qp_desc(qp);
  uint64_t raddr = mori_gda_remote_addr(win, peer, dst_offset), saddr = mori_gda_remote_addr(win, peer, signal_offset);
  uint32_t rkey = g->rkey[peer], lkey = g->lkey;
  uint64_t rung = 0;
  int64_t at = mori_gda_reserve(win, qp, q, 2, timeout_ns, &rung, &start);
  if (at < 0) return (int)at;
  mori_gda_write_rdma(&d, (uint64_t)at, 0, 0, raddr, rkey, laddr, lkey, (uint32_t)bytes);
  uint64_t db = mori_gda_write_inline(&d, (uint64_t)at + 1, MORI_GDA_SIGNALED | MORI_GDA_FENCED, saddr, rkey, &signal_value, 8);
  return mori_gda_ring(win, qp, &d, q, (uint64_t)at, 2, db, rung, timeout_ns);
}

/* n puts to one peer, one claim, one doorbell, one completion (the last):
 * each of at most MORI_GDA_MAX_PIECE bytes from this rank's window. */
MORI_DEVICE_INLINE int mori_gda_put_batch(mori_window_dev_t win, int peer, uint32_t n, const uint64_t *dst_offset,
                                          const void *const *src, const uint64_t *bytes, uint64_t timeout_ns) {
  if (!mori_gda_reaches(win, peer)) return MORI_DEVICE_EUNREACHABLE;
  const mori_gda_window_t *g = win.gda;
  for (uint32_t i = 0; i < n; i++) {
    int rc = mori_gda_check_remote(win, MORI_PROXY_PUT, peer, dst_offset[i], bytes[i]);
    if (rc) return rc;
    if (!mori_gda_local_addr(win, src[i], bytes[i]) || bytes[i] > MORI_GDA_MAX_PIECE) return MORI_DEVICE_EINVAL;
  }
  if (n == 0) return MORI_DEVICE_OK;
  int q = mori_gda_pick_qp(g, peer);
  mori_gda_qp_t *qp = mori_gda_qp_of(g, peer, q);
  const mori_gda_qp_t d = mori_gda_qp_desc(qp);
  uint32_t rkey = g->rkey[peer], lkey = g->lkey;
  uint64_t rung = 0, start = 0;
  int64_t at = mori_gda_reserve(win, qp, q, n, timeout_ns, &rung, &start);
  if (at < 0) return (int)at;
  uint64_t db = 0;
  for (uint32_t i = 0; i < n; i++)
    db = mori_gda_write_rdma(&d, (uint64_t)at + i, 0, i + 1 == n ? MORI_GDA_SIGNALED : 0,
                             mori_gda_remote_addr(win, peer, dst_offset[i]), rkey, (uint64_t)(uintptr_t)src[i], lkey,
                             (uint32_t)bytes[i]);
  return mori_gda_ring(win, qp, &d, q, (uint64_t)at, n, db, rung, timeout_ns);
}

/* The lanes of the warp present at a call (a warp that the block's size
 * cuts short has fewer, and so has one whose lanes took different
 * branches): a warp's batch is theirs. A lane's place in the batch is its
 * rank among them; the first claims and rings, the last's WQE asks for the
 * completion. */
#if defined(MORI_DEVICE_COMPILER_CUDA)
/* PTX rather than the toolkit's intrinsics: the Triton bitcode compiles
 * these headers with clang and no CUDA headers. Lane ids are the
 * hardware's (%laneid), whatever the block's shape. */
typedef uint32_t mori_gda_lanes_t;
MORI_DEVICE_INLINE mori_gda_lanes_t mori_gda_lanes_present(void) {
  uint32_t m;
  asm volatile("activemask.b32 %0;" : "=r"(m));
  return m;
}
MORI_DEVICE_INLINE int mori_gda_lane_id(void) {
  uint32_t l;
  asm("mov.u32 %0, %%laneid;" : "=r"(l));
  return (int)l;
}
MORI_DEVICE_INLINE mori_gda_lanes_t mori_gda_lanes_below(void) {
  uint32_t m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}
MORI_DEVICE_INLINE int mori_gda_lanes_count(mori_gda_lanes_t m) {
  uint32_t c;
  asm("popc.b32 %0, %1;" : "=r"(c) : "r"(m));
  return (int)c;
}
MORI_DEVICE_INLINE int mori_gda_lanes_last(mori_gda_lanes_t m) {
  uint32_t b;
  asm("bfind.u32 %0, %1;" : "=r"(b) : "r"(m));
  return (int)b;
}
#define MORI_GDA_SHUFFLE(m, v, lane) __shfl_sync((m), (v), (lane))
#define MORI_GDA_SYNC_LANES(m) asm volatile("bar.warp.sync %0;" ::"r"(m) : "memory")
#elif defined(MORI_DEVICE_COMPILER_HIP)
typedef unsigned long long mori_gda_lanes_t;
MORI_DEVICE_INLINE mori_gda_lanes_t mori_gda_lanes_present(void) { return (mori_gda_lanes_t)__ballot(1); }
/* The compiler's builtins: HIP's __lane_id() reads the device library's
 * wavefront size, which these kernels do not link. */
MORI_DEVICE_INLINE int mori_gda_lane_id(void) {
  return (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
MORI_DEVICE_INLINE mori_gda_lanes_t mori_gda_lanes_below(void) {
  return ((mori_gda_lanes_t)1 << mori_gda_lane_id()) - 1;
}
MORI_DEVICE_INLINE int mori_gda_lanes_count(mori_gda_lanes_t m) { return (int)__popcll(m); }
MORI_DEVICE_INLINE int mori_gda_lanes_last(mori_gda_lanes_t m) { return 63 - (int)__clzll((long long)m); }
#define MORI_GDA_SHUFFLE(m, v, lane) __shfl((v), (lane))
#define MORI_GDA_SYNC_LANES(m) __builtin_amdgcn_wave_barrier()
#else
typedef uint32_t mori_gda_lanes_t;
MORI_DEVICE_INLINE mori_gda_lanes_t mori_gda_lanes_present(void) { return 1u; }
MORI_DEVICE_INLINE int mori_gda_lane_id(void) { return 0; }
MORI_DEVICE_INLINE mori_gda_lanes_t mori_gda_lanes_below(void) { return 0u; }
MORI_DEVICE_INLINE int mori_gda_lanes_count(mori_gda_lanes_t m) { return __builtin_popcount(m); }
MORI_DEVICE_INLINE int mori_gda_lanes_last(mori_gda_lanes_t m) { return 31 - __builtin_clz(m); }
#define MORI_GDA_SHUFFLE(m, v, lane) ((void)(m), (void)(lane), (v))
#define MORI_GDA_SYNC_LANES(m) ((void)(m))
#endif
/* The lowest lane of m (m not empty): the count of the zeros below it. */
MORI_DEVICE_INLINE int mori_gda_lanes_first(mori_gda_lanes_t m) {
  return mori_gda_lanes_count((mori_gda_lanes_t)((m & (0 - m)) - 1));
}

#if defined(MORI_DEVICE_COMPILER_HOST)
#define MORI_GDA_UNROLL
#else
#define MORI_GDA_UNROLL _Pragma("unroll")
#endif

/* Stores a full warp's WQEs [first, first + count), WQE `first + l` built
 * by lane l in `mine` (its 64 bytes), as whole 16-byte pieces: at step j
 * (of 4) lane l stores piece l % 4 of WQE (count / 4) j + l / 4, so each
 * store instruction of the warp covers count * 16 contiguous bytes of the
 * ring (written by the lane that built it; each store instruction touches
 * a quarter of the batch's WQEs). One of the forms bench_gda times against the
 * library's. Every lane present; count: the warp's size, a multiple of 4. */
MORI_DEVICE_INLINE void mori_gda_store_wqes_warp(const mori_gda_qp_t *desc, uint64_t first, const uint32_t mine[16], int lane,
                                                 int count, mori_gda_lanes_t lanes) {
  typedef struct {
    uint32_t w[4];
  } __attribute__((aligned(16))) mori_gda_piece_t;
  int part = lane & 3;
  for (int j = 0; j < 4; j++) {
    int owner = (count / 4) * j + lane / 4;
    mori_gda_piece_t piece;
    MORI_GDA_UNROLL
    for (int i = 0; i < 4; i++) {
      /* Every lane takes word i of each of the owner's four pieces (a
       * shuffle reads one register for the whole warp), then keeps its own. */
      uint32_t p0 = MORI_GDA_SHUFFLE(lanes, mine[i], owner), p1 = MORI_GDA_SHUFFLE(lanes, mine[4 + i], owner);
      uint32_t p2 = MORI_GDA_SHUFFLE(lanes, mine[8 + i], owner), p3 = MORI_GDA_SHUFFLE(lanes, mine[12 + i], owner);
      piece.w[i] = part == 0 ? p0 : part == 1 ? p1 : part == 2 ? p2 : p3;
    }
    *(mori_gda_piece_t *)(mori_gda_wqe_at(desc, first + (uint64_t)owner) + 16 * part) = piece;
  }
}

/* How a warp's lanes store the WQEs of its batch (bench_gda times each):
 * each lane its own WQE with the encoder's 4- and 8-byte stores, each lane
 * its own WQE as four 16-byte pieces, or the warp's WQEs as contiguous
 * runs of pieces (mori_gda_store_wqes_warp; a full warp only, else the
 * encoder's stores). */
enum mori_gda_warp_stores {
  MORI_GDA_WARP_STORES_ENCODER = 0,
  MORI_GDA_WARP_STORES_PIECES = 1,
  MORI_GDA_WARP_STORES_RUNS = 2,
};

/* mori_gda_put_warp, with the WQE stores of `stores`. */
MORI_DEVICE_INLINE int mori_gda_impl_put_warp(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes,
                                              uint64_t timeout_ns, int stores) {
  mori_gda_lanes_t lanes = mori_gda_lanes_present();
  int lane = mori_gda_lane_id(), count = mori_gda_lanes_count(lanes);
  int head = mori_gda_lanes_first(lanes), tail = mori_gda_lanes_last(lanes);
  int rank = mori_gda_lanes_count(lanes & mori_gda_lanes_below()); /* present lanes below this one */
  const mori_gda_window_t *g = win.gda;
  if (!g) return MORI_DEVICE_EUNREACHABLE;
  /* As mori_gda_transfer: the table, then the QP's descriptor, the peer's
   * segment and key and (the head lane) the claim's words, then the checks. */
  const mori_gda_window_t t = *g;
  if (peer < 0 || peer >= t.world_size) return MORI_DEVICE_EUNREACHABLE;
  long long q = 0, at = 0;
  if (t.num_qp > 1) { /* the same for every lane */
    if (lane == head) q = (long long)(mori_atomic_add_u32(&t.next_qp[peer], 1) % (uint32_t)t.num_qp);
    q = MORI_GDA_SHUFFLE(lanes, q, head);
  }
  mori_gda_qp_t *qp = &t.qp[(size_t)peer * (size_t)t.num_qp + (size_t)q];
  const mori_gda_qp_t d = mori_gda_qp_desc(qp);
  uint64_t rbase = t.remote_base[peer];
  uint32_t rkey = t.rkey[peer], lkey = t.lkey;
  mori_gda_claim_words_t w = {0, 0, 0, 0};
  if (lane == head) w = mori_gda_claim_load(qp);
  if (d.wqe_cnt == 0) return MORI_DEVICE_EUNREACHABLE;
  int bad = mori_gda_check_remote(win, MORI_PROXY_PUT, peer, dst_offset, bytes) != 0 ||
            !mori_gda_local_win(t.local_base, win, src, bytes) || bytes > MORI_GDA_MAX_PIECE;
  /* A lane with a bad request still writes a WQE (a write of zero bytes),
   * so the claim is filled; it says so in its return. */
  uint64_t raddr = rbase + win.segment_offset + (bad ? 0 : dst_offset), laddr = bad ? t.local_base : (uint64_t)(uintptr_t)src;
  uint32_t len = bad ? 0u : (uint32_t)bytes;
  uint32_t flags = rank + 1 == count ? MORI_GDA_SIGNALED : 0;
  uint64_t rung = 0, start = 0;
  if (lane == head) at = mori_gda_claim(win, qp, (int)q, (uint32_t)count, d.wqe_cnt, w, timeout_ns, &rung, &start);
  at = MORI_GDA_SHUFFLE(lanes, at, head);
  if (at < 0) return (int)at;
  uint64_t index = (uint64_t)at + (uint64_t)rank;
  int full = count == MORI_THREAD_COUNT_WARP() && count % 4 == 0;
  long long db;
  if (stores == MORI_GDA_WARP_STORES_ENCODER || (stores == MORI_GDA_WARP_STORES_RUNS && !full)) {
    db = (long long)mori_gda_write_rdma(&d, index, 0, flags, raddr, rkey, laddr, lkey, len);
  } else {
    typedef struct {
      uint32_t w[4];
    } __attribute__((aligned(16))) mori_gda_piece_t;
    union {
      mori_gda_piece_t piece[4];
      uint32_t w[16];
    } wqe;
    db = (long long)mori_gda_encode_rdma(&d, wqe.w, index, 0, flags, raddr, rkey, laddr, lkey, len);
    if (stores == MORI_GDA_WARP_STORES_RUNS) {
      mori_gda_store_wqes_warp(&d, (uint64_t)at, wqe.w, lane, count, lanes);
    } else {
      mori_gda_piece_t *slot = (mori_gda_piece_t *)mori_gda_wqe_at(&d, index);
      MORI_GDA_UNROLL
      for (int i = 0; i < 4; i++) slot[i] = wqe.piece[i];
    }
  }
  db = MORI_GDA_SHUFFLE(lanes, db, tail); /* the last WQE's doorbell value */
  /* The lanes' barrier orders every lane's WQE stores before the head's
   * doorbell, whose release is cumulative over them. */
  MORI_GDA_SYNC_LANES(lanes);
  int rc = MORI_DEVICE_OK;
  if (lane == head) rc = mori_gda_ring(win, qp, &d, (int)q, (uint64_t)at, (uint32_t)count, (uint64_t)db, rung, timeout_ns);
  rc = (int)MORI_GDA_SHUFFLE(lanes, rc, head);
  return rc ? rc : bad ? MORI_DEVICE_EINVAL : MORI_DEVICE_OK;
}

/* Every lane of a warp present at the call puts its own (dst_offset, src,
 * bytes) to `peer`: the first claims as many WQEs as there are lanes and
 * rings once; each lane writes its WQE (the fastest of the three ways
 * bench_gda times). The lanes present must call it together, with the same
 * peer. */
MORI_DEVICE_INLINE int mori_gda_put_warp(mori_window_dev_t win, int peer, uint64_t dst_offset, const void *src, uint64_t bytes,
                                         uint64_t timeout_ns) {
  return mori_gda_impl_put_warp(win, peer, dst_offset, src, bytes, timeout_ns, MORI_GDA_WARP_STORES_ENCODER);
}

/* mori_gda_quiet_peer on the call's clock *start. */
MORI_DEVICE_INLINE int mori_gda_impl_quiet_peer(mori_window_dev_t win, int peer, uint64_t timeout_ns, uint64_t *start) {
  if (!mori_gda_reaches(win, peer)) return MORI_DEVICE_OK;
  const mori_gda_window_t *g = win.gda;
  int failed = -1; /* the first failed QP */
  for (int i = 0; i < g->num_qp; i++) {
    mori_gda_qp_t *qp = mori_gda_qp_of(g, peer, i);
    int rc = mori_gda_wait_completed(win, qp, i, mori_atomic_load_acquire_u64(&qp->reserved), timeout_ns, start);
    if (rc) return rc;
    if (failed < 0 && *(volatile uint32_t *)&qp->failed != 0) failed = i;
  }
  mori_fence_system();
  return failed >= 0 ? mori_gda_failed(win, mori_gda_qp_of(g, peer, failed), failed) : MORI_DEVICE_OK;
}

/* Every request to `peer` claimed so far has completed; MORI_DEVICE_EIO when
 * one of its QPs has failed (the mailbox names the peer and syndrome). The
 * waits on its QPs end within timeout_ns together. */
MORI_DEVICE_INLINE int mori_gda_quiet_peer(mori_window_dev_t win, int peer, uint64_t timeout_ns) {
  uint64_t start = 0;
  return mori_gda_impl_quiet_peer(win, peer, timeout_ns, &start);
}

/* The same for every peer, all within timeout_ns; the first failure's
 * code, after waiting for all. */
MORI_DEVICE_INLINE int mori_gda_quiet(mori_window_dev_t win, uint64_t timeout_ns) {
  const mori_gda_window_t *g = win.gda;
  if (!g) return MORI_DEVICE_OK;
  int first = MORI_DEVICE_OK;
  uint64_t start = 0;
  for (int p = 0; p < g->world_size; p++) {
    int rc = mori_gda_impl_quiet_peer(win, p, timeout_ns, &start);
    if (rc == MORI_DEVICE_ETIMEDOUT || rc == MORI_DEVICE_EABORTED) return rc;
    if (rc && !first) first = rc;
  }
  return first;
}

/* Orders this caller's later operations to `peer` after its earlier ones:
 * waits for the peer's QPs to complete what was claimed on them. */
MORI_DEVICE_INLINE int mori_gda_fence(mori_window_dev_t win, int peer, uint64_t timeout_ns) {
  return mori_gda_quiet_peer(win, peer, timeout_ns);
}

#endif
