// SPDX-License-Identifier: MIT
/* Symmetric segments: one range per rank mapped across the LSA team.
 *   1. the handle library of the memory's type shares this rank's exported
 *      handle with its LSA peers (every rank takes part, also one that has
 *      already failed: it shares "no handle");
 *   2. peers' handles are imported, one flat VA span of lsa_size × stride
 *      is reserved and the own slot is mapped as an alias of the local
 *      memory (so the flat arithmetic holds for every LSA index) — except
 *      for legacy IPC handles, which the runtime opens at addresses of its
 *      choosing: then there is no flat span (stride 0), only peer_base;
 *   3. every rank agrees that 1–2 succeeded everywhere, else all fail
 *      together naming the rank;
 *   4. every transport registers the segment (p2p maps the peers' slots);
 *      every rank agrees again.
 * Destroy is local: device synchronised, transports deregister, slots
 * unmapped and VA freed, imports released. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/profile.h"
#include "core/base/log.h"
#include "core/internal/agreement.h"
#include "core/internal/segment.h"

static int find_handle_library(const mori_comm_t *c, int type) {
  for (int i = 0; i < c->num_handles; i++)
    if (c->handles[i].handle_type == type) return i;
  return -1;
}

/* The test hook's state: exports to let pass, then exports to fail. */
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static int exports_to_pass, exports_to_fail;

void mori_segment_fail_exports(int skip, int count) {
  pthread_mutex_lock(&fault_lock);
  exports_to_pass = skip;
  exports_to_fail = count;
  pthread_mutex_unlock(&fault_lock);
}

static int export_handle(const mori_pmem_t *local, int type, mori_shareable_t *out) {
  pthread_mutex_lock(&fault_lock);
  bool fail = false;
  if (exports_to_pass > 0) exports_to_pass--;
  else if (exports_to_fail > 0) fail = exports_to_fail-- > 0;
  pthread_mutex_unlock(&fault_lock);
  if (fail) return mori_error_set(MORI_EMFILE, "dup of the exported handle failed (injected by a test)");
  if (type == MORI_HANDLE_LEGACY_IPC) {
    /* The handle was taken when the range was registered. */
    memset(out, 0, sizeof(*out));
    out->type = type;
    out->fd = -1;
    memcpy(out->blob, local->name, sizeof(out->blob));
    out->offset = local->offset;
    out->size = local->size;
    return 0;
  }
  return mori_platform_mem_export(local, type, out);
}

static void close_shared(mori_shareable_t *s) {
  if (s->type == MORI_HANDLE_POSIX_FD && s->fd >= 0) close(s->fd);
  s->fd = -1;
}

/* A peer's legacy IPC handle: its allocation opened here, at an address of
 * the runtime's choosing; the peer's range lies at its offset in it. */
static int open_legacy(mori_segment_t *seg, int lsa_index, const mori_shareable_t *theirs) {
  mori_comm_t *c = seg->comm;
  int peer = c->lsa_base + lsa_index;
  if (theirs->offset > theirs->size || seg->size > theirs->size - theirs->offset)
    return mori_error_set(MORI_EINVAL, "segment: rank %d's range (%zu bytes at offset %llu) is not inside its allocation (%llu bytes)",
                          peer, seg->size, (unsigned long long)theirs->offset, (unsigned long long)theirs->size);
  void *opened = NULL;
  int rc = mori_platform_ipc_open(theirs, c->device, &opened);
  if (rc) return mori_error_context(rc, "segment: opening rank %d's memory", peer);
  seg->lsa_mem[lsa_index] = (mori_pmem_t){.handle = (uint64_t)(uintptr_t)opened, .size = (size_t)theirs->size,
                                          .device = c->device, .handle_type = MORI_HANDLE_LEGACY_IPC};
  seg->peer_base[peer] = (char *)opened + theirs->offset;
  return 0;
}

