// SPDX-License-Identifier: MIT
/* Bounded socket steps. A connect is non-blocking and polled: a blocking one
 * waits for TCP's own SYN retries (about two minutes) whatever the caller's
 * timeout, for instance when rank 0's accept queue is full and its kernel
 * drops new SYNs. */
#include "core/bootstrap/internal/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

/* An endpoint as /proc/net/tcp{,6} prints it: the address's 32-bit words in
 * the kernel's byte order (each printed as a native integer), the port in
 * host order. */
struct endpoint {
  uint8_t addr[16];
  size_t addr_len; /* 4 or 16 */
  unsigned port;
};

static bool endpoint_of(const struct sockaddr_storage *sa, struct endpoint *e) {
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (sa->ss_family == AF_INET) {
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
    memcpy(e->addr, &v4->sin_addr, 4);
    e->addr_len = 4;
    e->port = ntohs(v4->sin_port);
    return true;
  }
  if (sa->ss_family == AF_INET6) {
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
    /* An IPv4 peer of a dual-stack socket is an IPv4 socket at its end. */
    if (memcmp(&v6->sin6_addr, mapped, sizeof(mapped)) == 0) {
      memcpy(e->addr, (const uint8_t *)&v6->sin6_addr + 12, 4);
      e->addr_len = 4;
    } else {
      memcpy(e->addr, &v6->sin6_addr, 16);
      e->addr_len = 16;
    }
    e->port = ntohs(v6->sin6_port);
    return true;
  }
  return false;
}

/* Parses "HEX:PORT" of addr_len bytes; false when it is not that. */
static bool parse_endpoint(const char *text, size_t addr_len, struct endpoint *e) {
  for (size_t w = 0; w < addr_len / 4; w++) {
    char word[9];
    memcpy(word, text + w * 8, 8);
    word[8] = '\0';
    char *end;
    uint32_t v = (uint32_t)strtoul(word, &end, 16);
    if (*end) return false;
    memcpy(e->addr + w * 4, &v, 4); /* the kernel printed the raw word natively */
  }
  if (text[addr_len * 2] != ':') return false;
  char *end;
  e->port = (unsigned)strtoul(text + addr_len * 2 + 1, &end, 16);
  e->addr_len = addr_len;
  return end != text + addr_len * 2 + 1;
}

static bool same_endpoint(const struct endpoint *a, const struct endpoint *b) {
  return a->addr_len == b->addr_len && a->port == b->port && memcmp(a->addr, b->addr, a->addr_len) == 0;
}

/* The kernel's socket diagnostics (what `ss` uses), asked for the one
 * socket whose local end is `peer` and whose remote end is `me`: 1 with
 * *uid, 0 when there is none, negative when the question cannot be asked. */
static int diag_lookup(const struct endpoint *peer, const struct endpoint *me, unsigned *uid) {
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return -errno;
  struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 req;
  } q;
  memset(&q, 0, sizeof(q));
  q.nlh.nlmsg_len = sizeof(q);
  q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  q.nlh.nlmsg_flags = NLM_F_REQUEST; /* one socket, by its addresses */
  q.req.sdiag_family = peer->addr_len == 4 ? AF_INET : AF_INET6;
  q.req.sdiag_protocol = IPPROTO_TCP;
  q.req.idiag_states = ~0u;
  q.req.id.idiag_sport = htons((uint16_t)peer->port);
  q.req.id.idiag_dport = htons((uint16_t)me->port);
  memcpy(q.req.id.idiag_src, peer->addr, peer->addr_len);
  memcpy(q.req.id.idiag_dst, me->addr, me->addr_len);
  q.req.id.idiag_cookie[0] = q.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  int rc = -EIO;
  if (sendto(nl, &q, sizeof(q), 0, (struct sockaddr *)&kernel, sizeof(kernel)) == (ssize_t)sizeof(q)) {
    struct pollfd p = {.fd = nl, .events = POLLIN};
    union {
      struct nlmsghdr h;
      uint8_t bytes[8192];
    } answer;
    ssize_t n = poll(&p, 1, 1000) == 1 ? recv(nl, &answer, sizeof(answer), 0) : -1;
    if (n >= (ssize_t)sizeof(struct nlmsghdr) && NLMSG_OK(&answer.h, (size_t)n)) {
      if (answer.h.nlmsg_type == NLMSG_ERROR && answer.h.nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
        const struct nlmsgerr *e = NLMSG_DATA(&answer.h);
        rc = e->error == -ENOENT ? 0 : e->error ? e->error : -EIO;
      } else if (answer.h.nlmsg_type == SOCK_DIAG_BY_FAMILY &&
                 answer.h.nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
        const struct inet_diag_msg *m = NLMSG_DATA(&answer.h);
        *uid = m->idiag_uid;
        rc = 1;
      }
    }
  }
  close(nl);
  return rc;
}

int mori_net_local_peer_uid(int fd, unsigned *uid) {
  struct sockaddr_storage mine, theirs;
  socklen_t mlen = sizeof(mine), tlen = sizeof(theirs);
  if (getsockname(fd, (struct sockaddr *)&mine, &mlen) != 0 || getpeername(fd, (struct sockaddr *)&theirs, &tlen) != 0)
    return -errno;
  struct endpoint me, peer;
  if (!endpoint_of(&mine, &me) || !endpoint_of(&theirs, &peer)) return 0;
  /* One question to the kernel; the tables, read whole, only where that
   * cannot be asked. */
  int found = diag_lookup(&peer, &me, uid);
  if (found >= 0) return found;
  FILE *f = fopen(peer.addr_len == 4 ? "/proc/net/tcp" : "/proc/net/tcp6", "re");
  if (!f) return -errno;
  char line[512];
  found = 0;
  if (!fgets(line, sizeof(line), f)) line[0] = '\0'; /* the column titles */
  while (fgets(line, sizeof(line), f)) {
    /* sl: local remote state tx:rx tr:when retrnsmt uid ... */
    char local[64], remote[64];
    unsigned state, owner;
    if (sscanf(line, " %*s %63s %63s %x %*s %*s %*s %u", local, remote, &state, &owner) != 4) continue;
    struct endpoint l, r;
    if (!parse_endpoint(local, peer.addr_len, &l) || !parse_endpoint(remote, me.addr_len, &r)) continue;
    if (!same_endpoint(&l, &peer) || !same_endpoint(&r, &me)) continue;
    *uid = owner;
    found = 1;
    if (state == 1) break; /* ESTABLISHED: the live one, should an old one linger */
  }
  fclose(f);
  return found;
}

bool mori_net_other_local_user(int fd, unsigned *uid) {
  return mori_net_local_peer_uid(fd, uid) == 1 && *uid != (unsigned)geteuid();
}
