// SPDX-License-Identifier: MIT
/* Frame headers: explicit little-endian fields, so that ranks built for
 * different machines agree, and every field checked before it is used. */
#include "core/bootstrap/internal/wire.h"

#include <stdio.h>
#include <string.h>

#include "mori/error.h"

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

void mori_wire_encode(const mori_wire_header_t *h, uint8_t out[MORI_WIRE_HEADER_BYTES]) {
  put32(out, MORI_WIRE_MAGIC);
  put32(out + 4, (uint32_t)MORI_WIRE_VERSION | h->op << 16);
  put32(out + 8, (uint32_t)h->rank);
  put32(out + 12, (uint32_t)h->arg);
  put64(out + 16, h->seq);
  put64(out + 24, h->bytes);
}

int mori_wire_decode(const uint8_t in[MORI_WIRE_HEADER_BYTES], mori_wire_header_t *h, char *why, size_t why_len) {
  uint32_t magic = get32(in), version_op = get32(in + 4);
  uint32_t version = version_op & 0xffff;
  memset(h, 0, sizeof(*h));
  if (magic != MORI_WIRE_MAGIC) {
    snprintf(why, why_len, "not a mori bootstrap frame (magic 0x%08x)", magic);
    return MORI_EPROTO;
  }
  if (version != MORI_WIRE_VERSION) {
    snprintf(why, why_len, "bootstrap protocol %u, this build speaks %d (mix of mori versions?)", version,
             MORI_WIRE_VERSION);
    return MORI_EPROTO;
  }
  h->op = version_op >> 16;
  h->rank = (int32_t)get32(in + 8);
  h->arg = (int32_t)get32(in + 12);
  h->seq = get64(in + 16);
  h->bytes = get64(in + 24);
  if (h->op < MORI_WIRE_HELLO || h->op >= MORI_WIRE_OP_END) {
    snprintf(why, why_len, "unknown frame type %u", h->op);
    return MORI_EPROTO;
  }
  if (h->bytes > MORI_WIRE_BYTES_MAX) {
    snprintf(why, why_len, "%s frame claims %llu bytes", mori_wire_op_name(h->op), (unsigned long long)h->bytes);
    return MORI_EPROTO;
  }
  if ((h->op == MORI_WIRE_REJECT || h->op == MORI_WIRE_ABORT) && h->bytes > MORI_WIRE_TEXT_MAX) {
    snprintf(why, why_len, "%s text of %llu bytes (at most %d)", mori_wire_op_name(h->op), (unsigned long long)h->bytes,
             MORI_WIRE_TEXT_MAX);
    return MORI_EPROTO;
  }
  if (why_len) why[0] = '\0';
  return 0;
}

uint64_t mori_wire_payload_bytes(const mori_wire_header_t *h) {
  if (h->op == MORI_WIRE_BARRIER || h->op == MORI_WIRE_ALLGATHER || h->op == MORI_WIRE_BCAST) return 0;
  if (h->op == MORI_WIRE_BCAST_VIA_ROOT && h->rank != h->arg) return 0;
  return h->bytes;
}

int mori_wire_has_mac(uint32_t op) {
  return op != MORI_WIRE_HELLO && op != MORI_WIRE_CHALLENGE && op != MORI_WIRE_AUTH && op != MORI_WIRE_REJECT;
}

int mori_wire_abort_code(int32_t peer_code) {
  if (peer_code < 0 && strcmp(mori_err_name(peer_code), "MORI_E_UNKNOWN") != 0) return peer_code;
  return MORI_EABORTED;
}

void mori_wire_text(const uint8_t *in, size_t len, char *out, size_t out_len) {
  if (!out_len) return;
  size_t n = 0;
  for (; n < len && n + 1 < out_len && in[n]; n++) out[n] = in[n] >= 0x20 && in[n] <= 0x7e ? (char)in[n] : '?';
  out[n] = '\0';
}

const char *mori_wire_op_name(uint32_t op) {
  static const char *const names[] = {"?",     "HELLO",     "CHALLENGE", "AUTH",    "REJECT", "READY",
                                      "ALLGATHER", "BCAST", "BARRIER",   "RESULT", "ABORT",  "LINKS",
                                      "DATA",  "ALLGATHER_VIA_ROOT", "BCAST_VIA_ROOT"};
  return op < MORI_WIRE_OP_END ? names[op] : "?";
}

void mori_wire_link_address_encode(const mori_wire_link_address_t *a, uint8_t out[MORI_WIRE_LINK_ADDRESS_BYTES]) {
  out[0] = (uint8_t)a->family;
  out[1] = (uint8_t)(a->family >> 8);
  out[2] = (uint8_t)a->port;
  out[3] = (uint8_t)(a->port >> 8);
  memcpy(out + 4, a->addr, sizeof(a->addr));
}

int mori_wire_link_address_decode(const uint8_t in[MORI_WIRE_LINK_ADDRESS_BYTES], mori_wire_link_address_t *a,
                                  char *why, size_t why_len) {
  memset(a, 0, sizeof(*a));
  uint16_t family = (uint16_t)(in[0] | in[1] << 8), port = (uint16_t)(in[2] | in[3] << 8);
  if (family != 4 && family != 6) {
    snprintf(why, why_len, "a link address of family %u (4 or 6 expected)", family);
    return MORI_EPROTO;
  }
  if (port == 0) {
    snprintf(why, why_len, "a link address with port 0");
    return MORI_EPROTO;
  }
  for (int i = 4; family == 4 && i < 16; i++)
    if (in[4 + i]) {
      snprintf(why, why_len, "an IPv4 link address with bytes after its address");
      return MORI_EPROTO;
    }
  a->family = family;
  a->port = port;
  memcpy(a->addr, in + 4, sizeof(a->addr));
  if (why_len) why[0] = '\0';
  return 0;
}
