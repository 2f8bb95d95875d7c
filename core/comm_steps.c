// SPDX-License-Identifier: MIT
/* A comm's own collective steps: over the node channel when every rank is
 * on one host and the payload fits a mailbox, else over the bootstrap. In a
 * file of its own so that the agreement (core/agreement.c) and comm
 * creation (core/comm.c) both use it without using each other. */
#include "core/base/profile.h"
#include "core/base/trace.h"
#include "core/internal/comm.h"
#include "core/internal/node_channel.h"
#include "mori/bootstrap.h"

/* `what` names the call, so that ranks at different calls are never paired. */
static int comm_allgather(mori_comm_t *c, const char *what, const void *send, void *recv, size_t bytes) {
  MORI_TRACE_SCOPE("comm_allgather", MORI_TS("step", what), MORI_TA("bytes", bytes), MORI_TA("ranks", c->size));
  uint64_t t = mori_profile_now();
  int rc = c->channel && bytes <= MORI_NODE_CHANNEL_PAYLOAD ? mori_node_channel_allgather(c->channel, what, send, recv, bytes)
                                                             : mori_bootstrap_allgather(c->bootstrap, send, recv, bytes);
  return mori_profile_done(MORI_PROF_COLLECTIVE_STEP, t, rc);
}

int mori_comm_allgather(mori_comm_t *c, const void *send, void *recv, size_t bytes) {
  return comm_allgather(c, "mori_comm_allgather", send, recv, bytes);
}

int mori_comm_allgather_named(mori_comm_t *c, const char *what, const void *send, void *recv, size_t bytes) {
  return comm_allgather(c, what, send, recv, bytes);
}
