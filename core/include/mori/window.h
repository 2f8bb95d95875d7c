// SPDX-License-Identifier: MIT
/* A window: one symmetric allocation, rendezvoused over a comm, mapped into
 * one flat VA span (peer address = base + lsa_peer * stride + offset) and
 * published as a per-peer pointer table (host and device copies). */
#ifndef MORI_WINDOW_H
#define MORI_WINDOW_H

#include "mori/comm.h"
#include "mori/device/impl/window__types.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_window mori_window_t;

/* Collective over the comm: every rank passes memory from mori_mem_alloc or
 * mori_mem_register (an interior pointer is fine: see mori_window_offset).
 * Ranks that disagree (size, pad, handle type) or pass memory mori does not
 * own make every rank fail with a message naming the ranks. */
MORI_API int mori_window_create(mori_comm_t *comm, void *ptr, mori_window_t **out);
/* Local; waits for the device, then unmaps and releases in order. NULL: no-op. */
MORI_API int mori_window_destroy(mori_window_t *win);

MORI_API mori_comm_t *mori_window_comm(const mori_window_t *win);
/* The allocation's base on this rank (== what mori_mem_alloc returned). */
MORI_API void *mori_window_local_ptr(const mori_window_t *win);
/* Offset of the pointer given at creation from the allocation's base. */
MORI_API size_t mori_window_offset(const mori_window_t *win);
MORI_API size_t mori_window_size(const mori_window_t *win);
/* Peer's base in this process, or NULL when no load/store transport reaches it. */
MORI_API void *mori_window_peer_ptr(const mori_window_t *win, int peer);
/* world_size entries: host copy (dereferenceable on the host platform only)
 * and device copy (for kernels). A window's device tables are copied by
 * the first of its device getters (ptrs_dev, signal_pads_dev, device_view)
 * to be called, which blocks until that copy has landed on mori's own
 * stream (one round trip to the device when the GPU is not shared; allowed
 * inside a graph capture), so a kernel launched afterwards on any stream
 * reads them complete. */
MORI_API void *const *mori_window_ptrs(const mori_window_t *win);
MORI_API void *const *mori_window_ptrs_dev(const mori_window_t *win);
/* Signal pads (NULL when the memory has none). */
MORI_API size_t mori_window_signal_pad_size(const mori_window_t *win);
MORI_API void *const *mori_window_signal_pads(const mori_window_t *win);
MORI_API void *const *mori_window_signal_pads_dev(const mori_window_t *win);
/* The by-value struct kernels take. */
MORI_API mori_window_dev_t mori_window_device_view(const mori_window_t *win);
/* The window's synchronisation area (barrier epochs; across nodes also the
 * arrivals and signals of every rank) as a view for mori/device/
 * remote_sync.h: flat arithmetic only (no pointer tables), the window's
 * mailbox, and a proxy ring that reaches the same area on other nodes. */
MORI_API mori_window_dev_t mori_window_sync_view(const mori_window_t *win);
/* The window's flat VA span over the whole comm: world rank p's allocation
 * starts at base + p * stride on this rank (a contiguous view of every
 * rank's memory, e.g. one tensor of shape [world, ...]). Exists only when
 * every rank of the comm is in this rank's load/store team (else
 * MORI_EUNREACHABLE, naming the team) and every rank's memory sits at the
 * same place of its mapping: a window of its own memory (isolation mode,
 * mori_mem_register, allocations above a heap chunk) or heap carves at
 * equal offsets (shmem_malloc); carves at different offsets have no flat
 * span (MORI_ENOTSUP; the pointer tables still reach every peer). */
typedef struct mori_flat_span {
  uint64_t base;    /* world rank 0's allocation in this process */
  uint64_t stride;  /* bytes from one rank's allocation to the next */
  uint64_t bytes;   /* the allocation's size on every rank */
  uint64_t span;    /* (world_size - 1) * stride + bytes: what a view over every rank covers */
  int32_t world_size;
  int32_t reserved;
} mori_flat_span_t;
MORI_API int mori_window_flat_span(const mori_window_t *win, mori_flat_span_t *out);
/* Reports (and clears) an error a kernel left in the window's mailbox;
 * when there is none, reports, every time, that the window's device tables
 * never reached the device (their copy failed: the device context is
 * broken; the device getters logged it once). */
MORI_API int mori_window_check(mori_window_t *win);
/* The longest a window op given no timeout (timeout_ns == 0, torch's
 * default) waits: MORI_UNTIMED_WAIT_MS as it was when the window was made,
 * default MORI_UNTIMED_WAIT_DEFAULT_MS (torch's NCCL watchdog's 10 minutes),
 * so a peer that never comes is an error naming it, not a hang; 0 when
 * that variable is 0 (such waits are unbounded). */
#define MORI_UNTIMED_WAIT_DEFAULT_MS 600000
MORI_API uint64_t mori_window_untimed_wait_ns(const mori_window_t *win);
/* Sets the abort flag every device-side wait of this window honours. */
MORI_API void mori_window_abort(mori_window_t *win);

MORI_EXTERN_C_END

#endif
