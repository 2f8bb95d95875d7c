// SPDX-License-Identifier: MIT
/* fabric handle library: one allgather of every rank's blob. */
#include "mori/handle_fabric.h"

MORI_HANDLE_BLOB_LIBRARY(mori_handle_fabric_ops, "fabric", MORI_HANDLE_FABRIC);
