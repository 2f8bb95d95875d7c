// SPDX-License-Identifier: MIT
/* A window's flat span over the whole comm, for contiguous views: the LSA
 * flat arithmetic of the window's view, offered only where it reaches every
 * rank (the LSA team is the world) and where the ranks' placements agree
 * (window.c leaves flat_stride 0 for heap carves at different offsets). */
#include <string.h>

#include "core/base/error.h"
#include "core/internal/window.h"
#include "core/internal/window_live.h"

int mori_window_flat_span(const mori_window_t *w, mori_flat_span_t *out) {
  if (!w || !out) return mori_error_set(MORI_EINVAL, "window_flat_span: window and out are required");
  memset(out, 0, sizeof(*out));
  /* Nothing of a destroyed window may be read: it is freed memory. */
  int live = mori_window_check_live(w, "window_flat_span");
  if (live) return live;
  const mori_comm_t *c = w->comm;
  size_t bytes = w->alloc->size;
  if (c->lsa_size != c->size)
    return mori_error_set(MORI_EUNREACHABLE,
                          "window_flat_span: rank %d reaches ranks [%d, %d) of the world of %d by load/store; a flat "
                          "span needs every rank in its load/store team",
                          c->rank, c->lsa_base, c->lsa_base + c->lsa_size, c->size);
  if ((!w->flat_stride || !w->flat_base) && !w->alloc->heap)
    return mori_error_set(MORI_ENOTSUP,
                          "window_flat_span: the window of %zu bytes on rank %d is over memory mori did not allocate "
                          "(%s handles), which each peer's runtime maps where it chooses, so it has no flat span; the "
                          "pointer tables reach every rank",
                          bytes, c->rank, mori_handle_type_name(w->alloc->local.mem.handle_type));
  if (!w->flat_stride || !w->flat_base)
    return mori_error_set(MORI_ENOTSUP,
                          "window_flat_span: the window of %zu bytes on rank %d sits at different heap offsets on "
                          "different ranks, so it has no flat span (use MORI_SHMEM_MODE=isolation, or allocate at "
                          "equal offsets with shmem_malloc; the pointer tables reach every rank either way)",
                          bytes, c->rank);
  /* The LSA team is the world, so LSA index p is world rank p. */
  out->base = w->flat_base;
  out->stride = w->flat_stride;
  out->bytes = bytes;
  out->span = (uint64_t)(c->size - 1) * w->flat_stride + bytes;
  out->world_size = c->size;
  return 0;
}
