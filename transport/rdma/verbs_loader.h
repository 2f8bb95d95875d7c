// SPDX-License-Identifier: MIT
/* libibverbs, loaded at run time from one X-macro symbol list (the functions
 * verbs.h does not already inline through the context's ops). */
#ifndef MORI_TRANSPORT_RDMA_VERBS_LOADER_H
#define MORI_TRANSPORT_RDMA_VERBS_LOADER_H

#include <infiniband/verbs.h>

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

/* Loads libibverbs.so.1 once; MORI_ENODEV with a message when it is absent. */
int mori_verbs_load(const struct mori_verbs **out);
/* Test hook: later loads return `v` instead (a fake provider whose context
 * ops carry poll_cq and post_send); NULL goes back to libibverbs. */
void mori_verbs_replace(const struct mori_verbs *v);

#ifdef __cplusplus
}
#endif

#endif
