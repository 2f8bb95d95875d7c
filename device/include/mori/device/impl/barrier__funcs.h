// SPDX-License-Identifier: MIT
/* Bodies of mori/device/barrier.h. */
#ifndef MORI_DEVICE_IMPL_BARRIER_FUNCS_H
#define MORI_DEVICE_IMPL_BARRIER_FUNCS_H

#include "mori/device/barrier.h"

MORI_DEVICE_INLINE uint32_t *mori_pad_slot(mori_window_dev_t win, int owner, int src, uint32_t channel) {
  uint32_t *pad = win.signal_pads[owner];
  return pad ? pad + (uint64_t)channel * (uint64_t)win.world_size + (uint64_t)src : (uint32_t *)0;
}

/* Bytes of pad that channels [0, channel] take: one uint32 per rank each.
 * 64-bit, so no channel number wraps it. */
MORI_HOST_DEVICE uint64_t mori_pad_bytes_needed(mori_window_dev_t win, uint32_t channel) {
  return ((uint64_t)channel + 1) * (uint64_t)win.world_size * 4;
}

/* The pad slot `owner` keeps for `src` on `channel`, or why there is none:
 * no pad (EUNREACHABLE), a rank outside the comm (EINVAL: it would index
 * past the pad table), or a channel past the pad (ECHANNEL, recorded in the
 * mailbox: the slot would lie in another window's memory). */
MORI_DEVICE_INLINE int mori_pad_check(mori_window_dev_t win, int owner, int src, uint32_t channel, int peer,
                                      uint32_t **slot) {
  *slot = (uint32_t *)0;
  if (!win.signal_pads) return MORI_DEVICE_EUNREACHABLE;
  if (owner < 0 || owner >= win.world_size || src < 0 || src >= win.world_size) return MORI_DEVICE_EINVAL;
  if (mori_pad_bytes_needed(win, channel) > win.signal_pad_size)
    return mori_device_report(win, MORI_DEVICE_ECHANNEL, peer, channel, 0, mori_pad_bytes_needed(win, channel),
                              win.signal_pad_size);
  *slot = mori_pad_slot(win, owner, src, channel);
  return *slot ? MORI_DEVICE_OK : MORI_DEVICE_EUNREACHABLE;
}

/* mori_pad_put on the clock `*start` of a call that waits more than once
 * (mori_wait_expired: 0 starts it), so the whole call ends within its
 * timeout rather than each of its waits. */
MORI_DEVICE_INLINE int mori_pad_put_within(mori_window_dev_t win, int peer, uint32_t channel, uint64_t timeout_ns,
                                           uint64_t *start) {
  uint32_t *slot;
  int rc = mori_pad_check(win, peer, win.world_rank, channel, peer, &slot);
  if (rc) return rc;
  for (uint32_t spin = 0; mori_atomic_cas_release_u32(slot, 0, 1) != 0; spin++) {
    if ((rc = mori_wait_check(win, spin, start, timeout_ns, peer, channel, 0, 1)) != MORI_DEVICE_OK) return rc;
    mori_pause();
  }
  return MORI_DEVICE_OK;
}

/* Sets my slot on `peer` (spins while the previous signal is unconsumed). */
MORI_DEVICE_INLINE int mori_pad_put(mori_window_dev_t win, int peer, uint32_t channel, uint64_t timeout_ns) {
  uint64_t start = 0;
  return mori_pad_put_within(win, peer, channel, timeout_ns, &start);
}

/* Consumes `peer`'s signal in my pad. */
MORI_DEVICE_INLINE int mori_pad_wait(mori_window_dev_t win, int peer, uint32_t channel, uint64_t timeout_ns) {
  uint32_t *slot;
  int rc = mori_pad_check(win, win.world_rank, peer, channel, peer, &slot);
  if (rc) return rc;
  uint64_t start = 0;
  for (uint32_t spin = 0; mori_atomic_cas_acquire_u32(slot, 1, 0) != 1; spin++) {
    if ((rc = mori_wait_check(win, spin, &start, timeout_ns, peer, channel, 1, 0)) != MORI_DEVICE_OK) return rc;
    mori_pause();
  }
  return MORI_DEVICE_OK;
}

