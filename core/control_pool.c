/* See internal/control_pool.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/internal/control_pool.h"
#include "core/platform/platform.h"

/* Up to RECLAIM_PAGES pages are added before returned blocks are reclaimed
 * (which waits for the device): 4096 windows' worth of churn per wait. */
enum { PAGE_BYTES = 4096, BLOCK_BYTES = 64, BLOCKS_PER_PAGE = PAGE_BYTES / BLOCK_BYTES, RECLAIM_PAGES = 64 };
MORI_STATIC_ASSERT(sizeof(mori_device_control_t) <= BLOCK_BYTES, "a control block fits its slot");

typedef mori_control_block_t block_t;

typedef struct page {
  char *host, *dev;
  block_t blocks[BLOCKS_PER_PAGE];
  struct page *next;
} page_t;

typedef struct pool {
  page_t *pages;
  int npages;
  block_t *free_blocks, *pending;
} pool_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_t pools[MORI_MAX_DEVICES];

static int add_page(int device, pool_t *p) {
  page_t *pg = calloc(1, sizeof(*pg));
  if (!pg) return mori_error_set(MORI_ENOMEM, "control blocks");
  int rc = mori_platform_host_alloc_mapped(device, PAGE_BYTES, (void **)&pg->host, (void **)&pg->dev);
  if (rc) {
    free(pg);
    return mori_error_context(rc, "control blocks of device %d", device);
  }
  memset(pg->host, 0, PAGE_BYTES);
  for (int i = 0; i < BLOCKS_PER_PAGE; i++) {
    pg->blocks[i] = (block_t){(mori_device_control_t *)(pg->host + i * BLOCK_BYTES),
                              (mori_device_control_t *)(pg->dev + i * BLOCK_BYTES), p->free_blocks};
    p->free_blocks = &pg->blocks[i];
  }
  pg->next = p->pages;
  p->pages = pg;
  p->npages++;
  return 0;
}

int mori_control_block_get(int device, mori_control_block_t **out) {
  if (device < 0 || device >= MORI_MAX_DEVICES) return mori_error_set(MORI_EINVAL, "control block: device %d", device);
  pthread_mutex_lock(&pool_lock);
  pool_t *p = &pools[device];
  int rc = 0;
  if (!p->free_blocks && p->pending && p->npages >= RECLAIM_PAGES) {
    /* Reuse what old windows returned once their kernels are surely done. */
    rc = mori_platform_synchronize(device);
    while (!rc && p->pending) {
      block_t *b = p->pending;
      p->pending = b->next;
      memset(b->host, 0, BLOCK_BYTES);
      b->next = p->free_blocks;
      p->free_blocks = b;
    }
  }
  if (!rc && !p->free_blocks) rc = add_page(device, p);
  if (!rc) {
    block_t *b = p->free_blocks;
    p->free_blocks = b->next;
    *out = b;
  }
  pthread_mutex_unlock(&pool_lock);
  return rc;
}

void mori_control_block_put(int device, mori_control_block_t *b) {
  if (!b || device < 0 || device >= MORI_MAX_DEVICES) return;
  pthread_mutex_lock(&pool_lock);
  pool_t *p = &pools[device];
  b->next = p->pending;
  p->pending = b;
  pthread_mutex_unlock(&pool_lock);
}

void mori_control_pool_destroy_all(void) {
  pthread_mutex_lock(&pool_lock);
  for (int d = 0; d < MORI_MAX_DEVICES; d++) {
    pool_t *p = &pools[d];
    while (p->pages) {
      page_t *pg = p->pages;
      p->pages = pg->next;
      mori_platform_host_free_mapped(pg->host);
      free(pg);
    }
    p->free_blocks = p->pending = NULL;
    p->npages = 0;
  }
  pthread_mutex_unlock(&pool_lock);
}
