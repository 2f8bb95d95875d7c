// SPDX-License-Identifier: MIT
/* Bodies of mori/device/window.h. */
#ifndef MORI_DEVICE_IMPL_WINDOW_FUNCS_H
#define MORI_DEVICE_IMPL_WINDOW_FUNCS_H

#include "mori/device/impl/window__types.h"

/* One multiply-add and no load, unless the ranks' heap carves differ. */
MORI_HOST_DEVICE void *mori_lsa_ptr(mori_window_dev_t win, int lsa_peer, uint64_t offset) {
  if (__builtin_expect(win.stride == 0, 0)) return (void *)((char *)win.ptrs[win.lsa_base + lsa_peer] + offset);
  return (void *)(uintptr_t)(win.flat_base + (uint64_t)lsa_peer * win.stride + offset);
}

MORI_HOST_DEVICE int mori_lsa_index(mori_window_dev_t win, int world_peer) {
  int idx = world_peer - win.lsa_base;
  return (idx >= 0 && idx < win.lsa_size) ? idx : -1;
}

MORI_HOST_DEVICE void *mori_peer_ptr(mori_window_dev_t win, int peer, uint64_t offset) {
  int idx = mori_lsa_index(win, peer);
  return idx < 0 ? (void *)0 : mori_lsa_ptr(win, idx, offset);
}

MORI_HOST_DEVICE void *mori_table_ptr(mori_window_dev_t win, int peer, uint64_t offset) {
  char *base = (char *)win.ptrs[peer];
  return base ? (void *)(base + offset) : (void *)0;
}

MORI_HOST_DEVICE void *mori_local_ptr(mori_window_dev_t win, uint64_t offset) {
  return mori_table_ptr(win, win.world_rank, offset);
}

#endif
