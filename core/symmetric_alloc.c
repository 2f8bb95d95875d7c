// SPDX-License-Identifier: MIT
/* Symmetric allocation (the shmem model, shmem_malloc): every rank of a comm
 * allocates the same size in the same order, and the carve must sit at the
 * same offset of every rank's heap, so that one offset names the buffer on
 * every rank. Each rank carves locally; one allgather of {status, size,
 * offset} checks it; a rank whose sequence diverged (another size, or a
 * heap whose history put the carve elsewhere) makes every rank fail, naming
 * the ranks and their offsets, and nothing stays allocated. Above mem.c
 * and comm.c: neither knows of the other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/internal/alloc.h"
#include "core/internal/comm.h"
#include "mori/heap.h"

struct placement {
  int32_t rc;
  int32_t reserved;
  uint64_t size, offset; /* offset from the heap's base */
  char why[176];         /* a failed rank's own message, for every rank's */
};

int mori_mem_alloc_symmetric(mori_comm_t *comm, size_t size, const mori_mem_attr_t *attr, void **out) {
  if (!comm || !out) return mori_error_set(MORI_EINVAL, "mem_alloc_symmetric: comm and out are required");
  *out = NULL;
  mori_mem_attr_t local;
  mori_mem_attr_init(&local);
  if (attr) local = *attr;
  local.device = comm->device;
  void *ptr = NULL;
  struct placement me = {0, 0, size, 0, ""};
  me.rc = mori_mem_alloc(size, &local, &ptr);
  if (!me.rc) {
    mori_alloc_t *a = mori_alloc_acquire(ptr);
    if (a && a->heap) {
      me.offset = (uint64_t)a->block.chunk * mori_heap_chunk_size(a->heap) + a->block.offset;
    } else {
      me.rc = mori_error_set(MORI_ENOTSUP,
                             "mem_alloc_symmetric of %zu bytes on rank %d: symmetric offsets need the heap "
                             "(MORI_SHMEM_MODE=static or vmm, and at most one chunk)",
                             size, comm->rank);
    }
    mori_alloc_release(a);
  }
  char own[512];
  snprintf(own, sizeof(own), "%s", me.rc ? mori_last_error() : "");
  snprintf(me.why, sizeof(me.why), "%s", own);
  struct placement *all = calloc((size_t)comm->size, sizeof(*all));
  int rc = all ? mori_comm_allgather(comm, &me, all, sizeof(me)) : mori_error_set(MORI_ENOMEM, "mem_alloc_symmetric");
  /* This rank's own failure first (its message says why), else the first
   * rank that failed. */
  if (!rc && me.rc) rc = mori_error_set(me.rc, "%s", own);
  for (int r = 0; !rc && r < comm->size; r++)
    if (all[r].rc)
      rc = mori_error_set(all[r].rc, "mem_alloc_symmetric: rank %d failed (%s: %.*s)", r, mori_err_name(all[r].rc),
                          (int)sizeof(all[r].why), all[r].why);
  for (int r = 1; !rc && r < comm->size; r++)
    if (all[r].size != all[0].size)
      rc = mori_error_set(MORI_EMISMATCH, "mem_alloc_symmetric: rank %d asked for %llu bytes, rank 0 for %llu", r,
                          (unsigned long long)all[r].size, (unsigned long long)all[0].size);
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
      char msg[512];
      snprintf(msg, sizeof(msg), "%s", mori_last_error());
      mori_mem_free(ptr);
      mori_error_set(rc, "%s", msg);
    }
    return rc;
  }
  *out = ptr;
  return 0;
}
