// SPDX-License-Identifier: MIT
/* A device error record in words (device_record.c), for the mailbox's
 * reader (mori_window_check). */
#ifndef MORI_CORE_INTERNAL_DEVICE_RECORD_H
#define MORI_CORE_INTERNAL_DEVICE_RECORD_H

#include <stdint.h>

#include "mori/device/impl/window__types.h"

/* Sets the thread's error from record `e` with code `code` and returns the
 * code. `untimed_wait_ns`: the bound a wait given no timeout ends at (the
 * window's; 0: none), so a timeout that came from it says so. */
int mori_device_record_error(int code, const mori_device_error_t *e, uint64_t untimed_wait_ns);

/* A record of a collective context whose epochs start at `call_base`
 * (window_terms.h), made to count the context's calls from 1: the words
 * that hold a call's epoch (which depend on the channel) lose the base; a
 * word below it (nothing of this context yet: 0, or an older context's
 * value) is left as it is. Nothing changes when call_base is 0. */
void mori_device_record_rebase(mori_device_error_t *e, uint64_t call_base);

#endif