/* Steps 1 and 2 of the header comment. `rc` is this rank's status so far. */
static int share_and_map(mori_segment_t *seg, const mori_pmem_t *local, uint64_t seq, int rc) {
  mori_comm_t *c = seg->comm;
  int type = local ? local->handle_type : c->handle_type;
  mori_shareable_t mine;
  memset(&mine, 0, sizeof(mine));
  mine.type = MORI_HANDLE_NONE;
  mine.fd = -1;
  mori_shareable_t *theirs = NULL;
  if (c->lsa_size > 1) {
    int lib = find_handle_library(c, type);
    theirs = calloc((size_t)c->size, sizeof(*theirs));
    bool *want = calloc((size_t)c->size, sizeof(bool));
    if (!rc && (!theirs || !want)) rc = mori_error_set(MORI_ENOMEM, "segment: handle table");
    if (!rc && lib < 0)
      rc = mori_error_set(MORI_ENOTSUP, "segment: the memory has %s handles and the comm has no handle library for them",
                          mori_handle_type_name(type));
    if (!rc) {
      rc = export_handle(local, type, &mine);
      if (rc) {
        mori_error_context(rc, "segment: exporting rank %d's memory", c->rank);
        mine.type = MORI_HANDLE_NONE;
        mine.fd = -1;
      }
    }
    if (lib >= 0 && theirs && want) {
      for (int r = 0; r < c->size; r++) theirs[r] = (mori_shareable_t){.type = MORI_HANDLE_NONE, .fd = -1};
      for (int i = 0; i < c->lsa_size; i++) want[c->lsa_base + i] = c->lsa_base + i != c->rank;
      uint64_t t = mori_profile_now();
      int share_rc = mori_profile_done(MORI_PROF_HANDLE_SHARE, t,
                                       c->handles[lib].share(c->handle_state[lib], c, seq, &mine, theirs, want));
      if (share_rc && !rc) rc = mori_error_context(share_rc, "segment: sharing handles through %s", c->handles[lib].name);
    }
    free(want);
  }
  for (int i = 0; !rc && i < c->lsa_size; i++) {
    int peer = c->lsa_base + i;
    if (peer == c->rank) {
      seg->lsa_mem[i] = *local;
      seg->lsa_mem[i].owned = false; /* an alias: never released through the segment */
      continue;
    }
    if (theirs[peer].type == MORI_HANDLE_NONE) {
      rc = mori_error_set(MORI_EIO, "segment: rank %d shared no handle (it failed)", peer);
      break;
    }
    if (type == MORI_HANDLE_LEGACY_IPC) {
      rc = open_legacy(seg, i, &theirs[peer]);
      continue;
    }
    rc = mori_platform_mem_import(&theirs[peer], seg->stride, c->device, &seg->lsa_mem[i]);
    if (rc) mori_error_context(rc, "segment: importing rank %d's memory", peer);
  }
  if (theirs)
    for (int r = 0; r < c->size; r++) close_shared(&theirs[r]);
  close_shared(&mine);
  free(theirs);
  /* Opened where the runtime chose: no flat span, the table answers. */
  if (type == MORI_HANDLE_LEGACY_IPC) return rc;
  size_t granularity = 0, span = 0;
  if (!rc) rc = mori_platform_granularity(c->device, &granularity);
  if (!rc && __builtin_mul_overflow((size_t)c->lsa_size, seg->stride, &span))
    rc = mori_error_set(MORI_ERANGE, "segment: %d slots of %zu bytes overflow the address space", c->lsa_size, seg->stride);
  if (!rc) {
    rc = mori_platform_va_reserve(c->device, span, granularity, (void **)&seg->flat_base);
    if (rc) mori_error_context(rc, "segment: reserving the flat span (%d x %zu bytes)", c->lsa_size, seg->stride);
  }
  if (!rc) {
    char *own = seg->flat_base + (size_t)c->lsa_rank * seg->stride;
    rc = mori_platform_mem_map(own, seg->stride, local);
    if (!rc) {
      seg->lsa_mapped[c->lsa_rank] = true;
      rc = mori_platform_set_access(own, seg->stride, c->device);
    }
    if (rc) mori_error_context(rc, "segment: mapping rank %d's own slot", c->rank);
  }
  return rc;
}

