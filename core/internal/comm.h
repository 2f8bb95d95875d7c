// SPDX-License-Identifier: MIT
/* The comm's internal layout (comm.c) and what the layers above it (segment,
 * signal arena, window, teardown) use of it. */
#ifndef MORI_CORE_INTERNAL_COMM_H
#define MORI_CORE_INTERNAL_COMM_H

#include <pthread.h>
#include <stdbool.h>

#include "core/platform/platform.h"
#include "mori/plugin.h"

MORI_EXTERN_C_BEGIN

enum { MORI_MAX_PLUGINS = 8 };

/* How this rank reaches one peer: what the transports provide (load/store
 * only inside the LSA team) and which transport carries what. */
typedef struct mori_route {
  uint32_t caps;
  int8_t reach;       /* transport index: load/store inside the LSA team, else RDMA; -1: none */
  int8_t copy_engine; /* transport index for copy-engine traffic; -1: none */
} mori_route_t;

struct mori_signal_arenas; /* signal_arena.c */
struct mori_node_channel;  /* node_channel.c */
struct mori_heap_segments; /* heap_segments.c */

struct mori_comm {
  mori_bootstrap_t *bootstrap;
  int rank, size, device;
  mori_peer_info_t *peers;
  /* Every given handle library whose type all ranks support, initialised;
   * a segment uses the one matching its memory. handle_type: the preferred. */
  mori_handle_ops_t handles[MORI_MAX_PLUGINS]; /* filled over the defaults */
  void *handle_state[MORI_MAX_PLUGINS];
  int num_handles;
  int handle_type;
  /* Transports as given (origin: the application's pointer, for lookups)
   * and as filled over the defaults table. */
  const mori_transport_ops_t *transport_origin[MORI_MAX_PLUGINS];
  mori_transport_ops_t transports[MORI_MAX_PLUGINS];
  void *transport_state[MORI_MAX_PLUGINS];
  int num_transports;
  mori_route_t *routes; /* per world rank */
  int lsa_base, lsa_size, lsa_rank;
  uint64_t next_segment_seq; /* collective counter: same on every rank */
  int live_windows;          /* under the window list's lock */
  uint64_t windows_made;     /* collective counter (every rank makes a window or none): same on every rank */
  struct mori_signal_arenas *arenas;
  struct mori_heap_segments *heap_segments; /* the device heap's chunks mapped across this comm */
  struct mori_node_channel *channel; /* NULL: collective steps go through the bootstrap */
  void *locality_dev;                /* locality.c: the peers' locality words on the device, made on first use */
  /* Times mori_finalize released this comm's shared memory on this rank
   * (window creation compares it across ranks: see rendezvous.h). */
  uint32_t finalizes;
  struct mori_comm *next_live; /* the process's list of comms (teardown) */
  /* The process that made the comm: its rank's steps are taken from it
   * alone (a process forked from it inherits the comm, but taking a step
   * would stand in for the rank in the peers' step, out of the rank's). */
  long creator_pid;
};

/* The process's comms, for mori_finalize: calls fn on each under the lock. */
void mori_comm_for_each(void (*fn)(mori_comm_t *comm, void *arg), void *arg);
/* Removes the comm from the list and releases it (plug-ins' fini, tables). */
void mori_comm_release(mori_comm_t *comm);
/* mori_comm_allgather for one of core's own collective steps: `what` names
 * the call, so that the node channel never pairs ranks at different calls. */
int mori_comm_allgather_named(mori_comm_t *comm, const char *what, const void *send, void *recv, size_t bytes);
/* The same step, waiting grace_ms beyond the comm's timeout for late
 * ranks: through the node channel (mori_node_channel_allgather_grace) or
 * the bootstrap (its allgather_grace op; a bootstrap of the caller's own
 * without that op keeps its own limit). */
int mori_comm_allgather_grace(mori_comm_t *comm, const char *what, const void *send, void *recv, size_t bytes,
                              int grace_ms);

MORI_EXTERN_C_END

#endif
