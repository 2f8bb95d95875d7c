// SPDX-License-Identifier: MIT
/* A record a kernel left in a window's mailbox, in words: which rank waited
 * for whom, on what, and what the numbers mean for that kind of wait. Kept
 * apart from the mailbox itself (window_view.c) because every layer that
 * leaves records (collectives, the proxy, GPU posting, EP) adds its cases
 * here, and the one place that reads them must know them all. */
#include <stdio.h>

#include "core/base/error.h"
#include "core/internal/device_record.h"
#include "mori/device/impl/report__funcs.h"

/* A collective call's signature word (MORI_COLL_SIG_CALL) in words:
 * "all_reduce of 1024 float32 elements (sum, ll)". */
static void describe_call(uint64_t word, char *out, size_t n) {
  static const char *const a2a_algos[] = {"slices", "ll", "direct"}, *const ar_algos[] = {"ll", "rsag", "oneshot"};
  static const char *const dtypes[] = {"float32", "bfloat16", "float16"}, *const ops[] = {"sum", "avg", "max", "min"};
  static const char *const layouts[] = {"all_to_all_v", "all_to_all_v_experts", "all_to_all_v_combine"};
  unsigned variant = MORI_COLL_SIG_FIELD(word, 56), dtype = MORI_COLL_SIG_FIELD(word, 52), algo = MORI_COLL_SIG_FIELD(word, 48);
  unsigned long long size = word & MORI_COLL_SIG_SIZE_MASK;
  switch (word >> 60) {
  case MORI_COLL_SIG_ALL_TO_ALL:
    snprintf(out, n, "%s of %llu bytes per member (%s)", variant ? "all_to_all_window" : "all_to_all", size,
             algo < 3 ? a2a_algos[algo] : "?");
    return;
  case MORI_COLL_SIG_ALL_REDUCE:
    snprintf(out, n, "all_reduce of %llu %s elements (%s, %s)", size, dtype < 3 ? dtypes[dtype] : "?",
             variant < 4 ? ops[variant] : "?", algo < 3 ? ar_algos[algo] : "?");
    return;
  case MORI_COLL_SIG_ALL_TO_ALL_V:
    snprintf(out, n, "%s with rows of %llu bytes", variant < 3 ? layouts[variant] : "all_to_all_v (?)", size);
    return;
  default:
    snprintf(out, n, "a call mori does not know (0x%llx)", (unsigned long long)word);
  }
}

/* A barrier's missing peers in words: "rank 1", "ranks 1, 3 and 6", with
 * "and N more" past what the mask holds or the text fits. */
static void missing_list(const mori_device_error_t *e, char *out, size_t n) {
  unsigned listed = 0, in_mask = (unsigned)__builtin_popcountll(e->seen);
  size_t used = (size_t)snprintf(out, n, "rank%s", e->missing_count > 1 ? "s" : "");
  for (int i = 0; i < 64 && used + 40 < n; i++) {
    if (!(e->seen >> i & 1)) continue;
    const char *sep = listed == 0 ? " " : listed + 1 == in_mask && in_mask == e->missing_count ? " and " : ", ";
    used += (size_t)snprintf(out + used, n - used, "%s%lld", sep, (long long)e->missing_base + i);
    listed++;
  }
  if (listed < e->missing_count)
    snprintf(out + used, n - used, "%s%u %s", listed ? " and " : " (", e->missing_count - listed,
             listed ? "more" : "not named)");
}

