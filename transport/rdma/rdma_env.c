// SPDX-License-Identifier: MIT
/* The rdma transport's environment, read in one place: the Shmem Guide's
 * variables (MORI_RDMA_DEVICES, MORI_NUM_QP_PER_PE, MORI_IB_GID_INDEX,
 * MORI_RDMA_SL, MORI_RDMA_TC, MORI_ENABLE_RAIL_ONLY) and mori's own
 * (MORI_RDMA_DEVICE, MORI_RDMA_GID_INDEX: older names kept as aliases;
 * MORI_RDMA_PORT, MORI_RDMA_TIMEOUT_MS, MORI_RDMA_MAX_MSG), and the choice
 * of a device from a device list. A value out of range is said once (a
 * warning naming the variable) and the default is used, as for every other
 * mori variable: a typo never silently changes what the fabric sees. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "transport/rdma/internal.h"

/* A whole number in [lo, hi] from `text`; false when it is not one. */
static bool parse_int(const char *text, long lo, long hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > hi) return false;
  *out = (int)v;
  return true;
}

int rdma_env_range(const char *name, int lo, int hi, int fallback) {
  const char *s = getenv(name);
  if (!s || !*s) return fallback;
  int v;
  if (parse_int(s, lo, hi, &v)) return v;
  MORI_WARN("rdma: %s=\"%s\" is not a whole number from %d to %d; using %d", name, s, lo, hi, fallback);
  return fallback;
}

int rdma_env_int(const char *name, int fallback) { return rdma_env_range(name, 0, INT32_MAX, fallback); }

/* The first of two names that is set (the Shmem Guide's, then mori's older
 * one); both set to different values: the guide's wins, said once. */
static const char *alias(const char *name, const char *old) {
  const char *a = getenv(name), *b = getenv(old);
  if (a && *a) {
    if (b && *b && strcmp(a, b) != 0) MORI_WARN("rdma: %s=\"%s\" and %s=\"%s\" are both set; using %s", name, a, old, b, name);
    return name;
  }
  return (b && *b) ? old : name;
}

void rdma_config_read(struct rdma_config *c) {
  memset(c, 0, sizeof(*c));
  const char *devices = alias("MORI_RDMA_DEVICES", "MORI_RDMA_DEVICE");
  const char *list = getenv(devices);
  if (list && *list) {
    c->devices_var = devices;
    c->exclude = list[0] == '^';
    snprintf(c->devices, sizeof(c->devices), "%s", list + (c->exclude ? 1 : 0));
    if (strlen(list) >= sizeof(c->devices))
      MORI_WARN("rdma: %s is longer than %zu characters; the rest is ignored", devices, sizeof(c->devices) - 1);
  }
  c->num_qp = rdma_env_range("MORI_NUM_QP_PER_PE", 1, RDMA_MAX_QP_PER_PE, 1);
  c->gid_index = rdma_env_range(alias("MORI_IB_GID_INDEX", "MORI_RDMA_GID_INDEX"), 0, 255, -1);
  c->sl = rdma_env_range("MORI_RDMA_SL", 0, 15, 0);
  c->tc = rdma_env_range("MORI_RDMA_TC", 0, 255, 0);
  /* Read as every switch is (0/1, true/false, on/off, yes/no): "false" is off. */
  c->rail_only = mori_env_bool_or("MORI_ENABLE_RAIL_ONLY", false);
  c->port = rdma_env_range("MORI_RDMA_PORT", 1, 255, 1);
  c->max_msg = rdma_env_int("MORI_RDMA_MAX_MSG", 0);
}

/* Whether `name` is one of the comma-separated names of `list`. */
static bool listed(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == n && !strncmp(p, name, n)) return true;
    p += len + (comma ? 1 : 0);
  }
  return false;
}

/* The present devices, comma-separated, for messages. */
static void present(const char *const *names, int n, char *out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < n && used < cap; i++) used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? "," : "", names[i]);
  if (!n) snprintf(out, cap, "none");
}

int rdma_pick_device(const struct rdma_config *c, const char *const *names, int n, int local_rank, int *chosen) {
  char all[256];
  present(names, n, all, sizeof(all));
  if (n == 0) return mori_error_set(MORI_ENODEV, "rdma: no RDMA device");
  /* The candidates, in the include list's order (the order the user wrote),
   * else in the system's order less the excluded ones. */
  int cand[RDMA_MAX_DEVICES], m = 0;
  if (c->devices_var && !c->exclude) {
    for (const char *p = c->devices; *p && m < RDMA_MAX_DEVICES;) {
      const char *comma = strchr(p, ',');
      size_t len = comma ? (size_t)(comma - p) : strlen(p);
      int found = -1;
      for (int i = 0; i < n && found < 0; i++)
        if (strlen(names[i]) == len && !strncmp(names[i], p, len)) found = i;
      if (found >= 0) cand[m++] = found;
      else if (len) MORI_WARN("rdma: %s names %.*s, which is not present (present: %s)", c->devices_var, (int)len, p, all);
      p += len + (comma ? 1 : 0);
    }
  } else {
    for (int i = 0; i < n && m < RDMA_MAX_DEVICES; i++)
      if (!c->devices_var || !listed(c->devices, names[i])) cand[m++] = i;
  }
  if (m == 0)
    return mori_error_set(MORI_ENODEV, "rdma: %s=%s%s leaves no RDMA device (present: %s)", c->devices_var,
                          c->exclude ? "^" : "", c->devices, all);
  /* Several left: ranks of a node spread over them, local rank i on the
   * i-th (modulo), so that a node's ranks share the NICs evenly. */
  *chosen = cand[(local_rank < 0 ? 0 : local_rank) % m];
  return 0;
}
