// SPDX-License-Identifier: MIT
/* HMAC as RFC 2104 defines it: H((K ^ opad) || H((K ^ ipad) || message)),
 * with keys longer than a block hashed first. */
#include "core/base/hmac_sha256.h"

#include <string.h>

void mori_hmac_sha256_init(mori_hmac_sha256_t *ctx, const void *key, size_t key_len) {
  uint8_t block[MORI_SHA256_BLOCK] = {0};
  if (key_len > MORI_SHA256_BLOCK)
    mori_sha256(key, key_len, block);
  else if (key_len)
    memcpy(block, key, key_len);
  uint8_t pad[MORI_SHA256_BLOCK];
  for (int i = 0; i < MORI_SHA256_BLOCK; i++) pad[i] = block[i] ^ 0x36;
  mori_sha256_init(&ctx->inner);
  mori_sha256_update(&ctx->inner, pad, sizeof(pad));
  for (int i = 0; i < MORI_SHA256_BLOCK; i++) pad[i] = block[i] ^ 0x5c;
  mori_sha256_init(&ctx->outer);
  mori_sha256_update(&ctx->outer, pad, sizeof(pad));
  memset(block, 0, sizeof(block));
  memset(pad, 0, sizeof(pad));
}

void mori_hmac_sha256_update(mori_hmac_sha256_t *ctx, const void *data, size_t len) {
  mori_sha256_update(&ctx->inner, data, len);
}

void mori_hmac_sha256_final(mori_hmac_sha256_t *ctx, uint8_t mac[MORI_SHA256_BYTES]) {
  uint8_t inner[MORI_SHA256_BYTES];
  mori_sha256_final(&ctx->inner, inner);
  mori_sha256_update(&ctx->outer, inner, sizeof(inner));
  mori_sha256_final(&ctx->outer, mac);
  memset(inner, 0, sizeof(inner));
}

void mori_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len, uint8_t mac[MORI_SHA256_BYTES]) {
  mori_hmac_sha256_t ctx;
  mori_hmac_sha256_init(&ctx, key, key_len);
  mori_hmac_sha256_update(&ctx, data, len);
  mori_hmac_sha256_final(&ctx, mac);
}

bool mori_equal_secret(const void *a, const void *b, size_t n) {
  const volatile uint8_t *x = a, *y = b;
  uint8_t diff = 0;
  for (size_t i = 0; i < n; i++) diff |= (uint8_t)(x[i] ^ y[i]);
  return diff == 0;
}
