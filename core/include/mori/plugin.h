// SPDX-License-Identifier: MIT
/* The contract between core and its plug-ins: handle libraries move physical
 * memory between processes; transports reach peers. Each library exports one
 * const ops struct; the application lists the ones it wants in its
 * mori_comm_attr_t, so a program links only what it uses.
 *
 * Every ops struct opens with {size, abi_version, name}. At mori_comm_create
 * core checks them and the mandatory ops (naming library and op on failure)
 * and copies the struct over a table of defaults, so every op a plug-in
 * leaves out — NULL, or beyond the end of an older, smaller struct — answers
 * "nothing here / not supported", and call sites never test for NULL.
 *
 * Transports are chosen by capability, never by list order: for each peer a
 * transport reports what it provides (peer_caps); the load/store (LSA) team
 * is built from MORI_CAP_LOAD_STORE alone; a transport that needs another
 * capability for the same peer (copy engines need the peer mapped) says so
 * in `requires`, and comm creation fails with a clear error when no listed
 * transport provides it. */
#ifndef MORI_PLUGIN_H
#define MORI_PLUGIN_H

#include <stdbool.h>

#include "mori/comm.h"
#include "mori/window.h"

MORI_EXTERN_C_BEGIN

enum { MORI_PLUGIN_ABI_VERSION = 2 };

/* ---- handle libraries ---- */
struct mori_handle_ops {
  uint32_t size;
  uint32_t abi_version;
  const char *name;
  int handle_type; /* mori_handle_type_t this library carries */
  int (*init)(mori_comm_t *comm, void **state);
  /* Mandatory. Collective over the comm; every rank calls it, also one whose
   * own export failed (mine->type == MORI_HANDLE_NONE), so that no rank is
   * left waiting. theirs[r] receives rank r's handle for every r with
   * want[r]; theirs[r].type is MORI_HANDLE_NONE when rank r had none. The
   * caller closes received fds. `seq` numbers the exchange (the same on
   * every rank): a message from another exchange is never taken for this
   * one. */
  int (*share)(void *state, mori_comm_t *comm, uint64_t seq, const mori_shareable_t *mine, mori_shareable_t *theirs,
               const bool *want);
  int (*fini)(void *state);
};

/* ---- transports ---- */

/* What a transport provides for one peer (a bitmask). */
enum mori_cap {
  MORI_CAP_LOAD_STORE = 1u << 0,     /* the peer's memory is mapped: plain loads and stores */
  MORI_CAP_COPY_ENGINE = 1u << 1,    /* bulk copies by DMA engines */
  MORI_CAP_RDMA = 1u << 2,           /* one-sided RDMA through a NIC */
  MORI_CAP_REMOTE_ATOMICS = 1u << 3, /* 64-bit atomics on the peer's memory */
};

/* A symmetric segment: one physical range per rank, mapped across the LSA
 * team of a comm into one flat VA span (slot i = LSA index i), registered
 * with every transport of the comm. Windows, signal-pad arenas and the
 * symmetric heap are built on segments. */
typedef struct mori_segment mori_segment_t;

struct mori_transport_ops {
  uint32_t size;
  uint32_t abi_version;
  const char *name;
  /* Capabilities this transport needs another transport to provide for a
   * peer it serves (sdma: MORI_CAP_LOAD_STORE). */
  uint32_t requires;
  int (*init)(mori_comm_t *comm, void **state);
  /* Mandatory. What this transport provides for `peer` (mori_cap bits; 0:
   * does not reach it). Same answer on every call. */
  int (*peer_caps)(void *state, mori_comm_t *comm, int peer, uint32_t *caps);
  /* Collective over the comm (every rank calls it in the same order, also
   * after a local failure). p2p maps the LSA peers' memory into their slots;
   * rdma registers the memory with the NIC and exchanges keys. */
  int (*segment_register)(void *state, mori_segment_t *seg, void **seg_state);
  /* Local. Called before core unmaps anything, with the device idle. */
  int (*segment_deregister)(void *state, mori_segment_t *seg, void *seg_state);
  /* Adds what kernels need (keys, queues) to a window's device view. */
  int (*device_info)(void *state, mori_segment_t *seg, void *seg_state, mori_window_dev_t *dev);
  int (*fini)(void *state);
  /* Appended (a struct that ends before it answers 0): how many queue pairs
   * (connections of its own) the transport holds to `peer`. Lets shmem
   * report MORI_NUM_QP_PER_PE as opened, without linking a transport. */
  int (*queue_pairs)(void *state, int peer);
};

/* The queue pairs the comm's transports hold to `peer` (0: none). */
MORI_API int mori_comm_queue_pairs(const mori_comm_t *comm, int peer);
/* Whether this rank's device can map `peer`'s memory: same host and the
 * platform grants peer access (the rule of p2p and the copy engines). */
