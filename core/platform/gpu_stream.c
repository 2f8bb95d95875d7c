// SPDX-License-Identifier: MIT
/* The GPU platforms' stream queries, written once for CUDA and HIP over the
 * names of gpu_api.h, each with the stream's device current. */
#include <stdio.h>

#include "core/platform/gpu_api.h"

static int stream_synchronize(void *stream) {
  GPU_TRY(gpu.streamSynchronize((gpu_stream_t)stream), "waiting for stream %p", stream);
  return 0;
}

int mori_platform_stream_synchronize(int device, void *stream) {
  return GPU_ON_DEVICE(device, stream_synchronize(stream));
}

static int stream_capturing(void *stream, bool *yes) {
  gpu_capture_status_t status = GPU_CAPTURE_STATUS_NONE;
  GPU_TRY(gpu.streamIsCapturing((gpu_stream_t)stream, &status), "capture status of stream %p", stream);
  *yes = status != GPU_CAPTURE_STATUS_NONE;
  return 0;
}

int mori_platform_stream_capturing(int device, void *stream, bool *yes) {
  return GPU_ON_DEVICE(device, stream_capturing(stream, yes));
}
