// SPDX-License-Identifier: MIT
/* The team a context is made for: checked on the rank that names it, then
 * agreed across the comm, before any workspace is made. A team is a plain
 * value the caller may fill by hand, so nothing else stops a stride of 0,
 * members past the comm, or members that each name another team (each then
 * sums with whoever it thinks its members are, and returns MORI_OK). The
 * members also agree on whether the context checks its calls: a member
 * that checks waits in every call for a signature the others never give.
 * The same step takes the largest epoch floor any rank gives (coll.c):
 * where the new context's epochs start. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* What each rank gives the step: its team, whether it checks calls (what
 * members must give alike: the fields before AGREED), and its epoch floor
 * in two halves (free: the largest is taken). */
enum { START, STRIDE, SIZE, CHECKS, AGREED, FLOOR_LOW = AGREED, FLOOR_HIGH, FIELDS };

/* Members of one team name the same team and check calls alike;
 * bystanders (ranks outside the team they name) are free. *a and *b get
 * the first pair that breaks it. */
static bool members_agree(const int32_t *teams, int n, int *a, int *b) {
  for (int r = 0; r < n; r++) {
    const int32_t *mine = teams + FIELDS * r;
    mori_team_t t = {mine[START], mine[STRIDE], mine[SIZE], -1};
    if (mori_team_from_world(t, r) < 0) continue;
    for (int m = 0; m < t.size; m++) {
      const int32_t *theirs = teams + FIELDS * mori_team_to_world(t, m);
      if (memcmp(theirs, mine, AGREED * sizeof(*mine)) != 0) {
        int w = mori_team_to_world(t, m);
        *a = r;
        *b = w;
        return false;
      }
    }
  }
  return true;
}

int mori_coll_agree_team(mori_comm_t *comm, mori_team_t team, bool check_calls, uint64_t epoch_floor, int local_rc,
                         int *largest_team, bool *any_checks, uint64_t *epoch_base) {
  int n = mori_comm_size(comm);
  int rc = local_rc;
  const char *why = rc ? NULL : team_defect(team, n);
  if (why)
    rc = mori_error_set(MORI_EINVAL, "the team it names, {start %d, stride %d, size %d}, is not a team of the comm of %d ranks: %s",
                        team.start, team.stride, team.size, n, why);
  int32_t mine[FIELDS] = {[START] = team.start, [STRIDE] = team.stride, [SIZE] = team.size, [CHECKS] = check_calls,
                          [FLOOR_LOW] = (int32_t)(uint32_t)epoch_floor, [FLOOR_HIGH] = (int32_t)(uint32_t)(epoch_floor >> 32)};
  int32_t *all = calloc((size_t)n, sizeof(mine));
  if (!all && !rc) rc = mori_error_set(MORI_ENOMEM, "its table of the teams (%d ranks)", n);
  /* Every rank takes the step, failed or not; each then reads the same
   * table, so all go on or all fail alike. */
  int arc = mori_agree_gather(comm, rc, "coll_create", mine, all, sizeof(mine));
  int a = -1, b = -1;
  if (!arc && !members_agree(all, n, &a, &b)) {
    const int32_t *ta = all + FIELDS * a, *tb = all + FIELDS * b;
    if (memcmp(ta, tb, CHECKS * sizeof(*ta)) != 0)
      arc = mori_error_set(MORI_EMISMATCH,
                           "coll_create: ranks disagree on the team: rank %d names {start %d, stride %d, size %d}, and "
                           "rank %d, a member of it, names {start %d, stride %d, size %d}",
                           a, ta[START], ta[STRIDE], ta[SIZE], b, tb[START], tb[STRIDE], tb[SIZE]);
    else
      arc = mori_error_set(MORI_EMISMATCH,
                           "coll_create: members of one team disagree on checking calls: rank %d %s, rank %d %s "
                           "(mori_coll_attr_t.check_calls or MORI_COLL_CHECK_CALLS)",
                           a, ta[CHECKS] ? "checks them" : "does not", b, tb[CHECKS] ? "checks them" : "does not");
  }
  *largest_team = 1;
  *any_checks = false;
  *epoch_base = 0;
  for (int r = 0; !arc && r < n; r++) {
    const int32_t *theirs = all + FIELDS * r;
    if (theirs[SIZE] > *largest_team) *largest_team = theirs[SIZE];
    *any_checks = *any_checks || theirs[CHECKS];
    uint64_t proposed = (uint64_t)(uint32_t)theirs[FLOOR_HIGH] << 32 | (uint32_t)theirs[FLOOR_LOW];
    if (proposed > *epoch_base) *epoch_base = proposed;
  }
  free(all);
  return arc;
}
