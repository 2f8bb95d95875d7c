// SPDX-License-Identifier: MIT
/* The host platform's EP launcher: a call runs as `blocks` blocks of one
 * thread each, all at once (the calling thread is block 0, the others are
 * threads made for the call), so that the kernels' grid-wide parts (the
 * chunked list scan, the last block's arrival) run on the host as on a GPU. */
#include <pthread.h>
#include <stdio.h>

#include "collectives/ep_internal.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "mori/device/ep/dispatch_combine.h"

/* The threads made for a call wait for `go`: 1 once every one of them
 * exists, -1 when one could not be made (the call then runs as one block:
 * the kernels are right for any grid, and a grid with a block missing
 * would wait for it until the timeout). */
typedef struct host_start {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int go;
} host_start_t;

typedef struct host_block {
  const mori_ep_t *ep;
  const mori_ep_args_t *args;
  host_start_t *start;
  int combine;
  uint32_t block, grid;
  pthread_t thread;
  int rc;
} host_block_t;

static void run_block(host_block_t *b) {
  b->rc = b->combine ? mori_ep_combine_grid(&b->ep->view, b->args, b->block, b->grid)
                     : mori_ep_dispatch_grid(&b->ep->view, b->args, b->block, b->grid);
}

static void *block_thread(void *arg) {
  host_block_t *b = arg;
  pthread_mutex_lock(&b->start->lock);
  while (!b->start->go) pthread_cond_wait(&b->start->changed, &b->start->lock);
  int go = b->start->go;
  pthread_mutex_unlock(&b->start->lock);
  if (go > 0) run_block(b);
  return NULL;
}

static void set_go(host_start_t *start, int go) {
  pthread_mutex_lock(&start->lock);
  start->go = go;
  pthread_cond_broadcast(&start->changed);
  pthread_mutex_unlock(&start->lock);
}

/* The shape's blocks (1 when none is asked for), at most
 * MORI_EP_HOST_BLOCKS (default 1: a block_num tuned for a GPU would start
 * that many threads per rank, and on a CPU more threads than cores only
 * spin). */
static int launch(const mori_ep_t *ep, const mori_ep_args_t *a, mori_ep_shape_t shape, int combine) {
  uint32_t grid = shape.blocks ? shape.blocks : 1, most = ep->host_blocks > 0 ? (uint32_t)ep->host_blocks : 1;
  if (most > MORI_EP_HOST_MAX_BLOCKS) most = MORI_EP_HOST_MAX_BLOCKS;
  if (grid > most) grid = most;
  host_start_t start = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER, .go = 0};
  host_block_t blocks[MORI_EP_HOST_MAX_BLOCKS];
  for (uint32_t i = 0; i < grid; i++)
    blocks[i] = (host_block_t){.ep = ep, .args = a, .start = &start, .combine = combine, .block = i, .grid = grid};
  uint32_t made = 1;
  while (made < grid && pthread_create(&blocks[made].thread, NULL, block_thread, &blocks[made]) == 0) made++;
  if (grid > 1) set_go(&start, made == grid ? 1 : -1); /* one block (the default): no thread waits */
  if (made < grid) {
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
      MORI_WARN("ep: rank %d: starting block %u of %u as a thread failed; such a call runs as one block (said once)",
                ep->view.rank, made, grid);
    for (uint32_t i = 1; i < made; i++) pthread_join(blocks[i].thread, NULL);
    made = 1;
    blocks[0].grid = 1;
  }
  run_block(&blocks[0]);
  int rc = blocks[0].rc;
  for (uint32_t i = 1; i < made; i++) {
    pthread_join(blocks[i].thread, NULL);
    if (blocks[i].rc && !rc) rc = blocks[i].rc;
  }
  return rc ? mori_window_check(ep->win) : 0;
}

int mori_ep_launch_dispatch(const mori_ep_t *ep, const mori_ep_args_t *a, mori_ep_shape_t shape, void *stream) {
  (void)stream;
  return launch(ep, a, shape, 0);
}

int mori_ep_launch_combine(const mori_ep_t *ep, const mori_ep_args_t *a, mori_ep_shape_t shape, void *stream) {
  (void)stream;
  return launch(ep, a, shape, 1);
}

int mori_ep_launch_prepare(const mori_ep_t *ep) {
  (void)ep;
  return 0;
}

int mori_ep_device_wait(int device) {
  (void)device; /* every call completed before it returned */
  return 0;
}

int mori_ep_launch_reset(const mori_ep_t *ep, void *stream) {
  (void)stream;
  *(volatile int32_t *)mori_local_ptr(ep->view.win, ep->view.off_recv_num) = 0;
  return 0;
}

int mori_ep_device_info(int device, char *arch, size_t arch_size, int *sms) {
  (void)device;
  snprintf(arch, arch_size, "host");
  *sms = 1;
  return 0;
}
