// SPDX-License-Identifier: MIT
/* The team a context is made for: checked on the rank that names it, then
 * agreed across the comm, before any workspace is made. A team is a plain
 * value the caller may fill by hand, so nothing else stops a stride of 0,
 * members past the comm, or members that each name another team (each then
 * sums with whoever it thinks its members are, and returns MORI_OK). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "collectives/internal.h"
#include "core/base/error.h"
#include "core/internal/agreement.h"
#include "mori/comm.h"
#include "mori/device/team.h"

/* What makes t no team of a comm of `ranks`, or NULL. */
static const char *team_defect(mori_team_t t, int ranks) {
  if (t.stride < 1) return "its stride is below 1";
  if (t.size < 1) return "its size is below 1";
  if (t.start < 0) return "its start is negative";
  /* 64 bits: both terms are below 2^62, so the sum cannot wrap. */
  if ((int64_t)t.start + (int64_t)(t.size - 1) * t.stride >= ranks) return "its members run past the comm's last rank";
  return NULL;
}

/* Members of one team name the same team; bystanders (ranks outside the
 * team they name) are free. *a and *b get the first pair that breaks it. */
static bool members_agree(const int32_t *teams, int n, int *a, int *b) {
  for (int r = 0; r < n; r++) {
    mori_team_t t = {teams[3 * r], teams[3 * r + 1], teams[3 * r + 2], -1};
    if (mori_team_from_world(t, r) < 0) continue;
    for (int m = 0; m < t.size; m++) {
      int w = mori_team_to_world(t, m);
      if (teams[3 * w] != t.start || teams[3 * w + 1] != t.stride || teams[3 * w + 2] != t.size) {
        *a = r;
        *b = w;
        return false;
      }
    }
  }
  return true;
}

int mori_coll_agree_team(mori_comm_t *comm, mori_team_t team, int local_rc) {
  int n = mori_comm_size(comm);
  int rc = local_rc;
  const char *why = rc ? NULL : team_defect(team, n);
  if (why)
    rc = mori_error_set(MORI_EINVAL, "the team it names, {start %d, stride %d, size %d}, is not a team of the comm of %d ranks: %s",
                        team.start, team.stride, team.size, n, why);
  int32_t mine[3] = {team.start, team.stride, team.size};
  int32_t *all = calloc((size_t)n, sizeof(mine));
  if (!all && !rc) rc = mori_error_set(MORI_ENOMEM, "its table of the teams (%d ranks)", n);
  /* Every rank takes the step, failed or not; each then reads the same
   * table, so all go on or all fail alike. */
  int arc = mori_agree_gather(comm, rc, "coll_create", mine, all, sizeof(mine));
  int a = -1, b = -1;
  if (!arc && !members_agree(all, n, &a, &b))
    arc = mori_error_set(MORI_EMISMATCH,
                         "coll_create: ranks disagree on the team: rank %d names {start %d, stride %d, size %d}, and "
                         "rank %d, a member of it, names {start %d, stride %d, size %d}",
                         a, all[3 * a], all[3 * a + 1], all[3 * a + 2], b, all[3 * b], all[3 * b + 1], all[3 * b + 2]);
  free(all);
  return arc;
}