/* A mismatch record (MORI_COLL_MISMATCH_CHANNEL) in words. */
static int mismatch_error(const mori_device_error_t *e) {
  char mine[128], theirs[128];
  unsigned long long call = (unsigned long long)e->waited_ns, a = (unsigned long long)e->expected,
                     b = (unsigned long long)e->seen;
  const char *after = "; the call moved nothing on any member, and the context's later calls stay paired";
  switch (e->channel - MORI_COLL_MISMATCH_CHANNEL) {
  case MORI_COLL_SIG_CALL: {
    describe_call(e->expected, mine, sizeof(mine));
    describe_call(e->seen, theirs, sizeof(theirs));
    /* The same call on another algorithm: a limit or a forced choice differs. */
    const uint64_t algo_bits = 15ull << 48;
    const char *why = (e->expected & ~algo_bits) == (e->seen & ~algo_bits)
                          ? " (the same call on another algorithm: MORI_A2A_ALGO, MORI_ALLREDUCE_ALGO or an LL size limit "
                            "is set differently on them)"
                          : "";
    return mori_error_set(MORI_EMISMATCH, "the context's call %llu: rank %d called %s, rank %d %s%s%s", call, e->waiter_rank,
                          mine, e->peer, theirs, why, after);
  }
  case MORI_COLL_SIG_MORE:
    return mori_error_set(MORI_EMISMATCH, "the context's call %llu: rank %d gave experts=%llu, align=%llu; rank %d experts=%llu, align=%llu%s",
                          call, e->waiter_rank, a >> 32, a & 0xffffffffull, e->peer, b >> 32, b & 0xffffffffull, after);
  case MORI_COLL_SIG_OFFSET:
    if (a >> 48 != b >> 48)
      return mori_error_set(MORI_EMISMATCH,
                            "the context's call %llu: rank %d writes its output into the comm's window %llu (in the order "
                            "of creation), rank %d into window %llu (every member gives the same window)%s",
                            call, e->waiter_rank, a >> 48, e->peer, b >> 48, after);
    return mori_error_set(MORI_EMISMATCH,
                          "the context's call %llu: rank %d writes its output at offset %llu of the output window, rank %d "
                          "at %llu (every member gives the same offset)%s",
                          call, e->waiter_rank, a & MORI_COLL_SIG_SIZE_MASK, e->peer, b & MORI_COLL_SIG_SIZE_MASK, after);
  case MORI_COLL_SIG_ROWS:
    return mori_error_set(MORI_EMISMATCH,
                          "the context's call %llu: rank %d's output holds %llu rows, rank %d's %llu (every member's output "
                          "holds the same rows)%s",
                          call, e->waiter_rank, a, e->peer, b, after);
  default: {
    const uint64_t mask = MORI_COLL_SIG_SIZE_MASK;
    char plan_a[64], plan_b[64];
    if ((a & mask) || (b & mask)) {
      snprintf(plan_a, sizeof(plan_a), "%llu slices of %llu", a >> 48, a & mask);
      snprintf(plan_b, sizeof(plan_b), "%llu slices of %llu", b >> 48, b & mask);
    } else {
      snprintf(plan_a, sizeof(plan_a), "%llu pieces per member", a >> 48);
      snprintf(plan_b, sizeof(plan_b), "%llu pieces per member", b >> 48);
    }
    return mori_error_set(MORI_EMISMATCH,
                          "the context's call %llu: rank %d and rank %d made the same call but planned it differently "
                          "(rank %d: %s; rank %d: %s): a tuning variable (MORI_COLL_SLICE_BYTES, MORI_A2AV_PIECES, ...) is "
                          "set differently on them%s",
                          call, e->waiter_rank, e->peer, e->waiter_rank, plan_a, e->peer, plan_b, after);
  }
  }
}

/* A word of a record that holds a call's epoch, counted from the context's
 * first call (a block counter at the base itself: no call yet, 0); a word
 * below the base is no call of this context. */
static uint64_t less_base(uint64_t word, uint64_t call_base) { return word >= call_base ? word - call_base : word; }

void mori_device_record_rebase(mori_device_error_t *e, uint64_t call_base) {
  if (!call_base) return;
  int code = (int)(int32_t)e->code;
  uint32_t channel = e->channel;
  if (code == MORI_EMISMATCH && channel - MORI_COLL_MISMATCH_CHANNEL < MORI_COLL_SIG_WORDS) {
    e->waited_ns = less_base(e->waited_ns, call_base); /* the call; expected and seen are signature words */
  } else if (channel == MORI_COLL_OUT_OF_STEP_CHANNEL) {
    e->expected = less_base(e->expected, call_base); /* this call and the member's */
    e->seen = less_base(e->seen, call_base);
  } else if (code == MORI_EINVAL && channel == MORI_COLL_REFUSED_CHANNEL) {
    e->expected = less_base(e->expected, call_base); /* seen: a rank */
  } else if ((code == MORI_EDEVICE_TIMEOUT || code == MORI_EABORTED) && !e->missing_count) {
    /* A wait for a flag of this call: its epoch, and what was seen there.
     * An LL line's flag is the epoch's low 32 bits: one that is a call of
     * this context up to this one counts from the base too. */
    e->expected = less_base(e->expected, call_base);
    uint64_t low = (e->seen - call_base) & 0xffffffffull;
    if (e->seen >= call_base) e->seen -= call_base;
    else if (e->seen && e->seen >> 32 == 0 && call_base >> 32 && low <= e->expected) e->seen = low;
  }
}

