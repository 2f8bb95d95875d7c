// SPDX-License-Identifier: MIT
/* Rank 0's address. Split by hand, with every length checked, because the
 * string comes from the environment of whoever launched the job. */
#include "core/bootstrap/internal/address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>

#include "core/base/error.h"

static int bad(const char *address, const char *why) {
  return mori_error_set(MORI_EINVAL, "bootstrap: address '%.200s' is not host:port or [IPv6]:port: %s", address, why);
}

int mori_tcp_split_address(const char *address, char *host, size_t host_len, uint16_t *port) {
  if (!address || !*address) return bad("", "it is empty");
  size_t len = strlen(address);
  const char *host_start, *host_end, *port_start;
  if (address[0] == '[') {
    host_start = address + 1;
    host_end = memchr(host_start, ']', len - 1);
    if (!host_end) return bad(address, "the '[' is never closed");
    if (host_end[1] != ':') return bad(address, "no ':port' right after ']'");
    port_start = host_end + 2;
  } else {
    host_end = strrchr(address, ':');
    if (!host_end) return bad(address, "no ':port'");
    host_start = address;
    port_start = host_end + 1;
    if (memchr(host_start, ':', (size_t)(host_end - host_start)))
      return bad(address, "an IPv6 address needs brackets: [addr]:port");
  }
  size_t host_bytes = (size_t)(host_end - host_start);
  if (host_bytes == 0) return bad(address, "no host");
  if (host_bytes >= host_len || host_bytes >= MORI_TCP_HOST_MAX) return bad(address, "the host is too long");
  if (memchr(host_start, '[', host_bytes) || memchr(host_start, ']', host_bytes))
    return bad(address, "stray bracket in the host");
  unsigned value = 0;
  size_t digits = 0;
  for (const char *p = port_start; *p; p++, digits++) {
    if (*p < '0' || *p > '9' || digits >= 5) return bad(address, "the port is not a number in 1..65535");
    value = value * 10 + (unsigned)(*p - '0');
  }
  if (digits == 0) return bad(address, "no port");
  if (value < 1 || value > 65535) return bad(address, "the port is not a number in 1..65535");
  memcpy(host, host_start, host_bytes);
  host[host_bytes] = '\0';
  *port = (uint16_t)value;
  return 0;
}

int mori_tcp_resolve_address(const char *address, struct sockaddr_storage *sa, socklen_t *len, bool *numeric) {
  char host[MORI_TCP_HOST_MAX];
  uint16_t port;
  int rc = mori_tcp_split_address(address, host, sizeof(host), &port);
  if (rc) return rc;
  memset(sa, 0, sizeof(*sa));
  struct sockaddr_in *v4 = (struct sockaddr_in *)sa;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)sa;
  *numeric = true;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    *len = sizeof(*v4);
    return 0;
  }
  if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    *len = sizeof(*v6);
    return 0;
  }
  *numeric = false;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  int e = getaddrinfo(host, NULL, &hints, &res);
  if (e != 0 || !res)
    return mori_error_set(MORI_EINVAL, "bootstrap: cannot resolve the host of '%.200s': %s", address,
                          e ? gai_strerror(e) : "no address");
  if (res->ai_addrlen > sizeof(*sa) || (res->ai_family != AF_INET && res->ai_family != AF_INET6)) {
    freeaddrinfo(res);
    return mori_error_set(MORI_EINVAL, "bootstrap: '%.200s' resolves to neither IPv4 nor IPv6", address);
  }
  memcpy(sa, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  if (sa->ss_family == AF_INET)
    v4->sin_port = htons(port);
  else
    v6->sin6_port = htons(port);
  return 0;
}
