// SPDX-License-Identifier: MIT
/* Who holds an abstract unix socket name, when a connect to it cannot say:
 * a name bound and not listened on, or listened on with a full backlog,
 * refuses a connection exactly as a name nobody bound does. The kernel's
 * socket diagnostics (NETLINK_SOCK_DIAG, unix family) list every unix
 * socket of this network namespace with its name and its owner's uid, to
 * any user, so the fd channel can tell another user's squat from a rank
 * that has not bound its name yet. */
#ifndef MORI_HANDLES_POSIX_FD_SOCKET_HOLDER_H
#define MORI_HANDLES_POSIX_FD_SOCKET_HOLDER_H

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

/* 1 with *uid the owner of a socket bound to `sa`'s abstract name (len: the
 * address length connect takes), 0 when none is bound, -1 when the kernel
 * cannot say (no socket diagnostics, or a kernel before 5.3 that does not
 * report uids). Sets no mori error: "cannot say" is an answer. */
int fd_socket_holder_uid(const struct sockaddr_un *sa, socklen_t len, uid_t *uid);

MORI_EXTERN_C_END

#endif
