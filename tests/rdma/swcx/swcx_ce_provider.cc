// SPDX-License-Identifier: MIT
// Linked into the suites that run over the software ConnectX wrapping the
// copy-engine NIC: every comm's rdma transport gets its verbs through it
// (installed before main, so every rank's process inherits it). For
// tests/rdma/rdma_test.cc it answers the weak mori_test_ce_nic_installed:
// the device underneath is the copy-engine NIC's.
#include "transport/rdma/ce_nic/ce_nic.h"
#include "transport/rdma/swcx/swcx.h"

extern "C" bool mori_test_ce_nic_installed(void) {
  static const bool installed = mori_swcx_install(mori_ce_nic_provider()) == 0;
  return installed;
}

static const bool kInstalledAtStart = mori_test_ce_nic_installed();
