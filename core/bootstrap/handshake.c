// SPDX-License-Identifier: MIT
/* The start-up proofs and keys: HMAC-SHA256 under the job key, over a label
 * that says what is proven (so one proof can never stand in for another),
 * the world size, the rank and both nonces (so nothing can be replayed from
 * another connection or another job). */
#include "core/bootstrap/internal/handshake.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/base/hmac_sha256.h"
#include "mori/error.h"

static void mac_over(const uint8_t key[MORI_HS_KEY_BYTES], const char *label, int32_t size, int32_t rank,
                     const uint8_t nonce_rank[MORI_WIRE_NONCE_BYTES], const uint8_t nonce_root[MORI_WIRE_NONCE_BYTES],
                     uint8_t out[MORI_WIRE_MAC_BYTES]) {
  uint8_t ids[8];
  for (int i = 0; i < 4; i++) {
    ids[i] = (uint8_t)((uint32_t)size >> (8 * i));
    ids[4 + i] = (uint8_t)((uint32_t)rank >> (8 * i));
  }
  mori_hmac_sha256_t ctx;
  mori_hmac_sha256_init(&ctx, key, MORI_HS_KEY_BYTES);
  mori_hmac_sha256_update(&ctx, label, strlen(label) + 1);
  mori_hmac_sha256_update(&ctx, ids, sizeof(ids));
  mori_hmac_sha256_update(&ctx, nonce_rank, MORI_WIRE_NONCE_BYTES);
  mori_hmac_sha256_update(&ctx, nonce_root, MORI_WIRE_NONCE_BYTES);
  mori_hmac_sha256_final(&ctx, out);
}

void mori_hs_job_key(const void *secret, size_t len, uint8_t key[MORI_HS_KEY_BYTES]) {
  static const char label[] = "mori bootstrap 2: job key";
  mori_hmac_sha256(secret, len, label, sizeof(label), key);
}

void mori_hs_link_key(const uint8_t key[MORI_HS_KEY_BYTES], int32_t size, int32_t dialer, int32_t acceptor,
                      uint8_t link_key[MORI_HS_KEY_BYTES]) {
  static const char label[] = "mori bootstrap 3: link key";
  uint8_t ids[12];
  for (int i = 0; i < 4; i++) {
    ids[i] = (uint8_t)((uint32_t)size >> (8 * i));
    ids[4 + i] = (uint8_t)((uint32_t)dialer >> (8 * i));
    ids[8 + i] = (uint8_t)((uint32_t)acceptor >> (8 * i));
  }
  mori_hmac_sha256_t ctx;
  mori_hmac_sha256_init(&ctx, key, MORI_HS_KEY_BYTES);
  mori_hmac_sha256_update(&ctx, label, sizeof(label));
  mori_hmac_sha256_update(&ctx, ids, sizeof(ids));
  mori_hmac_sha256_final(&ctx, link_key);
}

void mori_hs_proof(const uint8_t key[MORI_HS_KEY_BYTES], mori_hs_role_t role, int32_t size, int32_t rank,
                   const uint8_t nonce_rank[MORI_WIRE_NONCE_BYTES], const uint8_t nonce_root[MORI_WIRE_NONCE_BYTES],
                   uint8_t proof[MORI_WIRE_MAC_BYTES]) {
  mac_over(key, role == MORI_HS_ROOT ? "mori bootstrap 2: rank 0's proof" : "mori bootstrap 2: a rank's proof", size,
           rank, nonce_rank, nonce_root, proof);
}

void mori_hs_session_keys(const uint8_t key[MORI_HS_KEY_BYTES], int32_t size, int32_t rank,
                          const uint8_t nonce_rank[MORI_WIRE_NONCE_BYTES],
                          const uint8_t nonce_root[MORI_WIRE_NONCE_BYTES], uint8_t to_root[MORI_HS_KEY_BYTES],
                          uint8_t from_root[MORI_HS_KEY_BYTES]) {
  mac_over(key, "mori bootstrap 2: frames to rank 0", size, rank, nonce_rank, nonce_root, to_root);
  mac_over(key, "mori bootstrap 2: frames from rank 0", size, rank, nonce_rank, nonce_root, from_root);
}

static void frame_mac_init(mori_hmac_sha256_t *ctx, const uint8_t key[MORI_HS_KEY_BYTES], uint64_t counter) {
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)(counter >> (8 * i));
  mori_hmac_sha256_init(ctx, key, MORI_HS_KEY_BYTES);
  mori_hmac_sha256_update(ctx, le, sizeof(le));
}

