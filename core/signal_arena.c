// SPDX-License-Identifier: MIT
/* Signal arenas: each comm keeps 2 MiB segments cut into GRANULE-byte
 * pieces; a slot is a run of granules free on every rank, so all ranks
 * agree on its offset. Ranks hand out slots in the same order, so their
 * maps mostly match and each rank's own first fit is the same run: that
 * run, proposed in the window's rendezvous, is taken with no step of its
 * own. Otherwise the run is found from an allgather of the free maps (the
 * maps differ when ranks released or reclaimed slots at different times:
 * they release in different orders, and from other threads, as the torch
 * backend frees from Python's garbage collector). A released run
 * is "dirty": kernels of the old window may still touch it, so it is zeroed
 * and reused only after a device synchronisation, which happens when no
 * run is free on some rank (all ranks learn it from the same allgather) and
 * the comm already has ARENAS_BEFORE_RECLAIM arenas; before that a new
 * arena is added, which waits for nothing. Releasing never waits for the
 * device. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/internal/agreement.h"
#include "core/internal/local_mem.h"
#include "core/internal/segment.h"
#include "core/internal/signal_arena.h"

enum {
  GRANULE = 512,
  ARENA_BYTES = 2 << 20,
  GRANULES = ARENA_BYTES / GRANULE,
  MAP_BYTES = GRANULES / 8,
  /* Reclaiming released runs waits for the device (every stream's work in
   * flight); adding an arena does not. Up to this many arenas (16 MiB per
   * comm) are added before released runs are reclaimed, so windows made
   * and destroyed while kernels run do not stall them. */
  ARENAS_BEFORE_RECLAIM = 8,
};

struct arena {
  mori_local_mem_t memory;
  mori_segment_t *segment;
  uint8_t used[MAP_BYTES];  /* handed out or dirty */
  uint8_t dirty[MAP_BYTES]; /* released, waiting for a device sync and zeroing */
  int first_free;           /* every granule below it is used: searches start there */
};

struct mori_signal_arenas {
  pthread_mutex_t lock; /* assign (collective) against release (any thread) */
  struct arena **arenas; /* each arena allocated alone: lookups never see one move */
  int count;
  int dirty_granules;
};

static bool is_used(const uint8_t *map, int g) { return map[g / 8] & (1u << (g % 8)); }
static void set_used(uint8_t *map, int g, bool v) {
  if (v) map[g / 8] |= (uint8_t)(1u << (g % 8));
  else map[g / 8] &= (uint8_t)~(1u << (g % 8));
}

static struct mori_signal_arenas *arenas_of(mori_comm_t *c) {
  if (!c->arenas) {
    struct mori_signal_arenas *a = calloc(1, sizeof(*a));
    if (!a) return NULL;
    pthread_mutex_init(&a->lock, NULL);
    c->arenas = a;
  }
  return c->arenas;
}

/* Backs granules [start, start + count) of arena `a`: on the host platform
 * their pages of /dev/shm are reserved now, so a peer's first signal there,
 * or a reclaim's zeroing, cannot meet a full /dev/shm (a SIGBUS). An arena
 * is made back-on-demand and only the runs handed out are backed: all 2 MiB
 * of every rank's arena made a 256-rank start-up 0.13 s slower, and a window
 * uses a few hundred bytes. */
static int back_run(const mori_comm_t *c, struct arena *a, int start, int count) {
  size_t at = (size_t)start * GRANULE, bytes = (size_t)count * GRANULE;
  int rc = mori_platform_mem_back(&a->memory.mem, at, bytes);
  return rc ? mori_error_context(rc, "signal arena: rank %d backing %zu bytes at offset %zu", c->rank, bytes, at) : 0;
}

/* Every rank adds one arena together, its first `back_granules` backed (the
 * run the caller takes from it). `rc`: this rank's status so far. */
