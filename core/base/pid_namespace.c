// SPDX-License-Identifier: MIT
/* See pid_namespace.h. */
#include "core/base/pid_namespace.h"

#include <sys/stat.h>

uint64_t mori_pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}
