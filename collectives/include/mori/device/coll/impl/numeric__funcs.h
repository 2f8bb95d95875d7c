// SPDX-License-Identifier: MIT
/* Element types and reductions for the collectives, in integer arithmetic
 * where the hardware has no common spelling (bf16, fp16 conversions), so
 * results are bit-identical on CUDA, HIP and the host. Sums accumulate in
 * fp32 in rank order: deterministic, and the same on every rank. */
#ifndef MORI_DEVICE_COLL_IMPL_NUMERIC_FUNCS_H
#define MORI_DEVICE_COLL_IMPL_NUMERIC_FUNCS_H

#include "mori/device/coll/types.h"

/* A float as its bits (or bits as a float). */
typedef union mori_coll_impl_f32 {
  uint32_t u;
  float f;
} mori_coll_impl_f32_t;

MORI_HOST_DEVICE float mori_coll_impl_bits_to_float(uint32_t bits) {
  mori_coll_impl_f32_t v;
  v.u = bits;
  return v.f;
}

MORI_HOST_DEVICE uint32_t mori_coll_impl_float_to_bits(float f) {
  mori_coll_impl_f32_t v;
  v.f = f;
  return v.u;
}

MORI_HOST_DEVICE float mori_coll_impl_bf16_to_float(uint16_t h) { return mori_coll_impl_bits_to_float((uint32_t)h << 16); }

/* Round to nearest even; NaN stays NaN. */
MORI_HOST_DEVICE uint16_t mori_coll_impl_float_to_bf16(float f) {
  uint32_t u = mori_coll_impl_float_to_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

MORI_HOST_DEVICE float mori_coll_impl_fp16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return mori_coll_impl_bits_to_float(sign);
    /* subnormal: normalise */
    exp = 127 - 15 + 1;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      exp--;
    }
    mant &= 0x3ffu;
    return mori_coll_impl_bits_to_float(sign | (exp << 23) | (mant << 13));
  }
  if (exp == 31) return mori_coll_impl_bits_to_float(sign | 0x7f800000u | (mant << 13));
  return mori_coll_impl_bits_to_float(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

/* Round to nearest even, overflow to infinity, NaN stays NaN. */
MORI_HOST_DEVICE uint16_t mori_coll_impl_float_to_fp16(float f) {
  uint32_t u = mori_coll_impl_float_to_bits(f), sign = (u >> 16) & 0x8000u;
  int32_t exp = (int32_t)((u >> 23) & 0xffu) - 127 + 15;
  uint32_t mant = u & 0x7fffffu;
  if (((u >> 23) & 0xffu) == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = (uint32_t)exp << 10 | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;
  return (uint16_t)(sign | half);
}

MORI_HOST_DEVICE uint32_t mori_coll_impl_dtype_size(uint32_t dtype) { return dtype == MORI_FLOAT32 ? 4 : 2; }

/* Element i of a buffer of `dtype`, as float. */
MORI_HOST_DEVICE float mori_coll_impl_load_elem(const void *p, uint64_t i, uint32_t dtype) {
  if (dtype == MORI_FLOAT32) return ((const float *)p)[i];
  uint16_t h = ((const uint16_t *)p)[i];
  return dtype == MORI_BFLOAT16 ? mori_coll_impl_bf16_to_float(h) : mori_coll_impl_fp16_to_float(h);
}

MORI_HOST_DEVICE void mori_coll_impl_store_elem(void *p, uint64_t i, uint32_t dtype, float v) {
  if (dtype == MORI_FLOAT32) ((float *)p)[i] = v;
  else ((uint16_t *)p)[i] = dtype == MORI_BFLOAT16 ? mori_coll_impl_float_to_bf16(v) : mori_coll_impl_float_to_fp16(v);
}

/* acc := acc (op) v; the first operand of a reduction starts acc. A NaN
 * wins MAX and MIN whichever rank holds it (as torch's max and min), not
 * only when it comes first. */
MORI_HOST_DEVICE float mori_coll_impl_reduce(float acc, float v, uint32_t op) {
  if (op == MORI_REDOP_MAX) return (v > acc || v != v) ? v : acc;
  if (op == MORI_REDOP_MIN) return (v < acc || v != v) ? v : acc;
  return acc + v;
}

MORI_HOST_DEVICE float mori_coll_impl_reduce_finish(float acc, uint32_t op, int n) {
  return op == MORI_REDOP_AVG ? acc / (float)n : acc;
}

/* The elements of one 8-byte word of `dtype`, reduced into acc[0..k). */
MORI_HOST_DEVICE int mori_coll_impl_word_elems(uint32_t dtype) { return dtype == MORI_FLOAT32 ? 2 : 4; }

MORI_HOST_DEVICE float mori_coll_impl_word_elem(uint64_t word, int j, uint32_t dtype) {
  if (dtype == MORI_FLOAT32) return mori_coll_impl_bits_to_float((uint32_t)(word >> (32 * j)));
  uint16_t h = (uint16_t)(word >> (16 * j));
  return dtype == MORI_BFLOAT16 ? mori_coll_impl_bf16_to_float(h) : mori_coll_impl_fp16_to_float(h);
}

MORI_HOST_DEVICE uint64_t mori_coll_impl_word_set(uint64_t word, int j, uint32_t dtype, float v) {
  if (dtype == MORI_FLOAT32) {
    uint64_t mask = 0xffffffffull << (32 * j);
    return (word & ~mask) | ((uint64_t)mori_coll_impl_float_to_bits(v) << (32 * j));
  }
  uint16_t h = dtype == MORI_BFLOAT16 ? mori_coll_impl_float_to_bf16(v) : mori_coll_impl_float_to_fp16(v);
  uint64_t mask = 0xffffull << (16 * j);
  return (word & ~mask) | ((uint64_t)h << (16 * j));
}

#endif
