// SPDX-License-Identifier: MIT
/* The unique ID: 128 bytes that tell every PE where rank 0's bootstrap
 * listens and which job it serves. Layout (host byte order: the ID travels
 * between the PEs of one job):
 *   0  magic "MORISHM" + NUL     8  version, length (uint16 each)
 *   12 family, port (uint16)    16 job token (uint64, random, never 0)
 *   24 address (16 bytes)       40 interface name (16 bytes)
 *   56 the job's bootstrap secret (32 random bytes: only holders of the ID
 *      are admitted by rank 0, and rank 0 proves it holds it too)
 *   88 zero                    120 checksum (FNV-1a of bytes 0..119)
 * The listening socket is opened here, by shmem_get_unique_id, so the port
 * is known and taken before the ID leaves the process; rank 0's
 * shmem_init_attr in this process takes it over. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/internal/finalize.h"
#include "shmem/internal/socket_ifname.h"
#include "shmem/internal/unique_id.h"

enum {
  UID_VERSION = 2,
  OFF_VERSION = 8,
  OFF_LENGTH = 10,
  OFF_FAMILY = 12,
  OFF_PORT = 14,
  OFF_TOKEN = 16,
  OFF_ADDR = 24,
  OFF_IFNAME = 40,
  OFF_SECRET = 56,
  OFF_CHECKSUM = 120,
  /* IDs made but not yet used by an init in this process. */
  MAX_LISTENERS = 8,
  /* IDs already used by an init in this process, the latest ones. */
  MAX_USED = 32,
};
static const char uid_magic[8] = "MORISHM";

static pthread_mutex_t listeners_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  uint64_t token;
  int fd;
} listeners[MAX_LISTENERS];
static unsigned listeners_next;
static uint64_t used[MAX_USED];
static unsigned used_next;

static uint64_t checksum(const uint8_t *bytes) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < OFF_CHECKSUM; i++) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

static void put16(uint8_t *at, uint16_t v) { memcpy(at, &v, sizeof(v)); }
static uint16_t get16(const uint8_t *at) {
  uint16_t v;
  memcpy(&v, at, sizeof(v));
  return v;
}

/* mori_finalize: the sockets of IDs made and never used go too (nothing of
 * mori is left behind; an ID made before it is not for a later job). */
static void close_listeners(void) {
  pthread_mutex_lock(&listeners_lock);
  for (int i = 0; i < MAX_LISTENERS; i++) {
    if (listeners[i].fd >= 0 && listeners[i].token) {
      close(listeners[i].fd);
      used[used_next++ % MAX_USED] = listeners[i].token; /* given up: not for a later init */
    }
    listeners[i].token = 0;
    listeners[i].fd = -1;
  }
  pthread_mutex_unlock(&listeners_lock);
}

static void keep_listener(uint64_t token, int fd) {
  /* Before the lock: the hook runs under mori_finalize, which takes it. */
  if (mori_finalize_hook_add(close_listeners) != 0) MORI_WARN("shmem_get_unique_id: %s", mori_last_error());
  pthread_mutex_lock(&listeners_lock);
  unsigned slot = listeners_next++ % MAX_LISTENERS;
  /* The oldest unused ID gives up its socket: its port is closed from now on. */
  if (listeners[slot].token && listeners[slot].fd >= 0) {
    close(listeners[slot].fd);
    used[used_next++ % MAX_USED] = listeners[slot].token;
  }
  listeners[slot].token = token;
  listeners[slot].fd = fd;
  pthread_mutex_unlock(&listeners_lock);
}

int mori_shmem_uid_take_listener(uint64_t token, bool *used_before) {
  int fd = -1;
  *used_before = false;
  pthread_mutex_lock(&listeners_lock);
  for (int i = 0; i < MAX_LISTENERS && fd < 0; i++)
    if (listeners[i].token == token && listeners[i].fd >= 0) {
      fd = listeners[i].fd;
      listeners[i].token = 0;
      listeners[i].fd = -1;
    }
  for (int i = 0; i < MAX_USED && fd < 0 && !*used_before; i++) *used_before = token && used[i] == token;
  if (fd >= 0) used[used_next++ % MAX_USED] = token;
  pthread_mutex_unlock(&listeners_lock);
  return fd;
}

int mori_shmem_uid_compose(const mori_shmem_uid_info_t *info, mori_shmem_uniqueid_t *out) {
  memset(out, 0, sizeof(*out));
  char host[INET6_ADDRSTRLEN + 2];
  const char *colon = strrchr(info->address, ':');
  size_t host_len = colon ? (size_t)(colon - info->address) : 0;
  if (!colon || host_len == 0 || host_len >= sizeof(host) || info->token == 0)
    return mori_error_set(MORI_EINVAL, "unique ID: address \"%s\" / token %016llx", info->address,
                          (unsigned long long)info->token);
  memcpy(host, info->address, host_len);
  host[host_len] = '\0';
  uint8_t *b = out->bytes;
  int family = AF_INET;
  if (host[0] == '[') { /* [v6] */
    family = AF_INET6;
    memmove(host, host + 1, host_len);
    host[strcspn(host, "]")] = '\0';
  }
  if (inet_pton(family, host, b + OFF_ADDR) != 1)
    return mori_error_set(MORI_EINVAL, "unique ID: \"%s\" is not a numeric address", host);
  unsigned long port = strtoul(colon + 1, NULL, 10);
  memcpy(b, uid_magic, sizeof(uid_magic));
  put16(b + OFF_VERSION, UID_VERSION);
  put16(b + OFF_LENGTH, MORI_SHMEM_UNIQUEID_BYTES);
  put16(b + OFF_FAMILY, (uint16_t)family);
  put16(b + OFF_PORT, (uint16_t)port);
  memcpy(b + OFF_TOKEN, &info->token, sizeof(info->token));
  memcpy(b + OFF_SECRET, info->secret, sizeof(info->secret));
  memcpy(b + OFF_IFNAME, info->ifname, strnlen(info->ifname, 15));
  uint64_t sum = checksum(b);
  memcpy(b + OFF_CHECKSUM, &sum, sizeof(sum));
  return 0;
}

