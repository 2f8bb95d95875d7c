// SPDX-License-Identifier: MIT
/* legacy IPC handle library: one bootstrap allgather of every rank's IPC
 * handle and the place of its range in the allocation. */
#include "mori/handle_legacy_ipc.h"

static int legacy_ipc_share(void *state, mori_comm_t *comm, uint64_t seq, const mori_shareable_t *mine,
                            mori_shareable_t *theirs, const bool *want) {
  (void)state;
  (void)seq; /* the bootstrap's allgathers are ordered: no mix-up possible */
  return mori_handle_allgather_blobs(comm, MORI_HANDLE_LEGACY_IPC, mine, theirs, want);
}

const mori_handle_ops_t mori_handle_legacy_ipc_ops = {
    .size = sizeof(mori_handle_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "legacy_ipc",
    .handle_type = MORI_HANDLE_LEGACY_IPC,
    .share = legacy_ipc_share,
};
