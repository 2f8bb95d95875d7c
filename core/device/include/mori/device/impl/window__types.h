// SPDX-License-Identifier: MIT
/* Layouts of the window's device view (see mori/device/window.h). */
#ifndef MORI_DEVICE_IMPL_WINDOW_TYPES_H
#define MORI_DEVICE_IMPL_WINDOW_TYPES_H

#include "mori/device/impl/proxy__types.h"
#include "mori/device/portability.h"

struct mori_gda_window; /* mori/device/impl/gda__types.h (transport/rdma/gda) */

/* A wait that timed out inside a kernel leaves one of these in the window's
 * host-visible mailbox instead of trapping (which would kill the context);
 * the next host call on the window reports it. A writer fills the fields
 * with plain stores, fences at system scope and writes `code` last: the
 * host reads a record only once `code` is non-zero, so it never sees a
 * half-written one. */
typedef struct mori_device_error {
  uint32_t code;       /* 0: empty; else a negative MORI_E* as uint32; written last */
  int32_t waiter_rank; /* world rank that waited */
  int32_t peer;        /* world rank waited for (a barrier's: the one its failing thread waited for), or -1 */
  uint32_t channel;    /* signal slot or barrier channel */
  uint64_t waited_ns;
  uint64_t expected;   /* value waited for */
  uint64_t seen;       /* last value read; a barrier's record (missing_count > 0): the missing peers' mask */
  /* A barrier's timeout names the peers that had not arrived when it gave
   * up, not only the one its thread waited for: missing_count of them, and
   * in `seen` bit i for world rank missing_base + i (the first 64). 0: not
   * a barrier's record. (In `seen` because the control block must stay in
   * its 64-byte pinned block.) */
  int32_t missing_base;
  uint32_t missing_count;
} mori_device_error_t;

/* Host-mapped control block shared by the host and the kernels of a window:
 * the abort flag every wait honours and the error mailbox. Kernels only
 * load from it and store to it (no atomic read-modify-write on host
 * memory): who may write the record is decided in device memory, by the
 * claim word in the window's barrier area (MORI_ERROR_CLAIM_WORD). */
typedef struct mori_device_control {
  uint32_t abort_flag;
  uint32_t records_read; /* written by the host only: records it has read and cleared */
  mori_device_error_t error;
  uint32_t trap_on_error; /* MORI_TRAP_ON_DEVICE_ERROR: trap after recording (GPU kernels) */
  uint32_t reserved;
} mori_device_control_t;

/* Passed by value to kernels. Peer p of the LSA team lives at
 * flat_base + p * stride; ptrs[world_rank] is the same memory as the pointer
 * the allocation returned (torch's model). */
typedef struct mori_window_dev {
  uint64_t flat_base;
  uint64_t stride;
  uint64_t size;             /* usable bytes per rank */
  void **ptrs;               /* world_size entries, device-visible; NULL = not load/store reachable */
  uint32_t **signal_pads;    /* world_size entries or NULL when the window has no pad */
  uint64_t signal_pad_size;  /* bytes per rank */
  uint64_t barrier_base;        /* LSA index i's barrier area: barrier_base + i * barrier_stride (0: none);
                                   this rank's holds the mailbox's claim word */
  mori_device_control_t *control; /* host-mapped */
  uint64_t barrier_stride;
  mori_proxy_ring_t *proxy;  /* requests for peers outside the LSA team (rdma), or NULL */
  uint64_t *proxy_tickets;   /* device-memory ticket counter of that ring */
  int32_t world_rank;
  int32_t world_size;
  int32_t lsa_rank;          /* my index in the LSA team */
  int32_t lsa_size;
  int32_t lsa_base;          /* world rank of LSA index 0 (the team is contiguous) */
  int32_t reserved;
  uint64_t segment_offset;   /* of this memory inside what the transports registered (a heap chunk); 0 otherwise */
  /* GPU posting to peers outside the LSA team (the rdma transport's table,
   * mori/device/gda.h), or NULL: those peers go through `proxy`. */
  struct mori_gda_window *gda;
} mori_window_dev_t;

MORI_STATIC_ASSERT(sizeof(mori_window_dev_t) == 128, "mori_window_dev_t layout is part of the ABI");

/* Barrier channels of the device API (mori/device/barrier.h). Each rank's
 * barrier area holds MORI_BARRIER_CHANNELS * lsa_size received epochs,
 * then MORI_BARRIER_CHANNELS local epoch counters, then the mailbox's claim
 * word, all uint64. The claim word (its low 32 bits) is the number of the
 * last record a kernel of this rank claimed: a kernel may write the
 * mailbox only while that record has been read (claim <= records_read),
 * and claims record records_read + 1 with a device-scope compare-and-swap. */
#define MORI_BARRIER_CHANNELS 8
#define MORI_ERROR_CLAIM_WORD(lsa_size) ((uint64_t)MORI_BARRIER_CHANNELS * ((uint64_t)(lsa_size) + 1))
#define MORI_BARRIER_AREA_BYTES(lsa_size) ((MORI_ERROR_CLAIM_WORD(lsa_size) + 1) * 8)

/* When the comm spans nodes, the barrier area continues with what the
 * barrier and the signals across nodes keep (mori/device/remote_sync.h),
 * per channel, uint64 each, indexed by world rank: barrier arrivals
 * received, this rank's barrier epoch, signals received, signals consumed.
 * Offsets are from the start of the area; `lsa` and `world` are the sizes. */
#define MORI_REMOTE_SYNC_BYTES(world) ((uint64_t)MORI_BARRIER_CHANNELS * (3 * (uint64_t)(world) + 1) * 8)
#define MORI_REMOTE_ARRIVED(lsa, world, ch, src) \
  (MORI_BARRIER_AREA_BYTES(lsa) + ((uint64_t)(ch) * (uint64_t)(world) + (uint64_t)(src)) * 8)
#define MORI_REMOTE_EPOCH(lsa, world, ch) \
  (MORI_BARRIER_AREA_BYTES(lsa) + (uint64_t)MORI_BARRIER_CHANNELS * (uint64_t)(world) * 8 + (uint64_t)(ch) * 8)
#define MORI_REMOTE_SIGNALED(lsa, world, ch, src)                                                          \
  (MORI_BARRIER_AREA_BYTES(lsa) + (uint64_t)MORI_BARRIER_CHANNELS * ((uint64_t)(world) + 1) * 8 + \
   ((uint64_t)(ch) * (uint64_t)(world) + (uint64_t)(src)) * 8)
#define MORI_REMOTE_CONSUMED(lsa, world, ch, src)                                                          \
  (MORI_BARRIER_AREA_BYTES(lsa) + (uint64_t)MORI_BARRIER_CHANNELS * (2 * (uint64_t)(world) + 1) * 8 + \
   ((uint64_t)(ch) * (uint64_t)(world) + (uint64_t)(src)) * 8)

#endif
