// SPDX-License-Identifier: MIT
/* Transport: RDMA through libibverbs (loaded with dlopen: a program that does
 * not list this transport never touches libibverbs). MORI_NUM_QP_PER_PE RC
 * queue pairs per peer, one memory region per window; puts, gets and atomic
 * adds are posted by the host, and kernels' requests by GPU-initiated
 * posting where the comm chose it (MORI_RDMA_GDA, mori_rdma_gda_status;
 * mori/device/gda.h), else by the CPU proxy. Reaches every peer of the comm (under
 * MORI_ENABLE_RAIL_ONLY the same-rail and same-host ones); list it after
 * p2p so that peers on the same host stay load/store.
 *
 * Environment (docs/multinode.md, "RDMA variables"): MORI_RDMA_DEVICES
 * (include list "mlx5_0,mlx5_1" or exclude list "^mlx5_2"; local rank i
 * takes the i-th device left, modulo; MORI_RDMA_DEVICE: one name, older),
 * MORI_NUM_QP_PER_PE (1), MORI_IB_GID_INDEX (older: MORI_RDMA_GID_INDEX;
 * default 1 when the port has it — the IPv4-mapped RoCE GID —, else 0),
 * MORI_RDMA_SL and MORI_RDMA_TC (0), MORI_ENABLE_RAIL_ONLY, MORI_RDMA_PORT
 * (1), MORI_RDMA_TIMEOUT_MS (how long a quiet, a post waiting for room or
 * a window's deregistration waits for completions; default the timeout of
 * the bootstrap the comm was made over, mori_bootstrap_timeout_ms),
 * MORI_RDMA_MAX_MSG (lowers the largest message per work request; default
 * the port's max_msg_sz).
 *
 * The verbs calls go to libibverbs unless the program set another provider
 * (transport/rdma/provider.h; mori's copy-engine stand-in for a NIC,
 * //transport/rdma/ce_nic, is one that tests and benchmarks link).
 *
 * Transfers of any length are posted in pieces of at most the port's
 * largest message. An atomic add (and a kernel's signal) to a peer is
 * ordered after every earlier put or get to it, whichever QP carried them.
 * A window destroyed while work the host or the proxy posted to a peer is
 * still in flight waits MORI_RDMA_TIMEOUT_MS for it; what has not completed
 * then has its queue pairs moved to error, and that peer is unreachable
 * over rdma (MORI_EUNREACHABLE) for the rest of the comm. Work kernels
 * posted themselves (GPU posting) is not tracked by the host: quiet it in
 * the kernel (mori_quiet_window) before the window goes, or its late
 * completions fail (the memory region is gone) and mark that peer's queue
 * pair failed for the comm. A kernel's request through
 * the proxy is checked against its window as the host calls are: one that
 * leaves it is refused (mori_proxy_quiet: MORI_DEVICE_ERANGE; the window's
 * mailbox names the peer, the offset and the size). */
#ifndef MORI_TRANSPORT_RDMA_H
#define MORI_TRANSPORT_RDMA_H

#include "mori/plugin.h"

MORI_EXTERN_C_BEGIN

extern MORI_API const mori_transport_ops_t mori_transport_rdma_ops;

/* RDMA WRITE of `bytes` from this rank's window at `src_offset` into
 * `peer`'s window at `dst_offset`. Returns once posted; mori_rdma_quiet waits. */
MORI_API int mori_rdma_put(mori_window_t *win, int peer, size_t dst_offset, size_t src_offset, size_t bytes);
/* RDMA READ from `peer`'s window at `src_offset` into this rank's window at `dst_offset`. */
MORI_API int mori_rdma_get(mori_window_t *win, int peer, size_t dst_offset, size_t src_offset, size_t bytes);
/* Atomic 64-bit add at `peer`'s window `offset` (8-byte aligned). */
MORI_API int mori_rdma_atomic_add(mori_window_t *win, int peer, size_t offset, uint64_t value);
/* Waits (bounded by MORI_RDMA_TIMEOUT_MS, else the bootstrap's timeout) until everything this rank posted
 * on the comm has completed; a failed completion since the last quiet is an
 * error naming the peer and the verbs status (MORI_EIO), reported once. */
MORI_API int mori_rdma_quiet(mori_comm_t *comm);

/* For `mori_info` (tools/info): how the transport stands towards `peer` in
 * `comm`. 1: queue pairs reach it; 0: they do not, and `why` says why (no
 * usable device on some rank, with this rank's reason: libibverbs absent,
 * no device, a port down; rail-only leaves it out; the peer is this rank).
 * `nic`: the device this rank opened ("" when none); `rail`: this rank's
 * rail under MORI_ENABLE_RAIL_ONLY, else -1. MORI_EINVAL when the comm does
 * not hold this transport. */
MORI_API int mori_rdma_peer_status(const mori_comm_t *comm, int peer, char *nic, size_t nic_len, int *rail, char *why,
                                   size_t why_len);

/* Whether kernels post this comm's RDMA work themselves (GPU-initiated
 * posting, *enabled = 1) or hand it to the proxy (0), and why: the step that
 * failed, on which rank, or MORI_RDMA_GDA=off (docs/multinode.md). The same
 * on every rank. MORI_EINVAL when the comm has no rdma transport. */
MORI_API int mori_rdma_gda_status(const mori_comm_t *comm, int *enabled, char *why, size_t why_len);

/* How this rank registers the comm's memory with its NIC: "dma-buf
 * (ibv_reg_dmabuf_mr)" for GPU memory the driver exports as a dma-buf,
 * "ibv_reg_mr (peer memory): no dma-buf: <why>" for GPU memory it does not
 * (the driver's peer-memory module then serves the NIC), "ibv_reg_mr (host
 * memory)" on the host platform; before the first registration, the plan.
 * MORI_EINVAL when the comm has no rdma transport; "" when no rank has a
 * usable device. */
MORI_API int mori_rdma_memory_status(const mori_comm_t *comm, char *how, size_t how_len);

MORI_EXTERN_C_END

#endif
