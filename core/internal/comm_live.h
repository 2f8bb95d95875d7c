// SPDX-License-Identifier: MIT
/* Whether a comm handle is one of the process's live comms (comm.c), for
 * calls that take a comm and would otherwise read a destroyed comm's freed
 * memory (teams, locality, address maps). */
#ifndef MORI_CORE_INTERNAL_COMM_LIVE_H
#define MORI_CORE_INTERNAL_COMM_LIVE_H

#include "mori/comm.h"

MORI_EXTERN_C_BEGIN

/* 0 when `comm` is one of the process's live comms, else MORI_EINVAL naming
 * `call` (a comm destroyed already, or a pointer that never was one). */
int mori_comm_check_live(const mori_comm_t *comm, const char *call);

MORI_EXTERN_C_END

#endif
