// SPDX-License-Identifier: MIT
/* See internal/rendezvous.h. */
#include "core/internal/rendezvous.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "mori/types.h"

/* "rank 0: 4096, rank 1: 8192" for the ranks whose field differs from rank
 * 0's; unit NULL: the values in hex ("rank 0: 0x0, rank 3: 0x2"). */
static void describe_mismatch(char *out, size_t len, const mori_rendezvous_info_t *all, int n, size_t field,
                              const char *unit) {
  size_t used = 0;
  uint64_t first;
  const char *fmt = unit ? "%s%s %d: %llu%s" : "%s%s %d: 0x%llx%s";
  memcpy(&first, (const char *)&all[0] + field, sizeof(first));
  used += (size_t)snprintf(out, len, fmt, "", "rank", 0, (unsigned long long)first, unit ? unit : "");
  for (int r = 1; r < n && used + 40 < len; r++) {
    uint64_t v;
    memcpy(&v, (const char *)&all[r] + field, sizeof(v));
    if (v != first) used += (size_t)snprintf(out + used, len - used, fmt, ", ", "rank", r, (unsigned long long)v, unit ? unit : "");
  }
}

/* The same place in the heap: chunk and offset alike. (Not chunk x chunk
 * size + offset compared as one number: a peer's chunk size is data, and
 * that product can wrap onto another chunk's place.) */
static bool same_heap_place(const mori_rendezvous_info_t *a, const mori_rendezvous_info_t *b) {
  return a->heap_chunk == b->heap_chunk && a->heap_offset == b->heap_offset;
}

/* The caller's terms: the same on every rank (a rank that asks for the same
 * place while another does not is in another call: sequences diverged),
 * its arguments alike, and either every allocation empty or none. */
static int check_terms(const mori_rendezvous_info_t *all, int size, const char *const *arg_names, bool *all_empty) {
  char list[512];
  int empty = 0;
  for (int r = 0; r < size; r++) {
    if (all[r].terms & ~(uint32_t)(MORI_RENDEZVOUS_SAME_PLACE | MORI_RENDEZVOUS_EMPTY))
      return mori_error_set(MORI_EPROTO, "window_create: rank %d published an inconsistent record (unknown terms 0x%x)", r,
                            all[r].terms);
    if ((all[r].terms & MORI_RENDEZVOUS_SAME_PLACE) != (all[0].terms & MORI_RENDEZVOUS_SAME_PLACE))
      return mori_error_set(MORI_EMISMATCH,
                            "window_create: rank %d %s the same heap offset on every rank, rank 0 %s (the ranks' call "
                            "sequences diverged: a symmetric allocation against a plain window)",
                            r, (all[r].terms & MORI_RENDEZVOUS_SAME_PLACE) ? "asks for" : "does not ask for",
                            (all[0].terms & MORI_RENDEZVOUS_SAME_PLACE) ? "does" : "does not");
    empty += (all[r].terms & MORI_RENDEZVOUS_EMPTY) != 0;
  }
  for (int a = 0; a < 2; a++)
    for (int r = 1; r < size; r++)
      if (all[r].args[a] != all[0].args[a]) {
        char unnamed[16];
        snprintf(unnamed, sizeof(unnamed), "argument %d", a + 1);
        describe_mismatch(list, sizeof(list), all, size, offsetof(mori_rendezvous_info_t, args) + (size_t)a * sizeof(uint64_t),
                          NULL);
        return mori_error_set(MORI_EMISMATCH, "window_create: ranks disagree on the %s (%s)",
                              arg_names && arg_names[a] ? arg_names[a] : unnamed, list);
      }
  *all_empty = empty == size;
  if (empty && empty < size) {
    describe_mismatch(list, sizeof(list), all, size, offsetof(mori_rendezvous_info_t, size), " bytes");
    return mori_error_set(MORI_EMISMATCH, "window_create: ranks disagree on the size (%s)", list);
  }
  return 0;
}

/* "0, 3, 5" for the ranks whose record matches `pick`. */
static size_t list_ranks(char *out, size_t len, const mori_rendezvous_info_t *all, int n,
                         int (*pick)(const mori_rendezvous_info_t *)) {
  size_t used = 0;
  out[0] = '\0';
  for (int r = 0; r < n; r++)
    if (pick(&all[r]) && used + 16 < len) used += (size_t)snprintf(out + used, len - used, "%s%d", used ? ", " : "", r);
  return used;
}

