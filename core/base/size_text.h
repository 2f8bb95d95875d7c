// SPDX-License-Identifier: MIT
/* Sizes as people read them in logs and messages: "512 GiB", "1.5 MiB",
 * "4 KiB", "100 B" (powers of 1024; one decimal when not whole). */
#ifndef MORI_CORE_BASE_SIZE_TEXT_H
#define MORI_CORE_BASE_SIZE_TEXT_H

#include <stddef.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

enum { MORI_SIZE_TEXT_MAX = 24 };
/* Writes `bytes` as text into buf (MORI_SIZE_TEXT_MAX bytes) and returns buf. */
const char *mori_size_text(size_t bytes, char *buf);
/* A size in a compound literal buffer, for one use in a log call:
 * MORI_INFO("... %s", MORI_SIZE_TEXT(n)). */
#define MORI_SIZE_TEXT(bytes) mori_size_text((bytes), (char[MORI_SIZE_TEXT_MAX]){0})

MORI_EXTERN_C_END

#endif