/* A barrier's one code for the whole block (barrier.h: every thread returns
 * the same): 0 when every thread's is; else an abort if any thread saw one,
 * a timeout if any timed out, and otherwise the pad's absence (the only
 * other failure a thread meets after the block's own checks). */
MORI_DEVICE_INLINE int mori_barrier_block_code(int rc) {
  if (!MORI_SYNC_BLOCK_OR(rc != MORI_DEVICE_OK)) return MORI_DEVICE_OK;
  if (MORI_SYNC_BLOCK_OR(rc == MORI_DEVICE_EABORTED)) return MORI_DEVICE_EABORTED;
  if (MORI_SYNC_BLOCK_OR(rc == MORI_DEVICE_ETIMEDOUT)) return MORI_DEVICE_ETIMEDOUT;
  return MORI_DEVICE_EUNREACHABLE;
}

/* A pad slot a pad barrier has taken a signal from and not yet given back
 * (see mori_lsa_pad_barrier_block). */
#define MORI_PAD_CLAIMED 2u

/* Adds LSA index i (scanned in ascending order) to a timed-out barrier's
 * missing peers. The mask starts at the first missing index `first`, so
 * it names the first 64 of them; the caller sets m->base from `first`. */
MORI_DEVICE_INLINE void mori_missing_add(mori_missing_peers_t *m, int *first, int i) {
  if (*first < 0) *first = i;
  m->count++;
  if (i - *first < 64) m->mask |= 1ull << (i - *first);
}

/* The LSA peers whose signal on `channel` is not in this rank's pad: what
 * a timed-out pad barrier names (the barrier gives no slot back before
 * every signal has arrived, so an empty slot is a peer that has not). When
 * the peer the caller gave up on arrived in the meantime, it is named
 * alone: it was missing when the time ran out. */
MORI_DEVICE_INLINE mori_missing_peers_t mori_lsa_pad_missing(mori_window_dev_t win, uint32_t channel, int gave_up_on) {
  mori_missing_peers_t m = {0, 0, 0};
  int first = -1;
  for (int i = 0; i < win.lsa_size; i++) {
    int peer = win.lsa_base + i;
    uint32_t *slot = mori_pad_slot(win, win.world_rank, peer, channel);
    if (peer != win.world_rank && !(slot && mori_atomic_load_acquire_u32(slot) != 0)) mori_missing_add(&m, &first, i);
  }
  m.base = win.lsa_base + (first < 0 ? 0 : first);
  if (m.count == 0) m.mask = 1, m.base = gave_up_on, m.count = 1;
  return m;
}

/* Signals every LSA peer, then takes every peer's signal from this rank's
 * pad (CAS 1 -> MORI_PAD_CLAIMED: one taker per signal, as the CAS to 0
 * of mori_pad_wait), and gives the slots back (0) only once every thread
 * has taken all of its own: a wait that times out can then name every
 * peer missing, not only its own. A claimed slot still holds off the
 * peer's next signal (mori_pad_put waits for 0), so the later release
 * changes no outcome. The record of a timeout carries expected 0: a pad
 * barrier has no round (core/device_record.c). */
