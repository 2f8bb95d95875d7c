// SPDX-License-Identifier: MIT
/* The copy-engine NIC: a provider for the rdma transport (see
 * transport/rdma/provider.h) that stands in for a NIC between processes of
 * one machine. It serves peers that are declared on other nodes
 * (MORI_HOST_ID) but share this machine, so the rdma transport, the proxy
 * ring, its ordering and its completion signals run for real on a machine
 * without a NIC: host-platform CI, a single GPU. Data moves with the
 * platform's copy queue (cuMemcpyAsync on CUDA, a worker thread on the host
 * platform; not built on HIP, whose copy queue keeps no order). What it
 * checks and how it fails like a NIC: internal.h.
 *
 * Only a program that links //transport/rdma/ce_nic and installs it uses
 * it; the rdma transport has no other way to reach it:
 *
 *   mori_ce_nic_install();          // before creating the comms
 *   ... mori_comm_create(..., rdma transport ...) ...
 *
 * A program on libmori.so (Python, the torch backend) loads it instead:
 * dlopen("libmori_ce_nic.so") (//transport/rdma/ce_nic:libmori_ce_nic.so,
 * which carries its own copy of mori's platform layer), then hands
 * dlsym("mori_ce_nic_provider")() to libmori.so's mori_rdma_use_provider.
 *
 * MORI_RDMA_CE_FAULTS injects faults (`fail@N`, `stall@N`: internal.h). */
#ifndef MORI_TRANSPORT_RDMA_CE_NIC_H
#define MORI_TRANSPORT_RDMA_CE_NIC_H

#include "transport/rdma/provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The provider, for mori_rdma_use_provider (exported from
 * libmori_ce_nic.so, the provider as a library of its own). */
MORI_API const mori_rdma_provider_t *mori_ce_nic_provider(void);
/* mori_rdma_use_provider(mori_ce_nic_provider()): comms created from now on
 * in this process reach their rdma peers through the copy-engine NIC. */
int mori_ce_nic_install(void);

#ifdef __cplusplus
}
#endif

#endif
