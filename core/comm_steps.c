// SPDX-License-Identifier: MIT
/* A comm's own collective steps: over the node channel when every rank is
 * on one host and the payload fits a mailbox, else over the bootstrap. In a
 * file of its own so that the agreement (core/agreement.c) and comm
 * creation (core/comm.c) both use it without using each other. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/profile.h"
#include "core/base/trace.h"
#include "core/bootstrap/internal/step_grace.h"
#include "core/internal/comm.h"
#include "core/internal/node_channel.h"
#include "mori/bootstrap.h"

/* What a step through the bootstrap carries before its payload: the
 * call's name (cut to fit) and a hash of the whole name. The node channel's
 * mailboxes carry both; the bootstrap's frames carry only the step's
 * number, so without this a rank in another call of the same size (one
 * that timed out and went on, say) was paired with it silently. */
typedef struct step_tag {
  uint32_t id;
  char name[44];
} step_tag_t;

static step_tag_t tag_of(const char *what) {
  step_tag_t t;
  memset(&t, 0, sizeof(t));
  t.id = mori_call_identity(what);
  snprintf(t.name, sizeof(t.name), "%s", what ? what : "?");
  return t;
}

/* The bootstrap's allgather of `bytes` per rank, after one of the ranks'
 * call tags: every rank sees the same tags, so all fail alike when one rank
 * is in another call, and none takes the payload's step then. The tags go
 * on the stack up to 256 ranks; the payload goes straight into recv (which
 * may hold send), so a large step needs no buffer one rank could lack. */
static int bootstrap_step(mori_comm_t *c, const char *what, const void *send, void *recv, size_t bytes, int grace_ms) {
  step_tag_t tag = tag_of(what), on_stack[256], *tags = on_stack;
  if (c->size > 256) tags = calloc((size_t)c->size, sizeof(*tags));
  if (!tags) return mori_error_set(MORI_ENOMEM, "%s: rank %d's table of %d call tags", what, c->rank, c->size);
  int rc = mori_bootstrap_allgather_grace(c->bootstrap, &tag, tags, sizeof(tag), grace_ms);
  for (int r = 0; !rc && r < c->size; r++) {
    step_tag_t theirs = tags[r];
    theirs.name[sizeof(theirs.name) - 1] = '\0';
    if (theirs.id != tag.id || memcmp(theirs.name, tag.name, sizeof(tag.name)) != 0)
      rc = mori_error_set(MORI_EMISMATCH,
                          "%s: rank %d is in another collective step (%s, call %08x) than rank %d (%s, call %08x)", what,
                          r, theirs.name, theirs.id, c->rank, tag.name, tag.id);
  }
  if (tags != on_stack) free(tags);
  return rc ? rc : mori_bootstrap_allgather_grace(c->bootstrap, send, recv, bytes, grace_ms);
}

/* `what` names the call, so that ranks at different calls are never paired. */
static int comm_allgather(mori_comm_t *c, const char *what, const void *send, void *recv, size_t bytes, int grace_ms) {
  MORI_TRACE_SCOPE("comm_allgather", MORI_TS("step", what), MORI_TA("bytes", bytes), MORI_TA("ranks", c->size));
  /* Refused before anything is published: the peers and the rank's own
   * process (the comm's maker) stay in step, the channel unfailed. */
  if ((long)getpid() != c->creator_pid)
    return mori_error_set(MORI_EINVAL,
                          "%s: rank %d's comm was made by process %ld; this is process %ld (forked from it), which is "
                          "no rank of the comm and cannot take the rank's collective steps: initialise anew in it "
                          "(a new unique ID / comm) to take part in a job",
                          what ? what : "?", c->rank, c->creator_pid, (long)getpid());
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
    if (!rc && sizes) rc = mori_node_channel_allgather_grace(c->channel, header, &size, sizes, sizeof(size), grace_ms);
    for (int r = 0; !rc && sizes && r < c->size; r++)
      if (sizes[r] != bytes)
        rc = mori_error_set(MORI_EMISMATCH, "%s: rank %d gathers %llu bytes per rank, rank %d %zu", what, r,
                            (unsigned long long)sizes[r], c->rank, bytes);
    bool named = sizes != NULL; /* the size's step named the call in the channel */
    if (sizes != on_stack) free(sizes);
    bool sent = !rc; /* the ranks agreed; the payload went through the bootstrap */
    if (sent)
      rc = named ? mori_bootstrap_allgather_grace(c->bootstrap, send, recv, bytes, grace_ms)
                 : bootstrap_step(c, what, send, recv, bytes, grace_ms);
    /* The bootstrap's part failed after the channel's step passed: the
     * channel fails too, or the ranks' later small steps would pass in it
     * while this one had failed here (and perhaps passed elsewhere). */
    if (rc && sent && named) {
      char why[384];
      snprintf(why, sizeof(why), "%s (%zu bytes per rank, through the bootstrap): %s", what, bytes, mori_last_error());
      rc = mori_node_channel_fail(c->channel, rc, why);
    }
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