static int failed_before(const mori_rendezvous_info_t *i) { return i->status != 0; }
static int not_owned(const mori_rendezvous_info_t *i) { return i->status == 0 && i->ok != 1; }

/* A peer's code is data: only mori's own negative codes are passed on. */
static int code_of(int32_t status) {
  return status < 0 && strcmp(mori_err_name(status), "MORI_E_UNKNOWN") != 0 ? status : MORI_EIO;
}

/* Why a record cannot be right, or NULL. */
static const char *malformed(const mori_rendezvous_info_t *i) {
  if (i->size == 0 || i->mapped_size < i->size) return "size larger than what is mapped";
  if (i->offset >= i->mapped_size) return "pointer outside its allocation";
  if (i->heap_chunk < -1 || i->heap_chunk > MORI_RENDEZVOUS_MAX_CHUNK) return "heap chunk out of range";
  if (i->heap_chunk >= 0) {
    if (i->chunk_size == 0 || i->heap_offset >= i->chunk_size || i->mapped_size > i->chunk_size - i->heap_offset)
      return "heap placement outside its chunk";
  } else if (i->handle_type < MORI_HANDLE_NONE || i->handle_type > MORI_HANDLE_LEGACY_IPC) {
    return "unknown handle type";
  }
  return NULL;
}

/* The comm's shared memory (signal arenas, heap chunks mapped) is made
 * by every rank together, so it is alike everywhere — unless mori_finalize,
 * which releases it on the rank that calls it, ran on some ranks only.
 * Then no window can be made on the comm until every rank has finalized
 * as often: said here, on every rank, before any step depends on it. */
static int check_shared_state(const mori_rendezvous_info_t *all, int size) {
  int r = 1;
  while (r < size && all[r].arenas == all[0].arenas && all[r].heap_chunks == all[0].heap_chunks) r++;
  if (r == size) return 0;
  return mori_error_set(MORI_EMISMATCH,
                        "window_create: the ranks' comms hold different shared memory (rank 0: %u signal arena(s), %u heap "
                        "chunk(s) mapped, mori_finalize %u time(s); rank %d: %u, %u, %u): mori_finalize releases a comm's "
                        "shared memory on the rank that calls it, so call it on every rank (at the end of the job) or make "
                        "a new comm",
                        all[0].arenas, all[0].heap_chunks, all[0].finalizes, r, all[r].arenas, all[r].heap_chunks,
                        all[r].finalizes);
}

