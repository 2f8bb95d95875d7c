// SPDX-License-Identifier: MIT
/* What a window shows: accessors, the device view kernels take by value,
 * and the error mailbox kernels write instead of trapping. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/internal/window.h"
#include "core/internal/window_live.h"
#include "core/platform/platform.h"
#include "mori/device/impl/report__funcs.h"

mori_comm_t *mori_window_comm(const mori_window_t *w) { return w->comm; }
void *mori_window_local_ptr(const mori_window_t *w) { return w->alloc->local.base; }
size_t mori_window_offset(const mori_window_t *w) { return w->offset; }
size_t mori_window_size(const mori_window_t *w) { return w->alloc->size; }
uint64_t mori_window_untimed_wait_ns(const mori_window_t *w) { return w ? w->untimed_wait_ns : 0; }

void *mori_window_peer_ptr(const mori_window_t *w, int peer) {
  if (peer < 0 || peer >= w->comm->size) return NULL;
  return w->ptrs[peer];
}

/* Every getter that hands out a device address of the tables makes sure
 * they are there first: the first one copies a heap window's tables on
 * mori's own stream and waits for that copy alone (no other stream is
 * waited for), so a kernel launched afterwards on any stream reads them
 * complete; later calls cost one atomic load. A copy that fails means the
 * device context is broken: the failure is logged once and kept for
 * mori_window_check. Threads that ask at the same time wait for the one
 * that copies. */
static int copies_to_fail; /* injected failures (tests); atomic */

void mori_window_fail_table_copies(int count) { __atomic_store_n(&copies_to_fail, count, __ATOMIC_RELEASE); }