static int add_arena(mori_comm_t *c, struct mori_signal_arenas *all, int rc, int back_granules) {
  struct arena **grown = rc ? NULL : realloc(all->arenas, sizeof(*grown) * (size_t)(all->count + 1));
  struct arena *fresh = rc ? NULL : calloc(1, sizeof(*fresh));
  if (!rc && (!grown || !fresh)) rc = mori_error_set(MORI_ENOMEM, "signal arena: table");
  if (grown) all->arenas = grown;
  /* Backed run by run as they are handed out (back_run). */
  if (!rc) rc = mori_local_mem_create(c->device, ARENA_BYTES, c->handle_type, MORI_PMEM_BACK_ON_DEMAND, &fresh->memory);
  if (!rc && !mori_platform_fresh_memory_reads_zero())
    rc = mori_platform_memset_zero(c->device, fresh->memory.base, fresh->memory.mapped_size);
  if (!rc) rc = back_run(c, fresh, 0, back_granules); /* agreed on in the segment's steps */
  mori_segment_t *seg = NULL;
  int seg_rc = mori_segment_create(c, rc ? NULL : &fresh->memory.mem, rc ? NULL : fresh->memory.base, ARENA_BYTES, rc, &seg);
  if (seg_rc) {
    mori_error_saved_t cause;
    mori_error_save(&cause);
    if (fresh) mori_local_mem_destroy(&fresh->memory);
    mori_error_restore(&cause);
    free(fresh);
    return mori_error_context(seg_rc, "signal arena");
  }
  fresh->segment = seg;
  all->arenas[all->count++] = fresh;
  return 0;
}

/* The 64 granules from g (a multiple of 64) as one word. */
static uint64_t word_at(const uint8_t *map, int g) {
  uint64_t w;
  memcpy(&w, map + g / 8, sizeof(w));
  return w;
}

static int granules_for(size_t bytes) { return bytes ? (int)((bytes + GRANULE - 1) / GRANULE) : 1; }

/* A run of `need` granules free in `map`, first fit from granule `from`,
 * below which every granule is used in `map`. Released runs stay used
 * until a reclaim, so the maps fill from the front between reclaims: the
 * search starts at the arena's first free granule and skips whole words of
 * used granules, or a comm that makes windows for a long time would pay a
 * scan of every granule handed out since the last reclaim on every window.
 * *first_free_out (optional): the first free granule seen (GRANULES: none). */
static bool find_run(const uint8_t *map, int from, int need, int *start_out, int *first_free_out) {
  int run = 0, first_free = GRANULES;
  bool found = false;
  for (int g = from / 64 * 64; g < GRANULES;) {
    if (run == 0 && g % 64 == 0 && word_at(map, g) == UINT64_MAX) {
      g += 64;
      continue;
    }
    if (is_used(map, g)) {
      run = 0;
    } else {
      if (g < first_free) first_free = g;
      if (++run == need) {
        *start_out = g - need + 1;
        found = true;
        break;
      }
    }
    g++;
  }
  if (first_free_out) *first_free_out = first_free;
  return found;
}

/* Waits for the device, zeroes every dirty run and frees it. */
static int reclaim_dirty(mori_comm_t *c, struct mori_signal_arenas *all) {
  int rc = mori_platform_synchronize(c->device);
  for (int i = 0; !rc && i < all->count; i++) {
    struct arena *a = all->arenas[i];
    for (int g = 0; !rc && g < GRANULES; g++) {
      if (!is_used(a->dirty, g)) continue;
      int end = g;
      while (end < GRANULES && is_used(a->dirty, end)) end++;
      rc = mori_platform_memset_zero(c->device, (char *)a->memory.base + (size_t)g * GRANULE, (size_t)(end - g) * GRANULE);
      for (int k = g; !rc && k < end; k++) {
        set_used(a->dirty, k, false);
        set_used(a->used, k, false);
      }
      if (!rc && g < a->first_free) a->first_free = g;
      g = end;
    }
  }
  if (!rc) all->dirty_granules = 0;
  return rc ? mori_error_context(rc, "signal arena: reusing released slots") : 0;
}

