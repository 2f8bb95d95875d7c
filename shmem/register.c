// SPDX-License-Identifier: MIT
/* Registering memory shmem did not allocate: the buffer becomes a window
 * of its own over the PEs (collective), so peers reach it through the
 * comm's transports. Memory mori already knows (an allocation of mori's
 * own API, e.g. the torch backend's) is used as it is; other memory is
 * adopted with mori_mem_register (a mapping adopted whole serves every
 * buffer registered in it, and is released with the last of them).
 * Deregistering is local. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/checked_math.h"
#include "core/base/error.h"
#include "mori/mem.h"
#include "shmem/internal/state.h"

/* Memory mori did not allocate, adopted without a copy. A virtual-memory
 * mapping (hipMemMap / cuMemMap, or on the host platform a shared file
 * mapping) is adopted whole; memory of the runtime's plain allocator
 * (hipMalloc / cudaMalloc: what torch's caching allocator hands out, and so
 * what the Shmem Guide's own example registers) has no such handle and is
 * adopted as the range itself, reached by peers through the runtime's IPC
 * handle of its allocation. Both reasons are kept when neither works. */
static int adopt(void *ptr, size_t size, void **adopted) {
  void *base = NULL;
  int rc = mori_mem_register(ptr, NULL, &base);
  if (rc == 0) {
    *adopted = base;
    return 0;
  }
  if (rc != MORI_ENOT_OWNED) return mori_error_context(rc, "shmem_buffer_register");
  char vmm_reason[512];
  snprintf(vmm_reason, sizeof(vmm_reason), "%s", mori_last_error());
  mori_clear_error();
  rc = mori_mem_register_range(ptr, size, NULL);
  if (rc == 0) {
    *adopted = ptr;
    return 0;
  }
  /* Copied first: the message written next is built in the same buffer. */
  char range_reason[512];
  snprintf(range_reason, sizeof(range_reason), "%s", mori_last_error());
  return mori_error_set(rc, "shmem_buffer_register: PE %d cannot share [%p, +%zu bytes): not a virtual-memory mapping (%s), "
                            "and not memory of the runtime's allocator either (%s)",
                        mori_shmem.rank, ptr, size, vmm_reason, range_reason);
}

/* Whether a registered block other than `except` holds the adoption at
 * `adopted`: a mapping adopted whole serves every buffer registered in it,
 * and goes with the last of them. */
static bool adoption_held(const void *adopted, const mori_shmem_block_t *except) {
  for (const mori_shmem_block_t *b = mori_shmem.blocks; b; b = b->next)
    if (b != except && b->registered && b->adopted == adopted) return true;
  return false;
}

/* This PE's side: the checks, the memory adopted for the window (*adopted:
 * by this call, freed if the registration fails; *shared: an earlier
 * registration's adoption of the same mapping, kept), and where the buffer
 * sits in the memory the window covers. */
static int prepare(void *ptr, size_t size, void **adopted, void **shared, uint64_t *offset) {
  *adopted = NULL;
  *shared = NULL;
  *offset = 0;
  if (!ptr || size == 0) return mori_error_set(MORI_EINVAL, "shmem_buffer_register: pointer %p, %zu bytes", ptr, size);
  size_t end;
  if (mori_add_overflows((size_t)(uintptr_t)ptr, size, &end))
    return mori_error_set(MORI_ERANGE, "shmem_buffer_register: [%p, +%zu bytes) runs past the end of the address space", ptr,
                          size);
  mori_shmem_block_t *b = mori_shmem_find_overlap(ptr, size);
  if (b)
    return mori_error_set(MORI_EEXIST, "shmem_buffer_register: [%p, +%zu) overlaps %s at %p", ptr, size,
                          b->registered ? "a registered buffer" : "a shmem allocation", b->base);
  mori_mem_info_t info;
  int rc = 0;
  if (mori_mem_query(ptr, &info) != 0) {
    mori_clear_error();
    if ((rc = adopt(ptr, size, adopted)) != 0) return rc;
    rc = mori_mem_query(ptr, &info);
  } else if (adoption_held(info.base, NULL)) {
    *shared = info.base;
  }
  if (!rc && (info.offset > info.size || size > info.size - info.offset))
    rc = mori_error_set(MORI_EINVAL, "shmem_buffer_register: %zu bytes at %p run past the end of its mapping (%zu bytes at %p)",
                        size, ptr, info.size, info.base);
  if (rc && *adopted) {
    mori_mem_free(*adopted);
    *adopted = NULL;
  }
  if (!rc) *offset = info.offset;
  return rc;
}

