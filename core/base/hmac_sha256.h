// SPDX-License-Identifier: MIT
/* HMAC-SHA256 (RFC 2104) and a comparison whose time does not depend on
 * where two MACs differ: what the bootstrap's challenge/response and its
 * frame integrity checks are built from. */
#ifndef MORI_CORE_BASE_HMAC_SHA256_H
#define MORI_CORE_BASE_HMAC_SHA256_H

#include <stdbool.h>

#include "core/base/sha256.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_hmac_sha256 {
  mori_sha256_t inner;
  mori_sha256_t outer; /* already fed the outer padded key */
} mori_hmac_sha256_t;

void mori_hmac_sha256_init(mori_hmac_sha256_t *ctx, const void *key, size_t key_len);
void mori_hmac_sha256_update(mori_hmac_sha256_t *ctx, const void *data, size_t len);
void mori_hmac_sha256_final(mori_hmac_sha256_t *ctx, uint8_t mac[MORI_SHA256_BYTES]);
void mori_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, uint8_t mac[MORI_SHA256_BYTES]);

/* True when a and b hold the same n bytes; reads all n bytes whatever they are. */
bool mori_equal_secret(const void *a, const void *b, size_t n);

MORI_EXTERN_C_END

#endif
