// SPDX-License-Identifier: MIT
/* See internal/socket_ifname.h. */
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "shmem/internal/socket_ifname.h"

/* Whether `name` matches an entry of the comma-separated `list` (as a
 * prefix: "eth" matches eth0). */
static bool listed(const char *list, const char *name) {
  const char *p = list;
  while (*p) {
    size_t n = strcspn(p, ",");
    if (n > 0 && strncmp(name, p, n) == 0) return true;
    p += n;
    if (*p == ',') p++;
  }
  return false;
}

/* Interfaces no other machine can reach: container and VM bridges. */
static bool host_internal(const char *name) {
  return strncmp(name, "docker", 6) == 0 || strncmp(name, "virbr", 5) == 0 || strncmp(name, "veth", 4) == 0;
}

static bool usable(const struct ifaddrs *ifa) {
  if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) return false;
  int family = ifa->ifa_addr->sa_family;
  if (family == AF_INET6) {
    /* A link-local address needs a scope id a peer cannot guess. */
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)ifa->ifa_addr;
    if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) return false;
  }
  return family == AF_INET || family == AF_INET6;
}

int mori_shmem_pick_address(struct sockaddr_storage *addr, socklen_t *len, char ifname[16]) {
  struct ifaddrs *all = NULL;
  if (getifaddrs(&all) != 0) return mori_error_errno("shmem: listing network interfaces");
  const char *want = mori_env_string("MORI_SOCKET_IFNAME");
  bool exclude = want && want[0] == '^';
  const char *list = want && *want ? want + exclude : NULL;
  const struct ifaddrs *best = NULL;
  /* Two passes: IPv4 first, then IPv6. */
  for (int pass = 0; pass < 2 && !best; pass++) {
    int family = pass == 0 ? AF_INET : AF_INET6;
    for (const struct ifaddrs *ifa = all; ifa && !best; ifa = ifa->ifa_next) {
      if (!usable(ifa) || ifa->ifa_addr->sa_family != family) continue;
      bool loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
      if (list && !exclude) {
        if (listed(list, ifa->ifa_name)) best = ifa;
      } else if (!loopback && !host_internal(ifa->ifa_name) && !(list && listed(list, ifa->ifa_name))) {
        best = ifa;
      }
    }
  }
  /* Nothing named or found: loopback serves a job on one machine, unless
   * the exclusion list names it. */
  for (const struct ifaddrs *ifa = all; !best && !(list && !exclude) && ifa; ifa = ifa->ifa_next)
    if (usable(ifa) && (ifa->ifa_flags & IFF_LOOPBACK) && ifa->ifa_addr->sa_family == AF_INET &&
        !(list && listed(list, ifa->ifa_name)))
      best = ifa;
  if (!best) {
    char names[256] = "";
    size_t used = 0;
    for (const struct ifaddrs *ifa = all; ifa && used + 20 < sizeof(names); ifa = ifa->ifa_next)
      if (usable(ifa) && !strstr(names, ifa->ifa_name))
        used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", used ? ", " : "", ifa->ifa_name);
    freeifaddrs(all);
    return mori_error_set(MORI_EINVAL, "shmem: MORI_SOCKET_IFNAME=\"%s\" matches no interface that is up with an address (there are: %s)",
                          want ? want : "", names[0] ? names : "none");
  }
  memset(addr, 0, sizeof(*addr));
  *len = best->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  memcpy(addr, best->ifa_addr, *len);
  snprintf(ifname, 16, "%s", best->ifa_name);
  freeifaddrs(all);
  return 0;
}
