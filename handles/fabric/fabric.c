/* fabric handle library: one bootstrap allgather of every rank's blob. */
#include <stdlib.h>
#include <string.h>

#include "core/internal/error.h"
#include "mori/handle_fabric.h"

static int fabric_init(mori_comm_t *comm, void **state) {
  *state = NULL;
  return 0;
}

static int fabric_share(void *state, mori_comm_t *comm, const mori_shareable_t *mine, mori_shareable_t *theirs,
                        const bool *want) {
  int size = mori_comm_size(comm);
  uint8_t *all = malloc((size_t)size * MORI_FABRIC_BLOB_SIZE);
  if (!all) return mori_error_set(MORI_ENOMEM, "fabric: blob table");
  int rc = mori_bootstrap_allgather(mori_comm_bootstrap(comm), mine->blob, all, MORI_FABRIC_BLOB_SIZE);
  if (rc) {
    free(all);
    return mori_error_context(rc, "fabric: exchanging handles");
  }
  for (int r = 0; r < size; r++) {
    if (!want[r]) continue;
    theirs[r].type = MORI_HANDLE_FABRIC;
    theirs[r].fd = -1;
    memcpy(theirs[r].blob, all + (size_t)r * MORI_FABRIC_BLOB_SIZE, MORI_FABRIC_BLOB_SIZE);
  }
  free(all);
  return 0;
}

static int fabric_fini(void *state) { return 0; }

const mori_handle_ops_t mori_handle_fabric_ops = {
    .size = sizeof(mori_handle_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "fabric",
    .handle_type = MORI_HANDLE_FABRIC,
    .init = fabric_init,
    .share = fabric_share,
    .fini = fabric_fini,
};
