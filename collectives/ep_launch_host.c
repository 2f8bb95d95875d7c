// SPDX-License-Identifier: MIT
/* The host platform's EP launcher: the calling CPU rank is the one block of
 * one thread that runs the call. */
#include <stdio.h>

#include "collectives/ep_internal.h"
#include "core/base/error.h"
#include "mori/device/ep/dispatch_combine.h"

int mori_ep_launch_dispatch(const mori_ep_t *ep, const mori_ep_args_t *a, mori_ep_shape_t shape, void *stream) {
  (void)shape, (void)stream;
  return mori_ep_dispatch_grid(&ep->view, a, 0, 1) ? mori_window_check(ep->win) : 0;
}

int mori_ep_launch_combine(const mori_ep_t *ep, const mori_ep_args_t *a, mori_ep_shape_t shape, void *stream) {
  (void)shape, (void)stream;
  return mori_ep_combine_grid(&ep->view, a, 0, 1) ? mori_window_check(ep->win) : 0;
}

int mori_ep_launch_prepare(const mori_ep_t *ep) {
  (void)ep;
  return 0;
}

int mori_ep_device_wait(int device) {
  (void)device; /* every call completed before it returned */
  return 0;
}

int mori_ep_launch_reset(const mori_ep_t *ep, void *stream) {
  (void)stream;
  *(volatile int32_t *)mori_local_ptr(ep->view.win, ep->view.off_recv_num) = 0;
  return 0;
}

int mori_ep_device_info(int device, char *arch, size_t arch_size, int *sms) {
  (void)device;
  snprintf(arch, arch_size, "host");
  *sms = 1;
  return 0;
}
