// SPDX-License-Identifier: MIT
/* Who proves what to whom when a rank joins (see wire.h for the frames).
 * Every rank holds a job key derived from the job's secret. A rank sends a
 * fresh nonce; rank 0 answers with its own nonce and a proof over both, so a
 * process that merely holds the port cannot pass for rank 0; the rank then
 * proves itself over the same nonces, so a stranger cannot join. Each
 * connection then gets one session key per direction, which the frames' MACs
 * use: nothing can be injected or replayed into an authenticated connection. */
#ifndef MORI_CORE_BOOTSTRAP_HANDSHAKE_H
#define MORI_CORE_BOOTSTRAP_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/hmac_sha256.h"
#include "core/bootstrap/internal/wire.h"
#include "mori/api.h"

MORI_EXTERN_C_BEGIN

enum { MORI_HS_KEY_BYTES = 32, MORI_HS_SECRET_MIN = 16 };

typedef enum mori_hs_role { MORI_HS_ROOT = 0, MORI_HS_RANK = 1 } mori_hs_role_t;

/* The job key: HMAC-SHA256 of a fixed label under the job's secret. */
void mori_hs_job_key(const void *secret, size_t len, uint8_t key[MORI_HS_KEY_BYTES]);

/* The key of the link that rank `dialer` opens to rank `acceptor` (see
 * links.h): the start-up proofs and session keys of that connection are made
 * under it instead of the job key, with the acceptor in rank 0's role and
 * the dialer as the rank. A proof made for one link, or for joining rank 0,
 * is worth nothing on another. */
void mori_hs_link_key(const uint8_t key[MORI_HS_KEY_BYTES], int32_t size, int32_t dialer, int32_t acceptor,
                      uint8_t link_key[MORI_HS_KEY_BYTES]);

/* The proof `role` gives for joining rank `rank` of a world of `size`. */
void mori_hs_proof(const uint8_t key[MORI_HS_KEY_BYTES], mori_hs_role_t role, int32_t size, int32_t rank,
                   const uint8_t nonce_rank[MORI_WIRE_NONCE_BYTES], const uint8_t nonce_root[MORI_WIRE_NONCE_BYTES],
                   uint8_t proof[MORI_WIRE_MAC_BYTES]);

/* The session keys of one connection: frames to rank 0 and frames from it. */
void mori_hs_session_keys(const uint8_t key[MORI_HS_KEY_BYTES], int32_t size, int32_t rank,
                          const uint8_t nonce_rank[MORI_WIRE_NONCE_BYTES],
                          const uint8_t nonce_root[MORI_WIRE_NONCE_BYTES], uint8_t to_root[MORI_HS_KEY_BYTES],
                          uint8_t from_root[MORI_HS_KEY_BYTES]);

/* The MAC of one frame: HMAC-SHA256 under a session key, over the frame's
 * number on its connection (so no frame can be replayed, dropped or
 * reordered unnoticed), its header, and the SHA-256 of its payload
 * (`digest`, see mori_hs_payload_digest). The payload is hashed apart so
 * that one sent on many connections (rank 0's result of a collective, the
 * same for every rank) is hashed once, not once per rank. */
void mori_hs_frame_mac(const uint8_t key[MORI_HS_KEY_BYTES], uint64_t counter, const uint8_t header[MORI_WIRE_HEADER_BYTES],
                       const uint8_t digest[MORI_SHA256_BYTES], uint8_t mac[MORI_WIRE_MAC_BYTES]);
/* The SHA-256 of a frame's payload (an empty payload's too). */
void mori_hs_payload_digest(const void *payload, size_t bytes, uint8_t digest[MORI_SHA256_BYTES]);

/* An authenticated frame opens with its header sealed: the 32-byte header,
 * then a MAC over {frame number, "header", header} under the session key.
 * The receiver checks that MAC before it believes any field of the header,
 * the size it is about to read included. */
void mori_hs_seal_header(const uint8_t key[MORI_HS_KEY_BYTES], uint64_t counter, const mori_wire_header_t *h,
                         uint8_t out[MORI_WIRE_SEALED_HEADER_BYTES]);
/* Whether the header in `in` is the one its MAC was made for. */
bool mori_hs_header_authentic(const uint8_t key[MORI_HS_KEY_BYTES], uint64_t counter,
                              const uint8_t in[MORI_WIRE_SEALED_HEADER_BYTES]);
/* 0 with *h decoded; MORI_EPROTO when the MAC does not match (why says the
 * frame failed its MAC: nothing of the header is used) or, behind a good
 * MAC, when the decoder refuses the header (why says how). */
int mori_hs_open_header(const uint8_t key[MORI_HS_KEY_BYTES], uint64_t counter,
                        const uint8_t in[MORI_WIRE_SEALED_HEADER_BYTES], mori_wire_header_t *h, char *why,
                        size_t why_len);

/* Rank 0's reader of one start-up message from a connection nobody vouches
 * for yet (HELLO or AUTH: a header and a 32-byte body), fed as bytes arrive. */
typedef struct mori_hs_reader {
  uint8_t buf[MORI_WIRE_HEADER_BYTES + MORI_WIRE_NONCE_BYTES];
  size_t have;
} mori_hs_reader_t;

void mori_hs_reader_reset(mori_hs_reader_t *r);
/* Bytes the message still lacks: never read more than this. */
size_t mori_hs_reader_want(const mori_hs_reader_t *r);
/* Takes len (<= want) more bytes. 0: more needed; 1: complete, with *h and
 * body filled; MORI_EPROTO: not the expected message, why says how. The
 * header is checked as soon as it is complete. */
int mori_hs_reader_feed(mori_hs_reader_t *r, const uint8_t *data, size_t len, uint32_t expected_op,
                        mori_wire_header_t *h, uint8_t body[MORI_WIRE_NONCE_BYTES], char *why, size_t why_len);

MORI_EXTERN_C_END

#endif
