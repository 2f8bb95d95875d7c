// Stream-ordered kernels behind SymmetricMemory::barrier (the device API's
// epoch barrier on the barrier area) and put_signal / wait_signal (torch's
// signal-pad protocol), see mori/device/barrier.h.
// Return 0 or a negative code for a failed launch; a wait that times out in
// the kernel leaves a record in the window's mailbox instead of trapping.
#pragma once

#include "mori/device/impl/window__types.h"

#ifdef __cplusplus
extern "C" {
#endif

// Internal to the backend library: never exported from it.
#define MORI_TORCH_INTERNAL __attribute__((visibility("hidden")))

MORI_TORCH_INTERNAL int mori_torch_launch_barrier(mori_window_dev_t view, int channel, uint64_t timeout_ns, void *stream);
MORI_TORCH_INTERNAL int mori_torch_launch_put_signal(mori_window_dev_t view, int dst_rank, int channel, uint64_t timeout_ns, void *stream);
MORI_TORCH_INTERNAL int mori_torch_launch_wait_signal(mori_window_dev_t view, int src_rank, int channel, uint64_t timeout_ns, void *stream);
MORI_TORCH_INTERNAL const char *mori_torch_launch_error(void);

#ifdef __cplusplus
}
#endif
