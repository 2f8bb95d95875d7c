// SPDX-License-Identifier: MIT
// Linked into gpu_gda_test only: gpu_proxy_test's cases with the software
// ConnectX (which reads the WQEs the kernels write, byte by byte, from
// pinned host memory mapped for the GPU) over the copy-engine NIC, and
// GPU-initiated posting required (MORI_RDMA_GDA=on): comm creation fails,
// naming the step, rather than falling back to the proxy.
#include <stdlib.h>

#include "transport/rdma/ce_nic/ce_nic.h"
#include "transport/rdma/swcx/swcx.h"

extern "C" int mori_test_gpu_rdma_install(void) {
  setenv("MORI_RDMA_GDA", "on", 1);
  return mori_swcx_install(mori_ce_nic_provider());
}
