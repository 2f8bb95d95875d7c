// SPDX-License-Identifier: MIT
/* Predefined teams and splits, from the comm's topology. */
#include <string.h>

#include "core/base/error.h"
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

int mori_team_split_strided(const mori_team_t *parent, int start, int stride, int size, mori_team_t *out) {
  if (!parent || !out) return mori_error_set(MORI_EINVAL, "team_split_strided: NULL argument");
  if (start < 0 || stride < 1 || size < 1 || start + (size - 1) * stride >= parent->size)
    return mori_error_set(MORI_EINVAL, "team_split_strided: indices %d + k*%d for k < %d leave the parent team of size %d",
                          start, stride, size, parent->size);
  mori_team_t t = {parent->start + start * parent->stride, stride * parent->stride, size, -1};
  int my_world = mori_team_to_world(*parent, parent->rank);
  t.rank = my_world < 0 ? -1 : mori_team_from_world(t, my_world);
  *out = t;
  return 0;
}

int mori_team_split_2d(const mori_team_t *parent, int x_size, mori_team_t *x, mori_team_t *y) {
  if (!parent || !x || !y) return mori_error_set(MORI_EINVAL, "team_split_2d: NULL argument");
  if (x_size < 1 || parent->size % x_size)
    return mori_error_set(MORI_EINVAL, "team_split_2d: x size %d does not divide the team size %d", x_size, parent->size);
  if (parent->rank < 0) return mori_error_set(MORI_EINVAL, "team_split_2d: this rank is not in the parent team");
  int row = parent->rank / x_size, col = parent->rank % x_size;
  int rc = mori_team_split_strided(parent, row * x_size, 1, x_size, x);
  if (!rc) rc = mori_team_split_strided(parent, col, x_size, parent->size / x_size, y);
  return rc;
}

void mori_team_destroy(mori_team_t *team) {
  if (team) memset(team, 0, sizeof(*team));
}

const char *mori_team_transport_name(const mori_comm_t *comm, int peer) {
  const mori_transport_ops_t *t = mori_comm_transport_for(comm, peer);
  return t ? t->name : "none";
}