int shmem_get_unique_id(mori_shmem_uniqueid_t *out) {
  if (!out) return mori_error_set(MORI_EINVAL, "shmem_get_unique_id: out is NULL");
  memset(out, 0, sizeof(*out));
  struct sockaddr_storage sa;
  socklen_t len = 0;
  mori_shmem_uid_info_t info;
  memset(&info, 0, sizeof(info));
  int rc = mori_shmem_pick_address(&sa, &len, info.ifname);
  if (rc) return mori_error_context(rc, "shmem_get_unique_id");
  if (sa.ss_family == AF_INET) ((struct sockaddr_in *)&sa)->sin_port = 0;
  else ((struct sockaddr_in6 *)&sa)->sin6_port = 0;
  int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return mori_error_errno("shmem_get_unique_id: socket");
  if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 1024) != 0 || getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    rc = mori_error_errno("shmem_get_unique_id: listening on %s", info.ifname);
    close(fd);
    return rc;
  }
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa.ss_family == AF_INET) {
    const struct sockaddr_in *a4 = (const struct sockaddr_in *)&sa;
    inet_ntop(AF_INET, &a4->sin_addr, host, sizeof(host));
    snprintf(info.address, sizeof(info.address), "%s:%u", host, ntohs(a4->sin_port));
  } else {
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&sa;
    inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof(host));
    snprintf(info.address, sizeof(info.address), "[%s]:%u", host, ntohs(a6->sin6_port));
  }
  while (info.token == 0)
    if (getrandom(&info.token, sizeof(info.token), 0) != (ssize_t)sizeof(info.token) ||
        getrandom(info.secret, sizeof(info.secret), 0) != (ssize_t)sizeof(info.secret)) {
      close(fd);
      return mori_error_errno("shmem_get_unique_id: random job token and secret");
    }
  if ((rc = mori_shmem_uid_compose(&info, out)) != 0) {
    close(fd);
    return mori_error_context(rc, "shmem_get_unique_id");
  }
  keep_listener(info.token, fd);
  MORI_DEBUG("shmem: unique ID for %s on %s (job token %016llx)", info.address, info.ifname, (unsigned long long)info.token);
  return 0;
}

int mori_shmem_uid_parse(const mori_shmem_uniqueid_t *id, mori_shmem_uid_info_t *out) {
  memset(out, 0, sizeof(*out));
  const uint8_t *b = id->bytes;
  if (memcmp(b, uid_magic, sizeof(uid_magic)) != 0)
    return mori_error_set(MORI_EINVAL, "unique ID: these bytes are not a mori shmem unique ID (no magic; a truncated or "
                                       "unwritten file, or another library's ID?)");
  if (get16(b + OFF_VERSION) != UID_VERSION || get16(b + OFF_LENGTH) != MORI_SHMEM_UNIQUEID_BYTES)
    return mori_error_set(MORI_EINVAL, "unique ID: version %u of %u bytes; this mori reads version %d of %d bytes",
                          get16(b + OFF_VERSION), get16(b + OFF_LENGTH), UID_VERSION, MORI_SHMEM_UNIQUEID_BYTES);
  uint64_t sum;
  memcpy(&sum, b + OFF_CHECKSUM, sizeof(sum));
  if (sum != checksum(b)) return mori_error_set(MORI_EINVAL, "unique ID: the checksum does not match (damaged in transit?)");
  int family = get16(b + OFF_FAMILY);
  unsigned port = get16(b + OFF_PORT);
  char host[INET6_ADDRSTRLEN] = "?";
  if (family != AF_INET && family != AF_INET6) return mori_error_set(MORI_EINVAL, "unique ID: address family %d", family);
  inet_ntop(family, b + OFF_ADDR, host, sizeof(host));
  snprintf(out->address, sizeof(out->address), family == AF_INET ? "%s:%u" : "[%s]:%u", host, port);
  memcpy(&out->token, b + OFF_TOKEN, sizeof(out->token));
  memcpy(out->secret, b + OFF_SECRET, sizeof(out->secret));
  memcpy(out->ifname, b + OFF_IFNAME, 15);
  return 0;
}

int mori_shmem_uniqueid_from_bytes(const void *bytes, size_t len, mori_shmem_uniqueid_t *out) {
  if (!bytes || !out) return mori_error_set(MORI_EINVAL, "unique ID: bytes and out are required");
  if (len != MORI_SHMEM_UNIQUEID_BYTES)
    return mori_error_set(MORI_EINVAL, "unique ID: %zu bytes; a unique ID has %d", len, MORI_SHMEM_UNIQUEID_BYTES);
  mori_shmem_uniqueid_t id;
  memcpy(id.bytes, bytes, sizeof(id.bytes));
  mori_shmem_uid_info_t info;
  int rc = mori_shmem_uid_parse(&id, &info);
  if (rc) return rc;
  *out = id;
  return 0;
}