int mori_device_record_error(int code, const mori_device_error_t *e, uint64_t untimed_wait_ns) {
  if (code == MORI_ERANGE && e->channel - MORI_PROXY_REFUSED_CHANNEL <= MORI_PROXY_SIGNAL_SET) {
    static const char *const ops[] = {"request", "put", "get", "atomic add", "signal"};
    return mori_error_set(code,
                          "the proxy of rank %d refused a %s from a kernel to rank %d: %llu bytes at offset %llu leave the "
                          "%llu-byte window",
                          e->waiter_rank, ops[e->channel - MORI_PROXY_REFUSED_CHANNEL], e->peer, (unsigned long long)e->seen,
                          (unsigned long long)e->expected, (unsigned long long)e->waited_ns);
  }
  if (code == MORI_ERANGE && e->expected >= MORI_A2AV_BAD_ROWS)
    return mori_error_set(code,
                          "a kernel on rank %d met a split that its sender gave wrong (negative, or more rows than any "
                          "output holds), for the output of rank %d; none of its rows were copied",
                          e->waiter_rank, e->peer);
  if (code == MORI_ERANGE)
    return mori_error_set(code, "a kernel on rank %d found the output of rank %d too small: %llu rows needed, %llu fit",
                          e->waiter_rank, e->peer, (unsigned long long)e->expected, (unsigned long long)e->seen);
  if (code == MORI_EMISMATCH && e->channel - MORI_COLL_MISMATCH_CHANNEL < MORI_COLL_SIG_WORDS) return mismatch_error(e);
  if (e->channel == MORI_COLL_OUT_OF_STEP_CHANNEL)
    return mori_error_set(code,
                          "a collective call (the context's call %llu) on rank %d found rank %d already at call %llu: the "
                          "members are out of step (an earlier call of the context timed out or was aborted on some "
                          "member); destroy the context and make a new one",
                          (unsigned long long)e->expected, e->waiter_rank, e->peer, (unsigned long long)e->seen);
  if (e->channel == MORI_COLL_MISMATCH_CHANNEL + MORI_COLL_SIG_WORDS)
    return mori_error_set(code,
                          "a collective call (the context's call %llu) on rank %d waited %.3f ms for rank %d to start it "
                          "and give its arguments (%s)",
                          (unsigned long long)e->expected, e->waiter_rank, (double)e->waited_ns / 1e6, e->peer,
                          mori_strerror(code));
  if (code == MORI_EINVAL && e->channel == MORI_COLL_REFUSED_CHANNEL)
    return mori_error_set(code,
                          "a collective call (the context's call %llu) on rank %d stopped: rank %d refused its part of "
                          "that call (its own error says why), so nothing of it is valid on any member",
                          (unsigned long long)e->expected, e->waiter_rank, e->peer);
  if (code == MORI_EINVAL && e->peer >= 0)
    return mori_error_set(code, "a kernel on rank %d was given %lld (negative) as the rows or offset for rank %d (expert %u)",
                          e->waiter_rank, (long long)e->expected, e->peer, e->channel);
  if (code == MORI_ECHANNEL && e->channel >= MORI_BARRIER_CHANNELS && e->seen == MORI_BARRIER_CHANNELS)
    return mori_error_set(code, "a kernel on rank %d used barrier channel %u; there are %d", e->waiter_rank, e->channel,
                          MORI_BARRIER_CHANNELS);
  if (code == MORI_ECHANNEL)
    return mori_error_set(code,
                          "a kernel on rank %d used signal channel %u (peer %d), which needs %llu bytes of signal pad; "
                          "the window has %llu bytes",
                          e->waiter_rank, e->channel, e->peer, (unsigned long long)e->expected, (unsigned long long)e->seen);
  if (code == MORI_EIO && e->channel - MORI_GDA_CQE_ERROR_CHANNEL < MORI_GDA_CHANNEL_QPS)
    return mori_error_set(code,
                          "the NIC completed work a kernel on rank %d posted to rank %d (queue pair %u, WQE %llu) with an "
                          "error: syndrome 0x%llx, vendor syndrome 0x%llx; that queue pair fails every later request, and quiets, "
                          "signals and atomics to that rank fail",
                          e->waiter_rank, e->peer, e->channel - MORI_GDA_CQE_ERROR_CHANNEL, (unsigned long long)e->waited_ns,
                          (unsigned long long)e->expected, (unsigned long long)e->seen);
  if (e->peer >= 0 && e->channel - MORI_GDA_TURN_CHANNEL < 2 * MORI_GDA_CHANNEL_QPS)
    return mori_error_set(code,
                          "a kernel on rank %d posting to rank %d (queue pair %u) waited %.3f ms for its turn to %s: an "
                          "earlier claimant never finished its own (a kernel stopped mid-post?); the queue pair is "
                          "abandoned, and its later posts and quiets fail at once (%s)",
                          e->waiter_rank, e->peer, (e->channel - MORI_GDA_TURN_CHANNEL) % MORI_GDA_CHANNEL_QPS,
                          (double)e->waited_ns / 1e6,
                          e->channel - MORI_GDA_TURN_CHANNEL < MORI_GDA_CHANNEL_QPS ? "ring the doorbell" : "consume a completion",
                          mori_strerror(code));
  if (e->peer >= 0 && e->channel - MORI_GDA_FULL_CHANNEL < 2 * MORI_GDA_CHANNEL_QPS)
    return mori_error_set(code, "a kernel on rank %d posting to rank %d (queue pair %u) %s after %.3f ms (%s)", e->waiter_rank,
                          e->peer, (e->channel - MORI_GDA_FULL_CHANNEL) % MORI_GDA_CHANNEL_QPS,
                          e->channel < MORI_GDA_QUIET_CHANNEL ? "waited for room in the send queue" : "waited for completions",
                          (double)e->waited_ns / 1e6, mori_strerror(code));
  /* A wait given no timeout ends at the window's bound: say so, or the
   * caller who asked for none reads of a timeout out of nowhere. */
  char bound[160] = "";
  if (code == MORI_EDEVICE_TIMEOUT && untimed_wait_ns && e->waited_ns >= untimed_wait_ns)
    snprintf(bound, sizeof(bound), "; a wait given no timeout ends after MORI_UNTIMED_WAIT_MS (%llu ms here; 0 waits forever)",
             (unsigned long long)(untimed_wait_ns / 1000000ull));
  if (e->missing_count) {
    char who[320];
    missing_list(e, who, sizeof(who));
    char which[96];
    if (e->expected == 0) /* the signal-pad barrier: no rounds (an epoch barrier's start at 1) */
      snprintf(which, sizeof(which), "signal-pad barrier on rank %d (channel %u)", e->waiter_rank, e->channel);
    else
      snprintf(which, sizeof(which), "barrier on rank %d (channel %u, round %llu)", e->waiter_rank, e->channel,
               (unsigned long long)e->expected);
    return mori_error_set(code, "%s %s after %.3f ms: %u peer%s had not arrived: %s%s", which,
                          code == MORI_EABORTED ? "was aborted" : "timed out", (double)e->waited_ns / 1e6,
                          e->missing_count, e->missing_count > 1 ? "s" : "", who, bound);
  }
  if (e->peer >= 0)
    return mori_error_set(code,
                          "kernel wait on rank %d for rank %d timed out after %.3f ms on channel %u (expected %llu, saw %llu)%s",
                          e->waiter_rank, e->peer, (double)e->waited_ns / 1e6, e->channel, (unsigned long long)e->expected,
                          (unsigned long long)e->seen, bound);
  return mori_error_set(code, "kernel wait on rank %d failed after %.3f ms on channel %u (%s)", e->waiter_rank,
                        (double)e->waited_ns / 1e6, e->channel, mori_strerror(code));
}
