// SPDX-License-Identifier: MIT
/* A registered segment's GPU-posting table (mori_gda_window_t), in device
 * memory, that mori_window_dev_t.gda points at: the comm's QP descriptors,
 * and this segment's keys and addresses on every rank. One allocation:
 * the table, then its arrays. */
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/platform/platform.h"
#include "transport/rdma/gda/gda_host.h"

int rdma_gda_window(struct rdma_state *s, struct rdma_segment *w, struct mori_gda_window **table_dev) {
  *table_dev = NULL;
  struct rdma_gda *g = s->gda;
  if (!g || !g->enabled || !w->mr) return 0;
  size_t n = (size_t)s->size;
  size_t at_base = (sizeof(mori_gda_window_t) + 7) & ~(size_t)7, at_rkey = at_base + n * sizeof(uint64_t),
         at_next = at_rkey + n * sizeof(uint32_t), total = at_next + n * sizeof(uint32_t);
  char *host = calloc(1, total), *dev = NULL;
  if (!host) return mori_error_set(MORI_ENOMEM, "rdma gda: window table");
  int rc = mori_platform_device_alloc(w->device, total, (void **)&dev);
  if (!rc) {
    mori_gda_window_t *t = (mori_gda_window_t *)host;
    t->qp = g->desc_dev;
    t->remote_base = (uint64_t *)(dev + at_base);
    t->rkey = (uint32_t *)(dev + at_rkey);
    t->next_qp = (uint32_t *)(dev + at_next);
    t->local_base = (uint64_t)(uintptr_t)w->mr->addr;
    t->local_size = w->mr->length;
    t->lkey = w->mr->lkey;
    t->num_qp = s->num_qp;
    t->world_size = s->size;
    memcpy(host + at_base, w->addr, n * sizeof(uint64_t));
    memcpy(host + at_rkey, w->rkey, n * sizeof(uint32_t));
    rc = mori_platform_upload(w->device, dev, host, total);
  }
  free(host);
  if (rc) {
    mori_platform_device_free(w->device, dev);
    return mori_error_context(rc, "rdma gda: the window's table");
  }
  *table_dev = (mori_gda_window_t *)dev;
  return 0;
}

void rdma_gda_window_free(int device, struct mori_gda_window *table_dev) {
  if (table_dev) mori_platform_device_free(device, table_dev);
}
