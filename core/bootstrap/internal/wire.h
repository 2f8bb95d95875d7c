// SPDX-License-Identifier: MIT
/* The TCP bootstrap's frames on the wire (protocol 6). Every frame opens
 * with a 32-byte little-endian header:
 *   magic u32 "mori" | version u16 | op u16 | rank i32 | arg i32 | seq u64 | bytes u64
 * Before a connection is authenticated a frame is that header and a
 * payload of mori_wire_payload_bytes(). Once it is, every frame is sealed
 * under that direction's session key (see handshake.h):
 *   header | header MAC (32) | payload | frame MAC (32)
 * the header MAC over {frame counter, "header", header}, checked before any
 * field of the header is believed (its size included: nothing more is read
 * on the word of a header that was altered), and the frame MAC over {frame
 * counter, header, SHA-256 of the payload}. A byte altered anywhere fails
 * one of the two.
 *
 * Start-up (no MACs; the proofs are the authentication), both to
 * rank 0 and on a link (a connection between two ranks, see links.h):
 *   rank -> 0  HELLO      rank, arg = world size, payload = the rank's nonce
 *   0 -> rank  CHALLENGE  payload = rank 0's nonce | rank 0's proof
 *              or REJECT  arg = a mori code, payload = why (text)
 *   rank -> 0  AUTH       rank, arg = world size, payload = the rank's proof
 *   0 -> rank  READY, or ABORT (arg = a mori code, payload = why), with MACs
 * Then, with MACs: LINKS to rank 0 carries a rank's link address, and
 * rank 0's RESULT the addresses the rank is to dial.
 * Collectives (with MACs): each rank tells rank 0 it has arrived with an
 * ALLGATHER, BCAST (arg = root) or BARRIER frame whose bytes is its
 * contribution's size and which carries no payload; rank 0 answers RESULT
 * (no payload) once every rank has arrived and agrees, or ABORT. The data
 * then travels between ranks over the links in DATA frames (arg = the round
 * of the exchange, bytes = the payload). A collective whose result is small
 * (tcp.c) carries its data in that round instead: ALLGATHER_VIA_ROOT with
 * the rank's contribution as payload, BCAST_VIA_ROOT (arg = root) with the
 * data as payload from the root and none from the others; rank 0's RESULT
 * carries the result. Any rank may send ABORT to rank 0 or on a link
 * instead of what was due.
 * Decoding never trusts a length beyond what the caller expects. */
#ifndef MORI_CORE_BOOTSTRAP_WIRE_H
#define MORI_CORE_BOOTSTRAP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

enum {
  MORI_WIRE_MAGIC = 0x6d6f7269, /* "mori" */
  MORI_WIRE_VERSION = 6,
  MORI_WIRE_HEADER_BYTES = 32,
  MORI_WIRE_NONCE_BYTES = 32,
  MORI_WIRE_MAC_BYTES = 32,
  /* An authenticated frame's header and its MAC. */
  MORI_WIRE_SEALED_HEADER_BYTES = MORI_WIRE_HEADER_BYTES + MORI_WIRE_MAC_BYTES,
  /* An ABORT's or REJECT's text, NUL included. */
  MORI_WIRE_TEXT_MAX = 768,
};

/* No collective's contribution is larger (1 TiB): a header that claims more
 * is garbage, and sizes stay far from overflowing. */
#define MORI_WIRE_BYTES_MAX (UINT64_C(1) << 40)

typedef enum mori_wire_op {
  MORI_WIRE_HELLO = 1,
  MORI_WIRE_CHALLENGE,
  MORI_WIRE_AUTH,
  MORI_WIRE_REJECT,
  MORI_WIRE_READY,
  MORI_WIRE_ALLGATHER,
  MORI_WIRE_BCAST,
  MORI_WIRE_BARRIER,
  MORI_WIRE_RESULT,
  MORI_WIRE_ABORT,
  MORI_WIRE_LINKS,
  MORI_WIRE_DATA,
  MORI_WIRE_ALLGATHER_VIA_ROOT,
  MORI_WIRE_BCAST_VIA_ROOT,
  MORI_WIRE_OP_END,
} mori_wire_op_t;

typedef struct mori_wire_header {
  uint32_t op;
  int32_t rank; /* the sender's rank */
  int32_t arg;  /* world size (HELLO, AUTH), root (BCAST, BCAST_VIA_ROOT), a mori code (REJECT, ABORT), round (DATA) */
  uint64_t seq; /* the collective's step, 0 during start-up */
  uint64_t bytes;
} mori_wire_header_t;

void mori_wire_encode(const mori_wire_header_t *h, uint8_t out[MORI_WIRE_HEADER_BYTES]);

/* Decodes and checks magic, version, op and size bounds. 0, or MORI_EPROTO
 * with the reason in why (always NUL-terminated). */
int mori_wire_decode(const uint8_t in[MORI_WIRE_HEADER_BYTES], mori_wire_header_t *h, char *why, size_t why_len);

/* Bytes of payload that follow h on the wire: h->bytes, except the
 * arrivals (ALLGATHER, BCAST, BARRIER), which carry none, and a
 * BCAST_VIA_ROOT from a rank other than the root (its arg). */
uint64_t mori_wire_payload_bytes(const mori_wire_header_t *h);

/* Whether frames of this op are sealed (sent only on an authenticated
 * connection; a receiver goes by the connection, not by the op). */
int mori_wire_has_mac(uint32_t op);

/* The code a rank returns for a REJECT or ABORT carrying peer_code: the
 * peer's code when it is one of mori's own (negative and named), else
 * MORI_EABORTED. The value on the wire is data, never returned as it is. */
int mori_wire_abort_code(int32_t peer_code);

/* Copies a peer's text into out (NUL-terminated, at most out_len - 1
 * characters), replacing anything unprintable with '?'. */
void mori_wire_text(const uint8_t *in, size_t len, char *out, size_t out_len);

const char *mori_wire_op_name(uint32_t op);

/* A rank's link address as it travels in LINKS and RESULT frames: family
 * u16 (4 or 6) | port u16 | address[16] (IPv4 in the first 4 bytes, the
 * rest zero), little-endian. */
enum { MORI_WIRE_LINK_ADDRESS_BYTES = 20 };
typedef struct mori_wire_link_address {
  uint16_t family; /* 4 or 6 */
  uint16_t port;
  uint8_t addr[16];
} mori_wire_link_address_t;

void mori_wire_link_address_encode(const mori_wire_link_address_t *a, uint8_t out[MORI_WIRE_LINK_ADDRESS_BYTES]);
/* 0, or MORI_EPROTO with the reason in why: another family, port 0, or an
 * IPv4 record with bytes after its address. */
int mori_wire_link_address_decode(const uint8_t in[MORI_WIRE_LINK_ADDRESS_BYTES], mori_wire_link_address_t *a,
                                  char *why, size_t why_len);

MORI_EXTERN_C_END

#endif
