// SPDX-License-Identifier: MIT
/* Step 2 of docs/getting-started.md on GPUs (CUDA or HIP, one source):
 * device selection and the exchange kernel. Built by mori_device_library. */
#include <stdio.h>

#include "examples/getting_started_exchange.h"
#include "examples/getting_started_kernel.h"

#if defined(MORI_DEVICE_COMPILER_HIP)
#define GPU(name) hip##name
#else
#define GPU(name) cuda##name
#endif

static char last_error[256];
const char *gs_last_error(void) { return last_error; }

static int check(GPU(Error_t) e, const char *what) {
  if (e == GPU(Success)) return 0;
  snprintf(last_error, sizeof(last_error), "%s: %s", what, GPU(GetErrorString)(e));
  return -1;
}

int gs_select_device(int local_rank) {
  int count = 0;
  if (check(GPU(GetDeviceCount)(&count), "counting GPUs")) return -1;
  if (count < 1) {
    snprintf(last_error, sizeof(last_error), "no GPU present");
    return -1;
  }
  int device = local_rank % count;
  if (check(GPU(SetDevice)(device), "selecting the GPU")) return -1;
  return device;
}

__global__ void exchange_kernel(mori_window_dev_t view, int *rc) {
  int r = gs_exchange(view);
  if (threadIdx.x == 0) *rc = r;
}

int gs_run_exchange(mori_window_dev_t view) {
  int *rc_dev = NULL, rc = -1;
  if (check(GPU(Malloc)((void **)&rc_dev, sizeof(int)), "allocating the result word")) return -1;
  exchange_kernel<<<1, 128>>>(view, rc_dev);
  if (check(GPU(GetLastError)(), "launching the kernel") ||
      check(GPU(Memcpy)(&rc, rc_dev, sizeof(int), GPU(MemcpyDeviceToHost)), "the kernel"))
    rc = -1;
  if (check(GPU(Free)(rc_dev), "freeing the result word")) rc = -1;
  return rc;
}
