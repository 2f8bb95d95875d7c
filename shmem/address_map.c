// SPDX-License-Identifier: MIT
/* Address maps of shmem allocations: the map of the allocation's window
 * (its device table was written when shmem_malloc made the window, so a
 * map costs no allocation and lives exactly as long as the allocation),
 * with shmem's own reasons for a pointer that is not in a live one. */
#include "core/base/error.h"
#include "mori/address_map.h"
#include "shmem/internal/state.h"

/* The live block holding ptr, or the error saying why there is none
 * (under the lock). */
static int find(const char *call, const void *ptr, mori_shmem_block_t **out) {
  *out = NULL;
  if (!mori_shmem.initialized) return mori_shmem_not_initialized(call);
  if ((*out = mori_shmem_find_block(ptr)) != NULL) return 0;
  const void *base = NULL;
  size_t size = 0;
  if (mori_shmem_was_freed(ptr, &base, &size))
    return mori_error_set(MORI_ENOT_OWNED, "%s: %p is in the allocation at %p (%zu bytes) that PE %d freed with shmem_free",
                          call, ptr, base, size, mori_shmem.rank);
  return mori_error_set(MORI_ENOT_OWNED, "%s: %p is not inside a live shmem allocation or registered buffer on PE %d",
                        call, ptr, mori_shmem.rank);
}

int mori_shmem_address_map(const void *ptr, mori_address_map_t *out) {
  if (!out) return mori_error_set(MORI_EINVAL, "mori_shmem_address_map: out is NULL");
  pthread_mutex_lock(&mori_shmem.lock);
  mori_shmem_block_t *b = NULL;
  int rc = find("mori_shmem_address_map", ptr, &b);
  if (!rc) rc = mori_window_address_map(b->win, out);
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}

int mori_shmem_translate(const void *ptr, int pe, void **out) {
  if (!out) return mori_error_set(MORI_EINVAL, "mori_shmem_translate: out is NULL");
  *out = NULL;
  pthread_mutex_lock(&mori_shmem.lock);
  mori_shmem_block_t *b = NULL;
  int rc = find("mori_shmem_translate", ptr, &b);
  if (!rc && (pe < 0 || pe >= mori_shmem.npes))
    rc = mori_error_set(MORI_EINVAL, "mori_shmem_translate: PE %d is out of range (%d PEs)", pe, mori_shmem.npes);
  if (!rc) {
    char *peer = mori_window_peer_ptr(b->win, pe);
    if (peer) *out = peer + ((const char *)ptr - (const char *)mori_window_local_ptr(b->win));
    else
      rc = mori_error_set(MORI_EUNREACHABLE, "mori_shmem_translate: PE %d is not load/store reachable from PE %d", pe,
                          mori_shmem.rank);
  }
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}
