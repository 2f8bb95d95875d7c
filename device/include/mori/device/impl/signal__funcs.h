// SPDX-License-Identifier: MIT
/* Bodies of mori/device/signal.h. */
#ifndef MORI_DEVICE_IMPL_SIGNAL_FUNCS_H
#define MORI_DEVICE_IMPL_SIGNAL_FUNCS_H

#include "mori/device/signal.h"

MORI_DEVICE_INLINE void mori_fence(void) { mori_fence_system(); }
/* For load/store peers a system fence is enough. */
MORI_DEVICE_INLINE void mori_quiet(void) { mori_fence_system(); }

MORI_HOST_DEVICE int mori_cmp_valid(mori_cmp_t cmp) {
  return (unsigned)cmp <= (unsigned)MORI_CMP_LT || cmp == MORI_CMP_LE;
}

MORI_HOST_DEVICE int mori_cmp_holds(uint64_t seen, mori_cmp_t cmp, uint64_t value) {
  switch (cmp) {
    case MORI_CMP_EQ: return seen == value;
    case MORI_CMP_NE: return seen != value;
    case MORI_CMP_GE: return seen >= value;
    case MORI_CMP_GT: return seen > value;
    case MORI_CMP_LT: return seen < value;
    case MORI_CMP_LE: return seen <= value;
    default: return 0; /* no such test: the waits refuse it before they poll */
  }
}

MORI_DEVICE_INLINE int mori_signal_set(mori_window_dev_t win, int peer, uint64_t offset, uint64_t value) {
  uint64_t *sig = (uint64_t *)mori_peer_ptr(win, peer, offset);
  if (!sig) return mori_remote_request(win, MORI_PROXY_SIGNAL_SET, peer, offset, 0, value);
  mori_atomic_store_release_u64(sig, value);
  return MORI_DEVICE_OK;
}

MORI_DEVICE_INLINE int mori_signal_add(mori_window_dev_t win, int peer, uint64_t offset, uint64_t value) {
  uint64_t *sig = (uint64_t *)mori_peer_ptr(win, peer, offset);
  if (!sig) return mori_remote_request(win, MORI_PROXY_ATOMIC_ADD, peer, offset, 0, value);
  mori_atomic_add_release_u64(sig, value);
  return MORI_DEVICE_OK;
}

MORI_DEVICE_INLINE int mori_wait_word(mori_window_dev_t win, uint64_t *word, mori_cmp_t cmp, uint64_t value,
                                      uint64_t timeout_ns, int peer, uint32_t channel, uint64_t *seen_out) {
  if (!mori_cmp_valid(cmp)) return MORI_DEVICE_EINVAL;
  uint64_t start = 0, seen = 0;
  for (uint32_t spin = 0;; spin++) {
    /* Plain polling, one acquire once the value is there: an acquire per
     * spin drops the multiprocessor's L1 every time, and the blocks that
     * share it then miss on every load. The acquire reads the word again
     * (what follows is ordered after the value it returns). */
    seen = mori_load_volatile_u64(word);
    if (mori_cmp_holds(seen, cmp, value) && mori_cmp_holds(seen = mori_atomic_load_acquire_u64(word), cmp, value)) break;
    int rc = mori_wait_check(win, spin, &start, timeout_ns, peer, channel, value, seen);
    if (rc != MORI_DEVICE_OK) {
      if (seen_out) *seen_out = seen;
      return rc;
    }
    mori_pause();
  }
  if (seen_out) *seen_out = seen;
  return MORI_DEVICE_OK;
}

MORI_DEVICE_INLINE int mori_signal_wait_until(mori_window_dev_t win, uint64_t offset, mori_cmp_t cmp, uint64_t value,
                                              uint64_t timeout_ns, int peer, uint32_t channel, uint64_t *seen_out) {
  return mori_wait_word(win, (uint64_t *)mori_local_ptr(win, offset), cmp, value, timeout_ns, peer, channel, seen_out);
}

MORI_DEVICE_INLINE int mori_proxy_request(mori_window_dev_t win, uint32_t op, int peer, uint64_t dst_offset,
                                          uint64_t src_offset, uint64_t bytes_or_value) {
  if (!win.proxy || peer < 0 || peer >= win.world_size) return MORI_DEVICE_EUNREACHABLE;
  /* A remote atomic or signal on an unaligned word fails on the NIC (or
   * tears): refused here, before it takes a slot. */
  if ((op == MORI_PROXY_ATOMIC_ADD || op == MORI_PROXY_SIGNAL_SET) && (dst_offset + win.segment_offset) % 8 != 0)
    return MORI_DEVICE_EINVAL;
  int64_t t = mori_proxy_submit(win, op, peer, dst_offset, src_offset, bytes_or_value, MORI_PROXY_SUBMIT_TIMEOUT_NS);
  return t < 0 ? (int)t : MORI_DEVICE_OK;
}

MORI_DEVICE_INLINE int mori_remote_request(mori_window_dev_t win, uint32_t op, int peer, uint64_t dst_offset,
                                           uint64_t src_offset, uint64_t bytes_or_value) {
  if (!win.gda || !mori_gda_reaches(win, peer)) return mori_proxy_request(win, op, peer, dst_offset, src_offset, bytes_or_value);
  switch (op) {
    case MORI_PROXY_PUT:
      return mori_gda_put(win, peer, dst_offset, mori_local_ptr(win, src_offset), bytes_or_value, MORI_GDA_POST_TIMEOUT_NS);
    case MORI_PROXY_GET:
      return mori_gda_get(win, peer, mori_local_ptr(win, dst_offset), src_offset, bytes_or_value, MORI_GDA_POST_TIMEOUT_NS);
    case MORI_PROXY_ATOMIC_ADD:
      return mori_gda_atomic_add(win, peer, dst_offset, bytes_or_value, (uint64_t *)0, MORI_GDA_POST_TIMEOUT_NS);
    case MORI_PROXY_SIGNAL_SET: return mori_gda_signal_set(win, peer, dst_offset, bytes_or_value, MORI_GDA_POST_TIMEOUT_NS);
    default: return MORI_DEVICE_EINVAL;
  }
}

/* GPU posting's quiet, then the proxy's, within timeout_ns together (0:
 * none): the proxy's gets what is left, at least a nanosecond, so it still
 * looks once. */
MORI_DEVICE_INLINE int mori_remote_quiet(mori_window_dev_t win, uint64_t timeout_ns) {
  uint64_t start = timeout_ns && win.gda ? mori_clock_ns() : 0;
  int rc = win.gda ? mori_gda_quiet(win, timeout_ns) : MORI_DEVICE_OK;
  int prc = mori_proxy_quiet(win, start ? mori_time_left(start, timeout_ns) : timeout_ns);
  return rc ? rc : prc;
}

MORI_DEVICE_INLINE int mori_quiet_window(mori_window_dev_t win, uint64_t timeout_ns) {
  mori_fence_system();
  return mori_remote_quiet(win, timeout_ns);
}

#endif
