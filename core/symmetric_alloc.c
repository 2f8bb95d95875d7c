// SPDX-License-Identifier: MIT
/* Symmetric allocation (mori_mem_alloc_symmetric, the shmem model without a
 * window): every rank of a comm allocates the same size in the same order,
 * and the carve must sit at the same offset of every rank's heap, so that
 * one offset names the buffer on every rank. Each rank carves locally; one
 * agreement step carrying {size, offset} checks it (agreement.c); a rank
 * whose sequence diverged (another size, or a heap whose history put the
 * carve elsewhere) makes every rank fail, naming the ranks and their
 * offsets, and nothing stays allocated. shmem_malloc does not come here:
 * its window's rendezvous checks the same (window_terms.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/trace.h"
#include "core/internal/agreement.h"
#include "core/internal/alloc.h"
#include "core/internal/alloc_discard.h"
#include "core/internal/comm.h"
#include "core/internal/comm_live.h"
#include "mori/heap.h"

struct placement {
  uint64_t size, offset; /* offset from the heap's base */
  /* Agreed too: alignments that differ carve blocks of different sizes at
   * the same offset, and only the next allocation would then fail. */
  uint64_t alignment;
};

int mori_mem_alloc_symmetric(mori_comm_t *comm, size_t size, const mori_mem_attr_t *attr, void **out) {
  MORI_TRACE_SCOPE("mem_alloc_symmetric", MORI_TA("bytes", size));
  if (!comm || !out) return mori_error_set(MORI_EINVAL, "mem_alloc_symmetric: comm and out are required");
  *out = NULL;
  /* Nothing of a destroyed comm may be read: it is freed memory. */
  int live = mori_comm_check_live(comm, "mem_alloc_symmetric");
  if (live) return live;
  mori_mem_attr_t local;
  mori_mem_attr_init(&local);
  if (attr) local = *attr;
  local.device = comm->device;
  void *ptr = NULL;
  struct placement me = {size, 0, local.alignment ? local.alignment : MORI_MEM_DEFAULT_ALIGNMENT};
  int status = mori_mem_alloc(size, &local, &ptr);
  if (!status) {
    mori_alloc_t *a = mori_alloc_acquire(ptr);
    if (a && a->heap) {
      me.offset = (uint64_t)a->block.chunk * mori_heap_chunk_size(a->heap) + a->block.offset;
    } else {
      status = mori_error_set(MORI_ENOTSUP,
                              "mem_alloc_symmetric of %zu bytes on rank %d: symmetric offsets need the heap "
                              "(MORI_SHMEM_MODE=static or vmm, and at most one chunk)",
                              size, comm->rank);
    }
    mori_alloc_release(a);
  }
  struct placement *all = calloc((size_t)comm->size, sizeof(*all));
  if (!all && !status) status = mori_error_set(MORI_ENOMEM, "mem_alloc_symmetric: rank %d's table", comm->rank);
  int rc = mori_agree_gather(comm, status, "mem_alloc_symmetric", &me, all, sizeof(me));
  for (int r = 1; !rc && r < comm->size; r++)
    if (all[r].size != all[0].size)
      rc = mori_error_set(MORI_EMISMATCH, "mem_alloc_symmetric: rank %d asked for %llu bytes, rank 0 for %llu", r,
                          (unsigned long long)all[r].size, (unsigned long long)all[0].size);
  for (int r = 1; !rc && r < comm->size; r++)
    if (all[r].alignment != all[0].alignment)
      rc = mori_error_set(MORI_EMISMATCH, "mem_alloc_symmetric of %llu bytes: rank %d asked for alignment %llu, rank 0 for %llu",
                          (unsigned long long)all[0].size, r, (unsigned long long)all[r].alignment,
                          (unsigned long long)all[0].alignment);
  for (int r = 1; !rc && r < comm->size; r++)
    if (all[r].offset != all[0].offset)
      rc = mori_error_set(MORI_EMISMATCH,
                          "mem_alloc_symmetric of %llu bytes: rank %d's carve is at heap offset %llu, rank 0's at %llu "
                          "(the ranks' allocation sequences diverged)",
                          (unsigned long long)all[0].size, r, (unsigned long long)all[r].offset,
                          (unsigned long long)all[0].offset);
  free(all);
  if (rc) {
    if (ptr) {
      mori_error_saved_t cause;
      mori_error_save(&cause);
      mori_alloc_discard(ptr); /* never handed out: not left pending, which would shift this rank's next carve */
      mori_error_restore(&cause);
    }
    return rc;
  }
  *out = ptr;
  return 0;
}
