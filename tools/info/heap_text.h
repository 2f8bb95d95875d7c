// SPDX-License-Identifier: MIT
/* The heap's mode as the report names it (text and JSON alike). */
#ifndef MORI_TOOLS_INFO_HEAP_TEXT_H
#define MORI_TOOLS_INFO_HEAP_TEXT_H

#include "mori/heap.h"

static inline const char *info_heap_mode_name(int mode) {
  return mode == MORI_HEAP_STATIC ? "static" : mode == MORI_HEAP_VMM ? "vmm" : "isolation";
}

#endif
