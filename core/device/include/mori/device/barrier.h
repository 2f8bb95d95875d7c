// SPDX-License-Identifier: MIT
/* LSA-team barrier over the window's signal pad, with torch's slot protocol
 * so the same pads serve torch's kernels: the slot for a signal from `src`
 * on `channel` is uint32 index channel * world_size + src of the
 * destination's pad; put = CAS 0 -> 1 (release, system scope), wait =
 * CAS 1 -> 0 (acquire). After a completed barrier every slot is 0 again.
 *
 * mori_pad_barrier_block: all threads of one block call it; thread t
 * signals and waits for LSA peer t. Needs a window with a signal pad of at
 * least (channel + 1) * world_size * 4 bytes; a channel beyond the pad is
 * MORI_DEVICE_ECHANNEL with a record in the mailbox, never a write into
 * the memory after the pad (another window's).
 *
 * mori_barrier_block (the device API's own barrier) uses a separate area
 * every window has, with monotonically increasing epochs: no round trips. */
#ifndef MORI_DEVICE_BARRIER_H
#define MORI_DEVICE_BARRIER_H

#include "mori/device/signal.h"

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

/* Sets my slot on `peer` (spins while the previous signal is unconsumed). */
MORI_DEVICE_INLINE int mori_pad_put(mori_window_dev_t win, int peer, uint32_t channel, uint64_t timeout_ns) {
  uint32_t *slot;
  int rc = mori_pad_check(win, peer, win.world_rank, channel, peer, &slot);
  if (rc) return rc;
  uint64_t start = 0;
  for (uint32_t spin = 0; mori_atomic_cas_release_u32(slot, 0, 1) != 0; spin++) {
    if (spin == 0) start = mori_clock_ns();
    if ((spin & 255) == 255) {
      uint64_t waited = mori_clock_ns() - start;
      if (mori_aborted(win)) return mori_device_report(win, MORI_DEVICE_EABORTED, peer, channel, waited, 0, 1);
      if (timeout_ns && waited > timeout_ns) return mori_device_report(win, MORI_DEVICE_ETIMEDOUT, peer, channel, waited, 0, 1);
    }
    mori_pause();
  }
  return MORI_DEVICE_OK;
}

/* Consumes `peer`'s signal in my pad. */
MORI_DEVICE_INLINE int mori_pad_wait(mori_window_dev_t win, int peer, uint32_t channel, uint64_t timeout_ns) {
  uint32_t *slot;
  int rc = mori_pad_check(win, win.world_rank, peer, channel, peer, &slot);
  if (rc) return rc;
  uint64_t start = 0;
  for (uint32_t spin = 0; mori_atomic_cas_acquire_u32(slot, 1, 0) != 1; spin++) {
    if (spin == 0) start = mori_clock_ns();
    if ((spin & 255) == 255) {
      uint64_t waited = mori_clock_ns() - start;
      if (mori_aborted(win)) return mori_device_report(win, MORI_DEVICE_EABORTED, peer, channel, waited, 1, 0);
      if (timeout_ns && waited > timeout_ns) return mori_device_report(win, MORI_DEVICE_ETIMEDOUT, peer, channel, waited, 1, 0);
    }
    mori_pause();
  }
  return MORI_DEVICE_OK;
}

/* Barrier among the LSA team on the signal pad with torch's protocol (what
 * SymmetricMemory::barrier does). Block scope; 0 on success. */
