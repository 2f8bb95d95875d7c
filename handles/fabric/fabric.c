// SPDX-License-Identifier: MIT
/* fabric handle library: one bootstrap allgather of every rank's blob. */
#include "mori/handle_fabric.h"

static int fabric_share(void *state, mori_comm_t *comm, uint64_t seq, const mori_shareable_t *mine,
                        mori_shareable_t *theirs, const bool *want) {
  (void)state;
  (void)seq; /* the bootstrap's allgathers are ordered: no mix-up possible */
  return mori_handle_allgather_blobs(comm, MORI_HANDLE_FABRIC, mine, theirs, want);
}

const mori_handle_ops_t mori_handle_fabric_ops = {
    .size = sizeof(mori_handle_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "fabric",
    .handle_type = MORI_HANDLE_FABRIC,
    .share = fabric_share,
};