MORI_DEVICE_INLINE int mori_lsa_pad_barrier_block(mori_window_dev_t win, uint32_t channel, uint64_t timeout_ns) {
  int rc = MORI_DEVICE_OK;
  if (!win.signal_pads) {
    if (MORI_THREAD_RANK_BLOCK() == 0) mori_device_report(win, MORI_DEVICE_EUNREACHABLE, -1, channel, 0, 0, 0);
    return MORI_DEVICE_EUNREACHABLE;
  }
  /* Checked once for the block, so every thread leaves alike. */
  if (mori_pad_bytes_needed(win, channel) > win.signal_pad_size) {
    if (MORI_THREAD_RANK_BLOCK() == 0)
      mori_device_report(win, MORI_DEVICE_ECHANNEL, -1, channel, 0, mori_pad_bytes_needed(win, channel), win.signal_pad_size);
    return MORI_DEVICE_ECHANNEL;
  }
  int count = MORI_THREAD_COUNT_BLOCK();
  /* One clock for this thread's signals and waits: the barrier ends within
   * timeout_ns, however long a peer took to free its slot. */
  uint64_t start = 0;
  for (int i = MORI_THREAD_RANK_BLOCK(); i < win.lsa_size; i += count) {
    int peer = win.lsa_base + i;
    if (peer == win.world_rank) continue;
    int r = mori_pad_put_within(win, peer, channel, timeout_ns, &start);
    if (r) rc = r;
  }
  /* claimed_below: this thread claimed every one of its slots below that index. */
  int claimed_below = rc == MORI_DEVICE_OK ? win.lsa_size : 0;
  for (int i = MORI_THREAD_RANK_BLOCK(); i < win.lsa_size && rc == MORI_DEVICE_OK; i += count) {
    int peer = win.lsa_base + i;
    if (peer == win.world_rank) continue;
    uint32_t *slot;
    if ((rc = mori_pad_check(win, win.world_rank, peer, channel, peer, &slot)) != MORI_DEVICE_OK) {
      claimed_below = i;
      break;
    }
    uint64_t waited = 0;
    for (uint32_t spin = 0; mori_atomic_cas_acquire_u32(slot, 1, MORI_PAD_CLAIMED) != 1; spin++) {
      if ((rc = mori_wait_expired(win, spin, &start, timeout_ns, &waited)) != MORI_DEVICE_OK) {
        mori_device_report_missing(win, rc, peer, channel, waited, 0, 0, mori_lsa_pad_missing(win, channel, peer));
        claimed_below = i;
        break;
      }
      mori_pause();
    }
  }
  rc = mori_barrier_block_code(rc); /* also: every thread has claimed what it could before any slot is given back */
  for (int i = MORI_THREAD_RANK_BLOCK(); i < claimed_below; i += count) {
    int peer = win.lsa_base + i;
    if (peer != win.world_rank) mori_atomic_store_release_u32(mori_pad_slot(win, win.world_rank, peer, channel), 0);
  }
  MORI_SYNC_BLOCK();
  return rc;
}

/* ---- the LSA barrier: epochs, one store per peer ---- */

MORI_HOST_DEVICE uint64_t *mori_barrier_word(mori_window_dev_t win, int lsa_index, uint64_t word) {
  return (uint64_t *)(uintptr_t)(win.barrier_base + (uint64_t)lsa_index * win.barrier_stride) + word;
}

/* The peers whose arrival at `epoch` of `channel` this rank has not seen:
 * what a timed-out barrier names (one thread waits for each peer, and the
 * first to give up writes the record; the others may not have yet). */
MORI_DEVICE_INLINE mori_missing_peers_t mori_lsa_barrier_missing(mori_window_dev_t win, uint32_t channel, uint64_t epoch) {
  mori_missing_peers_t m = {0, 0, 0};
  int n = win.lsa_size, me = win.lsa_rank, first = -1;
  for (int i = 0; i < n; i++)
    if (i != me && mori_atomic_load_acquire_u64(mori_barrier_word(win, me, (uint64_t)channel * n + i)) < epoch)
      mori_missing_add(&m, &first, i);
  m.base = win.lsa_base + (first < 0 ? 0 : first);
  return m;
}

/* Each round writes the next epoch into every peer's slot for this rank (a
 * release store: no round trip) and waits until every peer's epoch in
 * this rank's area has arrived (acquire). */