/* Every PE's buffer with the same size at the same offset of its window's
 * memory: a peer's address is that peer's window base plus this PE's
 * offset (shmem_ptr_p2p, the address maps, the device API), so a buffer
 * placed otherwise on some PE would be reached at the wrong bytes there.
 * Decided on every PE from the same table, so all fail together. */
static int agree_placement(int status, uint64_t offset, uint64_t size) {
  int n = mori_shmem.npes;
  uint64_t mine[2] = {offset, size};
  uint64_t *all = calloc((size_t)n, sizeof(mine));
  if (!all && !status) status = mori_error_set(MORI_ENOMEM, "shmem_buffer_register: PE %d's table", mori_shmem.rank);
  /* With a failed PE `all` is not written (nor needed: NULL is fine). */
  int rc = mori_agree_gather(mori_shmem.comm, status, MORI_SHMEM_REGISTER_STEP, mine, all, sizeof(mine));
  for (int pe = 1; !rc && pe < n; pe++) {
    unsigned long long o = all[2 * pe], s = all[2 * pe + 1], o0 = all[0], s0 = all[1];
    if (s != s0)
      rc = mori_error_set(MORI_EMISMATCH,
                          "shmem_buffer_register: PE %d registers %llu bytes, PE 0 %llu (a registered buffer has the same "
                          "size on every PE)",
                          pe, s, s0);
    else if (o != o0)
      rc = mori_error_set(MORI_EMISMATCH,
                          "shmem_buffer_register: PE %d's buffer starts %llu bytes into its allocation, PE 0's %llu bytes: "
                          "peers would be reached at the wrong place (register buffers at the same offset of same-sized "
                          "allocations, e.g. each allocation whole)",
                          pe, o, o0);
  }
  free(all);
  return rc;
}

int shmem_buffer_register(void *ptr, size_t size) {
  int rc = mori_shmem_lock_initialized("shmem_buffer_register");
  if (rc) return rc;
  void *adopted = NULL, *shared = NULL;
  mori_window_t *win = NULL;
  uint64_t offset = 0;
  int status = prepare(ptr, size, &adopted, &shared, &offset);
  rc = agree_placement(status, offset, size);
  if (!rc) rc = mori_window_create(mori_shmem.comm, ptr, &win); /* fails together */
  mori_shmem_block_t *b = NULL;
  if (!rc) {
    b = calloc(1, sizeof(*b));
    rc = mori_shmem_agree(mori_shmem.comm, b ? 0 : mori_error_set(MORI_ENOMEM, "bookkeeping"), "shmem_buffer_register");
  }
  if (!rc) {
    b->adopted = adopted ? adopted : shared;
    b->registered = true;
  }
  rc = mori_shmem_keep_block(rc, b, ptr, size, win, adopted);
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}

int shmem_buffer_deregister(void *ptr, size_t size) {
  pthread_mutex_lock(&mori_shmem.lock);
  int rc = 0;
  mori_shmem_block_t *b = mori_shmem.initialized ? mori_shmem_find_block(ptr) : NULL;
  if (!mori_shmem.initialized) rc = mori_shmem_not_initialized("shmem_buffer_deregister");
  else if (!b || !b->registered || b->base != ptr)
    rc = mori_error_set(b ? MORI_EINVAL : MORI_ENOT_OWNED, "shmem_buffer_deregister: %p is not a registered buffer%s", ptr,
                        b && !b->registered ? " (it is a shmem allocation: use shmem_free)"
                        : b                 ? " (it is inside the one registered at its base: deregister that)"
                                            : "");
  else if (b->size != size)
    rc = mori_error_set(MORI_EINVAL, "shmem_buffer_deregister: %p was registered with %zu bytes, not %zu", ptr, b->size, size);
  if (!rc) {
    mori_shmem_remove_block(b);
    rc = mori_window_destroy(b->win);
    if (!rc && b->adopted && !adoption_held(b->adopted, NULL)) rc = mori_mem_free(b->adopted);
    free(b);
  }
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}
