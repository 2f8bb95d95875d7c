// SPDX-License-Identifier: MIT
/* Operations on peers outside the LSA team, handed to the host proxy of the
 * transport that reaches them (rdma). Any number of threads may submit;
 * completion is observed with mori_proxy_quiet. Offsets are into the window on both
 * sides; the transport registered the window's segment (its own memory, or
 * the heap chunk it lives in, at the same offset on every rank), so the
 * window's place in that segment is added here. */
#ifndef MORI_DEVICE_PROXY_H
#define MORI_DEVICE_PROXY_H

#include "mori/device/impl/report__funcs.h"

/* Waits (timeout, abort) until a slot is free, then takes its ticket with a
 * compare-and-swap, so a ticket is never taken for a slot that is not
 * filled at once: a submit that times out leaves the ring as it was (taking
 * the ticket first left its slot empty, and the proxy, which serves tickets
 * in order, waited on it for good). Returns the ticket + 1 (> 0) or a
 * negative code. */
MORI_DEVICE_INLINE int64_t mori_proxy_submit(mori_window_dev_t win, uint32_t op, int peer, uint64_t dst_offset,
                                             uint64_t src_offset, uint64_t bytes_or_value, uint64_t timeout_ns) {
  mori_proxy_ring_t *ring = win.proxy;
  if (!ring) return MORI_DEVICE_EUNREACHABLE;
  uint64_t ticket = mori_atomic_load_acquire_u64(win.proxy_tickets), start = 0;
  for (uint32_t spin = 0;; spin++) {
    if (ticket - mori_atomic_load_acquire_u64(&ring->consumed) < MORI_PROXY_SLOTS) {
      uint64_t seen = mori_atomic_cas_u64(win.proxy_tickets, ticket, ticket + 1);
      if (seen == ticket) break; /* the slot is ours */
      ticket = seen;              /* another submitter took it: try the next */
      continue;
    }
    if (spin == 0) start = mori_clock_ns();
    if ((spin & 255) == 255) {
      uint64_t waited = mori_clock_ns() - start;
      if (mori_aborted(win)) return mori_device_report(win, MORI_DEVICE_EABORTED, peer, op, waited, ticket, 0);
      if (timeout_ns && waited > timeout_ns) return mori_device_report(win, MORI_DEVICE_ETIMEDOUT, peer, op, waited, ticket, 0);
    }
    mori_pause();
    ticket = mori_atomic_load_acquire_u64(win.proxy_tickets);
  }
  mori_proxy_request_t *r = &ring->slot[ticket % MORI_PROXY_SLOTS];
  r->op = op;
  r->peer = peer;
  r->dst_offset = dst_offset + win.segment_offset;
  r->src_offset = src_offset + win.segment_offset;
  r->bytes_or_value = bytes_or_value;
  r->window_offset = win.segment_offset;
  r->window_size = win.size;
  mori_atomic_store_release_u64(&r->ready, ticket + 1);
  return (int64_t)(ticket + 1);
}

/* A request the proxy refused for leaving its window, not yet reported:
 * into the window's mailbox (mori_window_check names peer, offset, size). */
MORI_DEVICE_INLINE int mori_proxy_take_refusal(mori_window_dev_t win) {
  mori_proxy_refusal_t *f = &win.proxy->refused;
  uint32_t count = *(volatile uint32_t *)&f->count;
  if (count == *(volatile uint32_t *)&f->reported) return 0;
  mori_fence_system(); /* the fields were written before count */
  mori_device_report(win, MORI_DEVICE_ERANGE, *(volatile int32_t *)&f->peer,
                     MORI_PROXY_REFUSED_CHANNEL + *(volatile uint32_t *)&f->op, *(volatile uint64_t *)&f->window_size,
                     *(volatile uint64_t *)&f->offset, *(volatile uint64_t *)&f->bytes);
  mori_fence_system();
  *(volatile uint32_t *)&f->reported = count;
  return 1;
}

/* Waits until every request submitted to this window's proxy so far has
 * completed (timeout, abort); a request refused for leaving its window is
 * MORI_DEVICE_ERANGE with a record in the mailbox, another failed request
 * MORI_DEVICE_EUNREACHABLE, detailed by the host (mori_window_check). */
MORI_DEVICE_INLINE int mori_proxy_quiet(mori_window_dev_t win, uint64_t timeout_ns) {
  mori_proxy_ring_t *ring = win.proxy;
  if (!ring) return MORI_DEVICE_OK;
  uint64_t target = mori_atomic_load_acquire_u64(win.proxy_tickets), start = 0, seen = 0;
  for (uint32_t spin = 0; (seen = mori_atomic_load_acquire_u64(&ring->done)) < target; spin++) {
    if (spin == 0) start = mori_clock_ns();
    if ((spin & 255) == 255) {
      uint64_t waited = mori_clock_ns() - start;
      if (mori_aborted(win)) return mori_device_report(win, MORI_DEVICE_EABORTED, -1, 0, waited, target, seen);
      if (timeout_ns && waited > timeout_ns) return mori_device_report(win, MORI_DEVICE_ETIMEDOUT, -1, 0, waited, target, seen);
    }
    mori_pause();
  }
  if (mori_proxy_take_refusal(win)) return MORI_DEVICE_ERANGE;
  return mori_atomic_load_acquire_u64(&ring->failed) ? MORI_DEVICE_EUNREACHABLE : MORI_DEVICE_OK;
}

#endif
