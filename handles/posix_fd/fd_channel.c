/* fd channel; see fd_channel.h. */
#include "handles/posix_fd/fd_channel.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/log.h"

#define FD_MAGIC 0x6d6f72692d666421ull /* "mori-fd!" */
enum { STASH_MAX = 4096 };

/* flags: FD_NO_HANDLE says the sender has no handle for this step (its
 * export failed): the step goes on everywhere, and the receiver learns it. */
enum { FD_NO_HANDLE = 1 };

struct fd_message {
  uint64_t magic;
  uint64_t token;
  int32_t rank;
  int32_t flags;
  uint64_t seq;
};

struct stashed {
  int rank;
  pid_t pid;
  uint64_t seq;
  int fd;
};

struct fd_channel {
  int sock;
  int rank;
  uint64_t nonce, token;
  unsigned rejected;
  struct stashed *stash;
  int stash_count;
};

static socklen_t channel_address(uint64_t nonce, int rank, struct sockaddr_un *sa) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  /* Abstract namespace: sun_path[0] == '\0'. */
  int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "mori-fd.%016llx.%d", (unsigned long long)nonce, rank);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int fd_channel_open(uint64_t nonce, uint64_t token, int rank, fd_channel_t **out) {
  fd_channel_t *ch = calloc(1, sizeof(*ch));
  if (!ch) return mori_error_set(MORI_ENOMEM, "fd channel");
  ch->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (ch->sock < 0) {
    free(ch);
    return mori_error_errno("fd channel: socket");
  }
  int one = 1;
  setsockopt(ch->sock, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
  struct sockaddr_un sa;
  socklen_t len = channel_address(nonce, rank, &sa);
  if (bind(ch->sock, (struct sockaddr *)&sa, len) != 0) {
    int rc = mori_error_errno("fd channel: rank %d cannot bind its socket", rank);
    close(ch->sock);
    free(ch);
    return rc;
  }
  ch->rank = rank;
  ch->nonce = nonce;
  ch->token = token;
  *out = ch;
  return 0;
}

void fd_channel_close(fd_channel_t *ch) {
  if (!ch) return;
  for (int i = 0; i < ch->stash_count; i++)
    if (ch->stash[i].fd >= 0) close(ch->stash[i].fd);
  free(ch->stash);
  close(ch->sock);
  free(ch);
}

unsigned fd_channel_rejected(const fd_channel_t *ch) { return ch->rejected; }

static int receive_one(fd_channel_t *ch, struct stashed *got);
static int stash_push(fd_channel_t *ch, struct stashed got);

/* While our message waits for room in the peer's queue, keep draining our
 * own: the peer may be blocked sending to us. */
static void drain_into_stash(fd_channel_t *ch) {
  struct stashed got;
  while (ch && receive_one(ch, &got) == 1)
    if (stash_push(ch, got) != 0) break;
}

static int send_message(fd_channel_t *ch, uint64_t nonce, int to, uint64_t token, int claimed_rank, uint64_t seq, int fd) {
  int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return mori_error_errno("fd channel: socket");
  struct sockaddr_un sa;
  socklen_t len = channel_address(nonce, to, &sa);
  struct fd_message m = {FD_MAGIC, token, claimed_rank, fd < 0 ? FD_NO_HANDLE : 0, seq};
  struct iovec iov = {&m, sizeof(m)};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof(control));
  struct msghdr msg = {.msg_name = &sa, .msg_namelen = len, .msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  int rc = 0;
  /* Up to ~30 s: the peer's queue may be full, or its socket not bound yet. */
  for (int attempt = 0;; attempt++) {
    if (sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) break;
    if ((errno == EAGAIN || errno == ECONNREFUSED || errno == ENOENT) && attempt < 30000) {
      drain_into_stash(ch);
      struct timespec pause = {0, 1000 * 1000};
      nanosleep(&pause, NULL);
      continue;
    }
    rc = mori_error_errno("fd channel: sending to rank %d", to);
    break;
  }
  close(sock);
  return rc;
}

int fd_channel_send_raw(uint64_t nonce, int to, uint64_t token, int claimed_rank, uint64_t seq, int fd) {
  return send_message(NULL, nonce, to, token, claimed_rank, seq, fd);
}

int fd_channel_send(fd_channel_t *ch, int to, uint64_t seq, int fd) {
  return send_message(ch, ch->nonce, to, ch->token, ch->rank, seq, fd);
}

static int stash_push(fd_channel_t *ch, struct stashed got) {
  if (ch->stash_count >= STASH_MAX) {
    if (got.fd >= 0) close(got.fd);
    ch->rejected++;
    MORI_WARN("fd channel: rank %d dropped a message: stash full", ch->rank);
    return 0;
  }
  struct stashed *grown = realloc(ch->stash, sizeof(*grown) * (size_t)(ch->stash_count + 1));
  if (!grown) {
    if (got.fd >= 0) close(got.fd);
    return mori_error_set(MORI_ENOMEM, "fd channel: stash");
  }
  ch->stash = grown;
  ch->stash[ch->stash_count++] = got;
  return 0;
}

/* Reads one datagram; returns 1 if one was accepted into *got, 0 if it was
 * rejected, negative on error. */
static int receive_one(fd_channel_t *ch, struct stashed *got) {
  struct fd_message m;
  struct iovec iov = {&m, sizeof(m)};
  union {
    char buf[CMSG_SPACE(sizeof(int) * 4) + CMSG_SPACE(sizeof(struct ucred))];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof(control.buf)};
  ssize_t n = recvmsg(ch->sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : mori_error_errno("fd channel: recvmsg");
  int fd = -1;
  struct ucred cred = {0, (uid_t)-1, (gid_t)-1};
  bool have_cred = false;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      /* Keep the first fd; close any extra a sender attached. */
      int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < count; i++) {
        int one;
        memcpy(&one, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof(int));
        if (fd < 0) fd = one;
        else close(one);
      }
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      memcpy(&cred, CMSG_DATA(c), sizeof(cred));
      have_cred = true;
    }
  }
  const char *why = NULL;
  if ((size_t)n != sizeof(m) || m.magic != FD_MAGIC) why = "malformed message";
  else if (m.token != ch->token) why = "wrong token";
  else if (!have_cred || cred.uid != geteuid()) why = "sender has another uid";
  else if (fd < 0 && !(m.flags & FD_NO_HANDLE)) why = "no file descriptor attached";
  if (why) {
    ch->rejected++;
    MORI_WARN("fd channel: rank %d rejected a message claiming rank %d from pid %d uid %d: %s", ch->rank,
              (size_t)n == sizeof(m) ? m.rank : -1, (int)cred.pid, (int)cred.uid, why);
    if (fd >= 0) close(fd);
    return 0;
  }
  if ((m.flags & FD_NO_HANDLE) && fd >= 0) {
    close(fd); /* "no handle" carries none */
    fd = -1;
  }
  *got = (struct stashed){m.rank, cred.pid, m.seq, fd};
  return 1;
}

