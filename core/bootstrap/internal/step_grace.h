// SPDX-License-Identifier: MIT
/* A bootstrap step with a grace for late ranks (bootstrap.c): what core's
 * comm steps use where the node channel is not theirs (ranks on several
 * hosts) and the caller knows ranks may come late. */
#ifndef MORI_CORE_BOOTSTRAP_INTERNAL_STEP_GRACE_H
#define MORI_CORE_BOOTSTRAP_INTERNAL_STEP_GRACE_H

#include "mori/bootstrap.h"

MORI_EXTERN_C_BEGIN

/* mori_bootstrap_allgather, waiting up to grace_ms beyond the bootstrap's
 * limit (its allgather_grace op); grace_ms <= 0, or a bootstrap without
 * the op, is the plain step. */
int mori_bootstrap_allgather_grace(mori_bootstrap_t *bootstrap, const void *send, void *recv, size_t bytes, int grace_ms);

MORI_EXTERN_C_END

#endif
