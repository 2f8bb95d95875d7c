// SPDX-License-Identifier: MIT
/* A device number a caller gave, checked: -1 is the current device, and
 * anything else must be one this process sees. Tables sized for
 * MORI_MAX_DEVICES took any number below that: a heap, with its address
 * reservation, was made for a device that does not exist, and the mistake
 * showed only at the first window. */
#include "core/base/error.h"
#include "core/platform/platform.h"

int mori_platform_resolve_device(int device, const char *call, int *out) {
  *out = device;
  if (device == -1) return mori_platform_current_device(out);
  int count = 0;
  int rc = device < -1 ? 0 : mori_platform_device_count(&count);
  if (rc) return mori_error_context(rc, "%s: device %d", call, device);
  if (device < -1 || device >= count)
    return mori_error_set(MORI_EINVAL, "%s: device %d: this process sees %d device(s) (0 to %d, or -1 for the current one)",
                          call, device, count ? count : 1, (count ? count : 1) - 1);
  return 0;
}
