// SPDX-License-Identifier: MIT
/* See ipc_cache.h. A list: a process opens few peer allocations. */
#include "core/platform/ipc_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"

struct ipc_open {
  struct ipc_open *next;
  uint8_t key[MORI_FABRIC_BLOB_SIZE];
  int device;
  void *base;
  size_t size;
  int uses;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ipc_open *opens;

void mori_ipc_cache_lock(void) { pthread_mutex_lock(&cache_lock); }
void mori_ipc_cache_unlock(void) { pthread_mutex_unlock(&cache_lock); }

void *mori_ipc_cache_acquire(const uint8_t key[MORI_FABRIC_BLOB_SIZE], int device) {
  for (struct ipc_open *o = opens; o; o = o->next)
    if (o->device == device && !memcmp(o->key, key, MORI_FABRIC_BLOB_SIZE)) {
      o->uses++;
      return o->base;
    }
  return NULL;
}

int mori_ipc_cache_insert(const uint8_t key[MORI_FABRIC_BLOB_SIZE], int device, void *base, size_t size) {
  struct ipc_open *o = calloc(1, sizeof(*o));
  if (!o) return mori_error_set(MORI_ENOMEM, "legacy IPC: bookkeeping of an open");
  memcpy(o->key, key, MORI_FABRIC_BLOB_SIZE);
  o->device = device;
  o->base = base;
  o->size = size;
  o->uses = 1;
  o->next = opens;
  opens = o;
  return 0;
}

int mori_ipc_cache_release(int device, void *base, bool *last, size_t *size) {
  for (struct ipc_open **p = &opens; *p; p = &(*p)->next) {
    struct ipc_open *o = *p;
    if (o->device != device || o->base != base) continue;
    *size = o->size;
    *last = --o->uses == 0;
    if (*last) {
      *p = o->next;
      free(o);
    }
    return 0;
  }
  return mori_error_set(MORI_ENOENT, "legacy IPC: nothing of device %d was opened at %p", device, base);
}
