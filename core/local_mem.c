// SPDX-License-Identifier: MIT
/* See internal/local_mem.h. */
#include <string.h>

#include "core/base/checked_math.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/internal/local_mem.h"

int mori_local_mem_create(int device, size_t size, int handle_type, unsigned flags, mori_local_mem_t *out) {
  memset(out, 0, sizeof(*out));
  int type = handle_type, rc;
  size_t granularity, mapped;
  mori_error_saved_t cause;
  if ((type < 0 && (rc = mori_platform_preferred_handle_type(device, &type)) != 0) ||
      (rc = mori_platform_granularity(device, &granularity)) != 0)
    return rc;
  if (size == 0 || mori_round_up_overflows(size, granularity, &mapped))
    return mori_error_set(MORI_EINVAL, "%zu bytes cannot be allocated (granularity %zu)", size, granularity);
  if ((rc = mori_platform_mem_create(device, mapped, type, flags, &out->mem)) != 0) return rc;
  if ((rc = mori_platform_va_reserve(device, mapped, granularity, &out->base)) != 0) goto fail_release;
  if ((rc = mori_platform_mem_map(out->base, mapped, &out->mem)) != 0) goto fail_va;
  if ((rc = mori_platform_set_access(out->base, mapped, device)) != 0) goto fail_unmap;
  out->mapped_size = mapped;
  out->device = device;
  return 0;
fail_unmap:
  mori_error_save(&cause);
  mori_platform_mem_unmap(device, out->base, mapped);
  goto release_va;
fail_va:
  mori_error_save(&cause);
release_va:
  mori_platform_va_release(device, out->base, mapped);
  goto release_mem;
fail_release:
  mori_error_save(&cause);
release_mem:
  mori_platform_mem_release(&out->mem);
  mori_error_restore(&cause); /* the step that failed, not a cleanup's message */
  out->base = NULL;
  return rc;
}

void mori_local_mem_destroy(mori_local_mem_t *lm) {
  if (!lm->base) return;
  /* Teardown goes on after a failed step, which goes to the log. */
  if (mori_platform_mem_unmap(lm->device, lm->base, lm->mapped_size) != 0)
    MORI_WARN("unmapping %zu bytes at %p: %s", lm->mapped_size, lm->base, mori_last_error());
  if (mori_platform_va_release(lm->device, lm->base, lm->mapped_size) != 0)
    MORI_WARN("releasing the VA at %p: %s", lm->base, mori_last_error());
  if (mori_platform_mem_release(&lm->mem) != 0) MORI_WARN("releasing memory: %s", mori_last_error());
  lm->base = NULL;
}
