// SPDX-License-Identifier: MIT
/* The opens of legacy IPC handles in this process (ipc_cache.c). A runtime
 * maps one allocation's IPC handle once per process and refuses a second
 * open, yet two windows may well lie in one peer allocation (torch's
 * caching allocator packs many tensors into one cudaMalloc): opens are
 * counted here, keyed by the handle's bytes and the device. */
#ifndef MORI_CORE_PLATFORM_IPC_CACHE_H
#define MORI_CORE_PLATFORM_IPC_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mori/types.h"

/* Locks the cache; every call below needs it held, so that a lookup and
 * the open that follows a miss happen as one step. */
void mori_ipc_cache_lock(void);
void mori_ipc_cache_unlock(void);
/* The address this process opened `key` at on `device` (one more use), or
 * NULL. */
void *mori_ipc_cache_acquire(const uint8_t key[MORI_FABRIC_BLOB_SIZE], int device);
/* Remembers a fresh open (one use). 0 or MORI_ENOMEM. */
int mori_ipc_cache_insert(const uint8_t key[MORI_FABRIC_BLOB_SIZE], int device, void *base, size_t size);
/* Drops one use of the open at `base`; *last says whether it was the last
 * (then the caller unmaps *size bytes). MORI_ENOENT when nothing was opened
 * there. */
int mori_ipc_cache_release(int device, void *base, bool *last, size_t *size);

#endif
