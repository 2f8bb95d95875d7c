/* The contract between core and its plug-ins: handle libraries move physical
 * memory between processes; transports reach peers. Each library exports one
 * const ops struct; the application lists the ones it wants in its
 * mori_comm_attr_t, so a program links only what it uses.
 *
 * Every ops struct opens with {size, abi_version, name}; core checks them and
 * the mandatory ops at mori_comm_create, naming library and op on failure. */
#ifndef MORI_PLUGIN_H
#define MORI_PLUGIN_H

#include <stdbool.h>

#include "mori/comm.h"
#include "mori/window.h"

MORI_EXTERN_C_BEGIN

enum { MORI_PLUGIN_ABI_VERSION = 1 };

/* ---- handle libraries ---- */
struct mori_handle_ops {
  uint32_t size;
  uint32_t abi_version;
  const char *name;
  int handle_type; /* mori_handle_type_t this library carries */
  int (*init)(mori_comm_t *comm, void **state);
  /* Collective over the comm. mine: this rank's export; theirs[r] receives
   * rank r's for every r with want[r] (the caller closes received fds). */
  int (*share)(void *state, mori_comm_t *comm, const mori_shareable_t *mine, mori_shareable_t *theirs,
               const bool *want);
  int (*fini)(void *state);
};

/* ---- transports ---- */
enum mori_transport_caps {
  MORI_TRANSPORT_LOAD_STORE = 1u << 0, /* peers' memory is mapped: plain loads and stores */
  MORI_TRANSPORT_RDMA = 1u << 1,       /* one-sided RDMA through a NIC */
  MORI_TRANSPORT_COPY_ENGINE = 1u << 2 /* bulk copies by DMA engines */
};

struct mori_transport_ops {
  uint32_t size;
  uint32_t abi_version;
  const char *name;
  uint32_t caps;
  int (*init)(mori_comm_t *comm, void **state);
  int (*can_reach)(void *state, mori_comm_t *comm, int peer, bool *yes);
  int (*window_register)(void *state, mori_window_t *win, void **win_state);
  int (*window_deregister)(void *state, mori_window_t *win, void *win_state);
  /* Adds what kernels need (keys, queues) to the device view. */
  int (*device_info)(void *state, mori_window_t *win, void *win_state, mori_window_dev_t *dev);
  int (*fini)(void *state);
};

/* Whether this rank's device can map `peer`'s memory: same host and the
 * platform grants peer access (the rule of p2p and the copy engines). */
MORI_API int mori_comm_peer_mappable(mori_comm_t *comm, int peer, bool *yes);

/* ---- what core offers plug-ins while a window is being made ---- */
/* The flat span's slot for LSA index i (reserved, not yet mapped for peers). */
MORI_API void *mori_window_slot(const mori_window_t *win, int lsa_index);
MORI_API size_t mori_window_stride(const mori_window_t *win);
MORI_API size_t mori_window_mapped_size(const mori_window_t *win);
/* Physical memory of LSA index i in this process (imported by core through
 * the handle library; index lsa_rank is this rank's own memory). */
MORI_API const struct mori_pmem *mori_window_lsa_mem(const mori_window_t *win, int lsa_index);
/* Records that a plug-in mapped (or unmapped) LSA slot i. */
MORI_API void mori_window_mark_mapped(mori_window_t *win, int lsa_index, bool mapped);
/* The state a transport returned from init / window_register (NULL when the
 * transport is not in the comm or not registered with the window). Lets a
 * transport's own host API find its state from a comm or window. */
MORI_API void *mori_comm_transport_state(const mori_comm_t *comm, const mori_transport_ops_t *ops);
MORI_API void *mori_window_transport_state(const mori_window_t *win, const mori_transport_ops_t *ops);
/* Publishes the address by which this process reaches world rank `peer`. */
MORI_API void mori_window_set_peer_ptr(mori_window_t *win, int peer, void *ptr);

MORI_EXTERN_C_END

#endif
