// SPDX-License-Identifier: MIT
/* Handle library: physical memory travels as POSIX file descriptors over a
 * private UNIX socket channel (same host only). */
#ifndef MORI_HANDLE_POSIX_FD_H
#define MORI_HANDLE_POSIX_FD_H

#include "mori/plugin.h"

MORI_EXTERN_C_BEGIN
extern MORI_API const mori_handle_ops_t mori_handle_posix_fd_ops;
MORI_EXTERN_C_END

#endif
