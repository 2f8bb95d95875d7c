// SPDX-License-Identifier: MIT
/* Registering a segment's memory with the NIC. GPU memory goes through
 * dma-buf where the platform exports one for it and the provider takes it
 * (ibv_reg_dmabuf_mr: the kernel's own path, no out-of-tree module);
 * otherwise through ibv_reg_mr, which for GPU memory relies on the driver's
 * peer-memory module, and which is the plain path for host memory (the
 * host platform, where there is nothing to ask). A failed dma-buf step is
 * not an error: the reason travels in `how` and ibv_reg_mr is tried. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/platform/platform.h"
#include "transport/rdma/internal.h"

static const struct rdma_dmabuf_ops *override;

void rdma_use_dmabuf_ops(const struct rdma_dmabuf_ops *ops) { __atomic_store_n(&override, ops, __ATOMIC_RELEASE); }

const struct rdma_dmabuf_ops *rdma_dmabuf_ops(void) {
  static struct rdma_dmabuf_ops platform = {mori_platform_dmabuf_export, mori_platform_dmabuf_close, false};
  const struct rdma_dmabuf_ops *o = __atomic_load_n(&override, __ATOMIC_ACQUIRE);
  if (o) return o;
  platform.gpu_memory = strcmp(mori_platform_name(), "host") != 0;
  return &platform;
}

void rdma_memory_plan(const mori_rdma_provider_t *p, const struct rdma_dmabuf_ops *ops, char *how, size_t how_len) {
  if (!ops->gpu_memory) snprintf(how, how_len, "ibv_reg_mr (host memory)");
  else if (!mori_rdma_provider_reg_dmabuf_mr(p))
    snprintf(how, how_len, "ibv_reg_mr (peer memory): no dma-buf: the provider (%s) has no ibv_reg_dmabuf_mr",
             p->name ? p->name : "?");
  else
    snprintf(how, how_len, "dma-buf (ibv_reg_dmabuf_mr) where the platform exports one, else ibv_reg_mr (peer memory); "
                           "nothing registered yet");
}

struct ibv_mr *rdma_reg_memory(const mori_rdma_provider_t *p, struct ibv_pd *pd, void *base, size_t len, int device,
                               int access, const struct rdma_dmabuf_ops *ops, char *how, size_t how_len) {
  if (!ops->gpu_memory) {
    snprintf(how, how_len, "ibv_reg_mr (host memory)");
    return (p->verbs->ibv_reg_mr)(pd, base, len, access);
  }
  char why[200];
  __typeof__(p->ibv_reg_dmabuf_mr) reg_dmabuf = mori_rdma_provider_reg_dmabuf_mr(p);
  int fd = -1;
  uint64_t offset = 0;
  if (!reg_dmabuf) {
    snprintf(why, sizeof(why), "the provider (%s) has no ibv_reg_dmabuf_mr", p->name ? p->name : "?");
  } else if (ops->export_fd(device, base, len, &fd, &offset) != 0) {
    snprintf(why, sizeof(why), "%s", mori_last_error());
    mori_clear_error();
  } else {
    /* Work requests name the memory by its address here (iova = base), as
     * for ibv_reg_mr. The region holds the buffer: the fd can go. */
    struct ibv_mr *mr = reg_dmabuf(pd, offset, len, (uint64_t)(uintptr_t)base, fd, access);
    int err = errno;
    if (ops->close_fd(fd) != 0) mori_clear_error();
    if (mr) {
      snprintf(how, how_len, "dma-buf (ibv_reg_dmabuf_mr)");
      return mr;
    }
    snprintf(why, sizeof(why), "ibv_reg_dmabuf_mr failed: %s", strerror(err));
  }
  snprintf(how, how_len, "ibv_reg_mr (peer memory): no dma-buf: %s", why);
  return (p->verbs->ibv_reg_mr)(pd, base, len, access);
}
