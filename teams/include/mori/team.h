// SPDX-License-Identifier: MIT
/* Teams: who is reachable how. Built from the comm's all-gathered topology
 * (host identity, device, local rank; MORI_HOST_ID simulates nodes). Teams
 * are values ({start, stride, size, rank}, see mori/device/team.h) that can
 * be passed to kernels as they are. A team carries no comm: one made by
 * hand, or one of another comm, is checked only for being a team (the
 * splits) and against a comm where a call takes one (a collective
 * context's creation checks and agrees it on every rank); its `rank` is
 * the caller's to keep right. */
#ifndef MORI_TEAM_H
#define MORI_TEAM_H

#include "mori/comm.h"
#include "mori/device/team.h"

MORI_EXTERN_C_BEGIN

typedef enum mori_team_kind {
  MORI_TEAM_WORLD = 0,
  MORI_TEAM_NODE = 1, /* ranks of this host */
  MORI_TEAM_LSA = 2,  /* load/store reachable: contiguous, equal-sized, else self */
  MORI_TEAM_RAIL = 3, /* the ranks with this rank's local index, one per node */
} mori_team_kind_t;

/* A predefined team. NODE and RAIL need a regular layout (nodes of equal
 * size, each a contiguous block of ranks); otherwise MORI_ENOTSUP says why. */
MORI_API int mori_team_get(const mori_comm_t *comm, mori_team_kind_t kind, mori_team_t *out);
/* Indices start, start + stride, … (size of them) of the parent. MORI_EINVAL
 * when the parent is no team (stride or size below 1, start negative, rank
 * neither -1 nor an index, members past INT_MAX) or when an index leaves
 * the parent. A single member's team has stride 1, whatever `stride`. */
MORI_API int mori_team_split_strided(const mori_team_t *parent, int start, int stride, int size, mori_team_t *out);
/* Parent as an x_size-wide grid: x = this rank's row (consecutive indices),
 * y = this rank's column (indices x_size apart). A single-member team has
 * stride 1. Both are written or, on an error, neither. */
MORI_API int mori_team_split_2d(const mori_team_t *parent, int x_size, mori_team_t *x, mori_team_t *y);
/* Teams are values; destroy only clears (kept for create/destroy symmetry)
 * to {start 0, stride 1, size 0, rank -1}: a team without members. */
MORI_API void mori_team_destroy(mori_team_t *team);

/* The transport that reaches world rank `peer` and its name ("none"; also
 * for a NULL or destroyed comm or a peer outside it, with the error set). */
MORI_API const char *mori_team_transport_name(const mori_comm_t *comm, int peer);

MORI_EXTERN_C_END

#endif
