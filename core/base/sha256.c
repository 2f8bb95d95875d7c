// SPDX-License-Identifier: MIT
/* SHA-256 as FIPS 180-4 specifies it: 64-byte blocks, big-endian words, 64
 * rounds with the constants below (the first 32 bits of the fractional parts
 * of the cube roots of the first 64 primes). */
#include "core/base/sha256.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress(uint32_t state[8], const uint8_t block[MORI_SHA256_BLOCK]) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 | (uint32_t)block[4 * i + 2] << 8 |
           (uint32_t)block[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + round_constants[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
  state[4] += e;
  state[5] += f;
  state[6] += g;
  state[7] += h;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MORI_SHA256_HAVE_SHANI 1

/* Whether the CPU has SHA, SSE4.1 and SSSE3. CPUID is a trap to the
 * hypervisor in a VM, tens of microseconds a process: glibc (2.33 on) has
 * asked already and says what it found; elsewhere CPUID is asked once, when
 * a hash is first needed (the compiler's __builtin_cpu_supports would link
 * a constructor running dozens of CPUID instructions in every process: 1% of
 * a 256-rank start-up's CPU). */
#if defined(__has_include)
#if __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h>
#define MORI_SHA256_GLIBC_CPU_FEATURES 1
#endif
#endif
#ifdef MORI_SHA256_GLIBC_CPU_FEATURES
static bool cpu_has_sha(void) {
  return CPU_FEATURE_ACTIVE(SHA) && CPU_FEATURE_ACTIVE(SSE4_1) && CPU_FEATURE_ACTIVE(SSSE3);
}
#else
#include <cpuid.h>
/* SHA: leaf 7, EBX bit 29; SSE4.1 and SSSE3: leaf 1, ECX bits 19 and 9. */
static bool cpu_has_sha(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9))) return false;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
}
#endif

/* The same compression through the CPU's SHA extensions (one sha256rnds2
 * does two rounds; sha256msg1/msg2 extend the message schedule four words
 * at a time): the bootstrap MACs every frame, and on a host of many ranks
 * the portable rounds were a visible part of a job's start-up. The state
 * is kept as the instructions want it, ABEF and CDGH. */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_shani(uint32_t state[8],
                                                                        const uint8_t block[MORI_SHA256_BLOCK]) {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i dcba = _mm_loadu_si128((const __m128i *)&state[0]);
  __m128i hgfe = _mm_loadu_si128((const __m128i *)&state[4]);
  __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
  __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
  __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
  __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
  const __m128i abef_in = abef, cdgh_in = cdgh;
  __m128i w[4]; /* the schedule's last 16 words, four to a vector */
  for (int g = 0; g < 16; g++) {
    __m128i *m = &w[g % 4];
    if (g < 4) {
      *m = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(block + 16 * g)), byte_swap);
    } else {
      /* W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], for t = 4g..4g+3. */
      __m128i back1 = w[(g + 3) % 4], back2 = w[(g + 2) % 4];
      __m128i sum = _mm_add_epi32(_mm_sha256msg1_epu32(*m, w[(g + 1) % 4]), _mm_alignr_epi8(back1, back2, 4));
      *m = _mm_sha256msg2_epu32(sum, back1);
    }
    __m128i wk = _mm_add_epi32(*m, _mm_loadu_si128((const __m128i *)&round_constants[4 * g]));
    cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
    abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
  }
  abef = _mm_add_epi32(abef, abef_in);
  cdgh = _mm_add_epi32(cdgh, cdgh_in);
  __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}
#endif

typedef void (*compress_fn)(uint32_t state[8], const uint8_t block[MORI_SHA256_BLOCK]);

/* Which compression runs: chosen once from the CPU (both give the same
 * digests; sha256_test checks each against the known answers). */
static _Atomic(compress_fn) chosen;

static compress_fn pick(bool portable) {
#ifdef MORI_SHA256_HAVE_SHANI
  if (!portable && cpu_has_sha()) return compress_shani;
#endif
  (void)portable;
  return compress;
}

bool mori_sha256_use_portable(bool portable) {
  compress_fn fn = pick(portable);
  atomic_store(&chosen, fn);
  return fn == compress;
}

static void compress_blocks(uint32_t state[8], const uint8_t *blocks, size_t count) {
  compress_fn fn = atomic_load_explicit(&chosen, memory_order_relaxed);
  if (!fn) {
    fn = pick(false);
    atomic_store(&chosen, fn);
  }
  for (size_t i = 0; i < count; i++) fn(state, blocks + i * MORI_SHA256_BLOCK);
}

void mori_sha256_init(mori_sha256_t *ctx) {
  /* The first 32 bits of the fractional parts of the square roots of the
   * first 8 primes. */
  static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(ctx->state, initial, sizeof(initial));
  ctx->total = 0;
  ctx->used = 0;
}

void mori_sha256_update(mori_sha256_t *ctx, const void *data, size_t len) {
  const uint8_t *p = data;
  ctx->total += len;
  if (ctx->used) {
    size_t take = MORI_SHA256_BLOCK - ctx->used < len ? MORI_SHA256_BLOCK - ctx->used : len;
    memcpy(ctx->block + ctx->used, p, take);
    ctx->used += take;
    p += take;
    len -= take;
    if (ctx->used < MORI_SHA256_BLOCK) return;
    compress_blocks(ctx->state, ctx->block, 1);
    ctx->used = 0;
  }
  size_t whole = len / MORI_SHA256_BLOCK;
  compress_blocks(ctx->state, p, whole);
  p += whole * MORI_SHA256_BLOCK;
  len -= whole * MORI_SHA256_BLOCK;
  if (len) memcpy(ctx->block, p, len);
  ctx->used = len;
}

void mori_sha256_final(mori_sha256_t *ctx, uint8_t digest[MORI_SHA256_BYTES]) {
  /* Padding: 0x80, zeros up to 56 mod 64, then the length in bits (64-bit
   * big-endian). */
  uint64_t bits = ctx->total * 8;
  ctx->block[ctx->used++] = 0x80;
  if (ctx->used > 56) {
    memset(ctx->block + ctx->used, 0, MORI_SHA256_BLOCK - ctx->used);
    compress_blocks(ctx->state, ctx->block, 1);
    ctx->used = 0;
  }
  memset(ctx->block + ctx->used, 0, 56 - ctx->used);
  for (int i = 0; i < 8; i++) ctx->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
  compress_blocks(ctx->state, ctx->block, 1);
  for (int i = 0; i < 8; i++) {
    digest[4 * i] = (uint8_t)(ctx->state[i] >> 24);
    digest[4 * i + 1] = (uint8_t)(ctx->state[i] >> 16);
    digest[4 * i + 2] = (uint8_t)(ctx->state[i] >> 8);
    digest[4 * i + 3] = (uint8_t)ctx->state[i];
  }
  memset(ctx, 0, sizeof(*ctx)); /* no key material left behind by HMAC */
}

void mori_sha256(const void *data, size_t len, uint8_t digest[MORI_SHA256_BYTES]) {
  mori_sha256_t ctx;
  mori_sha256_init(&ctx);
  mori_sha256_update(&ctx, data, len);
  mori_sha256_final(&ctx, digest);
}
