// SPDX-License-Identifier: MIT
/* One-sided signals, fences and waits with timeouts.
 *
 * A signal is a uint64 at an offset of the window (any offset the program
 * reserves; 8-byte aligned). set/add write the *peer's* copy with release
 * semantics at system scope, so data put before the signal is visible to a
 * peer that observed it with mori_signal_wait_until (acquire).
 *
 * Every wait takes a timeout and honours the window's abort flag. A wait
 * that fails leaves a record in the window's host-visible mailbox (who
 * waited, for whom, on which channel, for how long) and returns an error
 * code; it never traps, so the GPU context survives and the next host call
 * (mori_window_check) reports the record. */
#ifndef MORI_DEVICE_SIGNAL_H
#define MORI_DEVICE_SIGNAL_H

#include "mori/device/impl/report__funcs.h"
#include "mori/device/gda.h"
#include "mori/device/proxy.h"
#include "mori/device/window.h"

typedef enum mori_cmp {
  MORI_CMP_EQ = 0,
  MORI_CMP_NE = 1,
  MORI_CMP_GE = 2, /* the usual "counter reached" test */
  MORI_CMP_GT = 3,
  MORI_CMP_LT = 4,
  /* Not 5: OpenSHMEM's 5 is GE (and its 2 GT, its 3 LE), so code that
   * passes OpenSHMEM's numbers gets an error for 5 rather than another
   * test. mori's names are mori's numbers; never pass raw numbers. */
  MORI_CMP_LE = 6,
} mori_cmp_t;

/* Whether cmp is one of the above (5 is not): a wait given another returns
 * MORI_DEVICE_EINVAL at once (before, any other value meant GT). */
MORI_HOST_DEVICE int mori_cmp_valid(mori_cmp_t cmp);

/* Orders this thread's earlier stores to peers before its later ones. */
MORI_DEVICE_INLINE void mori_fence(void);

/* Waits until this thread's earlier stores to load/store peers are
 * complete (a system fence). Proxied requests: mori_quiet_window. */
MORI_DEVICE_INLINE void mori_quiet(void);

/* mori_quiet, plus completion of every request of this window to peers
 * outside the LSA team (mori_remote_quiet); MORI_DEVICE_EUNREACHABLE (the
 * proxy) or MORI_DEVICE_EIO (GPU posting) when one failed. */
MORI_DEVICE_INLINE int mori_quiet_window(mori_window_dev_t win, uint64_t timeout_ns);

/* Peer's signal := value (release, system scope); ordered after this
 * thread's earlier puts to that peer, also over rdma. */
MORI_DEVICE_INLINE int mori_signal_set(mori_window_dev_t win, int peer, uint64_t offset, uint64_t value);

/* Peer's signal += value (release, system scope). */
MORI_DEVICE_INLINE int mori_signal_add(mori_window_dev_t win, int peer, uint64_t offset, uint64_t value);

/* Waits until the word at `word` (this rank's memory) satisfies cmp
 * against value, with `win`'s abort flag, timeout and mailbox. `peer` (who
 * is expected to write it; -1 if unknown) and `channel` only label the
 * error record. timeout_ns == 0 waits forever (the abort flag still ends
 * it). *seen_out (may be NULL) gets the last value read, also when the
 * wait fails. An unknown cmp: MORI_DEVICE_EINVAL, nothing read. */
MORI_DEVICE_INLINE int mori_wait_word(mori_window_dev_t win, uint64_t *word, mori_cmp_t cmp, uint64_t value,
                                      uint64_t timeout_ns, int peer, uint32_t channel, uint64_t *seen_out);

/* Waits until this rank's signal at `offset` of the window satisfies cmp
 * against value (mori_wait_word). */
MORI_DEVICE_INLINE int mori_signal_wait_until(mori_window_dev_t win, uint64_t offset, mori_cmp_t cmp, uint64_t value,
                                              uint64_t timeout_ns, int peer, uint32_t channel, uint64_t *seen_out);

/* One operation for a peer outside the LSA team, through the window's
 * proxy (rdma; see mori/device/proxy.h): MORI_PROXY_PUT / _GET / _ATOMIC_ADD
 * / _SIGNAL_SET at offsets of the window on both sides. Waits up to
 * MORI_PROXY_SUBMIT_TIMEOUT_NS for a free slot; MORI_DEVICE_EUNREACHABLE
 * without a proxy or for a rank outside the comm, MORI_DEVICE_EINVAL for
 * an atomic or signal on an unaligned word. */
#define MORI_PROXY_SUBMIT_TIMEOUT_NS (10ull * 1000 * 1000 * 1000)
MORI_DEVICE_INLINE int mori_proxy_request(mori_window_dev_t win, uint32_t op, int peer, uint64_t dst_offset,
                                          uint64_t src_offset, uint64_t bytes_or_value);

/* The same operation by whichever way the rdma transport chose for the
 * comm: posted by this thread to the NIC itself when the window has a
 * GPU-posting table that reaches the peer (win.gda; mori/device/gda.h),
 * else handed to the proxy (mori_proxy_request). Every remote operation of
 * the device API, the shmem device API and the Triton library comes here. */
MORI_DEVICE_INLINE int mori_remote_request(mori_window_dev_t win, uint32_t op, int peer, uint64_t dst_offset,
                                           uint64_t src_offset, uint64_t bytes_or_value);

/* Completion of every request of this window to peers outside the LSA
 * team, by either way (GPU posting's, then the proxy's). */
MORI_DEVICE_INLINE int mori_remote_quiet(mori_window_dev_t win, uint64_t timeout_ns);

#include "mori/device/impl/signal__funcs.h"

#endif
