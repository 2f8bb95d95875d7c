// SPDX-License-Identifier: MIT
/* Socket diagnostics for one abstract name; see socket_holder.h. */
#include "handles/posix_fd/socket_holder.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* Unix sockets' states as the diagnostics number them (TCP's numbers): a
 * bound socket that is not connected is CLOSE, a listener LISTEN. */
enum { UNIX_STATE_CLOSE = 7, UNIX_STATE_LISTEN = 10 };

/* The name and uid attributes of one diagnostics message; true when it is
 * a socket bound to `name` (len bytes, the leading 0 included). */
static bool holds(const struct nlmsghdr *h, const char *name, size_t len, uid_t *uid, bool *has_uid) {
  const struct unix_diag_msg *m = NLMSG_DATA(h);
  int left = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*m));
  bool named = false;
  *has_uid = false;
  for (const struct rtattr *a = (const struct rtattr *)(m + 1); RTA_OK(a, left); a = RTA_NEXT(a, left)) {
    size_t n = RTA_PAYLOAD(a);
    if (a->rta_type == UNIX_DIAG_NAME) named = n == len && memcmp(RTA_DATA(a), name, len) == 0;
    if (a->rta_type == UNIX_DIAG_UID && n >= sizeof(uint32_t)) {
      uint32_t u;
      memcpy(&u, RTA_DATA(a), sizeof(u));
      *uid = (uid_t)u;
      *has_uid = true;
    }
  }
  return named;
}

int fd_socket_holder_uid(const struct sockaddr_un *sa, socklen_t len, uid_t *uid) {
  size_t name_len = (size_t)len - offsetof(struct sockaddr_un, sun_path);
  if (len <= offsetof(struct sockaddr_un, sun_path) || sa->sun_path[0] != '\0') return -1; /* abstract names only */
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return -1;
  struct {
    struct nlmsghdr h;
    struct unix_diag_req r;
  } req;
  memset(&req, 0, sizeof(req));
  req.h.nlmsg_len = sizeof(req);
  req.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.r.sdiag_family = AF_UNIX;
  req.r.udiag_states = (1u << UNIX_STATE_CLOSE) | (1u << UNIX_STATE_LISTEN);
  req.r.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_UID;
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
    close(nl);
    return -1;
  }
  /* The dump comes in datagrams of several messages each, until DONE. */
  int result = 0;
  bool done = false;
  _Alignas(struct nlmsghdr) char buf[32768]; /* more than a dump's datagram (a page or two) */
  while (!done && result == 0) {
    ssize_t n = recv(nl, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      result = -1;
      break;
    }
    int left = (int)n;
    for (const struct nlmsghdr *h = (const struct nlmsghdr *)buf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type == NLMSG_DONE) {
        done = true;
        break;
      }
      if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type != SOCK_DIAG_BY_FAMILY) {
        result = -1;
        break;
      }
      bool has_uid;
      if (holds(h, sa->sun_path, name_len, uid, &has_uid)) {
        result = has_uid ? 1 : -1; /* no uid: a kernel before 5.3 */
        break;
      }
    }
  }
  close(nl);
  return result;
}
