// SPDX-License-Identifier: MIT
/* A channel that carries file descriptors between the processes of one job
 * on one host: a listening UNIX seqpacket socket per rank in the abstract
 * namespace (nothing on disk to clean up); a sender connects, sends one
 * message (SCM_RIGHTS for the fd) and closes. The kernel records who
 * connected (SO_PEERCRED), so a connection from another user, or from a
 * process that is no rank of the job, is closed at accept, before anything
 * is read from it: its descriptors are never installed in this process. A
 * message read from a rank's process is accepted only when it carries the
 * job's secret token and claims the rank of the process that sent it.
 * The sender checks the other way round before it sends: the listener must
 * be the receiving rank's process (this uid, the pid that rank reported),
 * so a process that bound a free name (a rank's that closed its channel or
 * died) receives nothing. Every wait ends by the caller's timeout.
 * Warnings about what is refused are rate-limited (at most one a second).
 * Messages may arrive in any order: those for later steps wait in a stash;
 * those of steps already over are dropped and their fds closed. */
#ifndef MORI_HANDLES_POSIX_FD_CHANNEL_H
#define MORI_HANDLES_POSIX_FD_CHANNEL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

typedef struct fd_channel fd_channel_t;

/* name_nonce picks the socket names (visible in /proc/net/unix); token is
 * the secret every message must carry; `size` ranks, whose process ids are
 * given with fd_channel_set_pid (0: not known yet, nothing accepted). */
int fd_channel_open(uint64_t name_nonce, uint64_t token, int rank, int size, fd_channel_t **out);
void fd_channel_close(fd_channel_t *ch);
void fd_channel_set_pid(fd_channel_t *ch, int rank, pid_t pid);
/* A rank in another pid namespace than this process (`pid_namespace`, the
 * inode of its /proc/self/ns/pid as it reported it): its pid cannot be
 * compared with what the kernel reports for its sockets (a pid of its own
 * namespace; here another number, or 0). A process of this namespace never
 * speaks for it (connect, send, hold its socket); one of a namespace nested
 * in this one must live in the namespace the rank reported where its
 * namespace link can be read (not for another group without privilege);
 * one that cannot be told apart further, or that the kernel cannot name
 * here (pid 0, outside this namespace's tree), is checked by uid and, for
 * its messages, by the token. Whether such a rank has exited cannot be
 * told: waits on it end at their deadline. */
void fd_channel_set_foreign(fd_channel_t *ch, int rank, uint64_t pid_namespace);
/* Sends a duplicate of fd to rank `to`, tagged with step `seq`; fd < 0
 * sends "no handle" (this rank failed), which the receiver gets as -1.
 * Only to rank `to`'s process (MORI_EACCES naming the socket and whoever
 * holds it otherwise, at once); MORI_ECONNRESET at once when that process
 * has exited; MORI_ERANK_TIMEOUT when it accepted nothing within
 * timeout_ms. */
int fd_channel_send(fd_channel_t *ch, int to, uint64_t seq, int fd, int timeout_ms);
/* Receives rank `from`'s fd of step `seq` (-1: the sender had none).
 * Stashed messages of earlier steps, from any rank, are stale: dropped.
 * MORI_ERANK_TIMEOUT after timeout_ms; MORI_ECONNRESET as soon as rank
 * `from`'s process has exited with nothing queued from it. */
int fd_channel_recv(fd_channel_t *ch, int from, uint64_t seq, int timeout_ms, int *fd);
/* Connections closed unread (another user, or no rank's process). */
unsigned fd_channel_refused(const fd_channel_t *ch);
/* Messages read and dropped (malformed, forged token, wrong rank, stale). */
unsigned fd_channel_rejected(const fd_channel_t *ch);
/* Warnings written so far (the rest were suppressed by the rate limit). */
unsigned fd_channel_warnings(const fd_channel_t *ch);

/* For tests: one message with any token and claimed rank, or any bytes,
 * from this process to rank `to` of the channel named by name_nonce. */
int fd_channel_send_raw(uint64_t name_nonce, int to, uint64_t token, int claimed_rank, uint64_t seq, int fd);
int fd_channel_send_bytes(uint64_t name_nonce, int to, const void *bytes, size_t n, int fd);

MORI_EXTERN_C_END

#endif
