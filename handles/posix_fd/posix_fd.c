// SPDX-License-Identifier: MIT
/* posix_fd handle library: each comm gets an fd channel whose socket name
 * and secret token rank 0 draws at random and broadcasts through the
 * bootstrap; share() sends this rank's fd to every peer that wants it and
 * receives theirs; the channel accepts connections only from the processes
 * the ranks reported at comm creation. */
#include <stdlib.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/base/error.h"
#include "handles/posix_fd/fd_channel.h"
#include "mori/handle_posix_fd.h"

struct posix_fd_state {
  fd_channel_t *channel;
  int timeout_ms;
};

/* The step that ends setup: every rank's status, so that all go on or all
 * fail naming who (a rank that returned early would leave the others
 * waiting in a step it never takes). The failed rank keeps its own
 * message. */
static int agree(mori_comm_t *comm, int rc, const char *step) {
  int n = mori_comm_size(comm);
  int32_t mine = rc, *all = calloc((size_t)n, sizeof(*all));
  if (!all) return rc ? rc : mori_error_set(MORI_ENOMEM, "posix_fd: %s", step);
  int grc = mori_comm_allgather(comm, &mine, all, sizeof(mine));
  int failed = -1;
  for (int r = 0; !grc && r < n && failed < 0; r++)
    if (all[r]) failed = r;
  int code = failed >= 0 ? all[failed] : 0;
  free(all);
  if (rc) return rc;
  if (grc) return mori_error_context(grc, "posix_fd: %s", step);
  if (failed >= 0)
    return mori_error_set(code < 0 ? code : MORI_EIO, "posix_fd: %s: rank %d failed (%s; its own error says why)", step,
                          failed, mori_err_name(code < 0 ? code : MORI_EIO));
  return 0;
}

static int posix_fd_init(mori_comm_t *comm, void **state) {
  /* Socket-name nonce, token, and rank 0's status: it broadcasts either
   * way, so a failed draw fails every rank instead of leaving them waiting. */
  uint64_t secrets[3] = {0, 0, 0};
  int rc = 0;
  if (mori_comm_rank(comm) == 0 && getrandom(secrets, 2 * sizeof(uint64_t), 0) != 2 * sizeof(uint64_t)) {
    rc = mori_error_errno("posix_fd: drawing the channel token");
    secrets[2] = 1;
  }
  int brc = mori_bootstrap_bcast(mori_comm_bootstrap(comm), secrets, sizeof(secrets), 0);
  if (rc) return rc;
  if (brc) return mori_error_context(brc, "posix_fd: sharing the channel token");
  if (secrets[2]) return mori_error_set(MORI_EIO, "posix_fd: rank 0 could not draw the channel token (its own error says why)");
  struct posix_fd_state *s = calloc(1, sizeof(*s));
  if (!s) rc = mori_error_set(MORI_ENOMEM, "posix_fd");
  int size = mori_comm_size(comm);
  if (!rc) {
    s->timeout_ms = mori_bootstrap_timeout_ms(mori_comm_bootstrap(comm));
    rc = fd_channel_open(secrets[0], secrets[1], mori_comm_rank(comm), size, &s->channel);
  }
  if (rc) {
    free(s);
    return agree(comm, rc, "opening the fd channel");
  }
  /* Only the job's processes may connect (checked at accept), by pid where
   * the rank shares this process's pid namespace. */
  const mori_peer_info_t *me = mori_comm_peer_info(comm, mori_comm_rank(comm));
  for (int r = 0; r < size; r++) {
    const mori_peer_info_t *peer = mori_comm_peer_info(comm, r);
    bool foreign = peer->pid_namespace && me->pid_namespace && peer->pid_namespace != me->pid_namespace;
    if (foreign) fd_channel_set_foreign(s->channel, r, peer->pid_namespace);
    else fd_channel_set_pid(s->channel, r, peer->pid);
  }
  /* No rank may send before every socket is bound. */
  rc = agree(comm, 0, "opening the fd channel");
  if (rc) {
    fd_channel_close(s->channel);
    free(s);
    return rc;
  }
  *state = s;
  return 0;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What is left until the deadline; at least 1 ms, so that a call after the
 * deadline still takes what is already there without waiting. */
static int left_ms(int64_t deadline) {
  int64_t left = deadline - now_ms();
  return left < 1 ? 1 : left > INT32_MAX ? INT32_MAX : (int)left;
}

static int posix_fd_share(void *state, mori_comm_t *comm, uint64_t seq, const mori_shareable_t *mine,
                          mori_shareable_t *theirs, const bool *want) {
  struct posix_fd_state *s = state;
  int size = mori_comm_size(comm), me = mori_comm_rank(comm), rc = 0;
  int fd = mine->type == MORI_HANDLE_POSIX_FD ? mine->fd : -1; /* -1: "no handle" */
  /* want[] is symmetric (the LSA team): whoever I want, wants me. Every
   * send and receive is attempted, all within one timeout (the comm's
   * bootstrap's), so a failure here leaves no peer waiting for this rank
   * longer than its own timeout. */
  int64_t deadline = now_ms() + s->timeout_ms;
  for (int r = 0; r < size; r++) {
    if (!want[r] || r == me) continue;
    int src = fd_channel_send(s->channel, r, seq, fd, left_ms(deadline));
    if (src && !rc) rc = mori_error_context(src, "posix_fd: rank %d sending its handle to rank %d", me, r);
  }
  for (int r = 0; r < size; r++) {
    if (!want[r] || r == me) continue;
    int got = -1;
    int rrc = fd_channel_recv(s->channel, r, seq, left_ms(deadline), &got);
    theirs[r].type = got >= 0 ? MORI_HANDLE_POSIX_FD : MORI_HANDLE_NONE;
    theirs[r].fd = got;
    if (rrc && !rc) rc = rrc;
  }
  return rc;
}

static int posix_fd_fini(void *state) {
  struct posix_fd_state *s = state;
  if (!s) return 0;
  fd_channel_close(s->channel);
  free(s);
  return 0;
}

const mori_handle_ops_t mori_handle_posix_fd_ops = {
    .size = sizeof(mori_handle_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "posix_fd",
    .handle_type = MORI_HANDLE_POSIX_FD,
    .init = posix_fd_init,
    .share = posix_fd_share,
    .fini = posix_fd_fini,
};