static int assign_locked(mori_comm_t *c, struct mori_signal_arenas *all, size_t bytes, int rc, mori_arena_slot_t *slot) {
  int need = granules_for(bytes);
  if (!rc && bytes > ARENA_BYTES)
    rc = mori_error_set(MORI_ENOTSUP, "signal pad of %zu bytes is larger than an arena (%d bytes)", bytes, ARENA_BYTES);
  /* Every rank has the same number of arenas: they are added together. */
  int n = all->count;
  size_t map_bytes = (size_t)(n ? n : 1) * MAP_BYTES;
  /* A failed rank marks everything used: nobody picks a slot from its data. */
  uint8_t *mine = calloc(1, map_bytes + 1), *gathered = calloc((size_t)c->size, map_bytes + 1);
  if (!rc && (!mine || !gathered)) rc = mori_error_set(MORI_ENOMEM, "signal arena: maps");
  int found_arena = -1, start = 0;
  /* Round 0 searches the maps as they are; if no run is free anywhere, some
   * rank holds dirty runs and the comm has ARENAS_BEFORE_RECLAIM arenas,
   * every such rank reclaims and round 1 searches again (with fewer, an
   * arena is added instead). The last byte of each map says "I hold dirty
   * runs". */
  for (int round = 0; n > 0 && found_arena < 0 && round < 2; round++) {
    for (int i = 0; mine && i < n; i++) {
      if (rc) memset(mine + (size_t)i * MAP_BYTES, 0xff, MAP_BYTES);
      else memcpy(mine + (size_t)i * MAP_BYTES, all->arenas[i]->used, MAP_BYTES);
    }
    if (mine) mine[map_bytes] = !rc && all->dirty_granules > 0;
    int arc = (mine && gathered) ? mori_comm_allgather(c, mine, gathered, map_bytes + 1) : MORI_ENOMEM;
    if (arc) {
      free(mine);
      free(gathered);
      return rc ? rc : mori_error_context(arc, "signal arena: gathering free maps");
    }
    bool someone_dirty = false;
    for (int r = 0; r < c->size; r++) someone_dirty = someone_dirty || gathered[(size_t)r * (map_bytes + 1) + map_bytes];
    for (int r = 1; r < c->size; r++)
      for (size_t b = 0; b < map_bytes; b++) gathered[b] |= gathered[(size_t)r * (map_bytes + 1) + b];
    for (int i = 0; i < n && found_arena < 0; i++)
      /* Below this rank's first free granule the OR is used too. */
      if (find_run(gathered + (size_t)i * MAP_BYTES, all->arenas[i]->first_free, need, &start, NULL)) found_arena = i;
    if (found_arena >= 0 || !someone_dirty || round == 1 || n < ARENAS_BEFORE_RECLAIM) break;
    /* A failure here is this rank's: it marks everything used next round. */
    if (!rc && all->dirty_granules > 0) rc = reclaim_dirty(c, all);
  }
  free(mine);
  free(gathered);
  if (found_arena < 0) {
    /* Every arena is full on some rank (or a rank failed): all add one. */
    int grc = add_arena(c, all, rc, need);
    if (grc) return grc;
    found_arena = n;
    start = 0;
  } else {
    /* Every rank found this run in the same gathered maps, so every rank is
     * here: each backs it and all agree, so that a rank that cannot fails
     * the assignment with the others instead of alone. */
    rc = mori_agree(c, rc ? rc : back_run(c, all->arenas[found_arena], start, need), "backing signal slots");
  }
  if (rc) return rc;
  for (int g = start; g < start + need; g++) set_used(all->arenas[found_arena]->used, g, true);
  *slot = (mori_arena_slot_t){.arena = found_arena, .offset = (size_t)start * GRANULE, .bytes = bytes};
  return 0;
}

/* The run both slots share: the first slot rounded up to whole granules,
 * then the second. SIZE_MAX when either is larger than an arena. */
static size_t pair_bytes(size_t first_bytes, size_t second_bytes) {
  if (first_bytes > ARENA_BYTES || second_bytes > ARENA_BYTES) return SIZE_MAX;
  return (first_bytes + GRANULE - 1) / GRANULE * GRANULE + second_bytes; /* cannot wrap: both at most an arena */
}

