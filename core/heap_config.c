// SPDX-License-Identifier: MIT
/* See internal/heap_config.h. */
#include <string.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/size_text.h"
#include "core/internal/heap_config.h"
#include "core/platform/platform.h"

enum { GIB_SHIFT = 30, MAX_CHUNKS = 1 << 24 };

int mori_heap_config_from_env(const mori_heap_defaults_t *defaults, mori_heap_config_t *out) {
  static const mori_heap_defaults_t core_defaults = {MORI_HEAP_VMM, false, "mori's"};
  if (!defaults) defaults = &core_defaults;
  memset(out, 0, sizeof(*out));
  out->mode = defaults->mode;
  out->uncached = defaults->uncached;
  /* The order of mori_heap_mode_t and of the table's choices: static|vmm|isolation. */
  static const int modes[] = {MORI_HEAP_STATIC, MORI_HEAP_VMM, MORI_HEAP_ISOLATION};
  int mode = -1, type = -1;
  bool defer = false;
  int rc = mori_env_enum("MORI_SHMEM_MODE", &mode);
  if (!rc && mode >= 0) out->mode = modes[mode];
  if (!rc) rc = mori_env_enum("MORI_SHMEM_HEAP_TYPE", &type); /* normal|uncached */
  if (!rc && type >= 0) out->uncached = type == 1;
  if (!rc) rc = mori_env_bool("MORI_HEAP_DEFER_FREES", &defer);
  out->defer_frees = mori_platform_device_is_async() || defer;
  out->chunk_size = (size_t)1 << GIB_SHIFT;
  if (!rc) rc = mori_env_size("MORI_SHMEM_HEAP_SIZE", &out->heap_size);
  if (!rc) rc = mori_env_size("MORI_SHMEM_VMM_CHUNK_SIZE", &out->chunk_size);
  if (rc) return rc;
  if (out->mode == MORI_HEAP_STATIC && out->heap_size == 0) {
    if (mode >= 0) return mori_error_set(MORI_EINVAL, "MORI_SHMEM_MODE=static needs MORI_SHMEM_HEAP_SIZE (e.g. \"6G\")");
    return mori_error_set(MORI_EINVAL,
                          "MORI_SHMEM_HEAP_SIZE must be set before the heap is made: the heap is static by %s default "
                          "(e.g. MORI_SHMEM_HEAP_SIZE=6G; or MORI_SHMEM_MODE=vmm, which grows on demand)",
                          defaults->who);
  }
  bool limit_given = out->heap_size != 0;
  out->limit_given = limit_given;
  if (out->mode == MORI_HEAP_VMM && !limit_given) out->heap_size = (size_t)512 << GIB_SHIFT;
  /* The default limit is address space, not a promise: whole chunks of it. */
  if (out->mode == MORI_HEAP_VMM && !limit_given && out->chunk_size <= out->heap_size)
    out->heap_size = out->heap_size / out->chunk_size * out->chunk_size;
  if (out->mode == MORI_HEAP_VMM && out->chunk_size > out->heap_size)
    return mori_error_set(MORI_EINVAL, "MORI_SHMEM_VMM_CHUNK_SIZE=%s is larger than MORI_SHMEM_HEAP_SIZE=%s (the growth limit)",
                          MORI_SIZE_TEXT(out->chunk_size), MORI_SIZE_TEXT(out->heap_size));
  /* A vmm heap grows by whole chunks: a limit given between two multiples
   * was cut to the lower one without a word, and "no room" then quoted the
   * cut. (The chunk is at most the limit here, so the lower one is >= 1
   * chunk; the upper one is offered only within the variable's range.) */
  if (out->mode == MORI_HEAP_VMM && out->heap_size % out->chunk_size != 0) {
    size_t lower = out->heap_size / out->chunk_size * out->chunk_size, upper = lower + out->chunk_size;
    const mori_env_var_t *var = mori_env_find("MORI_SHMEM_HEAP_SIZE");
    bool upper_fits = upper > lower && (!var || upper <= var->max);
    return mori_error_set(MORI_EINVAL,
                          "MORI_SHMEM_HEAP_SIZE=%s is not a whole number of MORI_SHMEM_VMM_CHUNK_SIZE=%s chunks (a vmm "
                          "heap grows by whole chunks): give %s%s%s",
                          MORI_SIZE_TEXT(out->heap_size), MORI_SIZE_TEXT(out->chunk_size), MORI_SIZE_TEXT(lower),
                          upper_fits ? " or " : "", upper_fits ? MORI_SIZE_TEXT(upper) : "");
  }
  if (out->mode == MORI_HEAP_VMM && out->heap_size / out->chunk_size > MAX_CHUNKS)
    return mori_error_set(MORI_EINVAL,
                          "MORI_SHMEM_HEAP_SIZE=%s in chunks of MORI_SHMEM_VMM_CHUNK_SIZE=%s makes %zu chunks; a heap "
                          "holds at most %d (a chunk of at least %s)",
                          MORI_SIZE_TEXT(out->heap_size), MORI_SIZE_TEXT(out->chunk_size), out->heap_size / out->chunk_size,
                          MAX_CHUNKS, MORI_SIZE_TEXT((out->heap_size + MAX_CHUNKS - 1) / MAX_CHUNKS));
  return 0;
}
