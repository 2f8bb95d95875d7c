/* Signal pads without a granularity page per window: each comm keeps arenas
 * (symmetric allocations of ARENA_BYTES, themselves windows) cut into
 * GRANULE-byte pieces. A window's pad is a run of granules free on every
 * rank, found from an allgather of the ranks' free maps, so all ranks agree
 * on the offset although frees happen in different orders. A released run
 * is zeroed locally before it can be handed out again. */
#include <stdlib.h>
#include <string.h>

#include "core/internal/core.h"
#include "core/internal/error.h"
#include "core/internal/log.h"

enum {
  GRANULE = 512,
  ARENA_BYTES = 2 << 20,
  GRANULES = ARENA_BYTES / GRANULE,
  MAP_BYTES = GRANULES / 8,
};

struct mori_pad_arena {
  void *memory;
  mori_window_t *window;
  uint8_t used[MAP_BYTES];
};

static bool is_used(const uint8_t *map, int g) { return map[g / 8] & (1u << (g % 8)); }
static void set_used(uint8_t *map, int g, bool v) {
  if (v) map[g / 8] |= (uint8_t)(1u << (g % 8));
  else map[g / 8] &= (uint8_t)~(1u << (g % 8));
}

static int add_arena(mori_comm_t *c) {
  mori_pad_arena_t *grown = realloc(c->pad_arenas, sizeof(*grown) * (size_t)(c->num_pad_arenas + 1));
  if (!grown) return mori_error_set(MORI_ENOMEM, "signal pad: arena table");
  c->pad_arenas = grown;
  mori_pad_arena_t *a = &grown[c->num_pad_arenas];
  memset(a, 0, sizeof(*a));
  mori_mem_attr_t attr;
  mori_mem_attr_init(&attr);
  attr.device = c->device;
  int rc = mori_mem_alloc(ARENA_BYTES, &attr, &a->memory);
  if (rc) return mori_error_context(rc, "signal pad: arena");
  /* The arena is a window of its own (no pad); it does not count as a user
   * window of the comm. */
  c->creating_arena = true;
  rc = mori_window_create(c, a->memory, &a->window);
  c->creating_arena = false;
  if (rc) {
    mori_mem_free(a->memory);
    return mori_error_context(rc, "signal pad: arena window");
  }
  a->window->internal = true;
  c->live_windows--;
  mori_mem_free(a->memory); /* the window keeps it alive */
  c->num_pad_arenas++;
  return 0;
}

/* One run for both slots: one allgather per window instead of two. */
int mori_pad_assign_pair(mori_comm_t *c, size_t first_bytes, size_t second_bytes, mori_pad_slot_t *first,
                         mori_pad_slot_t *second) {
  size_t first_span = (first_bytes + GRANULE - 1) / GRANULE * GRANULE;
  mori_pad_slot_t run;
  int rc = mori_pad_assign(c, first_span + second_bytes, &run);
  if (rc) return rc;
  *first = (mori_pad_slot_t){.arena = run.arena, .offset = run.offset, .bytes = first_bytes};
  *second = (mori_pad_slot_t){.arena = run.arena, .offset = run.offset + first_span, .bytes = second_bytes};
  return 0;
}

int mori_pad_assign(mori_comm_t *c, size_t bytes, mori_pad_slot_t *slot) {
  int need = (int)((bytes + GRANULE - 1) / GRANULE);
  if (bytes > ARENA_BYTES)
    return mori_error_set(MORI_ENOTSUP, "signal pad of %zu bytes is larger than an arena (%d bytes)", bytes, ARENA_BYTES);
  int n = c->num_pad_arenas;
  uint8_t *all = NULL, *mine = NULL;
  int rc = 0;
  if (n > 0) {
    mine = malloc((size_t)n * MAP_BYTES);
    all = malloc((size_t)n * MAP_BYTES * (size_t)c->size);
    if (!mine || !all) {
      rc = mori_error_set(MORI_ENOMEM, "signal pad: maps");
      goto out;
    }
    for (int i = 0; i < n; i++) memcpy(mine + (size_t)i * MAP_BYTES, c->pad_arenas[i].used, MAP_BYTES);
    rc = mori_bootstrap_allgather(c->bootstrap, mine, all, (size_t)n * MAP_BYTES);
    if (rc) goto out;
    /* A granule is free when it is free on every rank. */
    for (int r = 1; r < c->size; r++)
      for (size_t b = 0; b < (size_t)n * MAP_BYTES; b++) all[b] |= all[(size_t)r * n * MAP_BYTES + b];
    for (int i = 0; i < n; i++) {
      const uint8_t *map = all + (size_t)i * MAP_BYTES;
      for (int start = 0, run = 0; start + need <= GRANULES;) {
        if (is_used(map, start + run)) {
          start += run + 1;
          run = 0;
          continue;
        }
        if (++run == need) {
          for (int g = start; g < start + need; g++) set_used(c->pad_arenas[i].used, g, true);
          *slot = (mori_pad_slot_t){.arena = i, .offset = (size_t)start * GRANULE, .bytes = bytes};
          goto out;
        }
      }
    }
  }
  /* Every arena is full on some rank: all ranks add one together. */
  rc = add_arena(c);
  if (!rc) {
    for (int g = 0; g < need; g++) set_used(c->pad_arenas[n].used, g, true);
    *slot = (mori_pad_slot_t){.arena = n, .offset = 0, .bytes = bytes};
  }
out:
  free(mine);
  free(all);
  return rc;
}

void mori_pad_release(mori_comm_t *c, const mori_pad_slot_t *slot) {
  if (slot->arena < 0 || slot->arena >= c->num_pad_arenas || slot->bytes == 0) return;
  mori_pad_arena_t *a = &c->pad_arenas[slot->arena];
  /* Pads must read zero when handed out again (torch's protocol). */
  char *local = (char *)mori_window_local_ptr(a->window) + slot->offset;
  if (mori_platform_memset_zero(local, slot->bytes) != 0) MORI_WARN("signal pad: %s", mori_last_error());
  int first = (int)(slot->offset / GRANULE), count = (int)((slot->bytes + GRANULE - 1) / GRANULE);
  for (int g = first; g < first + count; g++) set_used(a->used, g, false);
}

void *mori_pad_peer_ptr(mori_comm_t *c, const mori_pad_slot_t *slot, int peer) {
  char *base = mori_window_peer_ptr(c->pad_arenas[slot->arena].window, peer);
  return base ? base + slot->offset : NULL;
}

void mori_pad_flat(mori_comm_t *c, const mori_pad_slot_t *slot, uint64_t *base, uint64_t *stride) {
  mori_window_t *w = c->pad_arenas[slot->arena].window;
  *base = (uint64_t)(uintptr_t)mori_window_slot(w, 0) + slot->offset;
  *stride = mori_window_stride(w);
}

void mori_pad_arenas_destroy(mori_comm_t *c) {
  for (int i = 0; i < c->num_pad_arenas; i++) {
    if (!c->pad_arenas[i].window) continue;
    mori_window_destroy(c->pad_arenas[i].window);
    c->pad_arenas[i].window = NULL;
  }
  free(c->pad_arenas);
  c->pad_arenas = NULL;
  c->num_pad_arenas = 0;
}
