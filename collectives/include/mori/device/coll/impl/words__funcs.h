// SPDX-License-Identifier: MIT
/* 8-byte words of a buffer that may end mid-word or sit at any alignment:
 * what the LL protocols move and the reductions combine. */
#ifndef MORI_DEVICE_COLL_IMPL_WORDS_FUNCS_H
#define MORI_DEVICE_COLL_IMPL_WORDS_FUNCS_H

#include "mori/device/portability.h"

MORI_HOST_DEVICE uint64_t mori_coll_impl_ar_load_word(const char *base, uint64_t byte, uint64_t end) {
  if (byte + 8 <= end && (((uintptr_t)(base + byte)) & 7) == 0) return *(const uint64_t *)(base + byte);
  uint64_t w = 0;
  for (int i = 0; i < 8 && byte + (uint64_t)i < end; i++) w |= (uint64_t)(uint8_t)base[byte + i] << (8 * i);
  return w;
}

MORI_HOST_DEVICE void mori_coll_impl_ar_store_word(char *base, uint64_t byte, uint64_t end, uint64_t w) {
  if (byte + 8 <= end && (((uintptr_t)(base + byte)) & 7) == 0) {
    *(uint64_t *)(base + byte) = w;
    return;
  }
  for (int i = 0; i < 8 && byte + (uint64_t)i < end; i++) base[byte + i] = (char)(w >> (8 * i));
}

#endif
