// SPDX-License-Identifier: MIT
/* What a window shows: accessors, the device view kernels take by value,
 * and the error mailbox kernels write instead of trapping. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/internal/device_record.h"
#include "core/internal/window.h"
#include "core/internal/window_live.h"
#include "core/platform/platform.h"
#include "mori/device/impl/report__funcs.h"

mori_comm_t *mori_window_comm(const mori_window_t *w) { return w->comm; }
void *mori_window_local_ptr(const mori_window_t *w) { return w->alloc->local.base; }
size_t mori_window_offset(const mori_window_t *w) { return w->offset; }
size_t mori_window_size(const mori_window_t *w) { return w->alloc->size; }
uint64_t mori_window_untimed_wait_ns(const mori_window_t *w) { return w ? w->untimed_wait_ns : 0; }
uint64_t mori_window_ordinal(const mori_window_t *w) { return w->ordinal; }

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
  mori_device_record_rebase(&e, w->call_base);
  return mori_device_record_error(code, &e, w->untimed_wait_ns);
}

void mori_window_abort(mori_window_t *w) {
  if (w->control) __atomic_store_n(&w->control->abort_flag, 1, __ATOMIC_RELEASE);
}

void *mori_window_transport_state(const mori_window_t *w, const mori_transport_ops_t *ops) {
  return mori_segment_transport_state(w->view_segment, ops);
}
