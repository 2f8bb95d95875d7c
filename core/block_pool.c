// SPDX-License-Identifier: MIT
/* See internal/block_pool.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/internal/block_pool.h"
#include "mori/device/impl/window__types.h"
#include "core/platform/platform.h"

/* Pinned blocks are 64 bytes (mori_device_control_t) in 4 KiB pages;
 * device blocks are a power of two from 256 bytes up, in pages of 64 KiB
 * (or one block, when larger). Up to RECLAIM_PAGES pages are added to a
 * pool before returned blocks are reclaimed, which waits for the device. */
enum {
  PINNED_BLOCK = 64,
  PINNED_PAGE = 4096,
  DEVICE_MIN_SHIFT = 8,
  DEVICE_MAX_SHIFT = 24,
  DEVICE_PAGE = 64 << 10,
  POOLS = 1 + DEVICE_MAX_SHIFT - DEVICE_MIN_SHIFT + 1, /* pool 0: pinned; pool 1 + k: device blocks of 256 << k */
  RECLAIM_PAGES = 64,
};
MORI_STATIC_ASSERT(sizeof(mori_device_control_t) <= PINNED_BLOCK, "a control block fits a pinned block");

typedef struct page {
  char *host, *dev;
  struct page *next;
  mori_pool_block_t blocks[]; /* the page's blocks */
} page_t;

typedef struct pool {
  page_t *pages;
  int npages;
  mori_pool_block_t *free_blocks, *pending;
} pool_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_t pools[MORI_MAX_DEVICES][POOLS];
static int gets_to_pass, gets_to_fail; /* injected failures (tests); under pool_lock */

void mori_block_pool_fail_gets(int skip, int count) {
  pthread_mutex_lock(&pool_lock);
  gets_to_pass = skip;
  gets_to_fail = count;
  pthread_mutex_unlock(&pool_lock);
}

static size_t block_bytes(int pool) { return pool == 0 ? PINNED_BLOCK : (size_t)1 << (DEVICE_MIN_SHIFT + pool - 1); }
static size_t page_bytes(int pool) {
  if (pool == 0) return PINNED_PAGE;
  return block_bytes(pool) > DEVICE_PAGE ? block_bytes(pool) : DEVICE_PAGE;
}

/* The pool for `bytes` of `kind`, or -1 when no block is that large. */
static int pool_for(mori_pool_kind_t kind, size_t bytes) {
  if (kind == MORI_POOL_PINNED) return bytes <= PINNED_BLOCK ? 0 : -1;
  for (int shift = DEVICE_MIN_SHIFT; shift <= DEVICE_MAX_SHIFT; shift++)
    if (bytes <= (size_t)1 << shift) return 1 + shift - DEVICE_MIN_SHIFT;
  return -1;
}

static void free_page(int device, int pool, page_t *pg) {
  if (pool == 0) mori_platform_host_free_mapped(pg->host);
  else mori_platform_device_free(device, pg->dev);
  free(pg);
}

static int add_page(int device, int pool) {
  pool_t *p = &pools[device][pool];
  size_t count = page_bytes(pool) / block_bytes(pool);
  page_t *pg = calloc(1, sizeof(*pg) + count * sizeof(mori_pool_block_t));
  if (!pg) return mori_error_set(MORI_ENOMEM, "block pool: a page's bookkeeping");
  int rc = pool == 0 ? mori_platform_host_alloc_mapped(device, PINNED_PAGE, (void **)&pg->host, (void **)&pg->dev)
                     : mori_platform_device_alloc(device, page_bytes(pool), (void **)&pg->dev);
  if (rc) {
    free(pg);
    return mori_error_context(rc, "block pool: a page of %zu bytes on device %d", page_bytes(pool), device);
  }
  if (pg->host) memset(pg->host, 0, page_bytes(pool));
  for (size_t i = 0; i < count; i++) {
    size_t at = i * block_bytes(pool);
    pg->blocks[i] = (mori_pool_block_t){pg->host ? pg->host + at : NULL, pg->dev + at, p->free_blocks, pool};
    p->free_blocks = &pg->blocks[i];
  }
  pg->next = p->pages;
  p->pages = pg;
  p->npages++;
  return 0;
}

/* Returned blocks become free once every kernel that could use them is
 * done: after a device synchronisation. Pinned blocks are zeroed (a fresh
 * window's mailbox and abort flag read zero). */
static int reclaim(int device, pool_t *p, int pool) {
  int rc = mori_platform_synchronize(device);
  while (!rc && p->pending) {
    mori_pool_block_t *b = p->pending;
    p->pending = b->next;
    if (pool == 0) memset(b->host, 0, PINNED_BLOCK);
    b->next = p->free_blocks;
    p->free_blocks = b;
  }
  return rc;
}

int mori_pool_block_get(int device, mori_pool_kind_t kind, size_t bytes, mori_pool_block_t **out) {
  *out = NULL;
  if (device < 0 || device >= MORI_MAX_DEVICES) return mori_error_set(MORI_EINVAL, "block pool: device %d", device);
  int pool = pool_for(kind, bytes);
  if (pool < 0)
    return mori_error_set(MORI_ENOTSUP, "block pool: %zu bytes of %s memory is more than a block holds", bytes,
                          kind == MORI_POOL_PINNED ? "pinned" : "device");
  pthread_mutex_lock(&pool_lock);
  pool_t *p = &pools[device][pool];
  int rc = 0;
  if (gets_to_pass > 0) gets_to_pass--;
  else if (gets_to_fail > 0 && gets_to_fail--)
    rc = mori_error_set(MORI_ENOMEM, "block pool: no %zu-byte block on device %d (injected by a test)", bytes, device);
  if (!rc && !p->free_blocks && p->pending && p->npages >= RECLAIM_PAGES) rc = reclaim(device, p, pool);
  if (!rc && !p->free_blocks) rc = add_page(device, pool);
  if (!rc) {
    *out = p->free_blocks;
    p->free_blocks = (*out)->next;
  }
  pthread_mutex_unlock(&pool_lock);
  return rc;
}

void mori_pool_block_put(int device, mori_pool_block_t *b) {
  if (!b || device < 0 || device >= MORI_MAX_DEVICES || b->pool < 0 || b->pool >= POOLS) return;
  pthread_mutex_lock(&pool_lock);
  pool_t *p = &pools[device][b->pool];
  b->next = p->pending;
  p->pending = b;
  pthread_mutex_unlock(&pool_lock);
}

void mori_block_pools_destroy_all(void) {
  pthread_mutex_lock(&pool_lock);
  for (int d = 0; d < MORI_MAX_DEVICES; d++)
    for (int k = 0; k < POOLS; k++) {
      pool_t *p = &pools[d][k];
      while (p->pages) {
        page_t *pg = p->pages;
        p->pages = pg->next;
        free_page(d, k, pg);
      }
      p->free_blocks = p->pending = NULL;
      p->npages = 0;
    }
  pthread_mutex_unlock(&pool_lock);
}
