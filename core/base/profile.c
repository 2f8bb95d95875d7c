// SPDX-License-Identifier: MIT
/* See profile.h. Relaxed atomics: the counts are statistics, read while
 * other threads may add to them. */
#include "core/base/profile.h"

#include <stdatomic.h>
#include <time.h>

static const char *const names[MORI_PROF_COUNT] = {
    [MORI_PROF_MEM_CREATE] = "mem_create",
    [MORI_PROF_MEM_EXPORT] = "mem_export",
    [MORI_PROF_HANDLE_SHARE] = "handle_share",
    [MORI_PROF_MEM_IMPORT] = "mem_import",
    [MORI_PROF_VA_RESERVE] = "va_reserve",
    [MORI_PROF_MEM_MAP] = "mem_map",
    [MORI_PROF_SET_ACCESS] = "set_access",
    [MORI_PROF_TRANSPORT_REGISTER] = "transport_register",
    [MORI_PROF_COLLECTIVE_STEP] = "collective_step",
    [MORI_PROF_TABLE_UPLOAD] = "table_upload",
    [MORI_PROF_TABLE_WAIT] = "table_wait",
    [MORI_PROF_DEVICE_WAIT] = "device_wait",
    [MORI_PROF_DEVICE_ALLOC] = "device_alloc",
    [MORI_PROF_PINNED_ALLOC] = "pinned_alloc",
    [MORI_PROF_BLOCKING_COPY] = "blocking_copy",
};

_Static_assert(MORI_PROF_COUNT <= MORI_PROFILE_KINDS, "MORI_PROFILE_KINDS bounds the public read buffer");

static _Atomic uint64_t calls[MORI_PROF_COUNT], total[MORI_PROF_COUNT], slowest[MORI_PROF_COUNT];

uint64_t mori_profile_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void mori_profile_add(mori_profile_kind_t kind, uint64_t start) {
  uint64_t ns = mori_profile_now() - start;
  atomic_fetch_add_explicit(&calls[kind], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&total[kind], ns, memory_order_relaxed);
  uint64_t seen = atomic_load_explicit(&slowest[kind], memory_order_relaxed);
  while (ns > seen && !atomic_compare_exchange_weak_explicit(&slowest[kind], &seen, ns, memory_order_relaxed,
                                                             memory_order_relaxed)) {
  }
}

int mori_profile_done(mori_profile_kind_t kind, uint64_t start, int rc) {
  mori_profile_add(kind, start);
  return rc;
}

int mori_profile_read(mori_profile_entry_t *out, int max) {
  int n = 0;
  for (int k = 0; out && k < MORI_PROF_COUNT && n < max; k++) {
    uint64_t c = atomic_load_explicit(&calls[k], memory_order_relaxed);
    if (!c) continue;
    out[n].name = names[k];
    out[n].calls = c;
    out[n].total_ns = atomic_load_explicit(&total[k], memory_order_relaxed);
    out[n].max_ns = atomic_load_explicit(&slowest[k], memory_order_relaxed);
    n++;
  }
  return n;
}

void mori_profile_reset(void) {
  for (int k = 0; k < MORI_PROF_COUNT; k++) {
    atomic_store_explicit(&calls[k], 0, memory_order_relaxed);
    atomic_store_explicit(&total[k], 0, memory_order_relaxed);
    atomic_store_explicit(&slowest[k], 0, memory_order_relaxed);
  }
}