int fd_channel_recv(fd_channel_t *ch, int from, pid_t expected_pid, uint64_t seq, int timeout_ms, int *fd) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    /* Stashed first: a fast peer may have sent a later step already. */
    for (int i = 0; i < ch->stash_count; i++) {
      struct stashed *s = &ch->stash[i];
      if (s->rank == from && s->seq < seq) {
        /* Left from an exchange that already ended (a failed one): stale. */
        if (s->fd >= 0) close(s->fd);
        *s = ch->stash[--ch->stash_count];
        i--;
        continue;
      }
      if (s->rank != from || s->seq != seq) continue;
      if (s->pid != expected_pid) {
        ch->rejected++;
        MORI_WARN("fd channel: rank %d rejected a message claiming rank %d: sent by pid %d, rank %d is pid %d", ch->rank,
                  from, (int)s->pid, from, (int)expected_pid);
        if (s->fd >= 0) close(s->fd);
        *s = ch->stash[--ch->stash_count];
        i--;
        continue;
      }
      *fd = s->fd;
      *s = ch->stash[--ch->stash_count];
      return 0;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long elapsed = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
    if (elapsed >= timeout_ms)
      return mori_error_set(MORI_ERANK_TIMEOUT, "fd channel: rank %d waited %d ms for rank %d's handle (step %llu)",
                            ch->rank, timeout_ms, from, (unsigned long long)seq);
    struct pollfd p = {.fd = ch->sock, .events = POLLIN};
    int left = timeout_ms - (int)elapsed;
    if (poll(&p, 1, left > 200 ? 200 : left) <= 0) continue;
    struct stashed got;
    int r = receive_one(ch, &got);
    if (r < 0) return r;
    if (r == 0) continue;
    if ((r = stash_push(ch, got)) != 0) return r;
  }
}