void mori_hs_frame_mac(const uint8_t key[MORI_HS_KEY_BYTES], uint64_t counter, const uint8_t header[MORI_WIRE_HEADER_BYTES],
                       const uint8_t digest[MORI_SHA256_BYTES], uint8_t mac[MORI_WIRE_MAC_BYTES]) {
  mori_hmac_sha256_t ctx;
  frame_mac_init(&ctx, key, counter);
  mori_hmac_sha256_update(&ctx, header, MORI_WIRE_HEADER_BYTES);
  mori_hmac_sha256_update(&ctx, digest, MORI_SHA256_BYTES);
  mori_hmac_sha256_final(&ctx, mac);
}

void mori_hs_payload_digest(const void *payload, size_t bytes, uint8_t digest[MORI_SHA256_BYTES]) {
  mori_sha256(bytes ? payload : "", bytes, digest);
}

static void header_mac(const uint8_t key[MORI_HS_KEY_BYTES], uint64_t counter, const uint8_t *header,
                       uint8_t mac[MORI_WIRE_MAC_BYTES]) {
  /* The label keeps a header's MAC from ever standing for a frame's (whose
   * input goes on with the header's magic). */
  static const char label[] = "header";
  mori_hmac_sha256_t ctx;
  frame_mac_init(&ctx, key, counter);
  mori_hmac_sha256_update(&ctx, label, sizeof(label));
  mori_hmac_sha256_update(&ctx, header, MORI_WIRE_HEADER_BYTES);
  mori_hmac_sha256_final(&ctx, mac);
}

void mori_hs_seal_header(const uint8_t key[MORI_HS_KEY_BYTES], uint64_t counter, const mori_wire_header_t *h,
                         uint8_t out[MORI_WIRE_SEALED_HEADER_BYTES]) {
  mori_wire_encode(h, out);
  header_mac(key, counter, out, out + MORI_WIRE_HEADER_BYTES);
}

bool mori_hs_header_authentic(const uint8_t key[MORI_HS_KEY_BYTES], uint64_t counter,
                              const uint8_t in[MORI_WIRE_SEALED_HEADER_BYTES]) {
  uint8_t want[MORI_WIRE_MAC_BYTES];
  header_mac(key, counter, in, want);
  return mori_equal_secret(want, in + MORI_WIRE_HEADER_BYTES, sizeof(want));
}

int mori_hs_open_header(const uint8_t key[MORI_HS_KEY_BYTES], uint64_t counter,
                        const uint8_t in[MORI_WIRE_SEALED_HEADER_BYTES], mori_wire_header_t *h, char *why,
                        size_t why_len) {
  if (!mori_hs_header_authentic(key, counter, in)) {
    memset(h, 0, sizeof(*h));
    snprintf(why, why_len, "its frame failed its MAC (altered on the way)");
    return MORI_EPROTO;
  }
  return mori_wire_decode(in, h, why, why_len);
}

void mori_hs_reader_reset(mori_hs_reader_t *r) { r->have = 0; }

size_t mori_hs_reader_want(const mori_hs_reader_t *r) { return sizeof(r->buf) - r->have; }

int mori_hs_reader_feed(mori_hs_reader_t *r, const uint8_t *data, size_t len, uint32_t expected_op,
                        mori_wire_header_t *h, uint8_t body[MORI_WIRE_NONCE_BYTES], char *why, size_t why_len) {
  if (len > mori_hs_reader_want(r)) {
    snprintf(why, why_len, "more bytes than the start-up message holds");
    return MORI_EPROTO;
  }
  bool had_header = r->have >= MORI_WIRE_HEADER_BYTES;
  memcpy(r->buf + r->have, data, len);
  r->have += len;
  if (r->have < MORI_WIRE_HEADER_BYTES) return 0;
  if (!had_header || r->have == sizeof(r->buf)) {
    int rc = mori_wire_decode(r->buf, h, why, why_len);
    if (rc) return rc;
    if (h->op != expected_op) {
      snprintf(why, why_len, "%s where %s was due", mori_wire_op_name(h->op), mori_wire_op_name(expected_op));
      return MORI_EPROTO;
    }
    if (h->bytes != MORI_WIRE_NONCE_BYTES) {
      snprintf(why, why_len, "%s of %llu bytes (%d expected)", mori_wire_op_name(h->op), (unsigned long long)h->bytes,
               MORI_WIRE_NONCE_BYTES);
      return MORI_EPROTO;
    }
  }
  if (r->have < sizeof(r->buf)) return 0;
  memcpy(body, r->buf + MORI_WIRE_HEADER_BYTES, MORI_WIRE_NONCE_BYTES);
  return 1;
}
