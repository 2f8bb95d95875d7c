// SPDX-License-Identifier: MIT
/* Host-side address translation: a pointer into a shmem allocation or a
 * registered buffer, on another PE, through that block's window. */
#include "core/base/error.h"
#include "shmem/internal/state.h"

void *shmem_ptr_p2p(const void *ptr, int my_pe, int dest_pe) {
  pthread_mutex_lock(&mori_shmem.lock);
  void *at = NULL;
  mori_shmem_block_t *b = NULL;
  if (!mori_shmem.initialized) mori_shmem_not_initialized("shmem_ptr_p2p");
  else if (my_pe != mori_shmem.rank)
    mori_error_set(MORI_EINVAL, "shmem_ptr_p2p: my_pe %d is not this PE (%d)", my_pe, mori_shmem.rank);
  else if (dest_pe < 0 || dest_pe >= mori_shmem.npes)
    mori_error_set(MORI_EINVAL, "shmem_ptr_p2p: dest_pe %d outside [0, %d)", dest_pe, mori_shmem.npes);
  else if (!(b = mori_shmem_find_block(ptr)))
    mori_error_set(MORI_ENOT_OWNED, "shmem_ptr_p2p: %p is not in a shmem allocation or registered buffer", ptr);
  else if (dest_pe == my_pe)
    at = (void *)ptr;
  else {
    char *peer = mori_window_peer_ptr(b->win, dest_pe);
    if (peer) at = peer + ((const char *)ptr - (const char *)mori_window_local_ptr(b->win));
    else mori_error_set(MORI_EUNREACHABLE, "shmem_ptr_p2p: PE %d is not reached by load/store from PE %d", dest_pe, my_pe);
  }
  pthread_mutex_unlock(&mori_shmem.lock);
  return at;
}

int mori_shmem_window(const void *ptr, mori_window_t **out) {
  if (!out) return mori_error_set(MORI_EINVAL, "mori_shmem_window: out is NULL");
  pthread_mutex_lock(&mori_shmem.lock);
  *out = NULL;
  int rc = 0;
  mori_shmem_block_t *b = NULL;
  if (!mori_shmem.initialized) rc = mori_shmem_not_initialized("mori_shmem_window");
  else if (!(b = mori_shmem_find_block(ptr)))
    rc = mori_error_set(MORI_ENOT_OWNED, "mori_shmem_window: %p is not in a shmem allocation or registered buffer", ptr);
  else *out = b->win;
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}
