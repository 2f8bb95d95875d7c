/* mori_window_create: the collective rendezvous of one allocation.
 *   1. every rank publishes {ok, size, mapped size, pad, device, handle type};
 *      all validate, and every rank fails alike on a disagreement;
 *   2. handles of LSA peers travel through the comm's handle library and are
 *      imported;
 *   3. one flat VA span of lsa_size * stride is reserved; the transports
 *      (p2p) map each LSA peer into its slot and publish the pointers;
 *   4. signal pads come from the comm's arena; tables are copied to the
 *      device; a last allgather confirms that every rank succeeded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal/core.h"
#include "core/internal/error.h"
#include "core/internal/log.h"

struct rendezvous_info {
  int32_t ok; /* 1: the pointer is mori memory */
  int32_t device;
  int32_t handle_type;
  int32_t pid;
  uint64_t size, mapped_size, pad_size, offset;
};

/* "rank 0: 4096, rank 1: 8192" for the ranks whose field differs from rank 0's. */
static void describe_mismatch(char *out, size_t len, const struct rendezvous_info *all, int n, size_t field,
                              const char *unit) {
  size_t used = 0;
  out[0] = '\0';
  uint64_t first = *(const uint64_t *)((const char *)&all[0] + field);
  used += (size_t)snprintf(out, len, "rank 0: %llu%s", (unsigned long long)first, unit);
  for (int r = 1; r < n && used + 40 < len; r++) {
    uint64_t v = *(const uint64_t *)((const char *)&all[r] + field);
    if (v != first) used += (size_t)snprintf(out + used, len - used, ", rank %d: %llu%s", r, (unsigned long long)v, unit);
  }
}

static int validate(mori_comm_t *c, const struct rendezvous_info *all) {
  char list[512];
  size_t used = 0;
  list[0] = '\0';
  for (int r = 0; r < c->size; r++)
    if (!all[r].ok && used + 8 < sizeof(list)) used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", used ? ", " : "", r);
  if (used) return mori_error_set(MORI_ENOT_OWNED, "window_create: rank(s) %s passed memory mori does not own", list);
  for (int r = 1; r < c->size; r++) {
    if (all[r].size != all[0].size) {
      describe_mismatch(list, sizeof(list), all, c->size, offsetof(struct rendezvous_info, size), " bytes");
      return mori_error_set(MORI_EMISMATCH, "window_create: ranks disagree on the size (%s)", list);
    }
  }
  for (int r = 1; r < c->size; r++) {
    if (all[r].pad_size != all[0].pad_size) {
      describe_mismatch(list, sizeof(list), all, c->size, offsetof(struct rendezvous_info, pad_size), " pad bytes");
      return mori_error_set(MORI_EMISMATCH, "window_create: ranks disagree on the signal-pad size (%s)", list);
    }
  }
  for (int r = 1; r < c->size; r++) {
    if (all[r].mapped_size != all[0].mapped_size) {
      describe_mismatch(list, sizeof(list), all, c->size, offsetof(struct rendezvous_info, mapped_size), " mapped bytes");
      return mori_error_set(MORI_EMISMATCH, "window_create: ranks' allocation granularities differ (%s)", list);
    }
    if (all[r].handle_type != all[0].handle_type)
      return mori_error_set(MORI_EMISMATCH, "window_create: rank %d's memory has %s handles, rank 0's %s", r,
                            mori_handle_type_name(all[r].handle_type), mori_handle_type_name(all[0].handle_type));
  }
  bool carried = false;
  for (int i = 0; i < c->num_handles; i++) carried |= c->handles[i]->handle_type == all[0].handle_type;
  if (!carried)
    return mori_error_set(MORI_ENOTSUP, "window_create: the memory has %s handles and the comm has no handle library for them",
                          mori_handle_type_name(all[0].handle_type));
  return 0;
}

