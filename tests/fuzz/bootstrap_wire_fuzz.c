// SPDX-License-Identifier: MIT
/* libFuzzer target: what the TCP bootstrap reads from a connection nobody
 * vouches for yet. The input is a byte stream as a peer would send it:
 *   1. rank 0's reader of start-up messages takes it in chunks (the sizes
 *      come from the input too), as HELLO then AUTH, answering a complete
 *      HELLO with a proof and checking a complete AUTH against the job key;
 *   2. the frame decoder walks it frame by frame, taking each payload as far
 *      as the input goes, mapping REJECT/ABORT codes and cleaning their text,
 *      and decoding the link addresses a LINKS or RESULT frame carries;
 *   3. a receiver of sealed frames (an authenticated connection, protocol 6)
 *      walks it: each header's MAC is checked before any field is used, a
 *      size only then bounded, each frame's MAC checked after its payload;
 *   4. a header made from the input's first 32 bytes is sealed, one byte of
 *      the sealed header (position and bits from the next two bytes) is
 *      flipped, and it must then fail its MAC, whatever the byte.
 * Sanitizers catch any read or write out of bounds; the invariants below
 * abort on any decoded value the protocol forbids. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/bootstrap/internal/handshake.h"
#include "core/bootstrap/internal/wire.h"
#include "mori/error.h"

static void check(int ok) {
  if (!ok) abort();
}

static void run_reader(const uint8_t *data, size_t size) {
  static const uint8_t key[MORI_HS_KEY_BYTES] = {1, 2, 3};
  mori_hs_reader_t reader;
  mori_hs_reader_reset(&reader);
  uint32_t expected = MORI_WIRE_HELLO;
  uint8_t nonce_rank[MORI_WIRE_NONCE_BYTES] = {0}, nonce_root[MORI_WIRE_NONCE_BYTES] = {7};
  size_t at = 0;
  while (at < size) {
    size_t want = mori_hs_reader_want(&reader);
    check(want > 0 && want <= MORI_WIRE_HEADER_BYTES + MORI_WIRE_NONCE_BYTES);
    size_t chunk = 1 + data[at] % want; /* the chunk size is part of the input */
    if (chunk > size - at) chunk = size - at;
    mori_wire_header_t h;
    uint8_t body[MORI_WIRE_NONCE_BYTES];
    char why[160];
    int rc = mori_hs_reader_feed(&reader, data + at, chunk, expected, &h, body, why, sizeof(why));
    at += chunk;
    if (rc < 0) {
      check(rc == MORI_EPROTO && memchr(why, '\0', sizeof(why)) != NULL);
      return;
    }
    if (rc == 0) continue;
    check(h.op == expected && h.bytes == MORI_WIRE_NONCE_BYTES);
    uint8_t proof[MORI_WIRE_MAC_BYTES];
    if (expected == MORI_WIRE_HELLO) {
      memcpy(nonce_rank, body, sizeof(nonce_rank));
      mori_hs_proof(key, MORI_HS_ROOT, 8, h.rank, nonce_rank, nonce_root, proof);
      expected = MORI_WIRE_AUTH;
      mori_hs_reader_reset(&reader);
    } else {
      mori_hs_proof(key, MORI_HS_RANK, 8, h.rank, nonce_rank, nonce_root, proof);
      (void)mori_equal_secret(proof, body, sizeof(proof));
      return;
    }
  }
}

static void run_decoder(const uint8_t *data, size_t size) {
  static const uint8_t session_key[MORI_HS_KEY_BYTES] = {9, 8, 7};
  while (size >= MORI_WIRE_HEADER_BYTES) {
    mori_wire_header_t h;
    char why[160];
    int rc = mori_wire_decode(data, &h, why, sizeof(why));
    data += MORI_WIRE_HEADER_BYTES;
    size -= MORI_WIRE_HEADER_BYTES;
    if (rc) {
      check(rc == MORI_EPROTO && memchr(why, '\0', sizeof(why)) != NULL);
      continue; /* resynchronise on the next 32 bytes, as a fuzzer would wish */
    }
    check(h.op >= MORI_WIRE_HELLO && h.op < MORI_WIRE_OP_END && h.bytes <= MORI_WIRE_BYTES_MAX);
    uint8_t again[MORI_WIRE_HEADER_BYTES];
    mori_wire_encode(&h, again);
    check(memcmp(again, data - MORI_WIRE_HEADER_BYTES, sizeof(again)) == 0);
    uint64_t payload = mori_wire_payload_bytes(&h);
    check(payload <= h.bytes);
    size_t take = payload < size ? (size_t)payload : size;
    if (h.op == MORI_WIRE_REJECT || h.op == MORI_WIRE_ABORT) {
      check(h.bytes <= MORI_WIRE_TEXT_MAX);
      char text[MORI_WIRE_TEXT_MAX];
      mori_wire_text(data, take, text, sizeof(text));
      for (const char *p = text; *p; p++) check(*p >= 0x20 && *p <= 0x7e);
      int code = mori_wire_abort_code(h.arg);
      check(code < 0 && strcmp(mori_err_name(code), "MORI_E_UNKNOWN") != 0);
    }
    if (h.op == MORI_WIRE_LINKS || h.op == MORI_WIRE_RESULT)
      for (size_t at = 0; at + MORI_WIRE_LINK_ADDRESS_BYTES <= take; at += MORI_WIRE_LINK_ADDRESS_BYTES) {
        mori_wire_link_address_t a;
        char why[120];
        if (mori_wire_link_address_decode(data + at, &a, why, sizeof(why)) != 0) {
          check(memchr(why, '\0', sizeof(why)) != NULL);
          continue;
        }
        check((a.family == 4 || a.family == 6) && a.port != 0);
        uint8_t again[MORI_WIRE_LINK_ADDRESS_BYTES];
        mori_wire_link_address_encode(&a, again);
        check(memcmp(again, data + at, sizeof(again)) == 0);
      }
    if (mori_wire_has_mac(h.op) && take) {
      uint8_t digest[MORI_SHA256_BYTES], tag[MORI_WIRE_MAC_BYTES];
      mori_hs_payload_digest(data, take, digest);
      mori_hs_frame_mac(session_key, 1, data - MORI_WIRE_HEADER_BYTES, digest, tag);
    }
    data += take;
    size -= take;
  }
}

