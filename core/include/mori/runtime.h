// SPDX-License-Identifier: MIT
/* Device-generic runtime helpers for code that sits above mori and must not
 * talk to CUDA or HIP itself (the torch backend builds once for either):
 * which platform this build is for, small device allocations and copies.
 * Every call returns 0 or a negative MORI_E* with mori_last_error() set, and
 * leaves the caller's current device as it found it. */
#ifndef MORI_RUNTIME_H
#define MORI_RUNTIME_H

#include "mori/error.h"

MORI_EXTERN_C_BEGIN

/* "cuda", "hip" or "host". */
MORI_API const char *mori_runtime_platform(void);
MORI_API int mori_runtime_current_device(int *device);
/* Device memory for small tables; free accepts NULL. */
MORI_API int mori_device_alloc(int device, size_t size, void **out);
MORI_API int mori_device_free(int device, void *ptr);
/* Copies between host and device memory and waits for the copy. */
MORI_API int mori_device_copy(int device, void *dst, const void *src, size_t size);
/* Host bytes into device memory on a stream of mori's own, waiting for that
 * copy alone: no other stream is waited for or delayed. */
MORI_API int mori_device_upload(int device, void *dst, const void *src, size_t size);
/* Streams are the platform's (CUstream, hipStream_t; NULL: the default
 * stream; ignored on the host platform, where work completes at once). */
MORI_API int mori_stream_synchronize(int device, void *stream);
/* *yes = whether `stream` is being captured into a graph right now (a
 * capturing stream must not be waited for). */
MORI_API int mori_stream_capturing(int device, void *stream, int *yes);

MORI_EXTERN_C_END

#endif