/* Handles of every LSA peer, imported into this process. */
static int exchange_handles(mori_window_t *w) {
  mori_comm_t *c = w->comm;
  int type = w->alloc->mem.handle_type, lib = 0;
  while (c->handles[lib]->handle_type != type) lib++; /* validate() made sure it exists */
  mori_shareable_t mine;
  int rc = mori_platform_mem_export(&w->alloc->mem, type, &mine);
  if (rc) return mori_error_context(rc, "window_create: exporting this rank's memory");
  mori_shareable_t *theirs = calloc((size_t)c->size, sizeof(*theirs));
  bool *want = calloc((size_t)c->size, sizeof(bool));
  if (!theirs || !want) {
    rc = mori_error_set(MORI_ENOMEM, "window_create: handle table");
    goto out;
  }
  for (int r = 0; r < c->size; r++) theirs[r].fd = -1;
  for (int i = 0; i < c->lsa_size; i++) want[c->lsa_base + i] = (c->lsa_base + i) != c->rank;
  rc = c->handles[lib]->share(c->handle_state[lib], c, &mine, theirs, want);
  if (rc) {
    mori_error_context(rc, "window_create: sharing handles through %s", c->handles[lib]->name);
    goto out;
  }
  for (int i = 0; i < c->lsa_size && !rc; i++) {
    int peer = c->lsa_base + i;
    if (peer == c->rank) {
      w->lsa_mem[i] = w->alloc->mem;
      w->lsa_mem[i].owned = false; /* an alias: never released through the window */
      continue;
    }
    rc = mori_platform_mem_import(&theirs[peer], w->alloc->mapped_size, c->device, &w->lsa_mem[i]);
    if (rc) mori_error_context(rc, "window_create: importing rank %d's memory", peer);
  }
out:
  if (theirs)
    for (int r = 0; r < c->size; r++)
      if (theirs[r].type == MORI_HANDLE_POSIX_FD && theirs[r].fd >= 0) close(theirs[r].fd);
  if (mine.type == MORI_HANDLE_POSIX_FD && mine.fd >= 0) close(mine.fd);
  free(theirs);
  free(want);
  return rc;
}

static int publish_tables(mori_window_t *w) {
  mori_comm_t *c = w->comm;
  size_t bytes = sizeof(void *) * (size_t)c->size;
  int rc = mori_platform_device_alloc(c->device, bytes, (void **)&w->ptrs_dev);
  if (!rc) rc = mori_platform_memcpy(w->ptrs_dev, w->ptrs, bytes);
  if (!rc && w->has_pad) {
    rc = mori_platform_device_alloc(c->device, bytes, (void **)&w->pads_dev);
    if (!rc) rc = mori_platform_memcpy(w->pads_dev, w->pads, bytes);
  }
  if (!rc) rc = mori_platform_host_alloc_mapped(sizeof(mori_device_control_t), (void **)&w->control, (void **)&w->control_dev);
  return rc ? mori_error_context(rc, "window_create: publishing the pointer tables") : 0;
}

/* Everything a window holds, released in the design's order. Safe on a
 * partly built window. */
void mori_window_teardown(mori_window_t *w) {
  mori_comm_t *c = w->comm;
  for (int i = c->num_transports - 1; i >= 0; i--) {
    if (!w->transport_registered[i]) continue;
    if (c->transports[i]->window_deregister(c->transport_state[i], w, w->transport_state[i]) != 0)
      MORI_WARN("window teardown: transport %s: %s", c->transports[i]->name, mori_last_error());
    w->transport_registered[i] = false;
  }
  /* Kernels may still read peers through the slots. */
  if (mori_platform_synchronize(c->device) != 0) MORI_WARN("window teardown: %s", mori_last_error());
  for (int i = 0; w->lsa_mapped && i < c->lsa_size; i++) {
    if (!w->lsa_mapped[i]) continue;
    if (mori_platform_mem_unmap(w->flat_base + (size_t)i * w->stride, w->stride) != 0)
      MORI_WARN("window teardown: unmapping slot %d: %s", i, mori_last_error());
    w->lsa_mapped[i] = false;
  }
  for (int i = 0; w->lsa_mem && i < c->lsa_size; i++)
    if (c->lsa_base + i != c->rank) mori_platform_mem_release(&w->lsa_mem[i]);
  if (w->flat_base) mori_platform_va_release(w->flat_base, (size_t)c->lsa_size * w->stride);
  w->flat_base = NULL;
  mori_platform_device_free(w->ptrs_dev);
  mori_platform_device_free(w->pads_dev);
  mori_platform_host_free_mapped(w->control);
  if (w->has_pad) mori_pad_release(c, &w->pad_slot);
  if (w->has_sync) mori_pad_release(c, &w->sync_slot);
  free(w->ptrs);
  free(w->pads);
  free(w->lsa_mem);
  free(w->lsa_mapped);
  if (w->alloc) {
    pthread_mutex_lock(mori_registry_lock());
    mori_alloc_release_ref_locked(w->alloc);
    pthread_mutex_unlock(mori_registry_lock());
  }
  free(w);
}

