// SPDX-License-Identifier: MIT
/* Predefined teams and splits, from the comm's topology. */
#include <stdint.h>

#include "core/base/error.h"
#include "core/internal/comm_live.h"
#include "mori/plugin.h"
#include "mori/team.h"

static mori_team_t make_team(int start, int stride, int size, int me) {
  mori_team_t t = {start, stride, size, -1};
  t.rank = mori_team_from_world(t, me);
  return t;
}

/* Nodes of equal size, each a contiguous block of ranks: *per_node set. */
static int regular_nodes(const mori_comm_t *comm, int *per_node) {
  int n = mori_comm_size(comm);
  int local = mori_comm_peer_info(comm, 0)->local_size;
  for (int r = 0; r < n; r++) {
    const mori_peer_info_t *p = mori_comm_peer_info(comm, r);
    const mori_peer_info_t *first = mori_comm_peer_info(comm, r - r % local);
    if (p->local_size != local || p->local_rank != r % local || p->host_hash != first->host_hash)
      return mori_error_set(MORI_ENOTSUP,
                            "teams: ranks are not laid out as equal nodes of contiguous ranks (rank %d is local rank %d of "
                            "%d, expected %d of %d)",
                            r, p->local_rank, p->local_size, r % local, local);
  }
  *per_node = local;
  return 0;
}

int mori_team_get(const mori_comm_t *comm, mori_team_kind_t kind, mori_team_t *out) {
  if (!comm || !out) return mori_error_set(MORI_EINVAL, "team_get: NULL argument");
  int live = mori_comm_check_live(comm, "team_get");
  if (live) return live;
  int me = mori_comm_rank(comm), n = mori_comm_size(comm), per_node = 0, rc;
  switch (kind) {
    case MORI_TEAM_WORLD:
      *out = make_team(0, 1, n, me);
      return 0;
    case MORI_TEAM_LSA: {
      int base, size;
      mori_comm_lsa(comm, &base, &size, NULL);
      *out = make_team(base, 1, size, me);
      return 0;
    }
    case MORI_TEAM_NODE:
      if ((rc = regular_nodes(comm, &per_node)) != 0) return rc;
      *out = make_team(me - me % per_node, 1, per_node, me);
      return 0;
    case MORI_TEAM_RAIL:
      if ((rc = regular_nodes(comm, &per_node)) != 0) return rc;
      *out = make_team(me % per_node, per_node, n / per_node, me);
      return 0;
  }
  return mori_error_set(MORI_EINVAL, "team_get: unknown team kind %d", (int)kind);
}

/* What makes *t no team, or NULL. Teams are plain values (collectives take
 * them by hand, destroy leaves size 0), so a split checks its parent before
 * its arithmetic: stride 0 divided by zero, a negative one or a wrapped last
 * member gave children outside the world. */
static const char *team_defect(const mori_team_t *t) {
  if (t->stride < 1) return "its stride is below 1";
  if (t->size < 1) return "its size is below 1";
  if (t->start < 0) return "its start is negative";
  if (t->rank < -1 || t->rank >= t->size) return "its rank is neither -1 nor below its size";
  if ((int64_t)t->start + (int64_t)(t->size - 1) * t->stride > INT32_MAX)
    return "its last member's world rank does not fit int";
  return NULL;
}

static int check_parent(const char *call, const mori_team_t *t) {
  const char *why = team_defect(t);
  if (!why) return 0;
  return mori_error_set(MORI_EINVAL, "%s: parent team {start %d, stride %d, size %d, rank %d} is not a team: %s", call,
                        t->start, t->stride, t->size, t->rank, why);
}

int mori_team_split_strided(const mori_team_t *parent, int start, int stride, int size, mori_team_t *out) {
  if (!parent || !out) return mori_error_set(MORI_EINVAL, "team_split_strided: NULL argument");
  int rc = check_parent("team_split_strided", parent);
  if (rc) return rc;
  /* 64 bits: in int, start + (size-1)*stride wrapped negative and passed.
   * Both terms are below 2^62, so the sum cannot overflow. */
  if (start < 0 || stride < 1 || size < 1 || (int64_t)start + (int64_t)(size - 1) * stride >= parent->size)
    return mori_error_set(MORI_EINVAL, "team_split_strided: indices %d + k*%d for k < %d leave the parent team of size %d",
                          start, stride, size, parent->size);
  /* Members inside a sound parent have world ranks that fit int, and so
   * does the stride between two of them (it is below the parent's span). A
   * single member (size 1) has no stride to speak of: its team gets 1 (the
   * product of the strides given could wrap). */
  int world_stride = size == 1 ? 1 : stride * parent->stride;
  mori_team_t t = {parent->start + start * parent->stride, world_stride, size, -1};
  int my_world = mori_team_to_world(*parent, parent->rank);
  t.rank = my_world < 0 ? -1 : mori_team_from_world(t, my_world);
  *out = t;
  return 0;
}

int mori_team_split_2d(const mori_team_t *parent, int x_size, mori_team_t *x, mori_team_t *y) {
  if (!parent || !x || !y) return mori_error_set(MORI_EINVAL, "team_split_2d: NULL argument");
  int rc = check_parent("team_split_2d", parent);
  if (rc) return rc;
  if (x_size < 1 || parent->size % x_size)
    return mori_error_set(MORI_EINVAL, "team_split_2d: x size %d does not divide the team size %d", x_size, parent->size);
  if (parent->rank < 0)
    return mori_error_set(MORI_EINVAL,
                          "team_split_2d: the calling rank is not a member of the parent team {start %d, stride %d, size "
                          "%d} (its rank there is -1)",
                          parent->start, parent->stride, parent->size);
  /* Both teams or neither: *x is not left changed by a split of y that fails. */
  int row = parent->rank / x_size, col = parent->rank % x_size;
  mori_team_t tx, ty;
  rc = mori_team_split_strided(parent, row * x_size, 1, x_size, &tx);
  if (!rc) rc = mori_team_split_strided(parent, col, x_size, parent->size / x_size, &ty);
  if (rc) return mori_error_context(rc, "team_split_2d (x size %d of a team of %d)", x_size, parent->size);
  *x = tx;
  *y = ty;
  return 0;
}

/* No members, but a stride of 1: all zeros had stride 0, and the inline
 * arithmetic of a destroyed team divided by it. */
void mori_team_destroy(mori_team_t *team) {
  if (team) *team = (mori_team_t){0, 1, 0, -1};
}

const char *mori_team_transport_name(const mori_comm_t *comm, int peer) {
  if (!comm) {
    mori_error_set(MORI_EINVAL, "team_transport_name: NULL comm");
    return "none";
  }
  if (mori_comm_check_live(comm, "team_transport_name") != 0) return "none";
  if (peer < 0 || peer >= mori_comm_size(comm)) {
    mori_error_set(MORI_EINVAL, "team_transport_name: peer %d outside the comm of %d ranks", peer, mori_comm_size(comm));
    return "none";
  }
  const mori_transport_ops_t *t = mori_comm_transport_for(comm, peer);
  return t ? t->name : "none";
}