MORI_DEVICE_INLINE int mori_lsa_barrier_block(mori_window_dev_t win, uint32_t channel, uint64_t timeout_ns) {
  /* As every error of these barriers, with a record (one thread's). */
  if (channel >= MORI_BARRIER_CHANNELS) {
    if (MORI_THREAD_RANK_BLOCK() == 0)
      mori_device_report(win, MORI_DEVICE_ECHANNEL, -1, channel, 0, channel, MORI_BARRIER_CHANNELS);
    return MORI_DEVICE_ECHANNEL;
  }
  if (!win.barrier_base) {
    if (MORI_THREAD_RANK_BLOCK() == 0) mori_device_report(win, MORI_DEVICE_EUNREACHABLE, -1, channel, 0, 0, 0);
    return MORI_DEVICE_EUNREACHABLE;
  }
  int n = win.lsa_size, me = win.lsa_rank, count = MORI_THREAD_COUNT_BLOCK(), rc = MORI_DEVICE_OK;
  uint64_t *counter = mori_barrier_word(win, me, (uint64_t)MORI_BARRIER_CHANNELS * n + channel);
  uint64_t epoch = *(volatile uint64_t *)counter + 1;
  MORI_SYNC_BLOCK(); /* the block's earlier stores, and every thread has read the counter */
  for (int i = MORI_THREAD_RANK_BLOCK(); i < n; i += count)
    if (i != me) mori_atomic_store_release_u64(mori_barrier_word(win, i, (uint64_t)channel * n + me), epoch);
  uint64_t start = 0; /* one clock for this thread's waits: the barrier ends within timeout_ns */
  for (int i = MORI_THREAD_RANK_BLOCK(); i < n && rc == MORI_DEVICE_OK; i += count) {
    if (i == me) continue;
    uint64_t *slot = mori_barrier_word(win, me, (uint64_t)channel * n + i);
    uint64_t seen = 0, waited = 0;
    for (uint32_t spin = 0; (seen = mori_atomic_load_acquire_u64(slot)) < epoch; spin++) {
      if ((rc = mori_wait_expired(win, spin, &start, timeout_ns, &waited)) != MORI_DEVICE_OK) {
        mori_device_report_missing(win, rc, win.lsa_base + i, channel, waited, epoch, seen,
                                   mori_lsa_barrier_missing(win, channel, epoch));
        break;
      }
      mori_pause();
    }
  }
  rc = mori_barrier_block_code(rc);
  if (MORI_THREAD_RANK_BLOCK() == 0) *(volatile uint64_t *)counter = epoch;
  MORI_SYNC_BLOCK();
  return rc;
}

/* ---- the world barrier: the LSA barrier, then the other nodes ---- */

/* Word `offset` of this rank's synchronisation area (the sync view's). */
MORI_DEVICE_INLINE uint64_t *mori_remote_word(mori_window_dev_t sync, uint64_t offset) {
  return (uint64_t *)mori_lsa_ptr(sync, sync.lsa_rank, offset);
}

MORI_DEVICE_INLINE int mori_world_barrier_block(mori_window_dev_t win, mori_window_dev_t sync, uint32_t channel,
                                                uint64_t timeout_ns) {
  /* One deadline for the whole barrier: each step after the LSA barrier
   * gets what is left of timeout_ns (mori_time_left). */
  uint64_t start = timeout_ns && win.lsa_size != win.world_size ? mori_clock_ns() : 0;
  int rc = mori_lsa_barrier_block(win, channel, timeout_ns);
  /* Block-uniform: every thread takes the same branch (some thread's LSA
   * wait may have failed alone). */
  if (MORI_SYNC_BLOCK_OR(rc != MORI_DEVICE_OK)) return rc;
  if (win.lsa_size == win.world_size) return rc;
  if (MORI_THREAD_RANK_BLOCK() == 0) {
    int lsa = win.lsa_size, world = win.world_size, me = win.world_rank;
    rc = mori_quiet_window(win, mori_time_left(start, timeout_ns));
    uint64_t *mine = mori_remote_word(sync, MORI_REMOTE_EPOCH(lsa, world, channel));
    uint64_t epoch = *(volatile uint64_t *)mine + 1;
    /* A round counts once its arrivals are sent (as the LSA barrier's does),
     * so the next barrier lines up with the other nodes even after a timeout. */
    if (!rc) *(volatile uint64_t *)mine = epoch;
    for (int p = 0; p < world && !rc; p++)
      if (mori_lsa_index(win, p) < 0) rc = mori_signal_add(sync, p, MORI_REMOTE_ARRIVED(lsa, world, channel, me), 1);
    for (int p = 0; p < world && !rc; p++)
      if (mori_lsa_index(win, p) < 0)
        rc = mori_wait_word(sync, mori_remote_word(sync, MORI_REMOTE_ARRIVED(lsa, world, channel, p)), MORI_CMP_GE, epoch,
                            mori_time_left(start, timeout_ns), p, channel, 0);
    /* An arrival the proxy could not deliver is this rank's error too. */
    if (!rc) rc = mori_remote_quiet(sync, mori_time_left(start, timeout_ns));
  }
  MORI_SYNC_BLOCK();
  return rc; /* thread 0's for the other nodes; every failure is also in the mailbox */
}

#endif
