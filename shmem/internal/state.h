// SPDX-License-Identifier: MIT
/* The process's shmem state (one PE per process), shared by the files of
 * the shmem library. Every public call takes `lock` for its duration. */
#ifndef MORI_SHMEM_INTERNAL_STATE_H
#define MORI_SHMEM_INTERNAL_STATE_H

#include <pthread.h>
#include <stdbool.h>

#include "core/internal/agreement.h"
#include "mori/shmem.h"

MORI_EXTERN_C_BEGIN

enum { MORI_SHMEM_MAX_PLUGINS = 8 };

/* A shmem allocation or a registered buffer, with its window. */
typedef struct mori_shmem_block {
  void *base;            /* what the user holds: shmem_malloc's result or the registered pointer */
  size_t size;
  mori_window_t *win;
  void *adopted;         /* registered buffers: the mapping shmem registered with core (NULL: none) */
  bool registered;
  struct mori_shmem_block *next;
} mori_shmem_block_t;

typedef struct mori_shmem_state {
  pthread_mutex_t lock;
  bool initialized;
  int rank, npes, device;
  mori_bootstrap_t *bootstrap;
  mori_comm_t *comm;
  mori_shmem_block_t *blocks;
  /* Device state (device_state.c): shmem's own symmetric allocation and its
   * window, the table of peer chunk bases (host copy, device copy, which
   * rows are filled). */
  void *world_mem;
  mori_window_t *world_win;
  uint64_t *table;
  uint64_t *table_dev;
  bool *row_filled;
  mori_shmem_device_state_t dev;
  /* What the program listed (mori_shmem_use_plugins). */
  const mori_handle_ops_t *handles[MORI_SHMEM_MAX_PLUGINS];
  const mori_transport_ops_t *transports[MORI_SHMEM_MAX_PLUGINS];
  int num_handles, num_transports;
  uint32_t optional_transports; /* mori_comm_attr_t's bits */
} mori_shmem_state_t;

extern mori_shmem_state_t mori_shmem;

/* MORI_ENOT_INITIALIZED naming the call. */
int mori_shmem_not_initialized(const char *call);
/* Takes mori_shmem.lock for `call`: 0 with the lock held, or (the lock
 * released) MORI_ENOT_INITIALIZED when shmem is not initialised. */
int mori_shmem_lock_initialized(const char *call);

/* Collective over the PEs: core's agreement (core/internal/agreement.h):
 * 0 when every PE succeeded, else every PE fails naming the failed PE(s)
 * and carrying each one's message. */
static inline int mori_shmem_agree(mori_comm_t *comm, int my_rc, const char *step) { return mori_agree(comm, my_rc, step); }

/* The agreement steps of shmem_free and shmem_buffer_register, by name:
 * refuse.c takes the same steps for a PE that refuses its arguments. */
#define MORI_SHMEM_FREE_STEP "shmem_free (nothing was freed on any PE)"
#define MORI_SHMEM_REGISTER_STEP "shmem_buffer_register"

/* The block holding `ptr` (interior pointers allowed), or NULL. */
mori_shmem_block_t *mori_shmem_find_block(const void *ptr);
/* The first block sharing a byte with [ptr, +size), or NULL (size > 0,
 * ptr + size not wrapping). */
mori_shmem_block_t *mori_shmem_find_overlap(const void *ptr, size_t size);
void mori_shmem_add_block(mori_shmem_block_t *b);
/* The end of a call that makes a block over [base, base + size) with win
 * (under the lock, after the PEs agreed on rc): on success b records them
 * and joins the blocks; on failure b, win and backing (the memory the call
 * allocated, may be NULL) are freed, this thread's error kept, and rc
 * returned. */
int mori_shmem_keep_block(int rc, mori_shmem_block_t *b, void *base, size_t size, mori_window_t *win, void *backing);
void mori_shmem_remove_block(mori_shmem_block_t *b);
/* malloc.c: whether `ptr` lies in one of the allocations shmem_free
 * released lately (the last 64), and which (base, size). */
bool mori_shmem_was_freed(const void *ptr, const void **base, size_t *size);

/* device_state.c: made at init (collective), released at finalize. A new
 * shmem allocation's window fills its heap chunk's row of the device table
 * when the row is not filled yet: only then is this collective (one
 * agreement step named `step`; the row state is the same on every PE). */
int mori_shmem_device_state_create(void);
void mori_shmem_device_state_destroy(void);
int mori_shmem_device_state_note(mori_window_t *win, const char *step);

MORI_EXTERN_C_END

#endif