/* The live segments, for mori_segment_maps_peer. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static mori_segment_t *live_segments;

static bool overlaps(const char *lo, const char *hi, const char *base, size_t bytes) {
  return base && bytes && lo < base + bytes && hi > base;
}

/* The peer of `seg` whose mapping [lo, hi) overlaps, or -1. A slot of the
 * flat span that is mapped, or (memory without a span) a peer's import.
 * The own slot too: it aliases this rank's memory, which mori holds; and,
 * with a span, the segment's own memory, which for a signal arena is known
 * nowhere else (not in the heap, not in the allocation registry). Memory
 * without a span is a registered range, which the registry names. */
static int peer_mapped_at(const mori_segment_t *seg, const char *lo, const char *hi) {
  const mori_comm_t *c = seg->comm;
  if (seg->flat_base) {
    if (overlaps(lo, hi, (const char *)seg->local_base, seg->size)) return c->rank;
    for (int i = 0; i < c->lsa_size; i++)
      if (seg->lsa_mapped[i] && overlaps(lo, hi, seg->flat_base + (size_t)i * seg->stride, seg->stride))
        return c->lsa_base + i;
    return -1;
  }
  /* Without a span, each peer's whole allocation is opened (legacy IPC),
   * not only its range: all of it is the peer's. */
  for (int i = 0; seg->lsa_mem && i < c->lsa_size; i++) {
    const mori_pmem_t *m = &seg->lsa_mem[i];
    if (c->lsa_base + i != c->rank && m->handle_type == MORI_HANDLE_LEGACY_IPC &&
        overlaps(lo, hi, (const char *)(uintptr_t)m->handle, m->size))
      return c->lsa_base + i;
  }
  return -1;
}

bool mori_segment_maps_peer(const void *ptr, size_t size, int *owner, bool *own) {
  const char *lo = (const char *)ptr, *hi = lo + size; /* callers checked that it does not wrap */
  int found = -1;
  bool mine = false;
  pthread_mutex_lock(&live_lock);
  for (const mori_segment_t *seg = live_segments; seg && found < 0; seg = seg->next) {
    found = peer_mapped_at(seg, lo, hi);
    mine = found >= 0 && found == seg->comm->rank;
  }
  pthread_mutex_unlock(&live_lock);
  *owner = found;
  *own = mine;
  return found >= 0;
}

static void forget(mori_segment_t *seg) {
  pthread_mutex_lock(&live_lock);
  for (mori_segment_t **at = &live_segments; *at; at = &(*at)->next)
    if (*at == seg) {
      *at = seg->next;
      break;
    }
  pthread_mutex_unlock(&live_lock);
}

int mori_segment_create(mori_comm_t *c, const mori_pmem_t *local, void *local_base, size_t size, int local_rc,
                        mori_segment_t **out) {
  *out = NULL;
  mori_segment_t *seg = calloc(1, sizeof(*seg));
  int rc = local_rc;
  if (seg) {
    seg->comm = c;
    seg->local_base = local_base;
    seg->size = size;
    /* Memory opened through legacy IPC handles has no flat span. */
    seg->stride = local && local->handle_type != MORI_HANDLE_LEGACY_IPC ? local->size : 0;
    seg->lsa_mem = calloc((size_t)c->lsa_size, sizeof(*seg->lsa_mem));
    seg->lsa_mapped = calloc((size_t)c->lsa_size, sizeof(bool));
    seg->peer_base = calloc((size_t)c->size, sizeof(void *));
  }
  if (!rc && (!seg || !seg->lsa_mem || !seg->lsa_mapped || !seg->peer_base))
    rc = mori_error_set(MORI_ENOMEM, "segment: tables");
  if (!rc && (!local || size > local->size))
    rc = mori_error_set(MORI_EINVAL, "segment: %zu usable bytes in %zu mapped", size, local ? local->size : 0);
  uint64_t seq = ++c->next_segment_seq;
  if (seg) {
    /* Listed before any peer is mapped, so no mapping of it is ever
     * unlisted (destroy unlists it after the last one is gone). */
    pthread_mutex_lock(&live_lock);
    seg->next = live_segments;
    live_segments = seg;
    pthread_mutex_unlock(&live_lock);
    rc = share_and_map(seg, local, seq, rc);
    if (!rc) seg->peer_base[c->rank] = local_base;
  }
  rc = mori_agree(c, rc, "sharing and mapping a segment");
  if (!rc) {
    for (int i = 0; i < c->num_transports; i++) {
      uint64_t t = mori_profile_now();
      int trc = mori_profile_done(MORI_PROF_TRANSPORT_REGISTER, t,
                                  c->transports[i].segment_register(c->transport_state[i], seg, &seg->transport_state[i]));
      if (trc == 0) seg->registered[i] = true;
      else if (!rc) rc = mori_error_context(trc, "segment: transport %s", c->transports[i].name);
    }
    rc = mori_agree(c, rc, "registering a segment with the transports");
  }
  if (rc) {
    mori_error_saved_t cause;
    mori_error_save(&cause);
    mori_segment_destroy(seg);
    mori_error_restore(&cause);
    return rc;
  }
  *out = seg;
  return 0;
}

