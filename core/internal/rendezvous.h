// SPDX-License-Identifier: MIT
/* Step 1 of window creation (window.c): the record every rank publishes
 * and the checks every rank runs on the same gathered table, so all reach
 * the same verdict. Everything in a peer's record is checked here before
 * any of it is used (rendezvous.c; fuzzed by tests/fuzz/rendezvous_fuzz.c). */
#ifndef MORI_CORE_INTERNAL_RENDEZVOUS_H
#define MORI_CORE_INTERNAL_RENDEZVOUS_H

#include <stdint.h>

#include "core/internal/arena_proposal.h"
#include "mori/api.h"

MORI_EXTERN_C_BEGIN

/* Heap chunk indices a record may name: far above any heap's chunk count,
 * far below where index arithmetic could wrap. */
enum { MORI_RENDEZVOUS_MAX_CHUNK = 1 << 20 };

/* Record terms: the same heap offset (and size) on every rank is required;
 * this rank's allocation is empty (no memory, size 0). */
enum { MORI_RENDEZVOUS_SAME_PLACE = 1u, MORI_RENDEZVOUS_EMPTY = 2u };

typedef struct mori_rendezvous_info {
  int32_t status;      /* 0, or this rank's failure before the rendezvous (a negative MORI_E*) */
  int32_t ok;          /* 1: the pointer is mori memory */
  int32_t device;      /* the comm's device on this rank */
  int32_t handle_type;
  int32_t pid;
  int32_t heap_chunk;  /* -1: memory of its own */
  uint32_t terms;      /* MORI_RENDEZVOUS_* (window_terms.h) */
  int32_t mem_device;  /* the memory's device: must be `device` (-1: not known, memory registered without one) */
  uint64_t size, mapped_size, pad_size, offset;
  uint64_t heap_offset, chunk_size;
  uint64_t segment_seq; /* the rank's next segment sequence number */
  uint64_t args[2];     /* the caller's arguments, alike on every rank */
  mori_arena_proposal_t arena; /* the run this rank proposes for the window's signal slots */
  /* What the comm shares on this rank: the same on every rank unless
   * mori_finalize (which releases it) ran on some ranks only. finalizes
   * (the finalizes that released some of it) is only said in messages. */
  uint32_t arenas, heap_chunks, finalizes, reserved;
} mori_rendezvous_info_t;

/* 0 when the `size` records agree and each is consistent (every record
 * empty included: then there is no window); else an error naming the
 * ranks: a rank that failed before the rendezvous (its code when it is one
 * of mori's, else MORI_EIO), memory mori does not own (MORI_ENOT_OWNED), a
 * malformed record (MORI_EPROTO), memory on a device other than the
 * rank's comm (MORI_EINVAL, naming the rank and both devices), comms
 * whose shared state differs (MORI_EMISMATCH: mori_finalize ran on some
 * ranks only), a disagreement (MORI_EMISMATCH: sizes,
 * terms, the caller's arguments, or with MORI_RENDEZVOUS_SAME_PLACE the
 * heap offsets), or the same place asked of memory outside the heap
 * (MORI_ENOTSUP). lsa_base/lsa_size: this rank's load/store team;
 * arg_names: the names of args[0..1] in errors (NULL, or a NULL entry:
 * "argument 1/2"). */
int mori_rendezvous_validate(const mori_rendezvous_info_t *all, int size, int lsa_base, int lsa_size,
                             const char *const *arg_names);

/* The sequence number the window's segments continue from: the highest any
 * rank published, so ranks whose counters drifted apart are in step again. */
uint64_t mori_rendezvous_next_seq(const mori_rendezvous_info_t *all, int size);

MORI_EXTERN_C_END

#endif
