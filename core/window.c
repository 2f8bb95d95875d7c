/* Window accessors, the device view, the error mailbox, and destroy. */
#include <stdlib.h>
#include <string.h>

#include "core/internal/core.h"
#include "core/internal/error.h"
#include "core/internal/log.h"

int mori_window_destroy(mori_window_t *w) {
  if (!w) return 0;
  pthread_mutex_lock(mori_registry_lock());
  bool live = false;
  for (mori_window_t *x = mori_registry_first_window_locked(); x; x = x->next) live |= x == w;
  if (live) mori_registry_remove_window_locked(w);
  pthread_mutex_unlock(mori_registry_lock());
  if (!live) return mori_error_set(MORI_EINVAL, "window_destroy: %p is not a live window (destroyed twice?)", (void *)w);
  if (!w->internal) w->comm->live_windows--;
  mori_window_teardown(w);
  return 0;
}

mori_comm_t *mori_window_comm(const mori_window_t *w) { return w->comm; }
void *mori_window_local_ptr(const mori_window_t *w) { return w->alloc->base; }
size_t mori_window_offset(const mori_window_t *w) { return w->offset; }
size_t mori_window_size(const mori_window_t *w) { return w->alloc->size; }
size_t mori_window_stride(const mori_window_t *w) { return w->stride; }
size_t mori_window_mapped_size(const mori_window_t *w) { return w->alloc->mapped_size; }

void *mori_window_peer_ptr(const mori_window_t *w, int peer) {
  if (peer < 0 || peer >= w->comm->size) return NULL;
  return w->ptrs[peer];
}

void *const *mori_window_ptrs(const mori_window_t *w) { return w->ptrs; }
void *const *mori_window_ptrs_dev(const mori_window_t *w) { return w->ptrs_dev; }
size_t mori_window_signal_pad_size(const mori_window_t *w) { return w->has_pad ? w->alloc->signal_pad_size : 0; }
void *const *mori_window_signal_pads(const mori_window_t *w) { return w->has_pad ? w->pads : NULL; }
void *const *mori_window_signal_pads_dev(const mori_window_t *w) { return w->has_pad ? w->pads_dev : NULL; }

void *mori_window_slot(const mori_window_t *w, int lsa_index) {
  return w->flat_base + (size_t)lsa_index * w->stride;
}

const mori_pmem_t *mori_window_lsa_mem(const mori_window_t *w, int lsa_index) { return &w->lsa_mem[lsa_index]; }

void mori_window_set_peer_ptr(mori_window_t *w, int peer, void *ptr) {
  if (peer >= 0 && peer < w->comm->size) w->ptrs[peer] = ptr;
}

/* Plug-ins mark the slots they mapped so teardown unmaps exactly those. */
void mori_window_mark_mapped(mori_window_t *w, int lsa_index, bool mapped) { w->lsa_mapped[lsa_index] = mapped; }

mori_window_dev_t mori_window_device_view(const mori_window_t *w) {
  mori_window_dev_t d;
  memset(&d, 0, sizeof(d));
  const mori_comm_t *c = w->comm;
  d.flat_base = (uint64_t)(uintptr_t)w->flat_base;
  d.stride = w->stride;
  d.size = w->alloc->size;
  d.ptrs = w->ptrs_dev;
  d.signal_pads = w->has_pad ? (uint32_t **)w->pads_dev : NULL;
  d.signal_pad_size = w->has_pad ? w->alloc->signal_pad_size : 0;
  d.control = w->control_dev;
  if (w->has_sync) mori_pad_flat(w->comm, &w->sync_slot, &d.sync_base, &d.sync_stride);
  d.world_rank = c->rank;
  d.world_size = c->size;
  d.lsa_rank = c->lsa_rank;
  d.lsa_size = c->lsa_size;
  d.lsa_base = c->lsa_base;
  for (int i = 0; i < c->num_transports; i++)
    if (w->transport_registered[i] && c->transports[i]->device_info)
      c->transports[i]->device_info(c->transport_state[i], (mori_window_t *)w, w->transport_state[i], &d);
  return d;
}

int mori_window_check(mori_window_t *w) {
  mori_device_control_t *ctl = w->control;
  if (!ctl || !__atomic_load_n(&ctl->error.code, __ATOMIC_ACQUIRE)) return 0;
  mori_device_error_t e = ctl->error;
  int code = (int)(int32_t)e.code;
  memset(&ctl->error, 0, sizeof(ctl->error));
  __atomic_store_n(&ctl->error_claimed, 0, __ATOMIC_RELEASE);
  if (e.peer >= 0)
    return mori_error_set(code, "kernel wait on rank %d for rank %d timed out after %.3f ms on channel %u (expected %llu, saw %llu)",
                          e.waiter_rank, e.peer, (double)e.waited_ns / 1e6, e.channel, (unsigned long long)e.expected,
                          (unsigned long long)e.seen);
  return mori_error_set(code, "kernel wait on rank %d failed after %.3f ms on channel %u (%s)", e.waiter_rank,
                        (double)e.waited_ns / 1e6, e.channel, mori_strerror(code));
}

void mori_window_abort(mori_window_t *w) {
  if (w->control) __atomic_store_n(&w->control->abort_flag, 1, __ATOMIC_RELEASE);
}

void *mori_comm_transport_state(const mori_comm_t *c, const mori_transport_ops_t *ops) {
  for (int i = 0; i < c->num_transports; i++)
    if (c->transports[i] == ops) return c->transport_state[i];
  return NULL;
}

void *mori_window_transport_state(const mori_window_t *w, const mori_transport_ops_t *ops) {
  const mori_comm_t *c = w->comm;
  for (int i = 0; i < c->num_transports; i++)
    if (c->transports[i] == ops && w->transport_registered[i]) return w->transport_state[i];
  return NULL;
}
