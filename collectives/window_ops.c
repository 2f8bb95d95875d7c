/* Argument checks of mori/window_ops.h; the launchers run the kernels. */
#include "collectives/internal.h"
#include "core/base/error.h"
#include "mori/window_ops.h"

static int check_channel(const mori_window_dev_t *v, int channel, const char *what) {
  if (channel < 0 || channel >= MORI_BARRIER_CHANNELS)
    return mori_error_set(MORI_EINVAL, "%s: channel %d is outside [0, %d)", what, channel, MORI_BARRIER_CHANNELS);
  return 0;
}

static int check_pad(const mori_window_dev_t *v, int peer, int channel, const char *what) {
  if (!v->signal_pads)
    return mori_error_set(MORI_EINVAL, "%s: the window has no signal pad (its memory was allocated with pad size 0)", what);
  if (peer < 0 || peer >= v->world_size)
    return mori_error_set(MORI_EINVAL, "%s: rank %d is outside the comm of %d ranks", what, peer, v->world_size);
  if (peer < v->lsa_base || peer >= v->lsa_base + v->lsa_size)
    return mori_error_set(MORI_EUNREACHABLE, "%s: rank %d is not load/store reachable from rank %d", what, peer,
                          v->world_rank);
  uint64_t needed = ((uint64_t)channel + 1) * (uint64_t)v->world_size * 4;
  if (channel < 0 || needed > v->signal_pad_size)
    return mori_error_set(MORI_EINVAL, "%s: channel %d needs %llu bytes of signal pad, the window has %llu", what, channel,
                          (unsigned long long)needed, (unsigned long long)v->signal_pad_size);
  return 0;
}

int mori_window_barrier(mori_window_t *win, int channel, uint64_t timeout_ns, void *stream) {
  if (!win) return mori_error_set(MORI_EINVAL, "window_barrier: NULL window");
  mori_window_dev_t v = mori_window_device_view(win);
  /* The kernel meets the load/store team only: across nodes it would
   * return with the other nodes still running, a barrier in name only. */
  if (v.lsa_size < v.world_size)
    return mori_error_set(MORI_EUNREACHABLE,
                          "window_barrier: ranks outside [%d, %d) are not load/store reachable from rank %d (another "
                          "node); a barrier across nodes is not built (use the host's or the process group's)",
                          v.lsa_base, v.lsa_base + v.lsa_size, v.world_rank);
  int rc = check_channel(&v, channel, "window_barrier");
  return rc ? rc : mori_launch_window_op(win, &v, MORI_WINDOW_OP_BARRIER, -1, channel, timeout_ns, stream);
}

int mori_window_put_signal(mori_window_t *win, int peer, int channel, uint64_t timeout_ns, void *stream) {
  if (!win) return mori_error_set(MORI_EINVAL, "window_put_signal: NULL window");
  mori_window_dev_t v = mori_window_device_view(win);
  int rc = check_pad(&v, peer, channel, "window_put_signal");
  return rc ? rc : mori_launch_window_op(win, &v, MORI_WINDOW_OP_PUT_SIGNAL, peer, channel, timeout_ns, stream);
}

int mori_window_wait_signal(mori_window_t *win, int peer, int channel, uint64_t timeout_ns, void *stream) {
  if (!win) return mori_error_set(MORI_EINVAL, "window_wait_signal: NULL window");
  mori_window_dev_t v = mori_window_device_view(win);
  int rc = check_pad(&v, peer, channel, "window_wait_signal");
  return rc ? rc : mori_launch_window_op(win, &v, MORI_WINDOW_OP_WAIT_SIGNAL, peer, channel, timeout_ns, stream);
}
