/* LSA-team barrier over the window's signal pad, with torch's slot protocol
 * so the same pads serve torch's kernels: the slot for a signal from `src`
 * on `channel` is uint32 index channel * world_size + src of the
 * destination's pad; put = CAS 0 -> 1 (release, system scope), wait =
 * CAS 1 -> 0 (acquire). After a completed barrier every slot is 0 again.
 *
 * mori_barrier_block: all threads of one block call it; thread t signals and
 * waits for LSA peer t. Needs a window with a signal pad of at least
 * (channel + 1) * world_size * 4 bytes. */
#ifndef MORI_DEVICE_BARRIER_H
#define MORI_DEVICE_BARRIER_H

#include "mori/device/signal.h"

MORI_DEVICE_INLINE uint32_t *mori_pad_slot(mori_window_dev_t win, int owner, int src, uint32_t channel) {
  uint32_t *pad = win.signal_pads[owner];
  return pad ? pad + (uint64_t)channel * (uint64_t)win.world_size + (uint64_t)src : (uint32_t *)0;
}

/* Sets my slot on `peer` (spins while the previous signal is unconsumed). */
MORI_DEVICE_INLINE int mori_pad_put(mori_window_dev_t win, int peer, uint32_t channel, uint64_t timeout_ns) {
  uint32_t *slot = mori_pad_slot(win, peer, win.world_rank, channel);
  if (!slot) return MORI_DEVICE_EUNREACHABLE;
  uint64_t start = mori_clock_ns();
  for (uint32_t spin = 0; mori_atomic_cas_u32(slot, 0, 1) != 0; spin++) {
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
  uint32_t *slot = mori_pad_slot(win, win.world_rank, peer, channel);
  if (!slot) return MORI_DEVICE_EUNREACHABLE;
  uint64_t start = mori_clock_ns();
  for (uint32_t spin = 0; mori_atomic_cas_u32(slot, 1, 0) != 1; spin++) {
    if ((spin & 255) == 255) {
      uint64_t waited = mori_clock_ns() - start;
      if (mori_aborted(win)) return mori_device_report(win, MORI_DEVICE_EABORTED, peer, channel, waited, 1, 0);
      if (timeout_ns && waited > timeout_ns) return mori_device_report(win, MORI_DEVICE_ETIMEDOUT, peer, channel, waited, 1, 0);
    }
    mori_pause();
  }
  return MORI_DEVICE_OK;
}

/* Barrier among the LSA team on `channel`; 0 on success. Block scope: every
 * thread of the block calls; the return value is the block's verdict only in
 * threads < lsa_size. On the host platform one thread does all peers. */
MORI_DEVICE_INLINE int mori_barrier_block(mori_window_dev_t win, uint32_t channel, uint64_t timeout_ns) {
  int rc = MORI_DEVICE_OK;
  if (!win.signal_pads) return MORI_DEVICE_EUNREACHABLE;
  int count = MORI_THREAD_COUNT_BLOCK();
  MORI_SYNC_BLOCK(); /* the block's earlier stores go before the signal */
  mori_fence_system();
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

#endif
