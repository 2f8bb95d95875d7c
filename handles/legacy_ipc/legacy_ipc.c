// SPDX-License-Identifier: MIT
/* legacy IPC handle library: one allgather of every rank's IPC handle and
 * the place of its range in the allocation. */
#include "mori/handle_legacy_ipc.h"

MORI_HANDLE_BLOB_LIBRARY(mori_handle_legacy_ipc_ops, "legacy_ipc", MORI_HANDLE_LEGACY_IPC);
