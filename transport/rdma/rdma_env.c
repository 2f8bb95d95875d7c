// SPDX-License-Identifier: MIT
/* The rdma transport's environment, read in one place: the Shmem Guide's
 * variables (MORI_RDMA_DEVICES, MORI_NUM_QP_PER_PE, MORI_IB_GID_INDEX,
 * MORI_RDMA_SL, MORI_RDMA_TC, MORI_ENABLE_RAIL_ONLY) and mori's own
 * (MORI_RDMA_DEVICE, MORI_RDMA_GID_INDEX: older names kept as aliases;
 * MORI_RDMA_PORT, MORI_RDMA_TIMEOUT_MS, MORI_RDMA_MAX_MSG), and the choice
 * of a device from a device list. Each value is parsed by the variable
 * table's own readers (core/base/env.h), so what the comm's check accepts
 * is what the transport uses ("2s" is a duration here as there), and a
 * value out of range is an error naming the variable, never a default in
 * its place: a typo never silently changes what the fabric sees. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "transport/rdma/internal.h"

/* A whole-number variable, or `fallback` when unset; its range is the table's. */
static int env_int(const char *name, int fallback, int *out) {
  long long v = fallback;
  int rc = mori_env_int(name, &v);
  *out = (int)v;
  return rc;
}

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

int rdma_config_read(struct rdma_config *c) {
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
  /* The table bounds MORI_NUM_QP_PER_PE by RDMA_MAX_QP_PER_PE (64). */
  int rc = env_int("MORI_NUM_QP_PER_PE", 1, &c->num_qp);
  if (!rc) rc = env_int(alias("MORI_IB_GID_INDEX", "MORI_RDMA_GID_INDEX"), -1, &c->gid_index);
  if (!rc) rc = env_int("MORI_RDMA_SL", 0, &c->sl);
  if (!rc) rc = env_int("MORI_RDMA_TC", 0, &c->tc);
  /* Read as every switch is (0/1, true/false, on/off, yes/no): "false" is off. */
  if (!rc) rc = mori_env_bool("MORI_ENABLE_RAIL_ONLY", &c->rail_only);
  if (!rc) rc = env_int("MORI_RDMA_PORT", 1, &c->port);
  if (!rc) rc = env_int("MORI_RDMA_MAX_MSG", 0, &c->max_msg);
  return rc;
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