MORI_API int mori_comm_peer_mappable(mori_comm_t *comm, int peer, bool *yes);
/* The state a transport returned from init (NULL when the transport is not
 * in the comm). Lets a transport's own host API find its state. Compares
 * with the ops pointer the application listed. */
MORI_API void *mori_comm_transport_state(const mori_comm_t *comm, const mori_transport_ops_t *ops);

/* For handle libraries whose handles are blobs (fabric, legacy IPC): one
 * bootstrap allgather of every rank's blob, offset and size, as the share
 * op describes (a rank without a handle of `type` takes part with none). */
MORI_API int mori_handle_allgather_blobs(mori_comm_t *comm, int type, const mori_shareable_t *mine, mori_shareable_t *theirs,
                                         const bool *want);

/* Defines `ops`, the whole of such a library: handle library `lib_name`,
 * whose handles of `type` are shared by mori_handle_allgather_blobs, with
 * no state of its own. `seq` goes unused: the comm's allgathers are
 * ordered, so one exchange is never taken for another. (C: designated
 * initialisers.) E.g. MORI_HANDLE_BLOB_LIBRARY(mori_handle_fabric_ops,
 * "fabric", MORI_HANDLE_FABRIC); */
#define MORI_HANDLE_BLOB_LIBRARY(ops, lib_name, type)                                                                  \
  static int ops##_share(void *state, mori_comm_t *comm, uint64_t seq, const mori_shareable_t *mine,              \
                         mori_shareable_t *theirs, const bool *want) {                                            \
    (void)state;                                                                                                  \
    (void)seq;                                                                                                    \
    return mori_handle_allgather_blobs(comm, (type), mine, theirs, want);                                         \
  }                                                                                                               \
  const mori_handle_ops_t ops = {                                                                                 \
      .size = sizeof(mori_handle_ops_t),                                                                          \
      .abi_version = MORI_PLUGIN_ABI_VERSION,                                                                     \
      .name = (lib_name),                                                                                         \
      .handle_type = (type),                                                                                      \
      .share = ops##_share,                                                                                       \
  }

/* ---- what core offers plug-ins while a segment is being made ---- */
MORI_API mori_comm_t *mori_segment_comm(const mori_segment_t *seg);
/* This rank's memory of the segment (its local address) and its bytes. */
MORI_API void *mori_segment_local_base(const mori_segment_t *seg);
MORI_API size_t mori_segment_size(const mori_segment_t *seg);
/* Bytes per slot of the flat span (the mapped size, a granularity multiple);
 * 0 for memory shared through legacy IPC handles, which has no flat span
 * (core opened the peers' memory and set their bases already). */
MORI_API size_t mori_segment_stride(const mori_segment_t *seg);
/* The flat span's slot for LSA index i (reserved; core maps the own slot). */
MORI_API void *mori_segment_slot(const mori_segment_t *seg, int lsa_index);
/* Physical memory of LSA index i in this process (imported by core through
 * the handle library; index lsa_rank is this rank's own memory). */
MORI_API const struct mori_pmem *mori_segment_lsa_mem(const mori_segment_t *seg, int lsa_index);
/* Records that a plug-in mapped (or unmapped) LSA slot i, so teardown
 * unmaps exactly what was mapped. */
MORI_API void mori_segment_mark_mapped(mori_segment_t *seg, int lsa_index, bool mapped);
/* Publishes the address by which this process reaches world rank `peer`'s
 * memory of the segment. */
MORI_API void mori_segment_set_peer_base(mori_segment_t *seg, int peer, void *ptr);
/* The state `ops` returned from segment_register (NULL when not registered). */
MORI_API void *mori_segment_transport_state(const mori_segment_t *seg, const mori_transport_ops_t *ops);

/* Whether `comm` / `win` is one of the process's live ones (created and
 * not yet destroyed, by its own destroy or by mori_finalize): 0, else
 * MORI_EINVAL naming `call` and the pointer (destroyed already, or never
 * one). Every entry point that takes a handle checks it before reading
 * through it: core's, the layers above, and a plug-in's own. */
MORI_API int mori_comm_check_live(const mori_comm_t *comm, const char *call);
MORI_API int mori_window_check_live(const mori_window_t *win, const char *call);

/* The segment a window lives in, and the window's offset in it on this rank. */
MORI_API mori_segment_t *mori_window_segment(const mori_window_t *win, size_t *offset);
/* mori_segment_transport_state of the window's segment. */
MORI_API void *mori_window_transport_state(const mori_window_t *win, const mori_transport_ops_t *ops);

MORI_EXTERN_C_END

#endif
