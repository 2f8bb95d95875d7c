// SPDX-License-Identifier: MIT
/* Error codes of the device API and the mailbox every failed wait writes
 * (see mori/device/signal.h). */
#ifndef MORI_DEVICE_IMPL_REPORT_FUNCS_H
#define MORI_DEVICE_IMPL_REPORT_FUNCS_H

#include "mori/device/impl/window__types.h"

#define MORI_DEVICE_OK 0
#define MORI_DEVICE_EINVAL (-22)         /* = MORI_EINVAL */
#define MORI_DEVICE_ERANGE (-34)         /* = MORI_ERANGE: an output too small for what arrives */
#define MORI_DEVICE_EUNREACHABLE (-1003) /* = MORI_EUNREACHABLE */
#define MORI_DEVICE_EABORTED (-1007)     /* = MORI_EABORTED */
#define MORI_DEVICE_ETIMEDOUT (-1008)    /* = MORI_EDEVICE_TIMEOUT */
#define MORI_DEVICE_ECHANNEL (-1010)     /* = MORI_ECHANNEL: a pad channel past the window's signal pad */
#define MORI_DEVICE_EIO (-5)             /* = MORI_EIO: the NIC completed GPU-posted work with an error */
#define MORI_DEVICE_EMISMATCH (-1001)    /* = MORI_EMISMATCH: members called one collective call with different arguments */

/* Channels of the records GPU-initiated posting leaves (mori/device/gda.h;
 * + the QP's index among the peer's). An error completion (code
 * MORI_DEVICE_EIO): expected = the NIC's syndrome, seen = its vendor
 * syndrome, waited_ns = the failed WQE's counter. A wait for room in a send
 * queue or for an earlier doorbell, and a wait for completions, that timed
 * out or was aborted: the usual wait record. */
#define MORI_GDA_CQE_ERROR_CHANNEL 0x71000000u
#define MORI_GDA_FULL_CHANNEL 0x72000000u
#define MORI_GDA_QUIET_CHANNEL 0x73000000u
#define MORI_GDA_CHANNEL_QPS 0x01000000u /* QP indices a channel range holds */
/* A claimant's wait for its turn that timed out (an earlier claimant never
 * finished its own: a kernel stopped mid-post): the QP is abandoned. Ring
 * turns at + the QP's index, turns to consume a completion at +
 * MORI_GDA_CHANNEL_QPS + the index. */
#define MORI_GDA_TURN_CHANNEL 0x75000000u

/* The channel of a collective call's record when a member refused its part
 * of the call (code MORI_DEVICE_EINVAL; peer = the member that refused,
 * expected = the call's epoch, seen = the rank the wait was for). */
#define MORI_COLL_REFUSED_CHANNEL 0x74000000u

/* A collective call whose members gave different arguments (contexts
 * made with MORI_COLL_CHECK_CALLS=1): code MORI_DEVICE_EMISMATCH, peer =
 * the member whose call differs, channel = this channel + the word of the
 * call's signature that differs (MORI_COLL_SIG_*), expected = this rank's
 * word, seen = the member's, waited_ns = the context's call number. A wait
 * for a member's signature that timed out or was aborted: the usual wait
 * record on this channel + MORI_COLL_SIG_WORDS. A member's signature of a
 * later call than this one (the members are out of step): code
 * MORI_DEVICE_EMISMATCH on MORI_COLL_OUT_OF_STEP_CHANNEL, expected = this
 * call's number, seen = the member's. */
#define MORI_COLL_MISMATCH_CHANNEL 0x76000000u
#define MORI_COLL_OUT_OF_STEP_CHANNEL (MORI_COLL_MISMATCH_CHANNEL + 0x100u)