MORI_DEVICE_INLINE int mori_pad_barrier_block(mori_window_dev_t win, uint32_t channel, uint64_t timeout_ns) {
  int rc = MORI_DEVICE_OK;
  if (!win.signal_pads) return MORI_DEVICE_EUNREACHABLE;
  /* Checked once for the block, so every thread leaves alike. */
  if (mori_pad_bytes_needed(win, channel) > win.signal_pad_size) {
    if (MORI_THREAD_RANK_BLOCK() == 0)
      mori_device_report(win, MORI_DEVICE_ECHANNEL, -1, channel, 0, mori_pad_bytes_needed(win, channel), win.signal_pad_size);
    return MORI_DEVICE_ECHANNEL;
  }
  int count = MORI_THREAD_COUNT_BLOCK();
  for (int i = MORI_THREAD_RANK_BLOCK(); i < win.lsa_size; i += count) {
    int peer = win.lsa_base + i;
    if (peer == win.world_rank) continue;
    int r = mori_pad_put(win, peer, channel, timeout_ns);
    if (r) rc = r;
  }
  for (int i = MORI_THREAD_RANK_BLOCK(); i < win.lsa_size && rc == MORI_DEVICE_OK; i += count) {
    int peer = win.lsa_base + i;
    if (peer == win.world_rank) continue;
    int r = mori_pad_wait(win, peer, channel, timeout_ns);
    if (r) rc = r;
  }
  MORI_SYNC_BLOCK();
  return rc;
}

/* ---- the device API's barrier: epochs, one store per peer ---- */

MORI_HOST_DEVICE uint64_t *mori_barrier_word(mori_window_dev_t win, int lsa_index, uint64_t word) {
  return (uint64_t *)(uintptr_t)(win.barrier_base + (uint64_t)lsa_index * win.barrier_stride) + word;
}

/* Barrier among the LSA team on `channel` (< MORI_BARRIER_CHANNELS). Each
 * round writes the next epoch into every peer's slot for this rank (a
 * release store: no round trip) and waits until every peer's epoch in this
 * rank's area has arrived (acquire). Block scope: every thread of the block
 * calls; returns 0, or an error after leaving a record in the mailbox. */
MORI_DEVICE_INLINE int mori_barrier_block(mori_window_dev_t win, uint32_t channel, uint64_t timeout_ns) {
  if (!win.barrier_base || channel >= MORI_BARRIER_CHANNELS) return MORI_DEVICE_EUNREACHABLE;
  int n = win.lsa_size, me = win.lsa_rank, count = MORI_THREAD_COUNT_BLOCK(), rc = MORI_DEVICE_OK;
  uint64_t *counter = mori_barrier_word(win, me, (uint64_t)MORI_BARRIER_CHANNELS * n + channel);
  uint64_t epoch = *(volatile uint64_t *)counter + 1;
  MORI_SYNC_BLOCK(); /* the block's earlier stores, and every thread has read the counter */
  for (int i = MORI_THREAD_RANK_BLOCK(); i < n; i += count)
    if (i != me) mori_atomic_store_release_u64(mori_barrier_word(win, i, (uint64_t)channel * n + me), epoch);
  for (int i = MORI_THREAD_RANK_BLOCK(); i < n && rc == MORI_DEVICE_OK; i += count) {
    if (i == me) continue;
    uint64_t *slot = mori_barrier_word(win, me, (uint64_t)channel * n + i);
    uint64_t start = 0, seen = 0;
    for (uint32_t spin = 0; (seen = mori_atomic_load_acquire_u64(slot)) < epoch; spin++) {
      if (spin == 0) start = mori_clock_ns();
      if ((spin & 255) == 255) {
        uint64_t waited = mori_clock_ns() - start;
        if (mori_aborted(win)) {
          rc = mori_device_report(win, MORI_DEVICE_EABORTED, win.lsa_base + i, channel, waited, epoch, seen);
          break;
        }
        if (timeout_ns && waited > timeout_ns) {
          rc = mori_device_report(win, MORI_DEVICE_ETIMEDOUT, win.lsa_base + i, channel, waited, epoch, seen);
          break;
        }
      }
      mori_pause();
    }
  }
  MORI_SYNC_BLOCK();
  if (MORI_THREAD_RANK_BLOCK() == 0) *(volatile uint64_t *)counter = epoch;
  MORI_SYNC_BLOCK();
  return rc;
}

#endif
