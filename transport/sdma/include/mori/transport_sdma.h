// SPDX-License-Identifier: MIT
/* Transport: copy engines. Bulk, host-initiated copies between this rank and
 * its load/store peers, queued on the device's copy engines (cuMemcpyAsync
 * on NVIDIA; hsa-runtime's SDMA engines on AMD; a worker thread on the host
 * platform), so the SMs stay free. It moves bytes through the peer mappings
 * a load/store transport makes, so it requires one (p2p) in the same comm:
 * comm creation fails with a clear error otherwise. List order does not
 * matter. */
#ifndef MORI_TRANSPORT_SDMA_H
#define MORI_TRANSPORT_SDMA_H

#include "mori/plugin.h"

MORI_EXTERN_C_BEGIN

extern MORI_API const mori_transport_ops_t mori_transport_sdma_ops;

/* Queues a copy of `bytes` from local `src` to `peer`'s window at
 * `dst_offset`. Returns at once; mori_sdma_quiet waits. */
MORI_API int mori_sdma_put(mori_window_t *win, int peer, size_t dst_offset, const void *src, size_t bytes);
/* Queues a copy from `peer`'s window at `src_offset` to local `dst`. */
MORI_API int mori_sdma_get(mori_window_t *win, int peer, void *dst, size_t src_offset, size_t bytes);
/* Waits until every copy this rank queued on the comm has completed. */
MORI_API int mori_sdma_quiet(mori_comm_t *comm);

MORI_EXTERN_C_END

#endif
