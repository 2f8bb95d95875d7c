// SPDX-License-Identifier: MIT
/* Bodies of mori/device/remote_sync.h. */
#ifndef MORI_DEVICE_IMPL_REMOTE_SYNC_FUNCS_H
#define MORI_DEVICE_IMPL_REMOTE_SYNC_FUNCS_H

#include "mori/device/remote_sync.h"

MORI_DEVICE_INLINE int mori_remote_signal_put(mori_window_dev_t win, mori_window_dev_t sync, int peer, uint32_t channel,
                                              uint64_t timeout_ns) {
  uint64_t start = timeout_ns ? mori_clock_ns() : 0; /* both quiets within timeout_ns together */
  int rc = mori_quiet_window(win, timeout_ns);
  if (!rc) rc = mori_signal_add(sync, peer, MORI_REMOTE_SIGNALED(win.lsa_size, win.world_size, channel, win.world_rank), 1);
  /* Delivered, or a failure the sender sees (not only the waiter's timeout). */
  return rc ? rc : mori_remote_quiet(sync, mori_time_left(start, timeout_ns));
}

MORI_DEVICE_INLINE int mori_remote_signal_wait(mori_window_dev_t win, mori_window_dev_t sync, int peer, uint32_t channel,
                                               uint64_t timeout_ns) {
  uint64_t *consumed = mori_remote_word(sync, MORI_REMOTE_CONSUMED(win.lsa_size, win.world_size, channel, peer));
  uint64_t next = *(volatile uint64_t *)consumed + 1;
  int rc = mori_wait_word(sync, mori_remote_word(sync, MORI_REMOTE_SIGNALED(win.lsa_size, win.world_size, channel, peer)),
                          MORI_CMP_GE, next, timeout_ns, peer, channel, 0);
  if (!rc) *(volatile uint64_t *)consumed = next;
  return rc;
}

#endif
