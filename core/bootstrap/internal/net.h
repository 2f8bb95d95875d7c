// SPDX-License-Identifier: MIT
/* Socket steps of the TCP bootstrap, each bounded by an absolute deadline on
 * the monotonic clock (milliseconds). */
#ifndef MORI_CORE_BOOTSTRAP_NET_H
#define MORI_CORE_BOOTSTRAP_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

int64_t mori_net_now_ms(void);

/* 0 once fd is ready for events; MORI_ETIMEDOUT at the deadline. */
int mori_net_wait(int fd, short events, int64_t deadline);

/* 0, MORI_ETIMEDOUT, or MORI_ECONNRESET when the peer closed or failed. */
int mori_net_send_all(int fd, const void *buf, size_t len, int64_t deadline);
int mori_net_recv_all(int fd, void *buf, size_t len, int64_t deadline);

/* Connects a non-blocking stream socket to sa, retrying while nobody
 * listens yet, until the deadline. 0 with *fd set; else MORI_ETIMEDOUT (or
 * another code) with the last reason in why. */
int mori_net_connect(const struct sockaddr *sa, socklen_t len, int64_t deadline, int *fd, char *why, size_t why_len);

/* TCP_NODELAY and close-on-exec on a connected socket. */
void mori_net_tune(int fd);

MORI_EXTERN_C_END

#endif
