// SPDX-License-Identifier: MIT
// Linked into rdma_ce_test only: the copy-engine NIC is the provider of
// every comm the suite makes (installed before main, so every rank's
// process inherits it). rdma_test.cc asks through a weak symbol, so the
// same source without this file runs on the default provider (libibverbs).
#include "transport/rdma/ce_nic/ce_nic.h"

extern "C" bool mori_test_ce_nic_installed(void) {
  static const bool installed = mori_ce_nic_install() == 0;
  return installed;
}

// Installed at start-up, as the suite's ranks are forked after main starts.
static const bool kInstalledAtStart = mori_test_ce_nic_installed();
