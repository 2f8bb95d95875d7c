// SPDX-License-Identifier: MIT
/* See size_text.h. */
#include "core/base/size_text.h"

#include <stdio.h>

const char *mori_size_text(size_t bytes, char *buf) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  size_t whole = bytes;
  while (whole >= 1024 && u < 6) {
    whole /= 1024;
    u++;
  }
  size_t unit = (size_t)1 << (10 * u);
  if (u == 0 || bytes % unit == 0) {
    snprintf(buf, MORI_SIZE_TEXT_MAX, "%zu %s", whole, units[u]);
  } else {
    /* One decimal, rounded down so a size just under a limit never reads as the limit. */
    size_t tenths = ((bytes % unit) >> (10 * u - 10)) * 10 / 1024;
    snprintf(buf, MORI_SIZE_TEXT_MAX, "%zu.%zu %s", whole, tenths, units[u]);
  }
  return buf;
}
