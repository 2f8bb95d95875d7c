/* p2p transport: a peer is reachable when it is on the same host and the
 * platform says this device can access the peer's device. */
#include "core/internal/error.h"
#include "core/platform/platform.h"
#include "mori/transport_p2p.h"

static int p2p_init(mori_comm_t *comm, void **state) {
  *state = NULL;
  return 0;
}

static int p2p_can_reach(void *state, mori_comm_t *comm, int peer, bool *yes) {
  return mori_comm_peer_mappable(comm, peer, yes);
}

static int p2p_window_register(void *state, mori_window_t *win, void **win_state) {
  mori_comm_t *comm = mori_window_comm(win);
  int base, size, me;
  mori_comm_lsa(comm, &base, &size, &me);
  size_t bytes = mori_window_mapped_size(win);
  int device = mori_comm_device(comm);
  for (int i = 0; i < size; i++) {
    /* The own slot too: an alias of the local memory, so the flat window
     * arithmetic works for every LSA index. */
    char *slot = mori_window_slot(win, i);
    int rc = mori_platform_mem_map(slot, bytes, mori_window_lsa_mem(win, i));
    if (rc) return mori_error_context(rc, "p2p: mapping rank %d into its slot", base + i);
    mori_window_mark_mapped(win, i, true);
    rc = mori_platform_set_access(slot, bytes, device);
    if (rc) return mori_error_context(rc, "p2p: access to rank %d's memory", base + i);
    if (i != me) mori_window_set_peer_ptr(win, base + i, slot);
  }
  *win_state = NULL;
  return 0;
}

/* Slots are unmapped by core after the device is idle. */
static int p2p_window_deregister(void *state, mori_window_t *win, void *win_state) { return 0; }

static int p2p_fini(void *state) { return 0; }

const mori_transport_ops_t mori_transport_p2p_ops = {
    .size = sizeof(mori_transport_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "p2p",
    .caps = MORI_TRANSPORT_LOAD_STORE,
    .init = p2p_init,
    .can_reach = p2p_can_reach,
    .window_register = p2p_window_register,
    .window_deregister = p2p_window_deregister,
    .device_info = NULL,
    .fini = p2p_fini,
};
