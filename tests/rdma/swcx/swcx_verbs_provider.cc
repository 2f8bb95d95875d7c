// SPDX-License-Identifier: MIT
// Linked into the suites that run over the software ConnectX wrapping
// libibverbs (Soft-RoCE in tools/rdma_vm_test.sh's guest): every comm's
// rdma transport gets its verbs through it (installed before main, so
// every rank's process inherits it). Where libibverbs is missing, nothing
// is installed and the suites find no RDMA device, as without it.
#include <cstdio>

#include "mori/error.h"
#include "transport/rdma/swcx/swcx.h"

static const bool kInstalledAtStart = [] {
  int rc = mori_swcx_install(nullptr);
  if (rc) fprintf(stderr, "software ConnectX over libibverbs not installed: %s\n", mori_last_error());
  return rc == 0;
}();
