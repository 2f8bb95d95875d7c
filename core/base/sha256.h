// SPDX-License-Identifier: MIT
/* SHA-256 (FIPS 180-4), for authenticating the bootstrap: small, portable,
 * no dependency. Not for bulk data: it runs at a few hundred MB/s. */
#ifndef MORI_CORE_BASE_SHA256_H
#define MORI_CORE_BASE_SHA256_H

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

MORI_EXTERN_C_END

#endif
