/* fabric handle library: one bootstrap allgather of every rank's blob. */
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "mori/handle_fabric.h"

/* A rank without a handle (its export failed) contributes a blob of zeros
 * and a "no handle" flag: the allgather happens on every rank either way. */
struct fabric_entry {
  uint8_t has_handle;
  uint8_t blob[MORI_FABRIC_BLOB_SIZE];
};

static int fabric_share(void *state, mori_comm_t *comm, uint64_t seq, const mori_shareable_t *mine,
                        mori_shareable_t *theirs, const bool *want) {
  int size = mori_comm_size(comm);
  struct fabric_entry me, *all = malloc((size_t)size * sizeof(*all));
  if (!all) return mori_error_set(MORI_ENOMEM, "fabric: blob table");
  memset(&me, 0, sizeof(me));
  me.has_handle = mine->type == MORI_HANDLE_FABRIC;
  if (me.has_handle) memcpy(me.blob, mine->blob, sizeof(me.blob));
  int rc = mori_bootstrap_allgather(mori_comm_bootstrap(comm), &me, all, sizeof(me));
  if (rc) {
    free(all);
    return mori_error_context(rc, "fabric: exchanging handles");
  }
  for (int r = 0; r < size; r++) {
    if (!want[r]) continue;
    theirs[r].type = all[r].has_handle ? MORI_HANDLE_FABRIC : MORI_HANDLE_NONE;
    theirs[r].fd = -1;
    memcpy(theirs[r].blob, all[r].blob, MORI_FABRIC_BLOB_SIZE);
  }
  free(all);
  return 0;
}

const mori_handle_ops_t mori_handle_fabric_ops = {
    .size = sizeof(mori_handle_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "fabric",
    .handle_type = MORI_HANDLE_FABRIC,
    .share = fabric_share,
};