static int copy_tables(mori_window_t *w) {
  mori_comm_t *c = w->comm;
  int left = __atomic_load_n(&copies_to_fail, __ATOMIC_ACQUIRE);
  while (left > 0 && !__atomic_compare_exchange_n(&copies_to_fail, &left, left - 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
  }
  if (left > 0) return mori_error_set(MORI_ERUNTIME, "copying the tables to device %d failed (injected by a test)", c->device);
  return mori_platform_upload(c->device, w->ptrs_dev, w->ptrs, 2 * sizeof(void *) * (size_t)c->size);
}

static void await_tables(const mori_window_t *cw) {
  mori_window_t *w = (mori_window_t *)cw; /* the copy's state, not the window's contents */
  if (__atomic_load_n(&w->tables_state, __ATOMIC_ACQUIRE) == MORI_TABLES_ON_DEVICE) return;
  int staged = MORI_TABLES_STAGED;
  if (!__atomic_compare_exchange_n(&w->tables_state, &staged, MORI_TABLES_COPYING, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    while (__atomic_load_n(&w->tables_state, __ATOMIC_ACQUIRE) != MORI_TABLES_ON_DEVICE) sched_yield();
    return;
  }
  mori_comm_t *c = w->comm;
  int rc = copy_tables(w);
  if (rc) {
    snprintf(w->tables_error, sizeof(w->tables_error), "%s", mori_last_error());
    __atomic_store_n(&w->tables_rc, rc, __ATOMIC_RELEASE);
    MORI_WARN("window %p: its device tables did not reach device %d: %s", (void *)w, c->device, w->tables_error);
  }
  __atomic_store_n(&w->tables_state, MORI_TABLES_ON_DEVICE, __ATOMIC_RELEASE);
}

void *const *mori_window_ptrs(const mori_window_t *w) { return w->ptrs; }
void *const *mori_window_ptrs_dev(const mori_window_t *w) {
  await_tables(w);
  return w->ptrs_dev;
}
size_t mori_window_signal_pad_size(const mori_window_t *w) { return w->pad_slot.bytes; }
void *const *mori_window_signal_pads(const mori_window_t *w) { return w->pad_slot.bytes ? w->pads : NULL; }
void *const *mori_window_signal_pads_dev(const mori_window_t *w) {
  await_tables(w);
  return w->pad_slot.bytes ? w->pads_dev : NULL;
}

mori_segment_t *mori_window_segment(const mori_window_t *w, size_t *offset) {
  if (offset) *offset = w->segment_offset; /* 0 for a segment of its own; the carve's place in a heap chunk */
  return w->view_segment;
}

mori_window_dev_t mori_window_device_view(const mori_window_t *w) {
  await_tables(w);
  return w->view;
}

/* The comm's ranks, and what each transport that registered `seg` adds
 * (keys, the proxy ring). */
static void fill_ranks_and_transports(mori_comm_t *c, mori_segment_t *seg, mori_window_dev_t *d) {
  d->world_rank = c->rank;
  d->world_size = c->size;
  d->lsa_rank = c->lsa_rank;
  d->lsa_size = c->lsa_size;
  d->lsa_base = c->lsa_base;
  for (int i = 0; seg && i < c->num_transports; i++)
    if (seg->registered[i]) c->transports[i].device_info(c->transport_state[i], seg, seg->transport_state[i], d);
}

/* Called once, when the window is complete: the view never changes after
 * (and kernels launched per call should not pay for assembling it). */
mori_window_dev_t mori_window_make_view(const mori_window_t *w) {
  mori_window_dev_t d;
  memset(&d, 0, sizeof(d));
  mori_comm_t *c = w->comm;
  d.flat_base = w->flat_base;
  d.stride = w->flat_stride;
  d.size = w->alloc->size;
  d.ptrs = w->ptrs_dev;
  d.signal_pads = w->pad_slot.bytes ? (uint32_t **)w->pads_dev : NULL;
  d.signal_pad_size = w->pad_slot.bytes;
  d.control = w->control_dev;
  mori_signal_arena_flat(c, &w->barrier_slot, &d.barrier_base, &d.barrier_stride);
  d.segment_offset = w->segment_offset;
  fill_ranks_and_transports(c, w->view_segment, &d);
  return d;
}

/* The barrier area as a window of its own: flat arithmetic over the
 * arena slot (no pointer tables), the window's mailbox, and the proxy ring
 * of the arena's segment, so a kernel reaches the same area of a rank on
 * another node (mori/device/remote_sync.h). */
mori_window_dev_t mori_window_make_sync_view(const mori_window_t *w) {
  mori_window_dev_t d;
  memset(&d, 0, sizeof(d));
  mori_comm_t *c = w->comm;
  mori_signal_arena_flat(c, &w->barrier_slot, &d.flat_base, &d.stride);
  d.size = w->barrier_slot.bytes;
  /* The same area as the window's barrier area: the mailbox's claim word is there. */
  d.barrier_base = d.flat_base;
  d.barrier_stride = d.stride;
  d.control = w->control_dev;
  d.segment_offset = w->barrier_slot.offset;
  fill_ranks_and_transports(c, mori_signal_arena_segment(c, &w->barrier_slot), &d);
  return d;
}

mori_window_dev_t mori_window_sync_view(const mori_window_t *w) { return w->sync_view; }

/* A failed copy of the tables is reported on every call, after any error a
 * kernel left (that one is reported once, and cleared). */
static int tables_failure(const mori_window_t *w) {
  int rc = __atomic_load_n(&w->tables_rc, __ATOMIC_ACQUIRE);
  if (!rc) return 0;
  return mori_error_set(rc, "window %p: its device tables did not reach device %d: %s", (const void *)w, w->comm->device,
                        w->tables_error);
}

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
    return mori_error_set(MORI_EMISMATCH,
                          "the context's call %llu: rank %d writes its output at offset %llu of the output window, rank %d "
                          "at %llu (every member gives the same offset)%s",
                          call, e->waiter_rank, a, e->peer, b, after);
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

int mori_window_tables_on_device(const mori_window_t *w) {
  (void)mori_window_ptrs_dev(w); /* the first ask copies them */
  return tables_failure(w);
}

int mori_window_check(mori_window_t *w) {
  mori_device_control_t *ctl = w->control;
  uint32_t written = ctl ? __atomic_load_n(&ctl->error.code, __ATOMIC_ACQUIRE) : 0;
  if (!written) return tables_failure(w);
  /* The code is written last: the fields before it are complete, and no
   * kernel writes them again until records_read moves on. */
  mori_device_error_t e = ctl->error;
  /* Two host threads may check at once: the one that clears the code
   * reports it and hands the mailbox back (records_read has one writer). */
  if (!__atomic_compare_exchange_n(&ctl->error.code, &written, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return tables_failure(w);
  int code = (int)(int32_t)written;
  __atomic_store_n(&ctl->records_read, ctl->records_read + 1, __ATOMIC_RELEASE);
  if (code == MORI_ERANGE && e.channel - MORI_PROXY_REFUSED_CHANNEL <= MORI_PROXY_SIGNAL_SET) {
    static const char *const ops[] = {"request", "put", "get", "atomic add", "signal"};
    return mori_error_set(code,
                          "the proxy of rank %d refused a %s from a kernel to rank %d: %llu bytes at offset %llu leave the "
                          "%llu-byte window",
                          e.waiter_rank, ops[e.channel - MORI_PROXY_REFUSED_CHANNEL], e.peer, (unsigned long long)e.seen,
                          (unsigned long long)e.expected, (unsigned long long)e.waited_ns);
  }
  if (code == MORI_ERANGE && e.expected >= MORI_A2AV_BAD_ROWS)
    return mori_error_set(code,
                          "a kernel on rank %d met a split that its sender gave wrong (negative, or more rows than any "
                          "output holds), for the output of rank %d; none of its rows were copied",
                          e.waiter_rank, e.peer);
  if (code == MORI_ERANGE)
    return mori_error_set(code, "a kernel on rank %d found the output of rank %d too small: %llu rows needed, %llu fit",
                          e.waiter_rank, e.peer, (unsigned long long)e.expected, (unsigned long long)e.seen);
  if (code == MORI_EMISMATCH && e.channel - MORI_COLL_MISMATCH_CHANNEL < MORI_COLL_SIG_WORDS) return mismatch_error(&e);
  if (e.channel == MORI_COLL_MISMATCH_CHANNEL + MORI_COLL_SIG_WORDS)
    return mori_error_set(code,
                          "a collective call (the context's call %llu) on rank %d waited %.3f ms for rank %d to start it "
                          "and give its arguments (%s)",
                          (unsigned long long)e.expected, e.waiter_rank, (double)e.waited_ns / 1e6, e.peer,
                          mori_strerror(code));
  if (code == MORI_EINVAL && e.channel == MORI_COLL_REFUSED_CHANNEL)
    return mori_error_set(code,
                          "a collective call (the context's call %llu) on rank %d stopped: rank %d refused its part of "
                          "that call (its own error says why), so nothing of it is valid on any member",
                          (unsigned long long)e.expected, e.waiter_rank, e.peer);
  if (code == MORI_EINVAL && e.peer >= 0)
    return mori_error_set(code, "a kernel on rank %d was given %lld (negative) as the rows or offset for rank %d (expert %u)",
                          e.waiter_rank, (long long)e.expected, e.peer, e.channel);
  if (code == MORI_ECHANNEL && e.channel >= MORI_BARRIER_CHANNELS && e.seen == MORI_BARRIER_CHANNELS)
    return mori_error_set(code, "a kernel on rank %d used barrier channel %u; there are %d", e.waiter_rank, e.channel,
                          MORI_BARRIER_CHANNELS);
  if (code == MORI_ECHANNEL)
    return mori_error_set(code,
                          "a kernel on rank %d used signal channel %u (peer %d), which needs %llu bytes of signal pad; "
                          "the window has %llu bytes",
                          e.waiter_rank, e.channel, e.peer, (unsigned long long)e.expected, (unsigned long long)e.seen);
  if (code == MORI_EIO && e.channel - MORI_GDA_CQE_ERROR_CHANNEL < MORI_GDA_CHANNEL_QPS)
    return mori_error_set(code,
                          "the NIC completed work a kernel on rank %d posted to rank %d (queue pair %u, WQE %llu) with an "
                          "error: syndrome 0x%llx, vendor syndrome 0x%llx; that rank is unreachable by GPU posting from now on",
                          e.waiter_rank, e.peer, e.channel - MORI_GDA_CQE_ERROR_CHANNEL, (unsigned long long)e.waited_ns,
                          (unsigned long long)e.expected, (unsigned long long)e.seen);
  if (e.peer >= 0 && e.channel - MORI_GDA_TURN_CHANNEL < 2 * MORI_GDA_CHANNEL_QPS)
    return mori_error_set(code,
                          "a kernel on rank %d posting to rank %d (queue pair %u) waited %.3f ms for its turn to %s: an "
                          "earlier claimant never finished its own (a kernel stopped mid-post?); the queue pair is "
                          "abandoned, and its later posts and quiets fail at once (%s)",
                          e.waiter_rank, e.peer, (e.channel - MORI_GDA_TURN_CHANNEL) % MORI_GDA_CHANNEL_QPS,
                          (double)e.waited_ns / 1e6,
                          e.channel - MORI_GDA_TURN_CHANNEL < MORI_GDA_CHANNEL_QPS ? "ring the doorbell" : "consume a completion",
                          mori_strerror(code));
  if (e.peer >= 0 && e.channel - MORI_GDA_FULL_CHANNEL < 2 * MORI_GDA_CHANNEL_QPS)
    return mori_error_set(code, "a kernel on rank %d posting to rank %d (queue pair %u) %s after %.3f ms (%s)", e.waiter_rank,
                          e.peer, (e.channel - MORI_GDA_FULL_CHANNEL) % MORI_GDA_CHANNEL_QPS,
                          e.channel < MORI_GDA_QUIET_CHANNEL ? "waited for room in the send queue" : "waited for completions",
                          (double)e.waited_ns / 1e6, mori_strerror(code));
  /* A wait given no timeout ends at the window's bound: say so, or the
   * caller who asked for none reads of a timeout out of nowhere. */
  char bound[160] = "";
  if (code == MORI_EDEVICE_TIMEOUT && w->untimed_wait_ns && e.waited_ns >= w->untimed_wait_ns)
    snprintf(bound, sizeof(bound), "; a wait given no timeout ends after MORI_UNTIMED_WAIT_MS (%llu ms here; 0 waits forever)",
             (unsigned long long)(w->untimed_wait_ns / 1000000ull));
  if (e.peer >= 0)
    return mori_error_set(code,
                          "kernel wait on rank %d for rank %d timed out after %.3f ms on channel %u (expected %llu, saw %llu)%s",
                          e.waiter_rank, e.peer, (double)e.waited_ns / 1e6, e.channel, (unsigned long long)e.expected,
                          (unsigned long long)e.seen, bound);
  return mori_error_set(code, "kernel wait on rank %d failed after %.3f ms on channel %u (%s)", e.waiter_rank,
                        (double)e.waited_ns / 1e6, e.channel, mori_strerror(code));
}

void mori_window_abort(mori_window_t *w) {
  if (w->control) __atomic_store_n(&w->control->abort_flag, 1, __ATOMIC_RELEASE);
}

void *mori_window_transport_state(const mori_window_t *w, const mori_transport_ops_t *ops) {
  return mori_segment_transport_state(w->view_segment, ops);
}
