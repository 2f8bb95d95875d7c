// SPDX-License-Identifier: MIT
/* The rdma transport's provider seam: who carries the verbs calls. The
 * transport above it (queue pairs, posting, the proxy) is the same whoever
 * provides them; like rdma-core, which keeps each device family's driver
 * (its software RoCE among them) in a provider of its own, mori keeps
 * anything that is not libibverbs out of the transport:
 *   - the default provider is libibverbs itself, loaded with dlopen the
 *     first time a comm needs it (a program that lists no rdma transport
 *     never loads it);
 *   - a test, benchmark or program that wants another one links it (e.g.
 *     //transport/rdma/ce_nic, mori's copy-engine stand-in for a NIC) and
 *     hands it to mori_rdma_use_provider before it creates its comms.
 * A program that uses libmori.so instead of the static libraries loads a
 * provider built as a library of its own (the copy-engine NIC's
 * libmori_ce_nic.so: dlopen, dlsym "mori_ce_nic_provider") and hands it to
 * libmori.so's mori_rdma_use_provider, which is exported for that.
 * Nothing registers itself: a provider is in effect only when the program
 * asked for it, so the production path never carries one it did not ask
 * for (tests/rdma checks that a program that does not ask links none).
 *
 * The calls are the verbs functions that verbs.h does not already inline
 * through the context's ops (ibv_post_send and ibv_poll_cq go through
 * ctx->ops, which the provider's ibv_open_device fills). Later providers
 * (a software ConnectX for GPU-initiated posting) add what they need at the
 * end of mori_rdma_provider_t: `size` says how much of it a provider fills,
 * and a field past it reads as absent. */
#ifndef MORI_TRANSPORT_RDMA_PROVIDER_H
#define MORI_TRANSPORT_RDMA_PROVIDER_H

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "mori/api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MORI_VERBS_FUNCS(X) \
  X(ibv_get_device_list)    \
  X(ibv_free_device_list)   \
  X(ibv_get_device_name)    \
  X(ibv_open_device)        \
  X(ibv_close_device)       \
  X(ibv_alloc_pd)           \
  X(ibv_dealloc_pd)         \
  X(ibv_reg_mr)             \
  X(ibv_dereg_mr)           \
  X(ibv_create_cq)          \
  X(ibv_destroy_cq)         \
  X(ibv_create_qp)          \
  X(ibv_destroy_qp)         \
  X(ibv_modify_qp)          \
  X(ibv_query_port)         \
  X(ibv_query_gid)          \
  X(ibv_wc_status_str)

/* Function-like macros of verbs.h (ibv_reg_mr, ibv_query_port) expand only
 * before "(": call through the table as (verbs.f)(...). */
struct mori_verbs {
#define MORI_VERBS_FIELD(f) __typeof__(f) *f;
  MORI_VERBS_FUNCS(MORI_VERBS_FIELD)
#undef MORI_VERBS_FIELD
};

typedef struct mori_rdma_provider {
  size_t size;      /* sizeof(mori_rdma_provider_t) as the provider was built */
  const char *name; /* for messages: "libibverbs", "copy-engine NIC" */
  const struct mori_verbs *verbs; /* every function set */
  /* Optional (NULL: none). Called right before ibv_open_device with the
   * comm's device (verbs has no device argument; a provider that moves
   * data with the GPU's own queues needs it). */
  void (*use_device)(int device);
  /* Optional (NULL: none). GPU-initiated posting (transport/rdma/gda): a
   * provider whose queues a kernel can drive itself describes its QPs and
   * CQs exactly as rdma-core's mlx5dv_init_obj does for a ConnectX
   * (MLX5DV_OBJ_QP, MLX5DV_OBJ_CQ: the send queue's WQE ring, the doorbell
   * records, the BlueFlame register, the CQE ring), with every buffer in
   * memory the comm's device reaches. The software ConnectX
   * (transport/rdma/swcx) fills it; for libibverbs the transport asks
   * libmlx5's own mlx5dv_init_obj when the device is a ConnectX. Returns 0
   * or an errno as mlx5dv_init_obj does. */
  int (*mlx5dv_init_obj)(struct mlx5dv_obj *obj, uint64_t obj_type);
  /* Optional (NULL: none). ibv_reg_dmabuf_mr (rdma-core 34 and later):
   * registers [offset, offset + length) of the dma-buf `fd`, reached by
   * work requests at `iova`. The transport registers GPU memory through it
   * where the platform exports a dma-buf, else with ibv_reg_mr (the peer-
   * memory module); for libibverbs it is looked up with dlsym, so an older
   * rdma-core leaves it NULL. */
  struct ibv_mr *(*ibv_reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
} mori_rdma_provider_t;

/* The provider's ibv_reg_dmabuf_mr, or NULL when it has none (or was built
 * before the field existed). */
static inline __typeof__(((mori_rdma_provider_t *)0)->ibv_reg_dmabuf_mr) mori_rdma_provider_reg_dmabuf_mr(
    const mori_rdma_provider_t *p) {
  return p->size >= offsetof(mori_rdma_provider_t, ibv_reg_dmabuf_mr) + sizeof(p->ibv_reg_dmabuf_mr) ? p->ibv_reg_dmabuf_mr
                                                                                                        : NULL;
}

/* The provider the rdma transport of comms created from now on uses: `p`
 * (not copied: it must outlive those comms), or NULL for libibverbs again.
 * Process-wide; a comm keeps the provider it was created with. Returns
 * MORI_EINVAL (naming the provider) when `p` is too small to hold the
 * fields every provider fills or misses a function. */
MORI_API int mori_rdma_use_provider(const mori_rdma_provider_t *p);

/* The provider in effect: the one set, else libibverbs, loaded once
 * (MORI_ENODEV with a message when it is absent). */
int mori_rdma_provider(const mori_rdma_provider_t **out);

#ifdef __cplusplus
}
#endif

#endif
