// SPDX-License-Identifier: MIT
/* Plug-in ops over a table of defaults (rdma-core's verbs_set_ops,
 * libfabric's fi_no_*): what a plug-in leaves out — NULL, or beyond the end
 * of the smaller struct an older plug-in was built with — answers "nothing
 * to do" for lifecycle hooks and "no capability" for queries, so core calls
 * every op unconditionally. Mandatory ops are checked here, by name. */
#include <stddef.h>
#include <string.h>

#include "core/base/error.h"
#include "core/internal/plugin_ops.h"

static int no_init(mori_comm_t *comm, void **state) {
  *state = NULL;
  return 0;
}
static int no_fini(void *state) { return 0; }

static int transport_reaches_nobody(void *state, mori_comm_t *comm, int peer, uint32_t *caps) {
  *caps = 0;
  return 0;
}
static int transport_registers_nothing(void *state, mori_segment_t *seg, void **seg_state) {
  *seg_state = NULL;
  return 0;
}
static int transport_deregisters_nothing(void *state, mori_segment_t *seg, void *seg_state) { return 0; }
static int transport_adds_no_device_info(void *state, mori_segment_t *seg, void *seg_state, mori_window_dev_t *dev) {
  return 0;
}

static int transport_holds_no_queue_pairs(void *state, int peer) { return 0; }

static const mori_transport_ops_t transport_defaults = {
    .size = sizeof(mori_transport_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "?",
    .requires = 0,
    .init = no_init,
    .peer_caps = transport_reaches_nobody,
    .segment_register = transport_registers_nothing,
    .segment_deregister = transport_deregisters_nothing,
    .device_info = transport_adds_no_device_info,
    .fini = no_fini,
    .queue_pairs = transport_holds_no_queue_pairs,
};

static int handle_shares_nothing(void *state, mori_comm_t *comm, uint64_t seq, const mori_shareable_t *mine,
                                 mori_shareable_t *theirs, const bool *want) {
  return mori_error_set(MORI_ENOTSUP, "handle library without a share op");
}

static const mori_handle_ops_t handle_defaults = {
    .size = sizeof(mori_handle_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "?",
    .handle_type = MORI_HANDLE_NONE,
    .init = no_init,
    .share = handle_shares_nothing,
    .fini = no_fini,
};

/* Copies the `given_size` bytes a plug-in has over the defaults (an older
 * plug-in's struct ends early: the rest stays default); callers then put
 * the defaults back into every op the plug-in left NULL. */
static void fill(void *out, const void *defaults, size_t full_size, const void *given, size_t given_size) {
  memcpy(out, defaults, full_size);
  memcpy(out, given, given_size < full_size ? given_size : full_size);
}

#define DEFAULT_IF_NULL(out, defaults, op) \
  if (!(out)->op) (out)->op = (defaults).op

static int check_header(const char *kind, const char *name, uint32_t size, uint32_t version, size_t minimum) {
  if (!name) return mori_error_set(MORI_EINVAL, "%s without a name", kind);
  if (version < 1 || version > MORI_PLUGIN_ABI_VERSION)
    return mori_error_set(MORI_EINVAL, "%s '%s': ABI version %u, this core supports 1 to %d", kind, name, version,
                          MORI_PLUGIN_ABI_VERSION);
  if (size < minimum)
    return mori_error_set(MORI_EINVAL, "%s '%s': ops struct of %u bytes is smaller than the mandatory part (%zu bytes)",
                          kind, name, size, minimum);
  return 0;
}

int mori_transport_ops_adopt(const mori_transport_ops_t *given, mori_transport_ops_t *out) {
  if (!given) return mori_error_set(MORI_EINVAL, "comm: the transport list holds NULL");
  size_t minimum = offsetof(mori_transport_ops_t, peer_caps) + sizeof(given->peer_caps);
  int rc = check_header("transport", given->name, given->size, given->abi_version, minimum);
  if (rc) return rc;
  if (!given->peer_caps) return mori_error_set(MORI_EINVAL, "transport '%s' lacks the mandatory op peer_caps", given->name);
  fill(out, &transport_defaults, sizeof(*out), given, given->size);
  DEFAULT_IF_NULL(out, transport_defaults, init);
  DEFAULT_IF_NULL(out, transport_defaults, segment_register);
  DEFAULT_IF_NULL(out, transport_defaults, segment_deregister);
  DEFAULT_IF_NULL(out, transport_defaults, device_info);
  DEFAULT_IF_NULL(out, transport_defaults, fini);
  DEFAULT_IF_NULL(out, transport_defaults, queue_pairs);
  out->size = sizeof(*out);
  return 0;
}

int mori_handle_ops_adopt(const mori_handle_ops_t *given, mori_handle_ops_t *out) {
  if (!given) return mori_error_set(MORI_EINVAL, "comm: the handle list holds NULL");
  size_t minimum = offsetof(mori_handle_ops_t, share) + sizeof(given->share);
  int rc = check_header("handle library", given->name, given->size, given->abi_version, minimum);
  if (rc) return rc;
  if (!given->share) return mori_error_set(MORI_EINVAL, "handle library '%s' lacks the mandatory op share", given->name);
  if (given->handle_type != MORI_HANDLE_POSIX_FD && given->handle_type != MORI_HANDLE_FABRIC &&
      given->handle_type != MORI_HANDLE_LEGACY_IPC)
    return mori_error_set(MORI_EINVAL, "handle library '%s' carries unknown handle type %d", given->name,
                          given->handle_type);
  fill(out, &handle_defaults, sizeof(*out), given, given->size);
  DEFAULT_IF_NULL(out, handle_defaults, init);
  DEFAULT_IF_NULL(out, handle_defaults, fini);
  out->size = sizeof(*out);
  return 0;
}
