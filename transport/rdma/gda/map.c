// SPDX-License-Identifier: MIT
/* The NIC's host memory a kernel must reach (send queues, CQ rings,
 * doorbell records, the doorbell page), mapped for the comm's device
 * (queues a provider placed in device memory are taken as they are). A
 * provider packs several QPs' doorbell records into one page and several
 * QPs' doorbells into one UAR page, and a page may be registered with the
 * GPU only once: ranges are collected first, merged where their pages
 * touch, then each merged range is registered once. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/platform/platform.h"
#include "transport/rdma/gda/gda_host.h"

int rdma_gda_map_add(struct rdma_gda_map *m, const void *p, size_t size, bool io) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  if (!p || size == 0) return mori_error_set(MORI_EINVAL, "rdma gda: a queue of the provider's is missing (NULL or empty)");
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 16;
    struct rdma_gda_range *r = realloc(m->r, cap * sizeof(*r));
    if (!r) return mori_error_set(MORI_ENOMEM, "rdma gda: map ranges");
    m->r = r;
    m->cap = cap;
  }
  uintptr_t a = (uintptr_t)p;
  bool in_device = false;
  int rc = mori_platform_is_device_memory(m->device, p, &in_device);
  if (rc) return mori_error_context(rc, "rdma gda: where the NIC's queue at %p lives", p);
  if (in_device) {
    /* Kernels reach it as it is: kept exact, never merged or registered. */
    m->r[m->n++] = (struct rdma_gda_range){a, a + size, false, false, (char *)p, true};
    return 0;
  }
  m->r[m->n++] = (struct rdma_gda_range){a & ~(page - 1), (a + size + page - 1) & ~(page - 1), io, false, NULL, false};
  return 0;
}

static int by_base(const void *x, const void *y) {
  const struct rdma_gda_range *a = x, *b = y;
  return a->base < b->base ? -1 : a->base > b->base;
}

int rdma_gda_map_commit(struct rdma_gda_map *m) {
  qsort(m->r, m->n, sizeof(*m->r), by_base);
  size_t out = 0;
  for (size_t i = 0; i < m->n; i++) {
    if (out && !m->r[i].in_device && !m->r[out - 1].in_device && m->r[i].base <= m->r[out - 1].end) {
      /* A doorbell register in a page with queues is ordinary memory (a
       * software NIC's), not a NIC's I/O page: mapped as memory. */
      m->r[out - 1].io = m->r[out - 1].io && m->r[i].io;
      if (m->r[i].end > m->r[out - 1].end) m->r[out - 1].end = m->r[i].end;
      continue;
    }
    m->r[out++] = m->r[i];
  }
  m->n = out;
  for (size_t i = 0; i < m->n; i++) {
    if (m->r[i].in_device) continue;
    void *dev = NULL;
    int rc = mori_platform_host_register(m->device, (void *)m->r[i].base, m->r[i].end - m->r[i].base, m->r[i].io, &dev,
                                         &m->r[i].registered);
    if (rc)
      return mori_error_context(rc, "rdma gda: mapping the NIC's %s (%zu bytes at %p) for the GPU",
                                m->r[i].io ? "doorbell page" : "queues", (size_t)(m->r[i].end - m->r[i].base), (void *)m->r[i].base);
    m->r[i].dev = dev;
  }
  return 0;
}

void *rdma_gda_map_dev(const struct rdma_gda_map *m, const void *p) {
  uintptr_t a = (uintptr_t)p;
  for (size_t i = 0; i < m->n; i++)
    if (m->r[i].dev && a >= m->r[i].base && a < m->r[i].end) return m->r[i].dev + (a - m->r[i].base);
  return NULL;
}

bool rdma_gda_map_in_device(const struct rdma_gda_map *m, const void *p) {
  uintptr_t a = (uintptr_t)p;
  for (size_t i = 0; i < m->n; i++)
    if (a >= m->r[i].base && a < m->r[i].end) return m->r[i].in_device;
  return false;
}

void rdma_gda_map_release(struct rdma_gda_map *m) {
  for (size_t i = 0; i < m->n; i++)
    if (m->r[i].registered) mori_platform_host_unregister(m->device, (void *)m->r[i].base);
  free(m->r);
  m->r = NULL;
  m->n = m->cap = 0;
}
