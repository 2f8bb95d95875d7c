// SPDX-License-Identifier: MIT
/* Internal error helpers: the detecting function sets the message, callers
 * add context in front of it, nobody overwrites it. */
#ifndef MORI_CORE_BASE_ERROR_H
#define MORI_CORE_BASE_ERROR_H

#include "mori/error.h"

MORI_EXTERN_C_BEGIN

#if defined(__GNUC__)
#define MORI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MORI_PRINTF(f, a)
#endif

/* Records "<message>" as this thread's last error and returns code. */
int mori_error_set(int code, const char *fmt, ...) MORI_PRINTF(2, 3);
/* Prepends "<context>: " to the last error and returns code. */
int mori_error_context(int code, const char *fmt, ...) MORI_PRINTF(2, 3);
/* Records strerror(errno) with a message; returns -errno (or MORI_EIO). */
int mori_error_errno(const char *fmt, ...) MORI_PRINTF(1, 2);

/* Cleanup after a failure keeps the first error: what it records of its own
 * (a failed unmap on the way out) goes to the log, never over the cause. */
typedef struct mori_error_saved {
  char text[1024];
} mori_error_saved_t;
void mori_error_save(mori_error_saved_t *saved);
void mori_error_restore(const mori_error_saved_t *saved);

MORI_EXTERN_C_END

#endif
