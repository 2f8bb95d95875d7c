// SPDX-License-Identifier: MIT
/* Bounded socket steps. A connect is non-blocking and polled: a blocking one
 * waits for TCP's own SYN retries (about two minutes) whatever the caller's
 * timeout, for instance when rank 0's accept queue is full and its kernel
 * drops new SYNs. */
#include "core/bootstrap/internal/net.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mori/error.h"

int64_t mori_net_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int mori_net_wait(int fd, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - mori_net_now_ms();
    if (left <= 0) return MORI_ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return -errno;
  }
}

int mori_net_send_all(int fd, const void *buf, size_t len, int64_t deadline) {
  const char *p = buf;
  while (len) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      int rc = mori_net_wait(fd, POLLOUT, deadline);
      if (rc) return rc;
      continue;
    }
    return MORI_ECONNRESET;
  }
  return 0;
}

int mori_net_recv_all(int fd, void *buf, size_t len, int64_t deadline) {
  char *p = buf;
  while (len) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0) return MORI_ECONNRESET;
    if (errno == EAGAIN || errno == EINTR) {
      int rc = mori_net_wait(fd, POLLIN, deadline);
      if (rc) return rc;
      continue;
    }
    return MORI_ECONNRESET;
  }
  return 0;
}

/* One attempt: 0 when connected, else the errno that ended it (ETIMEDOUT
 * when the deadline came first). */
static int connect_once(int fd, const struct sockaddr *sa, socklen_t len, int64_t deadline) {
  if (connect(fd, sa, len) == 0) return 0;
  if (errno != EINPROGRESS && errno != EINTR) return errno;
  if (mori_net_wait(fd, POLLOUT, deadline) != 0) return ETIMEDOUT;
  int err = 0;
  socklen_t err_len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) return errno;
  return err;
}

int mori_net_connect(const struct sockaddr *sa, socklen_t len, int64_t deadline, int *fd_out, char *why,
                     size_t why_len) {
  snprintf(why, why_len, "no attempt finished");
  int last = 0; /* how the previous attempt ended */
  for (;;) {
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      int rc = -errno;
      snprintf(why, why_len, "socket: %s", strerror(errno));
      return rc ? rc : MORI_EIO;
    }
    int err = connect_once(fd, sa, len, deadline);
    if (err == 0) {
      *fd_out = fd;
      return 0;
    }
    close(fd);
    if (err == ETIMEDOUT && mori_net_now_ms() >= deadline) {
      if (last)
        snprintf(why, why_len, "%s", strerror(last));
      else
        snprintf(why, why_len, "the connection was never accepted: rank 0's accept queue may be full, or the "
                               "network drops it");
      return MORI_ETIMEDOUT;
    }
    last = err;
    snprintf(why, why_len, "%s", strerror(err));
    /* Nobody listening yet, or the route is not there yet: try again. */
    if (err != ECONNREFUSED && err != ECONNRESET && err != ENETUNREACH && err != EHOSTUNREACH && err != ETIMEDOUT &&
        err != ECONNABORTED && err != EADDRNOTAVAIL && err != EAGAIN)
      return -err;
    int64_t left = deadline - mori_net_now_ms();
    if (left <= 0) return MORI_ETIMEDOUT;
    struct timespec pause = {0, (left < 20 ? left : 20) * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
}

void mori_net_tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(fd, F_SETFD, FD_CLOEXEC);
}
