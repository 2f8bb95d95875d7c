/* The host platform's launcher: the calling CPU rank runs every item of the
 * call in index order (pushes before the waits that need them, on every
 * rank), then publishes the epoch. */
#include "collectives/internal.h"
#include "mori/device/coll.h"

int mori_coll_launch_all_to_all(const mori_coll_t *c, const mori_a2a_args_t *a, void *stream) {
  mori_coll_dev_t d = mori_coll_device_view(c);
  uint64_t epoch = mori_coll_epoch(d);
  int rc = 0;
  for (uint32_t i = 0; i < a->items; i++) {
    int r = mori_a2a_item(d, a, epoch, i);
    if (r && !rc) rc = r;
  }
  mori_coll_finish_block(d, epoch, 1);
  return rc ? mori_window_check(c->win) : 0;
}

int mori_coll_launch_all_reduce(const mori_coll_t *c, const mori_allreduce_args_t *a, void *stream) {
  mori_coll_dev_t d = mori_coll_device_view(c);
  uint64_t epoch = mori_coll_epoch(d);
  int rc = 0;
  for (uint32_t i = 0; i < a->items; i++) {
    int r = mori_allreduce_item(d, a, epoch, i);
    if (r && !rc) rc = r;
  }
  mori_coll_finish_block(d, epoch, 1);
  return rc ? mori_window_check(c->win) : 0;
}
