// SPDX-License-Identifier: MIT
/* mori_bootstrap_tcp_from_env: the TCP bootstrap's settings from the
 * launcher's environment. Every number is read whole and checked: a value
 * that is not what it claims to be is an error naming the variable, never
 * some other number (atoi("abc") would be rank 0, or descriptor 0). */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/bootstrap/internal/address.h"
#include "core/bootstrap/internal/secret.h"
#include "mori/bootstrap.h"

/* The first of names that is set and not empty; its name in *which. */
static const char *first_env(const char *const *names, const char **which) {
  for (; *names; names++) {
    const char *v = getenv(*names);
    if (v && *v) {
      *which = *names;
      return v;
    }
  }
  return NULL;
}

/* A decimal integer in [min, max], nothing before or after it. */
static int env_int(const char *name, const char *value, long min, long max, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(value, &end, 10);
  bool digits_only = (value[0] >= '0' && value[0] <= '9') || (value[0] == '-' && value[1] >= '0' && value[1] <= '9');
  if (!digits_only || *end || errno || v < min || v > max)
    return mori_error_set(MORI_EINVAL, "bootstrap: %s='%.64s' is not a whole number in %ld..%ld", name, value, min,
                          max);
  *out = (int)v;
  return 0;
}

/* The port of "host:port" or "[v6]:port" (the bootstrap's own splitter),
 * or 0 when the address gives none ("host", a bare IPv6 literal, "[v6]"). */
static int address_port(const char *address) {
  char host[MORI_TCP_HOST_MAX];
  uint16_t port = 0;
  if (mori_tcp_split_address(address, host, sizeof(host), &port) == 0) return port;
  mori_clear_error(); /* no port is an answer here, not an error */
  return 0;
}

/* The descriptor a launcher handed rank 0 must be a listening stream socket
 * (anything else, a file, stdin, a closed number, would be accepted from)
 * on the port the other ranks are sent to. */
