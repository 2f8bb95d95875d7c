// SPDX-License-Identifier: MIT
/* A device number a caller gave, checked: -1 is the current device, and
 * anything else must be one the platform names (mori_platform_device_names).
 * Before, any number below MORI_MAX_DEVICES passed (and any negative one
 * meant the current device): on a GPU a heap, with its address
 * reservation, was made for a device that does not exist, and the mistake
 * showed only at the first window. */
#include "core/base/error.h"
#include "core/platform/platform.h"

int mori_platform_resolve_device(int device, const char *call, int *out) {
  *out = device;
  if (device == -1) return mori_platform_current_device(out);
  if (device < -1)
    return mori_error_set(MORI_EINVAL, "%s: device %d: a device is 0 or more, or -1 for the current one", call, device);
  int count = 0;
  int rc = mori_platform_device_names(&count);
  if (rc) return mori_error_context(rc, "%s: device %d", call, device);
  if (count > MORI_MAX_DEVICES) count = MORI_MAX_DEVICES;
  if (device >= count)
    return mori_error_set(MORI_EINVAL, "%s: device %d: this process has %d device(s) (0 to %d, or -1 for the current one)",
                          call, device, count, count - 1);
  return 0;
}
