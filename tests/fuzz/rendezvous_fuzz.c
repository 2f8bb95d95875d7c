// SPDX-License-Identifier: MIT
/* libFuzzer target: the records window creation gathers from every rank
 * (core/rendezvous.c), as a faulty or foreign peer might publish them. The
 * first byte sets the world size (1..16), the next two this rank's
 * load/store team; the rest fills the records field by field (zeros where
 * the input ends). Whatever the validator accepts must be safe to use the
 * way window.c uses it; the sanitizers catch any overflow on the way. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal/rendezvous.h"
#include "mori/error.h"

enum { MAX_RANKS = 16 };

static void check(int ok) {
  if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  int n = 1 + data[0] % MAX_RANKS;
  int lsa_size = 1 + data[1] % n;
  int lsa_base = data[2] % (n - lsa_size + 1);
  mori_rendezvous_info_t all[MAX_RANKS];
  memset(all, 0, sizeof(all));
  size_t bytes = size - 3 < sizeof(all[0]) * (size_t)n ? size - 3 : sizeof(all[0]) * (size_t)n;
  memcpy(all, data + 3, bytes);
  int rc = mori_rendezvous_validate(all, n, lsa_base, lsa_size, NULL);
  const char *msg = mori_last_error();
  check(memchr(msg, '\0', 1024) != NULL);
  check(rc <= 0);
  if (rc != 0) {
    check(strcmp(mori_err_name(rc), "MORI_E_UNKNOWN") != 0);
    return 0;
  }
  /* Accepted: what window.c then does with the table must not overflow. */
  int chunks = 0;
  for (int r = 0; r < n; r++) {
    check(all[r].terms == all[0].terms && all[r].args[0] == all[0].args[0] && all[r].args[1] == all[0].args[1]);
    if (all[0].terms & MORI_RENDEZVOUS_EMPTY) continue; /* every rank's allocation is empty: no window */
    check(all[r].status == 0 && all[r].ok == 1);
    check(all[r].size == all[0].size && all[r].pad_size == all[0].pad_size && all[r].mapped_size == all[0].mapped_size);
    check(all[r].size <= all[r].mapped_size && all[r].offset < all[r].mapped_size);
    check((all[r].heap_chunk >= 0) == (all[0].heap_chunk >= 0));
    if (all[r].heap_chunk >= 0) {
      check(all[r].heap_chunk <= MORI_RENDEZVOUS_MAX_CHUNK);
      check(all[r].heap_offset + all[r].mapped_size <= all[r].chunk_size); /* cannot wrap: checked piecewise */
      if (all[r].heap_chunk + 1 > chunks) chunks = all[r].heap_chunk + 1;
    }
  }
  /* Every allocation empty: no window, so no place to agree on. */
  if ((all[0].terms & MORI_RENDEZVOUS_SAME_PLACE) && !(all[0].terms & MORI_RENDEZVOUS_EMPTY))
    for (int r = 0; r < n; r++) check(all[r].heap_chunk == all[0].heap_chunk && all[r].heap_offset == all[0].heap_offset);
  uint64_t seq = mori_rendezvous_next_seq(all, n);
  for (int r = 0; r < n; r++) check(seq >= all[r].segment_seq);
  return 0;
}
