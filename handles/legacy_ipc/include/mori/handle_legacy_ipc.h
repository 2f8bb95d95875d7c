// SPDX-License-Identifier: MIT
/* Handle library: memory of the runtime's plain allocator (cudaMalloc /
 * hipMalloc, e.g. torch's caching allocator), adopted with
 * mori_mem_register_range, travels as the runtime's IPC handle of its
 * allocation (cudaIpcMemHandle_t / hipIpcMemHandle_t) carried by the
 * bootstrap. Peers open it at an address the runtime chooses: windows of
 * such memory are reached through the pointer table (no flat span). Same
 * node only, as the runtimes' IPC is. */
#ifndef MORI_HANDLE_LEGACY_IPC_H
#define MORI_HANDLE_LEGACY_IPC_H

#include "mori/plugin.h"

MORI_EXTERN_C_BEGIN
extern MORI_API const mori_handle_ops_t mori_handle_legacy_ipc_ops;
MORI_EXTERN_C_END

#endif
