// SPDX-License-Identifier: MIT
/* Size arithmetic that cannot wrap: every addition or multiplication of
 * sizes that come from a caller goes through these, so a size near SIZE_MAX
 * is an error, never a small number. */
#ifndef MORI_CORE_BASE_CHECKED_MATH_H
#define MORI_CORE_BASE_CHECKED_MATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The end of [start, +size) as an address, UINTPTR_MAX when it runs past
 * the end of the address space (no range reaches that far). */
static inline uintptr_t mori_range_end(const void *start, size_t size) {
  uintptr_t end;
  return __builtin_add_overflow((uintptr_t)start, size, &end) ? UINTPTR_MAX : end;
}
/* Whether [a, +an) and [b, +bn) share a byte, without wrapping. */
static inline bool mori_ranges_overlap(const void *a, size_t an, const void *b, size_t bn) {
  return an && bn && (uintptr_t)a < mori_range_end(b, bn) && (uintptr_t)b < mori_range_end(a, an);
}

#endif
