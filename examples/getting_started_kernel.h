// SPDX-License-Identifier: MIT
/* Step 2 of docs/getting-started.md: the device side, behind a C interface
 * so the program itself stays plain C. getting_started_kernel.cu implements
 * it for CUDA and HIP GPUs; getting_started_kernel_host.c for CPU ranks. */
#ifndef MORI_EXAMPLES_GETTING_STARTED_KERNEL_H
#define MORI_EXAMPLES_GETTING_STARTED_KERNEL_H

#include "mori/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Picks this rank's GPU, local_rank % the GPUs present, and makes it
 * current; returns the device, or a negative code (gs_last_error says why). */
int gs_select_device(int local_rank);
/* Runs the exchange kernel on the current device and waits for it; returns
 * 0 or the kernel's negative MORI_DEVICE_* code. */
int gs_run_exchange(mori_window_dev_t view);
const char *gs_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
