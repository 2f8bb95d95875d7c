// SPDX-License-Identifier: MIT
/* Capability by probe: a handle type is usable on a device when creating a
 * granularity-sized allocation with it and exporting it both succeed. The
 * answer is cached per device; device attributes are not trusted (on the
 * H200 machines the fabric attribute reads 1 yet creation is refused). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/platform/platform.h"

enum { MAX_PROBED_DEVICES = 256 };
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned probed_mask[MAX_PROBED_DEVICES];
static bool probed[MAX_PROBED_DEVICES];

static bool try_handle_type(int device, size_t size, int type) {
  mori_pmem_t mem;
  if (mori_platform_mem_create(device, size, type, 0, &mem) != 0) {
    MORI_DEBUG("probe: device %d: creating with %s handles failed: %s", device,
               mori_handle_type_name(type), mori_last_error());
    return false;
  }
  mori_shareable_t shared;
  bool ok = mori_platform_mem_export(&mem, type, &shared) == 0;
  if (!ok)
    MORI_DEBUG("probe: device %d: exporting %s handle failed: %s", device,
               mori_handle_type_name(type), mori_last_error());
  if (ok && type == MORI_HANDLE_POSIX_FD) close(shared.fd);
  mori_platform_mem_release(&mem);
  return ok;
}

int mori_platform_probe_handle_types(int device, unsigned *mask) {
  if (device < 0 || device >= MAX_PROBED_DEVICES)
    return mori_error_set(MORI_EINVAL, "probe: device index %d out of range", device);
  pthread_mutex_lock(&probe_lock);
  if (!probed[device]) {
    size_t granularity;
    int rc = mori_platform_granularity(device, &granularity);
    if (rc != 0) {
      pthread_mutex_unlock(&probe_lock);
      return mori_error_context(rc, "probe: device %d", device);
    }
    unsigned m = 0;
    if (try_handle_type(device, granularity, MORI_HANDLE_FABRIC)) m |= 1u << MORI_HANDLE_FABRIC;
    if (try_handle_type(device, granularity, MORI_HANDLE_POSIX_FD)) m |= 1u << MORI_HANDLE_POSIX_FD;
    /* The runtime's own IPC (memory it allocated, adopted by
     * mori_mem_register_range) needs nothing mori creates: always there. */
    m |= 1u << MORI_HANDLE_LEGACY_IPC;
    mori_clear_error(); /* a failed probe is an answer, not an error */
    probed_mask[device] = m;
    probed[device] = true;
    MORI_DEBUG("probe: device %d on %s: fabric %s, posix_fd %s", device, mori_platform_name(),
               (m & (1u << MORI_HANDLE_FABRIC)) ? "yes" : "no",
               (m & (1u << MORI_HANDLE_POSIX_FD)) ? "yes" : "no");
  }
  *mask = probed_mask[device];
  pthread_mutex_unlock(&probe_lock);
  return 0;
}

int mori_platform_preferred_handle_type(int device, int *type) {
  unsigned mask;
  int rc = mori_platform_probe_handle_types(device, &mask);
  if (rc != 0) return rc;
  int choice = -1; /* posix_fd|fabric */
  if ((rc = mori_env_enum("MORI_HANDLE_TYPE", &choice)) != 0) return rc;
  if (choice >= 0) {
    const char *forced = choice == 0 ? "posix_fd" : "fabric";
    int want = choice == 0 ? MORI_HANDLE_POSIX_FD : MORI_HANDLE_FABRIC;
    if (!(mask & (1u << want)))
      return mori_error_set(MORI_ENOTSUP, "MORI_HANDLE_TYPE=%s, but device %d cannot create and export %s handles",
                            forced, device, forced);
    *type = want;
    return 0;
  }
  if (mask & (1u << MORI_HANDLE_FABRIC)) *type = MORI_HANDLE_FABRIC;
  else if (mask & (1u << MORI_HANDLE_POSIX_FD)) *type = MORI_HANDLE_POSIX_FD;
  else return mori_error_set(MORI_ENOTSUP, "device %d can export neither fabric nor posix_fd handles", device);
  return 0;
}
