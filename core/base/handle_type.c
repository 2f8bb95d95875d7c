// SPDX-License-Identifier: MIT
/* The names of handle types (mori/types.h), for messages: here rather than
 * in the platform layer so that code checking what peers sent (the window
 * rendezvous) needs nothing but this base library. */
#include "mori/types.h"

const char *mori_handle_type_name(int type) {
  switch (type) {
    case MORI_HANDLE_POSIX_FD: return "posix_fd";
    case MORI_HANDLE_FABRIC: return "fabric";
    case MORI_HANDLE_LEGACY_IPC: return "legacy_ipc";
    case MORI_HANDLE_NONE: return "none";
  }
  return "unknown";
}
