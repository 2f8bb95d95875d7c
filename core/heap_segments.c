// SPDX-License-Identifier: MIT
/* See internal/heap_segments.h. */
#include <stdlib.h>

#include "core/base/error.h"
#include "core/base/trace.h"
#include "core/internal/agreement.h"
#include "core/internal/heap_segments.h"

struct mori_heap_segments {
  mori_segment_t **segments;
  int count, cap;
};

int mori_heap_segments_ensure(mori_comm_t *c, mori_heap_t *heap, int chunks, int local_rc) {
  MORI_TRACE_SCOPE("heap_map_chunks", MORI_TA("chunks", chunks), MORI_TA("status", local_rc));
  struct mori_heap_segments *s = c->heap_segments;
  int rc = local_rc;
  if (!s) {
    s = calloc(1, sizeof(*s));
    if (!s) {
      /* Every rank is at zero segments here (they are made together): take
       * part in the first one, failing, as the others would in the loop. */
      if (!rc) rc = mori_error_set(MORI_ENOMEM, "heap segments: rank %d's table", c->rank);
      if (chunks <= 0) return mori_agree(c, rc, "mapping heap chunks");
      mori_segment_t *seg = NULL;
      return mori_error_context(mori_segment_create(c, NULL, NULL, 0, rc, &seg), "mapping heap chunk 0 across the comm");
    }
    c->heap_segments = s;
  }
  if (chunks > s->cap) {
    int cap = chunks > 2 * s->cap ? chunks : 2 * s->cap;
    mori_segment_t **grown = realloc(s->segments, sizeof(*grown) * (size_t)cap);
    if (grown) {
      s->segments = grown;
      s->cap = cap;
    } else if (!rc) {
      rc = mori_error_set(MORI_ENOMEM, "heap segments: table of %d", chunks);
    }
  }
  if (s->count >= chunks) return mori_agree(c, rc, "mapping heap chunks");
  /* Every rank has the same count: segments are made together, in order. */
  while (s->count < chunks) {
    int k = s->count;
    mori_pmem_t mem;
    void *base = NULL;
    bool mine = !rc && heap && k < mori_heap_chunk_count(heap);
    if (mine) mori_heap_chunk(heap, k, &mem, &base);
    else if (!rc) rc = mori_error_set(MORI_EINVAL, "heap segments: chunk %d is not mapped on rank %d", k, c->rank);
    mori_segment_t *seg = NULL;
    int seg_rc = mori_segment_create(c, mine ? &mem : NULL, base, mine ? mori_heap_chunk_size(heap) : 0, rc, &seg);
    if (seg_rc) return mori_error_context(seg_rc, "mapping heap chunk %d across the comm", k);
    s->segments[s->count++] = seg;
  }
  return 0;
}

int mori_heap_segments_count(const mori_comm_t *c) {
  const struct mori_heap_segments *s = c->heap_segments;
  return s ? s->count : 0;
}

mori_segment_t *mori_heap_segment(mori_comm_t *c, int k) { return c->heap_segments->segments[k]; }

void mori_heap_segments_destroy_all(mori_comm_t *c) {
  struct mori_heap_segments *s = c->heap_segments;
  if (!s) return;
  for (int k = s->count - 1; k >= 0; k--) mori_segment_destroy(s->segments[k]);
  free(s->segments);
  free(s);
  c->heap_segments = NULL;
}