/* The fixed session key of the sealed streams: seeds sealed under it
 * (tests/fuzz/corpus/bootstrap_wire/sealed_*) pass their MACs. */
static const uint8_t sealed_key[MORI_HS_KEY_BYTES] = {0x5e, 0xa1, 0xed};

static void run_sealed(const uint8_t *data, size_t size) {
  for (uint64_t counter = 0; size >= MORI_WIRE_SEALED_HEADER_BYTES; counter++) {
    mori_wire_header_t h;
    char why[160];
    int rc = mori_hs_open_header(sealed_key, counter, data, &h, why, sizeof(why));
    if (rc) {
      /* A receiver drops the connection: nothing of the header was used. */
      check(rc == MORI_EPROTO && memchr(why, '\0', sizeof(why)) != NULL);
      check(mori_hs_header_authentic(sealed_key, counter, data) || (h.op == 0 && h.bytes == 0));
      return;
    }
    check(mori_hs_header_authentic(sealed_key, counter, data));
    check(h.op >= MORI_WIRE_HELLO && h.op < MORI_WIRE_OP_END && h.bytes <= MORI_WIRE_BYTES_MAX);
    uint8_t header[MORI_WIRE_HEADER_BYTES];
    memcpy(header, data, sizeof(header));
    data += MORI_WIRE_SEALED_HEADER_BYTES;
    size -= MORI_WIRE_SEALED_HEADER_BYTES;
    uint64_t payload = mori_wire_payload_bytes(&h);
    if (payload + MORI_WIRE_MAC_BYTES > size) return; /* a receiver waits for the rest */
    uint8_t digest[MORI_SHA256_BYTES], want[MORI_WIRE_MAC_BYTES];
    mori_hs_payload_digest(data, (size_t)payload, digest);
    mori_hs_frame_mac(sealed_key, counter, header, digest, want);
    if (!mori_equal_secret(want, data + payload, sizeof(want))) return;
    data += payload + MORI_WIRE_MAC_BYTES;
    size -= (size_t)payload + MORI_WIRE_MAC_BYTES;
  }
}

static void run_flip(const uint8_t *data, size_t size) {
  if (size < MORI_WIRE_HEADER_BYTES + 2) return;
  mori_wire_header_t h, got;
  char why[160];
  if (mori_wire_decode(data, &h, why, sizeof(why)) != 0) memset(&h, 0, sizeof(h));
  uint8_t sealed[MORI_WIRE_SEALED_HEADER_BYTES];
  mori_hs_seal_header(sealed_key, 7, &h, sealed);
  check(mori_hs_header_authentic(sealed_key, 7, sealed));
  check(!mori_hs_header_authentic(sealed_key, 8, sealed)); /* no replay under another number */
  uint8_t at = data[MORI_WIRE_HEADER_BYTES] % MORI_WIRE_SEALED_HEADER_BYTES;
  uint8_t bits = data[MORI_WIRE_HEADER_BYTES + 1] ? data[MORI_WIRE_HEADER_BYTES + 1] : 1;
  sealed[at] ^= bits;
  check(!mori_hs_header_authentic(sealed_key, 7, sealed));
  check(mori_hs_open_header(sealed_key, 7, sealed, &got, why, sizeof(why)) == MORI_EPROTO);
  check(strstr(why, "failed its MAC") != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  run_reader(data, size);
  run_decoder(data, size);
  run_sealed(data, size);
  run_flip(data, size);
  return 0;
}
