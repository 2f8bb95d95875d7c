// SPDX-License-Identifier: MIT
/* fd channel; see fd_channel.h. */
#include "handles/posix_fd/fd_channel.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/pid_namespace.h"
#include "handles/posix_fd/fd_message.h"
#include "handles/posix_fd/socket_holder.h"

enum {
  STASH_MAX = 4096,
  MESSAGE_WAIT_MS = 1000, /* a rank sends right after connecting */
  WARN_INTERVAL_MS = 1000,
  HOLDER_LOOK_MS = 50, /* how often a refused connect asks who holds the name */
};

struct stashed {
  int rank;
  uint64_t seq;
  int fd;
};

struct fd_channel {
  int listener;
  int rank, size;
  pid_t *pids; /* per rank in this pid namespace (0: not known yet) */
  uint64_t *namespaces; /* per rank in another pid namespace: the one it reported (0: in this one) */
  uint64_t own_namespace;
  uint64_t nonce, token;
  uint64_t floor; /* steps below this one are over: their messages are stale */
  unsigned refused, rejected, warnings, suppressed;
  int64_t warned_at_ms;
  struct stashed *stash;
  int stash_count;
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Anyone on the host can connect: at most one warning a second, so junk
 * cannot fill every rank's log. */
static void warn_limited(fd_channel_t *ch, const char *fmt, ...) MORI_PRINTF(2, 3);
static void warn_limited(fd_channel_t *ch, const char *fmt, ...) {
  int64_t now = now_ms();
  if (ch->warnings && now - ch->warned_at_ms < WARN_INTERVAL_MS) {
    ch->suppressed++;
    return;
  }
  char text[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (ch->suppressed) MORI_WARN("fd channel: rank %d %s (and %u more refused since the last warning)", ch->rank, text, ch->suppressed);
  else MORI_WARN("fd channel: rank %d %s", ch->rank, text);
  ch->warnings++;
  ch->suppressed = 0;
  ch->warned_at_ms = now;
}

static socklen_t channel_address(uint64_t nonce, int rank, struct sockaddr_un *sa) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  /* Abstract namespace: sun_path[0] == '\0'. */
  int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "mori-fd.%016llx.%d", (unsigned long long)nonce, rank);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* Another process bound this rank's name first: say who, as far as the
 * kernel tells (a listener's credentials, read by connecting to it). */
static int name_taken(const struct sockaddr_un *sa, socklen_t len, int rank) {
  struct ucred cred = {0, (uid_t)-1, (gid_t)-1};
  socklen_t clen = sizeof(cred);
  int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  bool known = probe >= 0 && connect(probe, (const struct sockaddr *)sa, len) == 0 &&
               getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0;
  if (probe >= 0) close(probe);
  if (known)
    return mori_error_set(MORI_EBUSY, "fd channel: rank %d's socket @%s is already held by pid %d uid %d", rank,
                          sa->sun_path + 1, (int)cred.pid, (int)cred.uid);
  return mori_error_set(MORI_EBUSY, "fd channel: rank %d's socket @%s is already bound by another process", rank,
                        sa->sun_path + 1);
}

int fd_channel_open(uint64_t nonce, uint64_t token, int rank, int size, fd_channel_t **out) {
  fd_channel_t *ch = calloc(1, sizeof(*ch));
  pid_t *pids = calloc((size_t)(size > 0 ? size : 1), sizeof(pid_t));
  uint64_t *namespaces = calloc((size_t)(size > 0 ? size : 1), sizeof(uint64_t));
  if (!ch || !pids || !namespaces) {
    free(ch);
    free(pids);
    free(namespaces);
    return mori_error_set(MORI_ENOMEM, "fd channel");
  }
  *ch = (fd_channel_t){.rank = rank,
                       .size = size,
                       .pids = pids,
                       .namespaces = namespaces,
                       .own_namespace = mori_pid_namespace(),
                       .nonce = nonce,
                       .token = token};
  /* From here on a failure closes the channel as it stands. */
  ch->listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (ch->listener < 0) {
    int rc = mori_error_errno("fd channel: socket");
    fd_channel_close(ch);
    return rc;
  }
  struct sockaddr_un sa;
  socklen_t len = channel_address(nonce, rank, &sa);
  if (bind(ch->listener, (struct sockaddr *)&sa, len) != 0 || listen(ch->listener, SOMAXCONN) != 0) {
    int rc = errno == EADDRINUSE ? name_taken(&sa, len, rank)
                                 : mori_error_errno("fd channel: rank %d cannot listen on its socket @%s", rank, sa.sun_path + 1);
    fd_channel_close(ch);
    return rc;
  }
  *out = ch;
  return 0;
}

void fd_channel_close(fd_channel_t *ch) {
  if (!ch) return;
  for (int i = 0; i < ch->stash_count; i++)
    if (ch->stash[i].fd >= 0) close(ch->stash[i].fd);
  free(ch->stash);
  free(ch->pids);
  free(ch->namespaces);
  if (ch->listener >= 0) close(ch->listener);
  free(ch);
}

void fd_channel_set_pid(fd_channel_t *ch, int rank, pid_t pid) {
  if (rank < 0 || rank >= ch->size) return;
  ch->pids[rank] = pid;
  ch->namespaces[rank] = 0;
}

void fd_channel_set_foreign(fd_channel_t *ch, int rank, uint64_t pid_namespace) {
  if (rank < 0 || rank >= ch->size) return;
  ch->pids[rank] = 0; /* its pid means nothing here */
  ch->namespaces[rank] = pid_namespace;
}

unsigned fd_channel_refused(const fd_channel_t *ch) { return ch->refused; }
unsigned fd_channel_rejected(const fd_channel_t *ch) { return ch->rejected; }
unsigned fd_channel_warnings(const fd_channel_t *ch) { return ch->warnings; }

/* How many pid namespaces, from this one down, the process the kernel
 * reports here as `pid` has a pid in: the NSpid line of its status, which
 * anyone may read. 1: a process of this namespace; more: one of a namespace
 * nested in this one (a container started from here); 0: unknown (gone, or
 * /proc hides it). */
static int namespace_depth(pid_t pid) {
  char path[48], line[256];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  int depth = 0;
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, "NSpid:", 6) == 0) {
      for (char *at = line + 6; (at = strpbrk(at, "0123456789")) != NULL; at += strspn(at, "0123456789")) depth++;
      break;
    }
  fclose(f);
  return depth;
}

