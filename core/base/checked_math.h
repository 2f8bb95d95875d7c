// SPDX-License-Identifier: MIT
/* Size arithmetic that cannot wrap: every addition or multiplication of
 * sizes that come from a caller goes through these, so a size near SIZE_MAX
 * is an error, never a small number. */
#ifndef MORI_CORE_BASE_CHECKED_MATH_H
#define MORI_CORE_BASE_CHECKED_MATH_H

#include <stdbool.h>
#include <stddef.h>

/* *out = a + b; true when that overflowed (then *out is unspecified). */
static inline bool mori_add_overflows(size_t a, size_t b, size_t *out) { return __builtin_add_overflow(a, b, out); }
/* *out = a * b; true when that overflowed. */
static inline bool mori_mul_overflows(size_t a, size_t b, size_t *out) { return __builtin_mul_overflow(a, b, out); }
/* *out = size rounded up to a multiple of `align` (> 0); true on overflow. */
static inline bool mori_round_up_overflows(size_t size, size_t align, size_t *out) {
  size_t padded;
  if (__builtin_add_overflow(size, align - 1, &padded)) return true;
  *out = padded / align * align;
  return false;
}

#endif
