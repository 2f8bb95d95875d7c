/* A channel that carries file descriptors between the processes of one job
 * on one host: a UNIX datagram socket in the abstract namespace (nothing on
 * disk to clean up), SCM_RIGHTS for the fd, and SCM_CREDENTIALS so the kernel
 * tells who sent each message. A message is accepted only when it carries the
 * job's secret token and comes from the uid of this process and the pid the
 * claimed rank has; everything else is dropped and logged. Messages may
 * arrive in any order: those for later steps wait in a stash. */
#ifndef MORI_HANDLES_POSIX_FD_CHANNEL_H
#define MORI_HANDLES_POSIX_FD_CHANNEL_H

#include <stdint.h>
#include <sys/types.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

typedef struct fd_channel fd_channel_t;

/* name_nonce picks the socket name (visible in /proc/net/unix); token is the
 * secret every message must carry. */
int fd_channel_open(uint64_t name_nonce, uint64_t token, int rank, fd_channel_t **out);
void fd_channel_close(fd_channel_t *ch);
/* Sends a duplicate of fd to rank `to`, tagged with step `seq`; fd < 0
 * sends "no handle" (this rank failed), which the receiver gets as -1. */
int fd_channel_send(fd_channel_t *ch, int to, uint64_t seq, int fd);
/* Receives rank `from`'s fd of step `seq` (-1: the sender had none), sent
 * by process `expected_pid`. Stashed messages of earlier steps from that
 * rank are stale and dropped. */
int fd_channel_recv(fd_channel_t *ch, int from, pid_t expected_pid, uint64_t seq, int timeout_ms, int *fd);
/* Messages dropped so far (forged token, wrong uid or pid, malformed). */
unsigned fd_channel_rejected(const fd_channel_t *ch);

/* For tests: sends a message with any token/rank from this process. */
int fd_channel_send_raw(uint64_t name_nonce, int to, uint64_t token, int claimed_rank, uint64_t seq, int fd);

MORI_EXTERN_C_END

#endif
