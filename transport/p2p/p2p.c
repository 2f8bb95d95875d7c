// SPDX-License-Identifier: MIT
/* p2p transport: load/store between the ranks of one host whose devices can
 * map each other's memory. Registering a segment maps every LSA peer's
 * memory into its slot of the flat span (core maps the own slot). */
#include "core/base/error.h"
#include "core/platform/platform.h"
#include "mori/transport_p2p.h"

static int p2p_peer_caps(void *state, mori_comm_t *comm, int peer, uint32_t *caps) {
  bool yes = false;
  int rc = mori_comm_peer_mappable(comm, peer, &yes);
  *caps = yes ? MORI_CAP_LOAD_STORE | MORI_CAP_REMOTE_ATOMICS : 0;
  return rc;
}

static int p2p_segment_register(void *state, mori_segment_t *seg, void **seg_state) {
  mori_comm_t *comm = mori_segment_comm(seg);
  int base, size, me;
  mori_comm_lsa(comm, &base, &size, &me);
  size_t bytes = mori_segment_stride(seg);
  int device = mori_comm_device(comm);
  *seg_state = NULL;
  /* No flat span (legacy IPC memory): core opened the peers already. */
  if (bytes == 0) return 0;
  for (int i = 0; i < size; i++) {
    if (i == me) continue;
    char *slot = mori_segment_slot(seg, i);
    int rc = mori_platform_mem_map(slot, bytes, mori_segment_lsa_mem(seg, i));
    if (rc) return mori_error_context(rc, "p2p: mapping rank %d into its slot", base + i);
    mori_segment_mark_mapped(seg, i, true);
    rc = mori_platform_set_access(slot, bytes, device);
    if (rc) return mori_error_context(rc, "p2p: access to rank %d's memory", base + i);
    mori_segment_set_peer_base(seg, base + i, slot);
  }
  return 0;
}

/* Slots are unmapped by core after the device is idle: nothing to do at
 * deregistration, no device info, no state: those ops are left out. */
const mori_transport_ops_t mori_transport_p2p_ops = {
    .size = sizeof(mori_transport_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "p2p",
    .peer_caps = p2p_peer_caps,
    .segment_register = p2p_segment_register,
};
