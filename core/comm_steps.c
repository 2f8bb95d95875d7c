// SPDX-License-Identifier: MIT
/* A comm's own collective steps: over the node channel when every rank is
 * on one host and the payload fits a mailbox, else over the bootstrap. In a
 * file of its own so that the agreement (core/agreement.c) and comm
 * creation (core/comm.c) both use it without using each other. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/base/error.h"
#include "core/base/profile.h"
#include "core/base/trace.h"
#include "core/internal/comm.h"
#include "core/internal/node_channel.h"
#include "mori/bootstrap.h"

/* `what` names the call, so that ranks at different calls are never paired. */
static int comm_allgather(mori_comm_t *c, const char *what, const void *send, void *recv, size_t bytes, int grace_ms) {
  MORI_TRACE_SCOPE("comm_allgather", MORI_TS("step", what), MORI_TA("bytes", bytes), MORI_TA("ranks", c->size));
  uint64_t t = mori_profile_now();
  int rc;
  if (c->channel && bytes <= MORI_NODE_CHANNEL_PAYLOAD) {
    rc = mori_node_channel_allgather_grace(c->channel, what, send, recv, bytes, grace_ms);
  } else {
    /* With a channel, a large step still takes one through it first (its
     * size alone): ranks that disagree on the size, one side of the
     * channel's limit each, then meet in the channel, which names them at
     * once, instead of waiting in different transports until the timeout.
     * The sizes go on the stack for up to 256 ranks (recv may hold `send`,
     * gathered in place), so only a larger node could fail to allocate. */
    uint64_t size = bytes, on_stack[256], *sizes = NULL;
    rc = 0;
    if (c->channel) {
      sizes = c->size <= 256 ? on_stack : calloc((size_t)c->size, sizeof(*sizes));
      if (!sizes) rc = mori_error_set(MORI_ENOMEM, "%s: rank %d's size table", what, c->rank);
    }
    /* Its own name, so that a rank gathering 8 bytes is never paired with it. */
    char header[160];
    snprintf(header, sizeof(header), "%s (the size of a step through the bootstrap)", what);
    if (!rc && sizes) rc = mori_node_channel_allgather(c->channel, header, &size, sizes, sizeof(size));
    for (int r = 0; !rc && sizes && r < c->size; r++)
      if (sizes[r] != bytes)
        rc = mori_error_set(MORI_EMISMATCH, "%s: rank %d gathers %llu bytes per rank, rank %d %zu", what, r,
                            (unsigned long long)sizes[r], c->rank, bytes);
    if (sizes != on_stack) free(sizes);
    if (!rc) rc = mori_bootstrap_allgather(c->bootstrap, send, recv, bytes);
  }
  return mori_profile_done(MORI_PROF_COLLECTIVE_STEP, t, rc);
}

int mori_comm_allgather(mori_comm_t *c, const void *send, void *recv, size_t bytes) {
  return comm_allgather(c, "mori_comm_allgather", send, recv, bytes, 0);
}

int mori_comm_allgather_named(mori_comm_t *c, const char *what, const void *send, void *recv, size_t bytes) {
  return comm_allgather(c, what, send, recv, bytes, 0);
}

int mori_comm_allgather_grace(mori_comm_t *c, const char *what, const void *send, void *recv, size_t bytes,
                              int grace_ms) {
  return comm_allgather(c, what, send, recv, bytes, grace_ms);
}