int mori_signal_arena_propose(mori_comm_t *c, size_t first_bytes, size_t second_bytes, mori_arena_proposal_t *out) {
  *out = (mori_arena_proposal_t){.arena = -1};
  size_t total = pair_bytes(first_bytes, second_bytes);
  struct mori_signal_arenas *all = c->arenas;
  if (!all || total > ARENA_BYTES) return 0;
  int need = granules_for(total), start = 0, rc = 0;
  pthread_mutex_lock(&all->lock);
  for (int i = 0; i < all->count; i++) {
    struct arena *a = all->arenas[i];
    if (a->first_free >= GRANULES) continue;
    if (find_run(a->used, a->first_free, need, &start, &a->first_free)) {
      /* Backed before it is proposed: the proposal's step carries a failure. */
      rc = back_run(c, a, start, need);
      if (rc) break;
      for (int g = start; g < start + need; g++) set_used(a->used, g, true); /* reserved */
      *out = (mori_arena_proposal_t){.arena = i, .start = start, .granules = need};
      break;
    }
  }
  pthread_mutex_unlock(&all->lock);
  return rc;
}

void mori_signal_arena_withdraw(mori_comm_t *c, const mori_arena_proposal_t *mine) {
  struct mori_signal_arenas *all = c->arenas;
  if (!all || mine->arena < 0) return;
  pthread_mutex_lock(&all->lock);
  if (mine->arena < all->count && mine->start >= 0 && mine->start <= GRANULES - mine->granules) {
    struct arena *a = all->arenas[mine->arena];
    for (int g = mine->start; g < mine->start + mine->granules; g++) set_used(a->used, g, false);
    if (mine->start < a->first_free) a->first_free = mine->start;
  }
  pthread_mutex_unlock(&all->lock);
}

/* Splits the run into the pair's two slots. */
static void split_pair(const mori_arena_slot_t *run, size_t first_bytes, size_t second_bytes, mori_arena_slot_t *first,
                       mori_arena_slot_t *second) {
  size_t first_span = (first_bytes + GRANULE - 1) / GRANULE * GRANULE;
  *first = (mori_arena_slot_t){.arena = run->arena, .offset = run->offset, .bytes = first_bytes};
  *second = (mori_arena_slot_t){.arena = run->arena, .offset = run->offset + first_span, .bytes = second_bytes};
}

int mori_signal_arena_assign_pair(mori_comm_t *c, size_t first_bytes, size_t second_bytes, int local_rc,
                                  const mori_arena_proposal_t *mine, const mori_arena_proposal_t *agreed,
                                  mori_arena_slot_t *first, mori_arena_slot_t *second) {
  memset(first, 0, sizeof(*first));
  memset(second, 0, sizeof(*second));
  int rc = local_rc;
  size_t total = pair_bytes(first_bytes, second_bytes);
  /* Every rank proposed, and so reserved, this run: it is free on every
   * rank and already taken on this one. The test uses only what every rank
   * sees alike (the gathered proposal, the sizes), so every rank keeps its
   * reservation or every rank takes the step. */
  bool keep = agreed && agreed->arena >= 0 && total <= ARENA_BYTES && agreed->granules == granules_for(total);
  if (keep) {
    /* Not reachable unless this rank's reservation went missing (slots
     * assigned concurrently on one comm, against the rule): every rank
     * then stops here rather than carry on with slots its peers lack. */
    if (!mine || memcmp(mine, agreed, sizeof(*mine)) != 0) {
      fprintf(stderr, "mori: signal arena: rank %d did not reserve the run %d+%d of arena %d every rank proposed\n",
              c->rank, agreed->start, agreed->granules, agreed->arena);
      abort();
    }
    if (rc) {
      mori_signal_arena_withdraw(c, mine);
      return rc;
    }
    mori_arena_slot_t run = {.arena = agreed->arena, .offset = (size_t)agreed->start * GRANULE, .bytes = total};
    split_pair(&run, first_bytes, second_bytes, first, second);
    return 0;
  }
  if (mine) mori_signal_arena_withdraw(c, mine); /* before this rank's maps are gathered */
  struct mori_signal_arenas *all = arenas_of(c);
  /* Without its table this rank still takes part in the step (as one with
   * no arena yet, like every rank the first time), failing: all fail alike. */
  struct mori_signal_arenas none;
  if (!all) {
    memset(&none, 0, sizeof(none));
    pthread_mutex_init(&none.lock, NULL);
    all = &none;
    if (!rc) rc = mori_error_set(MORI_ENOMEM, "signal arena: rank %d's table", c->rank);
  }
  /* Each may fit an arena while both do not: named here by the sizes asked
   * for, not by their sum (assign_locked would call the sum "a signal pad"). */
  if (!rc && total > ARENA_BYTES)
    rc = mori_error_set(MORI_ENOTSUP,
                        "signal slots of %zu + %zu bytes (the window's barrier area and its signal pad) are larger "
                        "than an arena (%d bytes)",
                        first_bytes, second_bytes, ARENA_BYTES);
  mori_arena_slot_t run = {0, 0, 0};
  pthread_mutex_lock(&all->lock);
  rc = assign_locked(c, all, rc ? 0 : total, rc, &run);
  pthread_mutex_unlock(&all->lock);
  if (all == &none) {
    free(none.arenas);
    pthread_mutex_destroy(&none.lock);
  }
  if (rc) return rc;
  split_pair(&run, first_bytes, second_bytes, first, second);
  return 0;
}