/* A collective call's signature: what every member of the call must give
 * alike, in words that say what they hold (a mismatch record is turned
 * into words with no other context).
 *   CALL: kind << 60 | variant << 56 | dtype << 52 | algorithm << 48 | size
 *     all-to-all:   variant 0 into any memory, 1 into a window; size = bytes per member
 *     all-reduce:   variant = the op; size = elements
 *     all-to-all-v: variant = the layout; size = bytes per row
 *   MORE: all-to-all-v: experts per member << 32 | alignment (rows); else 0
 *   PLAN: slices or pieces << 48 | bytes or elements per slice: what the
 *     sizes and the tuning variables chose where members must agree on it
 *     (0 where the plan is each member's own: LL all-reduce, empty calls)
 *   OFFSET: into a window: the window's ordinal on the comm (low 16 bits)
 *     << 48 | where the output lands in it; else 0
 *   ROWS: the rows every member's output holds (all-to-all-v; else 0) */
#define MORI_COLL_SIG_CALL 0
#define MORI_COLL_SIG_MORE 1
#define MORI_COLL_SIG_PLAN 2
#define MORI_COLL_SIG_OFFSET 3
#define MORI_COLL_SIG_ROWS 4
#define MORI_COLL_SIG_WORDS 5
#define MORI_COLL_SIG_ALL_TO_ALL 1ull
#define MORI_COLL_SIG_ALL_REDUCE 2ull
#define MORI_COLL_SIG_ALL_TO_ALL_V 3ull
#define MORI_COLL_SIG_SIZE_MASK ((1ull << 48) - 1)
#define MORI_COLL_SIG_FIELD(word, shift) (((word) >> (shift)) & 15u)

/* The rows an all-to-all-v publishes for a split (or offset) its caller
 * gave wrong: more than any output holds. A MORI_DEVICE_ERANGE record
 * needing at least this many rows names such a split, not a short output. */
#define MORI_A2AV_BAD_ROWS (1ull << 40)

/* Stops the kernel and the context with it (what torch's own backend does
 * on a timed-out wait); on the host platform, where a rank's "kernel" is the
 * process itself, nothing. */
#if defined(MORI_DEVICE_COMPILER_CUDA)
#define MORI_DEVICE_TRAP() __trap()
#elif defined(MORI_DEVICE_COMPILER_HIP)
#define MORI_DEVICE_TRAP() __builtin_trap()
#else
#define MORI_DEVICE_TRAP() ((void)0)
#endif

/* This rank's claim word (MORI_ERROR_CLAIM_WORD): device memory, in the
 * window's barrier area; NULL for a view without one. */
MORI_DEVICE_INLINE uint32_t *mori_error_claim_word(mori_window_dev_t win) {
  if (!win.barrier_base) return (uint32_t *)0;
  return (uint32_t *)((uint64_t *)(uintptr_t)(win.barrier_base + (uint64_t)win.lsa_rank * win.barrier_stride) +
                      MORI_ERROR_CLAIM_WORD(win.lsa_size));
}

/* Whether this thread may write the mailbox: the last record claimed has
 * been read by the host. A stale records_read only makes a free mailbox
 * look taken (that record is lost; an error at the moment the host clears
 * the last one), never two writers at once: records_read only grows, and
 * the compare-and-swap moves the claim past it. Signed differences: the
 * counters may wrap. */
MORI_DEVICE_INLINE int mori_error_claim(mori_window_dev_t win) {
  uint32_t *claim = mori_error_claim_word(win);
  if (!claim) return 0;
  uint32_t read = *(volatile uint32_t *)&win.control->records_read;
  uint32_t last = *(volatile uint32_t *)claim;
  while ((int32_t)(last - read) <= 0) {
    uint32_t seen = mori_atomic_cas_device_u32(claim, last, read + 1);
    if (seen == last) return 1;
    last = seen; /* another thread claimed (or is about to): look again */
  }
  return 0;
}

/* Leaves an error record in the mailbox (first writer wins until the host
 * has read it) and returns code; with MORI_TRAP_ON_DEVICE_ERROR set when
 * the window was made, a GPU kernel then traps (the record stays readable
 * in host memory). The only atomic is the claim, in device memory; the
 * record itself is plain stores into host memory, `code` last after a
 * system fence, so it works on every host (no atomics on host memory). */
/* A barrier's record names every peer missing (mori_device_error_t's
 * missing_*, the mask in its `seen`); the others pass none. */
typedef struct mori_missing_peers {
  uint64_t mask;
  int32_t base;
  uint32_t count;
} mori_missing_peers_t;