static int env_listen_fd(const char *value, const char *address, int *fd) {
  static const char name[] = "MORI_BOOTSTRAP_LISTEN_FD";
  int rc = env_int(name, value, 0, INT_MAX, fd);
  if (rc) return rc;
  int type = 0, listening = 0;
  socklen_t len = sizeof(type);
  if (getsockopt(*fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
    return mori_error_set(MORI_EINVAL, "bootstrap: %s=%s: descriptor %d is not a listening socket (%s)", name, value,
                          *fd, strerror(errno));
  len = sizeof(listening);
  if (type != SOCK_STREAM || getsockopt(*fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening)
    return mori_error_set(MORI_EINVAL, "bootstrap: %s=%s: descriptor %d is not a listening socket (%s)", name, value,
                          *fd, type != SOCK_STREAM ? "not a stream socket" : "it does not listen");
  struct sockaddr_storage sa;
  len = sizeof(sa);
  int port = 0, want = address_port(address);
  if (getsockname(*fd, (struct sockaddr *)&sa, &len) == 0) {
    if (sa.ss_family == AF_INET) port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
    if (sa.ss_family == AF_INET6) port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
  }
  if (port != want)
    return mori_error_set(MORI_EINVAL,
                          "bootstrap: %s=%s: descriptor %d listens on port %d, but the other ranks are sent to %s (port "
                          "%d): a launcher's socket must listen where MORI_BOOTSTRAP_ADDR says",
                          name, value, *fd, port, address, want);
  return 0;
}

/* A launcher's descriptor is rank 0's once: the first bootstrap takes it
 * over and closes it. A later bootstrap of the process binds the address
 * itself, as without a launcher; reading the variable again would take
 * whatever descriptor holds that number by then. */
static atomic_bool listen_fd_taken;

int mori_bootstrap_tcp_from_env(mori_bootstrap_t **out) {
  static const char *const rank_vars[] = {"MORI_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
  static const char *const size_vars[] = {"MORI_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                          "SLURM_NTASKS", NULL};
  static const char *const job_vars[] = {"SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", NULL};
  const char *rank_name = NULL, *size_name = NULL, *job_name = NULL;
  const char *rank_s = first_env(rank_vars, &rank_name), *size_s = first_env(size_vars, &size_name);
  if (!rank_s || !size_s)
    return mori_error_set(MORI_EINVAL,
                          "bootstrap: no rank/world size in the environment (set MORI_RANK and MORI_WORLD_SIZE, or "
                          "launch with torchrun, mpirun or srun)");
  mori_bootstrap_tcp_attr_t attr;
  mori_bootstrap_tcp_attr_init(&attr);
  int rc = env_int(rank_name, rank_s, 0, INT_MAX - 1, &attr.rank);
  if (!rc) rc = env_int(size_name, size_s, 1, INT_MAX, &attr.size);
  if (rc) return rc;
  char address[320];
  const char *addr = getenv("MORI_BOOTSTRAP_ADDR");
  const char *port_s = getenv("MORI_BOOTSTRAP_PORT");
  int port = 0;
  if (port_s && *port_s && (rc = env_int("MORI_BOOTSTRAP_PORT", port_s, 1, 65535, &port)) != 0) return rc;
  if (addr && *addr) {
    /* MORI_BOOTSTRAP_PORT completes an address that gives no port, and
     * must agree with one that does. */
    int given = address_port(addr);
    if (given && port && given != port)
      return mori_error_set(MORI_EINVAL,
                            "bootstrap: MORI_BOOTSTRAP_PORT='%d' disagrees with the port of MORI_BOOTSTRAP_ADDR='%.256s' "
                            "(%d): give the port once",
                            port, addr, given);
    bool bare_v6 = !given && addr[0] != '[' && strchr(addr, ':');
    if (given || !port)
      snprintf(address, sizeof(address), "%s", addr);
    else
      snprintf(address, sizeof(address), bare_v6 ? "[%s]:%d" : "%s:%d", addr, port);
  } else if (getenv("MASTER_ADDR")) {
    if (!port) {
      /* torchrun's store owns MASTER_PORT; mori takes the next one. */
      const char *master_port = getenv("MASTER_PORT");
      if (master_port && *master_port) {
        if ((rc = env_int("MASTER_PORT", master_port, 1, 65534, &port)) != 0) return rc;
        port++;
      } else {
        port = 29501;
      }
    }
    snprintf(address, sizeof(address), "%s:%d", getenv("MASTER_ADDR"), port);
  } else {
    const char *host = getenv("SLURM_LAUNCH_NODE_IPADDR");
    const char *job = first_env(job_vars, &job_name);
    unsigned hash = 0;
    for (const char *p = job ? job : ""; *p; p++) hash = hash * 31u + (unsigned char)*p;
    if (!port) port = 20000 + (int)(hash % 20000u);
    snprintf(address, sizeof(address), "%s:%d", host ? host : "127.0.0.1", port);
  }
  attr.address = address;
  const char *fd_s = getenv("MORI_BOOTSTRAP_LISTEN_FD");
  if (attr.rank == 0 && fd_s && *fd_s && !atomic_load(&listen_fd_taken)) {
    if ((rc = env_listen_fd(fd_s, address, &attr.listen_fd)) != 0) return rc;
    atomic_store(&listen_fd_taken, true); /* the bootstrap closes it, whatever comes of it */
  }
  uint8_t secret[MORI_SECRET_MAX];
  size_t secret_len = 0;
  if ((rc = mori_secret_from_env(secret, sizeof(secret), &secret_len)) != 0) {
    if (attr.listen_fd >= 0) close(attr.listen_fd); /* taken: nobody else closes it */
    return rc;
  }
  if (secret_len) {
    attr.secret = secret;
    attr.secret_len = secret_len;
  }
  mori_log_set_rank(attr.rank);
  rc = mori_bootstrap_tcp_create(&attr, out);
  memset(secret, 0, secret_len);
  return rc;
}