static int build(mori_window_t *w, const struct rendezvous_info *all) {
  mori_comm_t *c = w->comm;
  int rc;
  size_t granularity;
  w->stride = w->alloc->mapped_size;
  w->lsa_mem = calloc((size_t)c->lsa_size, sizeof(*w->lsa_mem));
  w->lsa_mapped = calloc((size_t)c->lsa_size, sizeof(bool));
  w->ptrs = calloc((size_t)c->size, sizeof(void *));
  w->pads = calloc((size_t)c->size, sizeof(void *));
  if (!w->lsa_mem || !w->lsa_mapped || !w->ptrs || !w->pads) return mori_error_set(MORI_ENOMEM, "window_create: tables");
  if ((rc = exchange_handles(w)) != 0) return rc;
  if ((rc = mori_platform_granularity(c->device, &granularity)) != 0) return rc;
  if ((rc = mori_platform_va_reserve((size_t)c->lsa_size * w->stride, granularity, (void **)&w->flat_base)) != 0)
    return mori_error_context(rc, "window_create: reserving the flat window (%d x %zu bytes)", c->lsa_size, w->stride);
  for (int i = 0; i < c->num_transports; i++) {
    rc = c->transports[i]->window_register(c->transport_state[i], w, &w->transport_state[i]);
    if (rc) return mori_error_context(rc, "window_create: transport %s", c->transports[i]->name);
    w->transport_registered[i] = true;
  }
  /* Invariant: the local entry is exactly what alloc returned. */
  w->ptrs[c->rank] = w->alloc->base;
  if (!c->creating_arena) {
    /* The device barrier's area and the signal pad, from one arena run. */
    rc = mori_pad_assign_pair(c, MORI_SYNC_AREA_BYTES(c->lsa_size), all[0].pad_size, &w->sync_slot, &w->pad_slot);
    if (rc) return rc;
    w->has_sync = true;
  }
  if (all[0].pad_size && !c->creating_arena) {
    w->has_pad = true;
    for (int p = 0; p < c->size; p++) w->pads[p] = mori_pad_peer_ptr(c, &w->pad_slot, p);
  }
  return publish_tables(w);
}

int mori_window_create(mori_comm_t *comm, void *ptr, mori_window_t **out) {
  if (!comm || !out) return mori_error_set(MORI_EINVAL, "window_create: comm and out are required");
  *out = NULL;
  struct rendezvous_info me;
  memset(&me, 0, sizeof(me));
  me.pid = (int32_t)getpid();
  me.device = comm->device;
  pthread_mutex_lock(mori_registry_lock());
  mori_alloc_t *a = ptr ? mori_registry_find_locked(ptr) : NULL;
  if (a && !a->freed) {
    a->refs++; /* the window's reference; dropped on any failure below */
    me.ok = 1;
    me.size = a->size;
    me.mapped_size = a->mapped_size;
    me.pad_size = a->signal_pad_size;
    me.offset = (uint64_t)((char *)ptr - (char *)a->base);
    me.handle_type = a->mem.handle_type;
  } else {
    a = NULL;
  }
  pthread_mutex_unlock(mori_registry_lock());
  if (!a) MORI_WARN("window_create: %p is not mori memory; every rank will fail this rendezvous", ptr);

  struct rendezvous_info *all = calloc((size_t)comm->size, sizeof(*all));
  mori_window_t *w = calloc(1, sizeof(*w));
  int rc = (!all || !w) ? mori_error_set(MORI_ENOMEM, "window_create") : 0;
  if (!rc) rc = mori_bootstrap_allgather(comm->bootstrap, &me, all, sizeof(me));
  if (!rc) rc = validate(comm, all);
  if (rc || !w) {
    if (a) {
      pthread_mutex_lock(mori_registry_lock());
      mori_alloc_release_ref_locked(a);
      pthread_mutex_unlock(mori_registry_lock());
    }
    free(w);
    free(all);
    return mori_error_context(rc, "window_create (rank %d, %p)", comm->rank, ptr);
  }
  w->comm = comm;
  w->alloc = a;
  w->offset = (size_t)me.offset;
  w->id = comm->next_window_id++;
  comm->live_windows++;
  rc = build(w, all);
  /* Every rank learns whether every other rank succeeded. */
  int32_t status = rc, *statuses = calloc((size_t)comm->size, sizeof(int32_t));
  int agree = statuses ? mori_bootstrap_allgather(comm->bootstrap, &status, statuses, sizeof(status)) : MORI_ENOMEM;
  if (!rc && agree) rc = agree;
  for (int r = 0; !rc && r < comm->size; r++)
    if (statuses[r]) rc = mori_error_set(statuses[r], "window_create: rank %d failed (%s)", r, mori_err_name(statuses[r]));
  free(statuses);
  free(all);
  if (rc) {
    char saved[1024];
    snprintf(saved, sizeof(saved), "%s", mori_last_error());
    comm->live_windows--;
    mori_window_teardown(w);
    mori_error_set(rc, "%s", saved);
    return mori_error_context(rc, "window_create (rank %d)", comm->rank);
  }
  pthread_mutex_lock(mori_registry_lock());
  mori_registry_add_window_locked(w);
  pthread_mutex_unlock(mori_registry_lock());
  *out = w;
  return 0;
}
