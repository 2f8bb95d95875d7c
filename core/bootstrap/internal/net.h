// SPDX-License-Identifier: MIT
/* Socket steps of the TCP bootstrap, each bounded by an absolute deadline on
 * the monotonic clock (milliseconds). */
#ifndef MORI_CORE_BOOTSTRAP_NET_H
#define MORI_CORE_BOOTSTRAP_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

int64_t mori_net_now_ms(void);

/* 0 once fd is ready for events; MORI_ETIMEDOUT at the deadline. */
int mori_net_wait(int fd, short events, int64_t deadline);

/* Connects a non-blocking stream socket to sa, retrying while nobody
 * listens yet, until the deadline. 0 with *fd set; else MORI_ETIMEDOUT (or
 * another code) with the last reason in why. */
int mori_net_connect(const struct sockaddr *sa, socklen_t len, int64_t deadline, int *fd, char *why, size_t why_len);

/* TCP_NODELAY and close-on-exec on a connected socket. */
void mori_net_tune(int fd);

/* Who is at the other end of a connected TCP socket, when it is on this
 * machine: the kernel knows every TCP socket of this network namespace with
 * its owner's uid (socket diagnostics over netlink, as `ss` asks; else the
 * tables /proc/net/tcp and /proc/net/tcp6), and the other end is the one
 * whose local address is our peer's and whose remote address is ours. 1 with *uid set when it is found (a process of this machine), 0
 * when not (another machine, or another network namespace, which the
 * job's secret must keep out), negative when the tables cannot be read. */
int mori_net_local_peer_uid(int fd, unsigned *uid);
/* Whether the other end is a process of another user of this machine (its
 * uid in *uid). Tables that cannot be read count as no: the job's secret
 * still keeps a stranger out. */
bool mori_net_other_local_user(int fd, unsigned *uid);

MORI_EXTERN_C_END

#endif