int mori_rendezvous_validate(const mori_rendezvous_info_t *all, int size, int lsa_base, int lsa_size,
                             const char *const *arg_names) {
  char list[512];
  if (list_ranks(list, sizeof(list), all, size, failed_before)) {
    int first = 0;
    while (!all[first].status) first++;
    int code = code_of(all[first].status);
    return mori_error_set(code, "window_create: rank(s) %s failed before the rendezvous (rank %d: %s)", list, first,
                          mori_err_name(code));
  }
  int rc0 = check_shared_state(all, size);
  if (rc0) return rc0;
  bool all_empty = false;
  int rc = check_terms(all, size, arg_names, &all_empty);
  if (rc || all_empty) return rc;
  if (list_ranks(list, sizeof(list), all, size, not_owned))
    return mori_error_set(MORI_ENOT_OWNED, "window_create: rank(s) %s passed memory mori does not own", list);
  for (int r = 0; r < size; r++) {
    const char *why = malformed(&all[r]);
    if (why) return mori_error_set(MORI_EPROTO, "window_create: rank %d published an inconsistent record (%s)", r, why);
  }
  /* A comm maps, registers and signals on its own device only. Checked in
   * the table rather than by the rank alone, so that every rank fails with
   * the same message in this one exchange (a layer above may try a comm
   * first and agree on another when this fails, as the torch backend does). */
  for (int r = 0; r < size; r++)
    if (all[r].mem_device >= 0 && all[r].mem_device != all[r].device)
      return mori_error_set(MORI_EINVAL, "window_create: rank %d's memory is on device %d, its comm on device %d", r,
                            all[r].mem_device, all[r].device);
  static const struct {
    size_t field;
    const char *what, *unit;
  } agreed[] = {
      {offsetof(mori_rendezvous_info_t, size), "the size", " bytes"},
      {offsetof(mori_rendezvous_info_t, pad_size), "the signal-pad size", " pad bytes"},
      {offsetof(mori_rendezvous_info_t, mapped_size), "the allocation granularity", " mapped bytes"},
  };
  for (size_t f = 0; f < sizeof(agreed) / sizeof(agreed[0]); f++)
    for (int r = 1; r < size; r++)
      if (memcmp((const char *)&all[r] + agreed[f].field, (const char *)&all[0] + agreed[f].field, sizeof(uint64_t))) {
        describe_mismatch(list, sizeof(list), all, size, agreed[f].field, agreed[f].unit);
        return mori_error_set(MORI_EMISMATCH, "window_create: ranks disagree on %s (%s)", agreed[f].what, list);
      }
  for (int r = 1; r < size; r++)
    if ((all[r].heap_chunk >= 0) != (all[0].heap_chunk >= 0))
      return mori_error_set(MORI_EMISMATCH,
                            "window_create: rank %d's memory %s the heap, rank 0's %s (is MORI_SHMEM_MODE the same everywhere?)",
                            r, all[r].heap_chunk >= 0 ? "is from" : "is not from", all[0].heap_chunk >= 0 ? "is" : "is not");
  bool same_place = (all[0].terms & MORI_RENDEZVOUS_SAME_PLACE) != 0;
  if (same_place && all[0].heap_chunk < 0)
    return mori_error_set(MORI_ENOTSUP, "window_create: the same heap offset on every rank needs memory from the symmetric "
                                        "heap (MORI_SHMEM_MODE=static or vmm, and at most one heap chunk per "
                                        "allocation: MORI_SHMEM_VMM_CHUNK_SIZE)");
  if (all[0].heap_chunk >= 0) {
    for (int r = 1; r < size; r++)
      if (all[r].chunk_size != all[0].chunk_size) {
        describe_mismatch(list, sizeof(list), all, size, offsetof(mori_rendezvous_info_t, chunk_size), " bytes");
        return mori_error_set(MORI_EMISMATCH,
                              "window_create: ranks disagree on the heap chunk size (MORI_SHMEM_HEAP_SIZE / MORI_SHMEM_VMM_CHUNK_SIZE: %s)",
                              list);
      }
    /* Asked for, or needed because transports beyond load/store address a
     * peer's memory at this rank's offset: the same place everywhere. */
    bool needed = same_place || lsa_size < size;
    for (int r = 1; r < size && needed; r++) {
      if (same_heap_place(&all[r], &all[0])) continue;
      if (same_place)
        return mori_error_set(MORI_EMISMATCH,
                              "window_create: rank %d's carve is at heap offset %llu of chunk %d, rank 0's at %llu of "
                              "chunk %d (the ranks' allocation sequences diverged)",
                              r, (unsigned long long)all[r].heap_offset, all[r].heap_chunk,
                              (unsigned long long)all[0].heap_offset, all[0].heap_chunk);
      return mori_error_set(MORI_EMISMATCH,
                            "window_create: rank %d's heap memory is at chunk %d + %llu, rank 0's at chunk %d + %llu, and "
                            "peers outside the load/store team [%d, %d) need the same place on every rank (allocate in the "
                            "same order everywhere, or set MORI_SHMEM_MODE=isolation)",
                            r, all[r].heap_chunk, (unsigned long long)all[r].heap_offset, all[0].heap_chunk,
                            (unsigned long long)all[0].heap_offset, lsa_base, lsa_base + lsa_size);
    }
    return 0;
  }
  for (int r = 1; r < size; r++)
    if (all[r].handle_type != all[0].handle_type)
      return mori_error_set(MORI_EMISMATCH, "window_create: rank %d's memory has %s handles, rank 0's %s", r,
                            mori_handle_type_name(all[r].handle_type), mori_handle_type_name(all[0].handle_type));
  return 0;
}

uint64_t mori_rendezvous_next_seq(const mori_rendezvous_info_t *all, int size) {
  uint64_t seq = 0;
  for (int r = 0; r < size; r++)
    if (all[r].segment_seq > seq) seq = all[r].segment_seq;
  return seq;
}
