// SPDX-License-Identifier: MIT
/* Which address rank 0's bootstrap listens on (socket_ifname.c). */
#ifndef MORI_SHMEM_INTERNAL_SOCKET_IFNAME_H
#define MORI_SHMEM_INTERNAL_SOCKET_IFNAME_H

#include <sys/socket.h>

#include "mori/error.h"

MORI_EXTERN_C_BEGIN

/* MORI_SOCKET_IFNAME: comma-separated interface names or prefixes ("eth",
 * "ib0,eth1"); a leading '^' excludes the listed ones instead. Unset: the
 * first interface that is up, not loopback and not a container bridge,
 * IPv4 before IPv6; loopback when there is none. Interfaces are taken in
 * the order the system lists them. MORI_EINVAL names the variable and the
 * interfaces there are when nothing matches. */
int mori_shmem_pick_address(struct sockaddr_storage *addr, socklen_t *len, char ifname[16]);

MORI_EXTERN_C_END

#endif
