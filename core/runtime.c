// SPDX-License-Identifier: MIT
/* mori/runtime.h over the platform layer. */
#include "core/base/error.h"
#include "core/platform/platform.h"
#include "mori/runtime.h"

const char *mori_runtime_platform(void) { return mori_platform_name(); }
int mori_runtime_current_device(int *device) { return mori_platform_current_device(device); }

int mori_device_alloc(int device, size_t size, void **out) {
  if (!out) return mori_error_set(MORI_EINVAL, "device_alloc: out is NULL");
  return mori_platform_device_alloc(device, size, out);
}

int mori_device_free(int device, void *ptr) { return mori_platform_device_free(device, ptr); }

int mori_device_copy(int device, void *dst, const void *src, size_t size) {
  if (!size) return 0;
  if (!dst || !src) return mori_error_set(MORI_EINVAL, "device_copy: NULL pointer");
  return mori_platform_memcpy(device, dst, src, size);
}

int mori_device_upload(int device, void *dst, const void *src, size_t size) {
  if (!size) return 0;
  if (!dst || !src) return mori_error_set(MORI_EINVAL, "device_upload: NULL pointer");
  return mori_platform_upload(device, dst, src, size);
}

int mori_stream_synchronize(int device, void *stream) { return mori_platform_stream_synchronize(device, stream); }

int mori_stream_capturing(int device, void *stream, int *yes) {
  if (!yes) return mori_error_set(MORI_EINVAL, "stream_capturing: yes is NULL");
  bool b = false;
  int rc = mori_platform_stream_capturing(device, stream, &b);
  *yes = b;
  return rc;
}
