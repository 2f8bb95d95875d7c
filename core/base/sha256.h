// SPDX-License-Identifier: MIT
/* SHA-256 (FIPS 180-4), for authenticating the bootstrap: small, no
 * dependency; the CPU's SHA extensions where it has them, else portable
 * rounds. Not for bulk data. */
#ifndef MORI_CORE_BASE_SHA256_H
#define MORI_CORE_BASE_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

enum { MORI_SHA256_BYTES = 32, MORI_SHA256_BLOCK = 64 };

typedef struct mori_sha256 {
  uint32_t state[8];
  uint64_t total; /* bytes hashed so far */
  uint8_t block[MORI_SHA256_BLOCK];
  size_t used; /* bytes waiting in block */
} mori_sha256_t;

void mori_sha256_init(mori_sha256_t *ctx);
void mori_sha256_update(mori_sha256_t *ctx, const void *data, size_t len);
void mori_sha256_final(mori_sha256_t *ctx, uint8_t digest[MORI_SHA256_BYTES]);
void mori_sha256(const void *data, size_t len, uint8_t digest[MORI_SHA256_BYTES]);
/* Where the CPU has SHA extensions they compress the blocks; true selects
 * the portable rounds instead (tests compare both). Returns whether the
 * portable rounds are now in use. */
bool mori_sha256_use_portable(bool portable);

MORI_EXTERN_C_END

#endif
