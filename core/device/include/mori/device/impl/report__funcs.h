// SPDX-License-Identifier: MIT
/* Error codes of the device API and the mailbox every failed wait writes
 * (see mori/device/signal.h). */
#ifndef MORI_DEVICE_IMPL_REPORT_FUNCS_H
#define MORI_DEVICE_IMPL_REPORT_FUNCS_H

#include "mori/device/impl/window__types.h"

#define MORI_DEVICE_OK 0
#define MORI_DEVICE_EINVAL (-22)         /* = MORI_EINVAL */
#define MORI_DEVICE_ERANGE (-34)         /* = MORI_ERANGE: an output too small for what arrives */
#define MORI_DEVICE_EUNREACHABLE (-1003) /* = MORI_EUNREACHABLE */
#define MORI_DEVICE_EABORTED (-1007)     /* = MORI_EABORTED */
#define MORI_DEVICE_ETIMEDOUT (-1008)    /* = MORI_EDEVICE_TIMEOUT */
#define MORI_DEVICE_ECHANNEL (-1010)     /* = MORI_ECHANNEL: a pad channel past the window's signal pad */

/* Stops the kernel and the context with it (what torch's own backend does
 * on a timed-out wait); on the host platform, where a rank's "kernel" is the
 * process itself, nothing. */
#if defined(MORI_DEVICE_COMPILER_CUDA)
#define MORI_DEVICE_TRAP() __trap()
#elif defined(MORI_DEVICE_COMPILER_HIP)
#define MORI_DEVICE_TRAP() __builtin_trap()
#else
#define MORI_DEVICE_TRAP() ((void)0)
#endif

/* Leaves an error record in the mailbox (first writer wins) and returns
 * code; with MORI_TRAP_ON_DEVICE_ERROR set when the window was made, a GPU
 * kernel then traps (the record stays readable in host memory). */
MORI_DEVICE_INLINE int mori_device_report(mori_window_dev_t win, int code, int peer, uint32_t channel,
                                          uint64_t waited_ns, uint64_t expected, uint64_t seen) {
  mori_device_control_t *ctl = win.control;
  if (ctl && mori_atomic_cas_u32(&ctl->error_claimed, 0, 1) == 0) {
    ctl->error.waiter_rank = win.world_rank;
    ctl->error.peer = peer;
    ctl->error.channel = channel;
    ctl->error.waited_ns = waited_ns;
    ctl->error.expected = expected;
    ctl->error.seen = seen;
    mori_fence_system();
    *(volatile uint32_t *)&ctl->error.code = (uint32_t)code;
    mori_fence_system();
  }
  /* Not for an abort: mori_window_abort exists to let waiting kernels end. */
  if (ctl && code != MORI_DEVICE_EABORTED && *(volatile uint32_t *)&ctl->trap_on_error) MORI_DEVICE_TRAP();
  return code;
}

MORI_DEVICE_INLINE int mori_aborted(mori_window_dev_t win) {
  return win.control && *(volatile uint32_t *)&win.control->abort_flag != 0;
}

#endif
