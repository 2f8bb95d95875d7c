// SPDX-License-Identifier: MIT
/* Whether a comm handle is one of the process's live comms (comm.c), for
 * calls that take a comm and would otherwise read a destroyed comm's freed
 * memory (teams, locality, address maps). */
#ifndef MORI_CORE_INTERNAL_COMM_LIVE_H
#define MORI_CORE_INTERNAL_COMM_LIVE_H

/* mori_comm_check_live is declared with the plug-in kit, which transports
 * call it from too. */
#include "mori/plugin.h"

#endif
