// SPDX-License-Identifier: MIT
/* Whether a window handle is one of the process's live windows (window.c),
 * for calls above core that take a handle and would otherwise read a
 * destroyed window's freed memory (the window ops of collectives/). */
#ifndef MORI_CORE_INTERNAL_WINDOW_LIVE_H
#define MORI_CORE_INTERNAL_WINDOW_LIVE_H

#include "mori/plugin.h" /* mori_window_check_live, which transports call too */
#include "mori/window.h"

MORI_EXTERN_C_BEGIN

/* 0 once the window's device tables are on the device (copying them if
 * this is the first ask), else the copy's failure, as every later call
 * that hands out a device address of them reports it. */
int mori_window_tables_on_device(const mori_window_t *win);

/* Which of its comm's windows `win` is, by creation order from 1: the same
 * number on every rank (a window is made on every rank or on none), so
 * members can tell whether they name the same window. */
uint64_t mori_window_ordinal(const mori_window_t *win);

MORI_EXTERN_C_END

#endif
