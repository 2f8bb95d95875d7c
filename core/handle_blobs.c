// SPDX-License-Identifier: MIT
/* mori_handle_allgather_blobs (mori/plugin.h): the exchange of handle
 * libraries whose handles are bytes rather than descriptors. */
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/internal/comm.h"
#include "mori/plugin.h"

/* A rank without a handle (its export failed) contributes zeros and a "no
 * handle" flag: the allgather happens on every rank either way. */
struct blob_entry {
  uint8_t has_handle;
  uint8_t pad[7];
  uint64_t offset, size;
  uint8_t blob[MORI_FABRIC_BLOB_SIZE];
};

int mori_handle_allgather_blobs(mori_comm_t *comm, int type, const mori_shareable_t *mine, mori_shareable_t *theirs,
                                const bool *want) {
  int size = mori_comm_size(comm);
  struct blob_entry me, *all = malloc((size_t)size * sizeof(*all));
  if (!all) return mori_error_set(MORI_ENOMEM, "%s handles: blob table", mori_handle_type_name(type));
  memset(&me, 0, sizeof(me));
  me.has_handle = mine->type == type;
  if (me.has_handle) {
    memcpy(me.blob, mine->blob, sizeof(me.blob));
    me.offset = mine->offset;
    me.size = mine->size;
  }
  /* A comm step (the node channel when every rank is on one host): made at
   * every segment, it was a TCP allgather through the bootstrap, which at
   * start-up with hundreds of ranks on a few cores took longer than the
   * imports it feeds. */
  int rc = mori_comm_allgather_named(comm, "handle blobs", &me, all, sizeof(me));
  if (rc) {
    free(all);
    return mori_error_context(rc, "%s handles: exchanging them", mori_handle_type_name(type));
  }
  for (int r = 0; r < size; r++) {
    if (!want[r]) continue;
    memset(&theirs[r], 0, sizeof(theirs[r]));
    theirs[r].type = all[r].has_handle ? type : MORI_HANDLE_NONE;
    theirs[r].fd = -1;
    theirs[r].offset = all[r].offset;
    theirs[r].size = all[r].size;
    memcpy(theirs[r].blob, all[r].blob, MORI_FABRIC_BLOB_SIZE);
  }
  free(all);
  return 0;
}
