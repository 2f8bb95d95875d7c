// SPDX-License-Identifier: MIT
/* See internal/rendezvous.h. */
#include "core/internal/rendezvous.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "mori/types.h"

/* "rank 0: 4096, rank 1: 8192" for the ranks whose field differs from rank 0's. */
static void describe_mismatch(char *out, size_t len, const mori_rendezvous_info_t *all, int n, size_t field,
                              const char *unit) {
  size_t used = 0;
  uint64_t first;
  memcpy(&first, (const char *)&all[0] + field, sizeof(first));
  used += (size_t)snprintf(out, len, "rank 0: %llu%s", (unsigned long long)first, unit);
  for (int r = 1; r < n && used + 40 < len; r++) {
    uint64_t v;
    memcpy(&v, (const char *)&all[r] + field, sizeof(v));
    if (v != first) used += (size_t)snprintf(out + used, len - used, ", rank %d: %llu%s", r, (unsigned long long)v, unit);
  }
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

int mori_rendezvous_validate(const mori_rendezvous_info_t *all, int size, int lsa_base, int lsa_size) {
  char list[512];
  if (list_ranks(list, sizeof(list), all, size, failed_before)) {
    int first = 0;
    while (!all[first].status) first++;
    int code = code_of(all[first].status);
    return mori_error_set(code, "window_create: rank(s) %s failed before the rendezvous (rank %d: %s)", list, first,
                          mori_err_name(code));
  }
  if (list_ranks(list, sizeof(list), all, size, not_owned))
    return mori_error_set(MORI_ENOT_OWNED, "window_create: rank(s) %s passed memory mori does not own", list);
  for (int r = 0; r < size; r++) {
    const char *why = malformed(&all[r]);
    if (why) return mori_error_set(MORI_EPROTO, "window_create: rank %d published an inconsistent record (%s)", r, why);
  }
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
  if (all[0].heap_chunk >= 0) {
    for (int r = 1; r < size; r++)
      if (all[r].chunk_size != all[0].chunk_size) {
        describe_mismatch(list, sizeof(list), all, size, offsetof(mori_rendezvous_info_t, chunk_size), " bytes");
        return mori_error_set(MORI_EMISMATCH,
                              "window_create: ranks disagree on the heap chunk size (MORI_SHMEM_HEAP_SIZE / MORI_SHMEM_VMM_CHUNK_SIZE: %s)",
                              list);
      }
    /* Transports beyond load/store address a peer's memory at this rank's
     * offset: the carves must sit at the same place everywhere. */
    for (int r = 1; r < size && lsa_size < size; r++)
      if (all[r].heap_chunk != all[0].heap_chunk || all[r].heap_offset != all[0].heap_offset)
        return mori_error_set(MORI_EMISMATCH,
                              "window_create: rank %d's heap memory is at chunk %d + %llu, rank 0's at chunk %d + %llu, and "
                              "peers outside the load/store team [%d, %d) need the same place on every rank (allocate in the "
                              "same order everywhere, or set MORI_SHMEM_MODE=isolation)",
                              r, all[r].heap_chunk, (unsigned long long)all[r].heap_offset, all[0].heap_chunk,
                              (unsigned long long)all[0].heap_offset, lsa_base, lsa_base + lsa_size);
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
