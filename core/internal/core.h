/* Core's internal objects, shared by comm.c, mem.c, window*.c. */
#ifndef MORI_CORE_INTERNAL_CORE_H
#define MORI_CORE_INTERNAL_CORE_H

#include <pthread.h>
#include <stdbool.h>

#include "core/platform/platform.h"
#include "mori/mem.h"
#include "mori/plugin.h"

MORI_EXTERN_C_BEGIN

enum { MORI_MAX_PLUGINS = 8 };

/* One allocation (mori_mem_alloc or mori_mem_register). */
typedef struct mori_alloc {
  void *base;
  size_t size, mapped_size, signal_pad_size;
  int device;
  mori_pmem_t mem;
  bool registered; /* memory mapped by someone else: never unmapped by us */
  bool freed;      /* mori_mem_free was called; released when refs drop to 0 */
  int refs;        /* 1 for the user + 1 per window */
  struct mori_alloc *next;
} mori_alloc_t;

/* A region of the comm's shared signal-pad arena. */
typedef struct mori_pad_slot {
  int arena;
  size_t offset, bytes;
} mori_pad_slot_t;

typedef struct mori_pad_arena mori_pad_arena_t;

struct mori_comm {
  mori_bootstrap_t *bootstrap;
  int rank, size, device;
  mori_peer_info_t *peers;
  /* Every given handle library whose type all ranks support, initialised;
   * a window uses the one matching its memory. handle_type: the preferred. */
  const mori_handle_ops_t *handles[MORI_MAX_PLUGINS];
  void *handle_state[MORI_MAX_PLUGINS];
  int num_handles;
  int handle_type;
  const mori_transport_ops_t *transports[MORI_MAX_PLUGINS];
  void *transport_state[MORI_MAX_PLUGINS];
  int num_transports;
  int8_t *reach; /* per peer: transport index, or -1 */
  int lsa_base, lsa_size, lsa_rank;
  int live_windows;
  uint64_t next_window_id;
  mori_pad_arena_t *pad_arenas;
  int num_pad_arenas;
  bool creating_arena; /* the window being created is an arena: no pad, no sync area */
};

struct mori_window {
  mori_comm_t *comm;
  mori_alloc_t *alloc;
  size_t offset;
  uint64_t id;
  char *flat_base;        /* lsa_size * stride bytes of VA */
  size_t stride;
  mori_pmem_t *lsa_mem;   /* per LSA index (own entry: a copy of alloc->mem) */
  bool *lsa_mapped;
  void **ptrs, **ptrs_dev;
  void **pads, **pads_dev;
  mori_pad_slot_t pad_slot;
  bool has_pad;
  mori_pad_slot_t sync_slot; /* the device barrier's area (mori/device/barrier.h) */
  bool has_sync;
  bool internal;          /* a signal-pad arena: not counted as a user window */
  mori_device_control_t *control;   /* host-visible */
  mori_device_control_t *control_dev;
  void *transport_state[MORI_MAX_PLUGINS];
  bool transport_registered[MORI_MAX_PLUGINS];
  struct mori_window *next; /* in the process-wide list */
};

/* The process-wide registry: allocations and windows, one lock. */
MORI_API pthread_mutex_t *mori_registry_lock(void);
MORI_API mori_alloc_t *mori_registry_find_locked(const void *ptr);
MORI_API void mori_alloc_release_ref_locked(mori_alloc_t *a);
MORI_API void mori_registry_add_window_locked(mori_window_t *w);
MORI_API void mori_registry_remove_window_locked(mori_window_t *w);
MORI_API mori_window_t *mori_registry_first_window_locked(void);

/* Releases everything a (possibly partly built) window holds. */
MORI_API void mori_window_teardown(mori_window_t *w);

/* Signal-pad arena of a comm (signal_pad.c). Collective. */
MORI_API int mori_pad_assign(mori_comm_t *comm, size_t bytes, mori_pad_slot_t *slot);
/* Two slots from one run (second_bytes may be 0): one collective step. */
MORI_API int mori_pad_assign_pair(mori_comm_t *comm, size_t first_bytes, size_t second_bytes, mori_pad_slot_t *first,
                                  mori_pad_slot_t *second);
MORI_API void mori_pad_release(mori_comm_t *comm, const mori_pad_slot_t *slot);
MORI_API void *mori_pad_peer_ptr(mori_comm_t *comm, const mori_pad_slot_t *slot, int peer);
/* The slot in the flat window arithmetic: LSA index i at base + i * stride. */
MORI_API void mori_pad_flat(mori_comm_t *comm, const mori_pad_slot_t *slot, uint64_t *base, uint64_t *stride);
MORI_API void mori_pad_arenas_destroy(mori_comm_t *comm);

MORI_EXTERN_C_END

#endif
