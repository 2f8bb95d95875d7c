// SPDX-License-Identifier: MIT
/* The part of `mori_info` that needs no comm: the build, the devices and
 * their architecture, the handle types the probe finds, the heap's
 * settings and the MORI_* variables set. A failure of any one is recorded
 * in the report as text, so that the rest is still shown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/platform/platform.h"
#include "mori/runtime.h"
#include "mori/version.h"
#include "tools/info/report.h"

static void gather_devices(info_report_t *r) {
  int count = 0;
  int rc = mori_platform_device_count(&count);
  if (!rc) rc = mori_platform_current_device(&r->device);
  if (rc) {
    snprintf(r->device_error, sizeof(r->device_error), "%s", mori_last_error());
    return;
  }
  r->device_count = count;
  r->num_devices = count < INFO_MAX_DEVICES ? count : INFO_MAX_DEVICES;
  for (int d = 0; d < r->num_devices; d++) {
    info_device_t *dev = &r->devices[d];
    if (mori_platform_device_describe(d, dev->name, sizeof(dev->name), dev->arch, sizeof(dev->arch)) != 0)
      snprintf(dev->name, sizeof(dev->name), "(unknown: %s)", mori_last_error());
  }
}

static void gather_handles(info_report_t *r) {
  r->preferred_handle = -1;
  if (r->device_error[0]) {
    snprintf(r->handle_error, sizeof(r->handle_error), "no device to probe");
    return;
  }
  int rc = mori_platform_probe_handle_types(r->device, &r->handle_mask);
  if (!rc) rc = mori_platform_preferred_handle_type(r->device, &r->preferred_handle);
  if (rc) {
    r->preferred_handle = -1;
    snprintf(r->handle_error, sizeof(r->handle_error), "%s", mori_last_error());
  }
}

struct env_copy {
  info_report_t *r;
  int cap;
};

static void keep_setting(void *ctx, const mori_env_setting_t *s) {
  struct env_copy *c = ctx;
  if (c->r->num_env == c->cap) {
    int cap = c->cap ? 2 * c->cap : 16;
    info_env_t *grown = realloc(c->r->env, (size_t)cap * sizeof(*grown));
    if (!grown) return; /* the report shows fewer variables rather than none */
    c->r->env = grown;
    c->cap = cap;
  }
  info_env_t *e = &c->r->env[c->r->num_env++];
  snprintf(e->name, sizeof(e->name), "%s", s->name);
  snprintf(e->value, sizeof(e->value), "%s", s->value);
  e->known = s->var != NULL;
  snprintf(e->parsed, sizeof(e->parsed), "%s", s->parsed);
  snprintf(e->problem, sizeof(e->problem), "%s", s->problem);
}

int info_gather_local(info_report_t *r) {
  r->version = mori_version();
  r->platform = mori_runtime_platform();
  gather_devices(r);
  gather_handles(r);
  if (mori_heap_config_from_env(NULL, &r->heap) != 0) snprintf(r->heap_error, sizeof(r->heap_error), "%s", mori_last_error());
  struct env_copy c = {r, 0};
  r->env_problems = mori_env_list(keep_setting, &c);
  /* The rdma transport posts what kernels ask for from a host thread (the
   * proxy); no kernel writes a NIC's doorbell itself. */
  r->gpu_posting = "GPU-initiated posting is not built in this version (kernels' RDMA requests go through the host proxy)";
  mori_clear_error();
  return 0;
}

void info_report_free(info_report_t *r) {
  free(r->env);
  free(r->peers);
  r->env = NULL;
  r->peers = NULL;
}
