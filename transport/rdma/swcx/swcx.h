// SPDX-License-Identifier: MIT
/* The software ConnectX: a provider for the rdma transport (see
 * transport/rdma/provider.h) that wraps another one (libibverbs, e.g. on
 * Soft-RoCE, or the copy-engine NIC) and gives every queue pair and
 * completion queue it creates the queues a ConnectX (mlx5) exposes to
 * GPU-initiated posting: a send WQE ring, doorbell records, a BlueFlame
 * register and a ring of 64-byte CQEs, described by the provider's
 * mlx5dv_init_obj exactly as rdma-core's is for a ConnectX. An engine
 * thread watches each send doorbell record, reads the new WQEs byte by
 * byte as the ConnectX PRM lays them out, executes them with the inner
 * provider's verbs on the same queue pair, and writes the completions
 * back as CQE64s. So GPU posting runs, and its encoding is checked,
 * where no ConnectX is. What it checks and how it fails: internal.h.
 *
 * The ordinary verbs (ibv_post_send, ibv_poll_cq) on its queue pairs go to
 * the inner provider as before: the proxy path runs unchanged beside the
 * emulated queues.
 *
 * Only a program that links //transport/rdma/swcx and installs it uses it:
 *
 *   mori_swcx_install(mori_ce_nic_provider());   // or NULL: libibverbs
 *   ... mori_comm_create(..., rdma transport ...) ...
 *
 * A program on libmori.so loads //transport/rdma/swcx:libmori_swcx.so,
 * dlsym("mori_swcx_provider")(inner) and hands the result to libmori.so's
 * mori_rdma_use_provider.
 *
 * MORI_RDMA_SWCX_FAULTS injects faults (`error@N`, `late@N:MS`,
 * `stall@N`: internal.h). */
#ifndef MORI_TRANSPORT_RDMA_SWCX_H
#define MORI_TRANSPORT_RDMA_SWCX_H

#include "transport/rdma/provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The software ConnectX over `inner` (NULL: the default provider,
 * libibverbs, loaded now), or NULL with mori's last error set when the
 * inner provider cannot be had. One inner provider at a time per process:
 * a later call with another one wraps that one for devices opened from
 * then on (devices already open keep theirs). The result lives as long
 * as the process. */
MORI_API const mori_rdma_provider_t *mori_swcx_provider(const mori_rdma_provider_t *inner);
/* mori_rdma_use_provider(mori_swcx_provider(inner)). */
int mori_swcx_install(const mori_rdma_provider_t *inner);

#ifdef __cplusplus
}
#endif

#endif