/* The pid namespace of a process the kernel reports here as `pid`, or 0
 * when it cannot be read (its ns link needs ptrace-read access: the same
 * uid and gid, or privilege). */
static uint64_t namespace_of(pid_t pid) {
  char path[48];
  snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
  struct stat st;
  return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Who is behind a socket, as far as this namespace can tell: the pid the
 * kernel reports here and, read from /proc once per connection and only
 * while some rank lives in another pid namespace, whether it lives in a
 * namespace nested in this one and which. */
struct peer_process {
  pid_t pid;
  bool nested;  /* its status lists pids in more than one namespace */
  uint64_t ns;  /* its namespace where the link can be read, else 0 */
};

static struct peer_process identify(const fd_channel_t *ch, pid_t pid) {
  struct peer_process p = {.pid = pid};
  bool any_foreign = false;
  for (int r = 0; r < ch->size && !any_foreign; r++) any_foreign = ch->namespaces[r] != 0;
  if (any_foreign && pid > 0 && namespace_depth(pid) >= 2) {
    p.nested = true;
    p.ns = namespace_of(pid);
  }
  return p;
}

/* Whether process p may be rank r's: the pid r reported; or, for a rank in
 * another pid namespace (whose own pid means nothing here), a process that
 * is provably not of this one:
 *   - pid 0: the kernel cannot name it here (it lives outside this
 *     namespace's tree); nothing more can be told of it;
 *   - a process of a namespace nested in this one: its namespace must be
 *     the one r reported where that can be read (it cannot for another
 *     gid: then uid and token judge, as for pid 0).
 * A process of this namespace, or one /proc tells nothing of (hidden, or
 * exited before its connection was read: a rank stays for the exchange's
 * agreement), never speaks for such a rank: the ranks of this namespace
 * are known by pid. */
static bool may_be_rank(const fd_channel_t *ch, int r, const struct peer_process *p) {
  if (!ch->namespaces[r]) return p->pid > 0 && ch->pids[r] == p->pid;
  if (p->pid == 0) return true;
  if (!p->nested) return false;
  return p->ns == 0 || (p->ns != ch->own_namespace && p->ns == ch->namespaces[r]);
}

/* Whether a connection from p may come from a rank other than this one;
 * which rank is checked on its message. */
static bool is_rank_process(const fd_channel_t *ch, const struct peer_process *p) {
  for (int r = 0; r < ch->size; r++)
    if (r != ch->rank && may_be_rank(ch, r, p)) return true;
  return false;
}

/* Reads the one message of an accepted connection whose credentials passed.
 * Returns 1 with *got filled, 0 when it is refused (fds closed). */
static int read_message(fd_channel_t *ch, int conn, const struct peer_process *from, int64_t deadline,
                        struct stashed *got) {
  struct pollfd p = {.fd = conn, .events = POLLIN};
  int64_t left = deadline - now_ms();
  int wait_ms = left < 0 ? 0 : left < MESSAGE_WAIT_MS ? (int)left : MESSAGE_WAIT_MS;
  if (poll(&p, 1, wait_ms) <= 0) {
    ch->rejected++;
    warn_limited(ch, "dropped a connection from pid %d: no message within %d ms", (int)from->pid, wait_ms);
    return 0;
  }
  uint8_t buf[FD_MESSAGE_BYTES + 1];
  struct iovec iov = {buf, sizeof(buf)};
  union {
    char buf[CMSG_SPACE(sizeof(int) * 4)];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof(control.buf)};
  ssize_t n = recvmsg(conn, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  int fds[4], count = 0;
  for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int in = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < in; i++) {
      int one;
      memcpy(&one, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof(int));
      if (count < 4) fds[count++] = one;
      else close(one);
    }
  }
  fd_message_t m;
  const char *why = n < 0 ? "read failed"
                          : fd_message_decode(buf, (size_t)n, count, (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0,
                                              ch->token, ch->size, &m);
  if (!why && !may_be_rank(ch, m.rank, from)) why = "sent by another process than the rank it claims";
  if (!why && m.rank == ch->rank) why = "claims this rank";
  if (why) {
    for (int i = 0; i < count; i++) close(fds[i]);
    ch->rejected++;
    warn_limited(ch, "rejected a message from pid %d: %s", (int)from->pid, why);
    return 0;
  }
  *got = (struct stashed){m.rank, m.seq, count ? fds[0] : -1};
  return 1;
}

/* Accepts one connection if one waits, reading its message by `deadline`.
 * Returns 1 with *got filled, 0 when none waits or it was refused, negative
 * on error. */
static int receive_one(fd_channel_t *ch, int64_t deadline, struct stashed *got) {
  int conn = accept4(ch->listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (conn < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return 0;
    return mori_error_errno("fd channel: rank %d: accept", ch->rank);
  }
  struct ucred cred = {0, (uid_t)-1, (gid_t)-1};
  socklen_t len = sizeof(cred);
  const char *why = NULL;
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) why = "credentials unknown";
  else if (cred.uid != geteuid()) why = "another user";
  struct peer_process from = {.pid = cred.pid};
  if (!why) from = identify(ch, cred.pid);
  if (!why && !is_rank_process(ch, &from)) why = "not a process of this job";
  int rc = 0;
  if (why) {
    /* Closed unread: whatever it sent, descriptors included, is discarded
     * by the kernel without ever entering this process. */
    ch->refused++;
    warn_limited(ch, "refused a connection from pid %d uid %d: %s", (int)cred.pid, (int)cred.uid, why);
  } else {
    rc = read_message(ch, conn, &from, deadline, got);
  }
  close(conn);
  return rc;
}

static int stash_push(fd_channel_t *ch, struct stashed got) {
  if (got.seq < ch->floor) { /* a step that is over (a failed exchange's late message) */
    if (got.fd >= 0) close(got.fd);
    ch->rejected++;
    return 0;
  }
  if (ch->stash_count >= STASH_MAX) {
    if (got.fd >= 0) close(got.fd);
    ch->rejected++;
    warn_limited(ch, "dropped a message of rank %d: stash full", got.rank);
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

/* While our message waits for room in the peer's backlog, keep draining our
 * own: the peer may be blocked sending to us. */
static void drain_into_stash(fd_channel_t *ch, int64_t deadline) {
  struct stashed got;
  for (int i = 0; ch && i < 64 && receive_one(ch, deadline, &got) == 1; i++)
    if (stash_push(ch, got) != 0) break;
}

/* ESRCH: no such process. EPERM means it exists (as another user). */
static bool process_gone(pid_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

/* The process that listens behind a connected socket must be rank `to`'s:
 * our uid, and the pid rank `to` reported. Anyone on the host can bind an
 * abstract name that is free (not bound yet, or no longer), so this is what
 * keeps the fd from going to whoever holds the name. */
static int check_listener(const fd_channel_t *ch, int sock, int to, const struct sockaddr_un *sa) {
  struct ucred cred = {0, (uid_t)-1, (gid_t)-1};
  socklen_t len = sizeof(cred);
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return mori_error_errno("fd channel: rank %d cannot learn who holds rank %d's socket @%s", ch->rank, to, sa->sun_path + 1);
  pid_t expected = ch->pids[to];
  struct peer_process holder = identify(ch, cred.pid);
  if (cred.uid == geteuid() && may_be_rank(ch, to, &holder)) return 0;
  return mori_error_set(MORI_EACCES,
                        "fd channel: rank %d's socket @%s is held by pid %d uid %d, not by rank %d's process "
                        "(pid %d uid %d): rank %d does not send its handle there",
                        to, sa->sun_path + 1, (int)cred.pid, (int)cred.uid, to, (int)expected, (int)geteuid(), ch->rank);
}

/* Sends one message on a fresh connection to rank `to`. ch NULL (test
 * hooks): nothing is checked and the wait ends after ~30 s. Otherwise the
 * listener must be rank `to`'s process, and every wait ends by `deadline`
 * (a full backlog; a name not bound, which after the channel's start-up
 * means that rank closed its channel or died). */
static int send_message(fd_channel_t *ch, uint64_t nonce, int to, const void *bytes, size_t n, int fd, int64_t deadline) {
  struct sockaddr_un sa;
  socklen_t len = channel_address(nonce, to, &sa);
  int sock = -1, rc = 0, err = 0;
  int64_t next_look = 0;
  for (;;) {
    sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (sock < 0) return mori_error_errno("fd channel: socket");
    if (connect(sock, (struct sockaddr *)&sa, len) == 0) break;
    err = errno;
    close(sock);
    sock = -1;
    if (err != EAGAIN && err != ECONNREFUSED && err != ENOENT) {
      errno = err;
      return mori_error_errno("fd channel: connecting to rank %d's socket @%s", to, sa.sun_path + 1);
    }
    if (ch && err != EAGAIN && process_gone(ch->pids[to]))
      return mori_error_set(MORI_ECONNRESET, "fd channel: rank %d (pid %d) has exited: rank %d cannot send it its handle",
                            to, (int)ch->pids[to], ch->rank);
    /* A name bound and not listened on, or with a full backlog, refuses
     * as an unbound one does: if another user holds it, no wait ends the
     * squat (the job's ranks run as this user), so it is said at once. */
    uid_t holder;
    if (ch && err != ENOENT && now_ms() >= next_look) {
      next_look = now_ms() + HOLDER_LOOK_MS;
      if (fd_socket_holder_uid(&sa, len, &holder) == 1 && holder != geteuid())
        return mori_error_set(MORI_EACCES,
                              "fd channel: rank %d's socket @%s is bound by uid %d, another user, not by rank %d's "
                              "process (pid %d uid %d): rank %d does not send its handle there",
                              to, sa.sun_path + 1, (int)holder, to, (int)ch->pids[to], (int)geteuid(), ch->rank);
    }
    if (now_ms() >= deadline) {
      if (!ch) {
        errno = err;
        return mori_error_errno("fd channel: connecting to rank %d", to);
      }
      return mori_error_set(MORI_ERANK_TIMEOUT,
                            "fd channel: rank %d (pid %d) %s within the timeout: rank %d could not send it its handle",
                            to, (int)ch->pids[to], err == EAGAIN ? "accepted no connection" : "had no socket bound",
                            ch->rank);
    }
    drain_into_stash(ch, deadline);
    struct timespec pause = {0, 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  if (ch && (rc = check_listener(ch, sock, to, &sa)) != 0) {
    close(sock);
    return rc;
  }
  struct iovec iov = {(void *)bytes, n};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof(control));
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof(control.buf);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  /* A fresh connection's queue has room for one message: this never blocks. */
  if (sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) rc = mori_error_errno("fd channel: sending to rank %d", to);
  close(sock);
  return rc;
}

enum { TEST_SEND_WAIT_MS = 30000 };

static int send_encoded(fd_channel_t *ch, uint64_t nonce, int to, uint64_t token, int claimed_rank, uint64_t seq, int fd,
                        int64_t deadline) {
  fd_message_t m = {token, claimed_rank, fd < 0 ? FD_NO_HANDLE : 0, seq};
  uint8_t bytes[FD_MESSAGE_BYTES];
  fd_message_encode(&m, bytes);
  return send_message(ch, nonce, to, bytes, sizeof(bytes), fd, deadline);
}

int fd_channel_send_raw(uint64_t nonce, int to, uint64_t token, int claimed_rank, uint64_t seq, int fd) {
  return send_encoded(NULL, nonce, to, token, claimed_rank, seq, fd, now_ms() + TEST_SEND_WAIT_MS);
}

int fd_channel_send_bytes(uint64_t nonce, int to, const void *bytes, size_t n, int fd) {
  return send_message(NULL, nonce, to, bytes, n, fd, now_ms() + TEST_SEND_WAIT_MS);
}

int fd_channel_send(fd_channel_t *ch, int to, uint64_t seq, int fd, int timeout_ms) {
  if (to < 0 || to >= ch->size || to == ch->rank)
    return mori_error_set(MORI_EINVAL, "fd channel: rank %d cannot send to rank %d (size %d)", ch->rank, to, ch->size);
  return send_encoded(ch, ch->nonce, to, ch->token, ch->rank, seq, fd, now_ms() + (timeout_ms > 0 ? timeout_ms : 0));
}

/* Drops every stashed message of a step before `seq`: those exchanges are
 * over (a failed one leaves late messages behind), and a stale fd would
 * keep a peer's memory alive. */
static void drop_stale(fd_channel_t *ch, uint64_t seq) {
  if (seq > ch->floor) ch->floor = seq;
  for (int i = 0; i < ch->stash_count; i++) {
    if (ch->stash[i].seq >= ch->floor) continue;
    if (ch->stash[i].fd >= 0) close(ch->stash[i].fd);
    ch->rejected++;
    ch->stash[i--] = ch->stash[--ch->stash_count];
  }
}

int fd_channel_recv(fd_channel_t *ch, int from, uint64_t seq, int timeout_ms, int *fd) {
  if (from < 0 || from >= ch->size)
    return mori_error_set(MORI_EINVAL, "fd channel: rank %d cannot receive from rank %d (size %d)", ch->rank, from, ch->size);
  drop_stale(ch, seq);
  int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
  for (;;) {
    /* Stashed first: a fast peer may have sent a later step already. */
    for (int i = 0; i < ch->stash_count; i++) {
      struct stashed *s = &ch->stash[i];
      if (s->rank != from || s->seq != seq) continue;
      *fd = s->fd;
      *s = ch->stash[--ch->stash_count];
      return 0;
    }
    int64_t left = deadline - now_ms();
    if (left <= 0)
      return mori_error_set(MORI_ERANK_TIMEOUT, "fd channel: rank %d waited %d ms for rank %d's handle (step %llu)",
                            ch->rank, timeout_ms, from, (unsigned long long)seq);
    struct pollfd p = {.fd = ch->listener, .events = POLLIN};
    if (poll(&p, 1, left > 200 ? 200 : (int)left) <= 0) {
      /* Nothing queued: a peer that has exited will send nothing more. */
      if (process_gone(ch->pids[from]))
        return mori_error_set(MORI_ECONNRESET, "fd channel: rank %d (pid %d) exited before sending its handle to rank %d (step %llu)",
                              from, (int)ch->pids[from], ch->rank, (unsigned long long)seq);
      continue;
    }
    struct stashed got;
    int r = receive_one(ch, deadline, &got);
    if (r < 0) return r;
    if (r == 0) continue;
    if ((r = stash_push(ch, got)) != 0) return r;
  }
}