MORI_DEVICE_INLINE int mori_device_report_missing(mori_window_dev_t win, int code, int peer, uint32_t channel,
                                                  uint64_t waited_ns, uint64_t expected, uint64_t seen,
                                                  mori_missing_peers_t missing) {
  mori_device_control_t *ctl = win.control;
  if (ctl && mori_error_claim(win)) {
    volatile mori_device_error_t *e = &ctl->error;
    e->waiter_rank = win.world_rank;
    e->peer = peer;
    e->channel = channel;
    e->waited_ns = waited_ns;
    e->expected = expected;
    e->seen = missing.count ? missing.mask : seen;
    e->missing_base = missing.base;
    e->missing_count = missing.count;
    mori_fence_system(); /* every field reaches host memory before the code */
    e->code = (uint32_t)code;
    mori_fence_system();
  }
  /* Not for an abort: mori_window_abort exists to let waiting kernels end. */
  if (ctl && code != MORI_DEVICE_EABORTED && *(volatile uint32_t *)&ctl->trap_on_error) MORI_DEVICE_TRAP();
  return code;
}

MORI_DEVICE_INLINE int mori_device_report(mori_window_dev_t win, int code, int peer, uint32_t channel,
                                          uint64_t waited_ns, uint64_t expected, uint64_t seen) {
  mori_missing_peers_t none = {0, 0, 0};
  return mori_device_report_missing(win, code, peer, channel, waited_ns, expected, seen, none);
}

MORI_DEVICE_INLINE int mori_aborted(mori_window_dev_t win) {
  return win.control && *(volatile uint32_t *)&win.control->abort_flag != 0;
}

/* What a waiting loop checks at each spin (spin counts from 0): the clock
 * starts at spin 0 (*start) unless *start already holds the start of an
 * earlier wait of the same call (a call of several waits passes one
 * *start to all, so together they end within its timeout, not each), and
 * at every look (MORI_WAIT_LOOK_MASK: every 256th spin on a GPU, every spin
 * on CPU ranks) an abort of the window or more than timeout_ns (0: none)
 * waited (*waited) ends the wait: its code, with no report (the caller's,
 * which may say more). MORI_DEVICE_OK: keep waiting. */
MORI_DEVICE_INLINE int mori_wait_expired(mori_window_dev_t win, uint32_t spin, uint64_t *start, uint64_t timeout_ns,
                                         uint64_t *waited) {
  if (spin == 0 && *start == 0) *start = mori_clock_ns() | 1; /* (never 0 once started) */
  if ((spin & MORI_WAIT_LOOK_MASK) != MORI_WAIT_LOOK_MASK) return MORI_DEVICE_OK;
  *waited = mori_clock_since(*start);
  if (mori_aborted(win)) return MORI_DEVICE_EABORTED;
  if (timeout_ns && *waited > timeout_ns) return MORI_DEVICE_ETIMEDOUT;
  return MORI_DEVICE_OK;
}

/* What is left of a call's timeout_ns (0: none) that started at `start`
 * (mori_clock_ns), for the next of its steps that take a timeout of their
 * own rather than a clock: at least a nanosecond once spent, so the step
 * still looks once and succeeds if what it waits for is there. */
MORI_DEVICE_INLINE uint64_t mori_time_left(uint64_t start, uint64_t timeout_ns) {
  if (!timeout_ns) return 0;
  uint64_t spent = mori_clock_since(start);
  return spent < timeout_ns ? timeout_ns - spent : 1;
}

/* mori_wait_expired, with the wait's report (peer, channel, expected and
 * seen say what was waited for). */
MORI_DEVICE_INLINE int mori_wait_check(mori_window_dev_t win, uint32_t spin, uint64_t *start, uint64_t timeout_ns, int peer,
                                       uint32_t channel, uint64_t expected, uint64_t seen) {
  uint64_t waited = 0;
  int rc = mori_wait_expired(win, spin, start, timeout_ns, &waited);
  return rc ? mori_device_report(win, rc, peer, channel, waited, expected, seen) : MORI_DEVICE_OK;
}

#endif
