// SPDX-License-Identifier: MIT
/* Rank 0's address, "host:port" or "[IPv6]:port": split (pure, bounded,
 * fuzzed) and resolved. */
#ifndef MORI_CORE_BOOTSTRAP_ADDRESS_H
#define MORI_CORE_BOOTSTRAP_ADDRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

/* Longest host part accepted: a DNS name is at most 253 characters. */
enum { MORI_TCP_HOST_MAX = 256 };

/* Splits address into host (NUL-terminated, brackets removed) and a port in
 * 1..65535. MORI_EINVAL with the reason in mori_last_error() otherwise; never
 * touches host beyond host_len bytes. */
int mori_tcp_split_address(const char *address, char *host, size_t host_len, uint16_t *port);

/* Splits and resolves address to its first stream address. *numeric says
 * whether the host was an IP literal rather than a name. */
int mori_tcp_resolve_address(const char *address, struct sockaddr_storage *sa, socklen_t *len, bool *numeric);

MORI_EXTERN_C_END

#endif