void mori_segment_destroy(mori_segment_t *seg) {
  if (!seg) return;
  mori_comm_t *c = seg->comm;
  /* Kernels may still use the segment (read peers through the slots, submit
   * to a transport's ring): wait for the device before anything goes. */
  if (mori_platform_synchronize(c->device) != 0) MORI_WARN("segment teardown: %s", mori_last_error());
  for (int i = c->num_transports - 1; i >= 0; i--) {
    if (!seg->registered[i]) continue;
    if (c->transports[i].segment_deregister(c->transport_state[i], seg, seg->transport_state[i]) != 0)
      MORI_WARN("segment teardown: transport %s: %s", c->transports[i].name, mori_last_error());
    seg->registered[i] = false;
  }
  /* The slots and the span in one release (slots are mapped only inside a
   * reserved span): on the host that is one munmap, not one per slot. */
  if (seg->flat_base &&
      mori_platform_span_release(c->device, seg->flat_base, c->lsa_size, seg->stride, seg->lsa_mapped) != 0)
    MORI_WARN("segment teardown: %s", mori_last_error());
  for (int i = 0; seg->lsa_mem && i < c->lsa_size; i++) {
    if (c->lsa_base + i == c->rank) continue;
    mori_pmem_t *m = &seg->lsa_mem[i];
    if (m->handle_type == MORI_HANDLE_LEGACY_IPC) {
      if (mori_platform_ipc_close(c->device, (void *)(uintptr_t)m->handle) != 0)
        MORI_WARN("segment teardown: closing rank %d's memory: %s", c->lsa_base + i, mori_last_error());
      m->handle_type = MORI_HANDLE_NONE;
    } else {
      mori_platform_mem_release(m);
    }
  }
  forget(seg); /* once no peer of it is mapped, before its tables go */
  free(seg->lsa_mem);
  free(seg->lsa_mapped);
  free(seg->peer_base);
  free(seg);
}

mori_comm_t *mori_segment_comm(const mori_segment_t *seg) { return seg->comm; }
void *mori_segment_local_base(const mori_segment_t *seg) { return seg->local_base; }
size_t mori_segment_size(const mori_segment_t *seg) { return seg->size; }
size_t mori_segment_stride(const mori_segment_t *seg) { return seg->stride; }
void *mori_segment_slot(const mori_segment_t *seg, int lsa_index) { return seg->flat_base + (size_t)lsa_index * seg->stride; }
const mori_pmem_t *mori_segment_lsa_mem(const mori_segment_t *seg, int lsa_index) { return &seg->lsa_mem[lsa_index]; }
void mori_segment_mark_mapped(mori_segment_t *seg, int lsa_index, bool mapped) { seg->lsa_mapped[lsa_index] = mapped; }

void mori_segment_set_peer_base(mori_segment_t *seg, int peer, void *ptr) {
  if (peer >= 0 && peer < seg->comm->size) seg->peer_base[peer] = ptr;
}

void *mori_segment_transport_state(const mori_segment_t *seg, const mori_transport_ops_t *ops) {
  const mori_comm_t *c = seg->comm;
  for (int i = 0; i < c->num_transports; i++)
    if (c->transport_origin[i] == ops && seg->registered[i]) return seg->transport_state[i];
  return NULL;
}