void mori_signal_arena_release(mori_comm_t *c, const mori_arena_slot_t *slot) {
  struct mori_signal_arenas *all = c->arenas;
  if (!all || slot->bytes == 0) return;
  pthread_mutex_lock(&all->lock);
  if (slot->arena >= 0 && slot->arena < all->count) {
    struct arena *a = all->arenas[slot->arena];
    /* Slots must read zero when handed out again (torch's protocol): the
     * run stays used until a reclaim has zeroed it. */
    int first = (int)(slot->offset / GRANULE), count = (int)((slot->bytes + GRANULE - 1) / GRANULE);
    for (int g = first; g < first + count; g++) set_used(a->dirty, g, true);
    all->dirty_granules += count;
  }
  pthread_mutex_unlock(&all->lock);
}

static mori_segment_t *segment_of(mori_comm_t *c, const mori_arena_slot_t *slot) {
  pthread_mutex_lock(&c->arenas->lock);
  mori_segment_t *seg = c->arenas->arenas[slot->arena]->segment;
  pthread_mutex_unlock(&c->arenas->lock);
  return seg;
}

void *mori_signal_arena_peer_ptr(mori_comm_t *c, const mori_arena_slot_t *slot, int peer) {
  char *base = segment_of(c, slot)->peer_base[peer];
  return base ? base + slot->offset : NULL;
}

mori_segment_t *mori_signal_arena_segment(mori_comm_t *c, const mori_arena_slot_t *slot) { return segment_of(c, slot); }

void mori_signal_arena_flat(mori_comm_t *c, const mori_arena_slot_t *slot, uint64_t *base, uint64_t *stride) {
  mori_segment_t *seg = segment_of(c, slot);
  *base = (uint64_t)(uintptr_t)seg->flat_base + slot->offset;
  *stride = seg->stride;
}

void mori_signal_arena_destroy_all(mori_comm_t *c) {
  struct mori_signal_arenas *all = c->arenas;
  if (!all) return;
  for (int i = 0; i < all->count; i++) {
    mori_segment_destroy(all->arenas[i]->segment);
    mori_local_mem_destroy(&all->arenas[i]->memory);
    free(all->arenas[i]);
  }
  free(all->arenas);
  pthread_mutex_destroy(&all->lock);
  free(all);
  c->arenas = NULL;
}

int mori_signal_arena_count(mori_comm_t *c) {
  struct mori_signal_arenas *all = c->arenas;
  if (!all) return 0;
  pthread_mutex_lock(&all->lock);
  int n = all->count;
  pthread_mutex_unlock(&all->lock);
  return n;
}
