// SPDX-License-Identifier: MIT
/* Error codes: every fallible mori call returns 0 or a negative MORI_E* code.
 * Codes equal -errno where errno already has the meaning; SDK-only conditions
 * sit below -1000. The detail (what failed, which rank, which size) is in the
 * calling thread's mori_last_error(). */
#ifndef MORI_ERROR_H
#define MORI_ERROR_H

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

/* X(name, value, description) */
#define MORI_ERRNO_MAP(X)                                                      \
  X(OK, 0, "success")                                                          \
  X(EPERM, -1, "operation not permitted")                                      \
  X(ENOENT, -2, "no such object")                                              \
  X(EIO, -5, "input/output error")                                             \
  X(EBADF, -9, "bad file descriptor")                                          \
  X(EAGAIN, -11, "resource temporarily unavailable")                           \
  X(ENOMEM, -12, "out of memory")                                              \
  X(EACCES, -13, "permission denied")                                          \
  X(EFAULT, -14, "bad address")                                                \
  X(EBUSY, -16, "object still in use")                                         \
  X(EEXIST, -17, "object already exists")                                      \
  X(ENODEV, -19, "no such device")                                             \
  X(EINVAL, -22, "invalid argument")                                           \
  X(EMFILE, -24, "too many open files")                                        \
  X(ERANGE, -34, "value out of range")                                         \
  X(ENOSYS, -38, "function not implemented")                                   \
  X(EPROTO, -71, "protocol error")                                             \
  X(EMSGSIZE, -90, "message too long")                                         \
  X(ENOTSUP, -95, "operation not supported")                                   \
  X(ECONNRESET, -104, "connection reset by peer")                              \
  X(ETIMEDOUT, -110, "timed out")                                              \
  X(ECONNREFUSED, -111, "connection refused")                                  \
  X(ECANCELED, -125, "operation canceled")                                     \
  X(EMISMATCH, -1001, "ranks disagree on a collective's arguments")            \
  X(ERANK_TIMEOUT, -1002, "a rank did not arrive in time")                     \
  X(EUNREACHABLE, -1003, "peer not reachable by any transport")               \
  X(ENOT_OWNED, -1004, "pointer not allocated by mori")                        \
  X(ERUNTIME, -1005, "GPU runtime error")                                      \
  X(ENO_GPU, -1006, "no GPU present for this platform")                        \
  X(EABORTED, -1007, "aborted by a peer or the abort flag")                    \
  X(EDEVICE_TIMEOUT, -1008, "a wait inside a kernel timed out")              \
  X(ENOT_INITIALIZED, -1009, "not initialised")                               \
  X(ECHANNEL, -1010, "signal channel outside the window's signal pad")

typedef enum mori_errno {
#define MORI_ERRNO_ENUM(name, value, desc) MORI_##name = (value),
  MORI_ERRNO_MAP(MORI_ERRNO_ENUM)
#undef MORI_ERRNO_ENUM
} mori_errno_t;

/* Short description of a code ("timed out"); never NULL. */
MORI_API const char *mori_strerror(int code);
/* Symbolic name of a code ("MORI_ETIMEDOUT"); never NULL. */
MORI_API const char *mori_err_name(int code);
/* Detail of the last failure on this thread ("" if none). */
MORI_API const char *mori_last_error(void);
/* Clears this thread's last error. */
MORI_API void mori_clear_error(void);
/* For code outside mori that implements one of its interfaces (a bootstrap
 * over another channel, a plug-in): records the message as this thread's
 * last error, as mori's own functions do, and returns code. */
MORI_API int mori_error_report(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

MORI_EXTERN_C_END

#endif /* MORI_ERROR_H */
