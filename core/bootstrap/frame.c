// SPDX-License-Identifier: MIT
/* Frames on an authenticated connection: header, payload, and a MAC under
 * the direction's session key over {frame number, header, payload}. A frame
 * whose MAC does not match was altered, injected or replayed. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "core/bootstrap/internal/net.h"
#include "core/bootstrap/internal/tcp.h"
#include "mori/error.h"

int mori_tcp_send_frame(struct tcp_peer *p, const mori_wire_header_t *h, const void *payload, int64_t deadline) {
  uint8_t header[MORI_WIRE_HEADER_BYTES];
  mori_wire_encode(h, header);
  size_t bytes = (size_t)mori_wire_payload_bytes(h);
  uint8_t mac[MORI_WIRE_MAC_BYTES];
  bool with_mac = mori_wire_has_mac(h->op);
  if (with_mac) {
    mori_hmac_sha256_t ctx;
    mori_hs_frame_mac_init(&ctx, p->key_tx, p->sent);
    mori_hmac_sha256_update(&ctx, header, sizeof(header));
    if (bytes) mori_hmac_sha256_update(&ctx, payload, bytes);
    mori_hmac_sha256_final(&ctx, mac);
    p->sent++;
  }
  int rc = mori_net_send_all(p->fd, header, sizeof(header), deadline);
  if (!rc && bytes) rc = mori_net_send_all(p->fd, payload, bytes, deadline);
  if (!rc && with_mac) rc = mori_net_send_all(p->fd, mac, sizeof(mac), deadline);
  return rc;
}

int mori_tcp_recv_header(struct tcp_peer *p, mori_wire_header_t *h, int64_t deadline, char *why, size_t why_len) {
  uint8_t header[MORI_WIRE_HEADER_BYTES];
  int rc = mori_net_recv_all(p->fd, header, sizeof(header), deadline);
  if (rc) return rc;
  rc = mori_wire_decode(header, h, why, why_len);
  if (rc) return rc;
  if (mori_wire_has_mac(h->op)) {
    mori_hs_frame_mac_init(&p->rx, p->key_rx, p->received);
    mori_hmac_sha256_update(&p->rx, header, sizeof(header));
  }
  return 0;
}

int mori_tcp_recv_payload(struct tcp_peer *p, void *dst, size_t bytes, int64_t deadline) {
  int rc = mori_net_recv_all(p->fd, dst, bytes, deadline);
  if (!rc) mori_hmac_sha256_update(&p->rx, dst, bytes);
  return rc;
}

int mori_tcp_recv_end(struct tcp_peer *p, int64_t deadline) {
  uint8_t got[MORI_WIRE_MAC_BYTES], want[MORI_WIRE_MAC_BYTES];
  int rc = mori_net_recv_all(p->fd, got, sizeof(got), deadline);
  if (rc) return rc;
  mori_hmac_sha256_final(&p->rx, want);
  p->received++;
  return mori_equal_secret(got, want, sizeof(want)) ? 0 : MORI_EPROTO;
}

int mori_tcp_recv_unexpected(struct tcp_peer *p, const mori_wire_header_t *h, int64_t deadline) {
  /* On an authenticated connection every frame carries a MAC: one whose op
   * says otherwise had its op altered, or is no frame of a mori rank. */
  if (!mori_wire_has_mac(h->op)) return MORI_EPROTO;
  uint64_t left = mori_wire_payload_bytes(h);
  if (left > MORI_TCP_CHECK_MAX) return MORI_EPROTO;
  int64_t soon = mori_net_now_ms() + MORI_TCP_CHECK_WAIT_MS;
  if (soon < deadline) deadline = soon;
  uint8_t chunk[4096];
  while (left) {
    size_t n = left < sizeof(chunk) ? (size_t)left : sizeof(chunk);
    if (mori_tcp_recv_payload(p, chunk, n, deadline) != 0) return MORI_EPROTO;
    left -= n;
  }
  return mori_tcp_recv_end(p, deadline) == 0 ? 0 : MORI_EPROTO;
}

int mori_tcp_recv_text(struct tcp_peer *p, const mori_wire_header_t *h, char *text, size_t len, int64_t deadline) {
  uint8_t raw[MORI_WIRE_TEXT_MAX]; /* the decoder bounds an ABORT's or REJECT's bytes by this */
  size_t bytes = (size_t)h->bytes;
  int rc = mori_net_recv_all(p->fd, raw, bytes, deadline);
  if (!rc && mori_wire_has_mac(h->op)) {
    mori_hmac_sha256_update(&p->rx, raw, bytes);
    rc = mori_tcp_recv_end(p, deadline);
  }
  mori_wire_text(raw, rc ? 0 : bytes, text, len);
  return rc;
}

/* The bootstrap is broken: the reason is kept, and rank 0 tells every rank
 * still connected (an ABORT frame with the code and the text). */
int mori_tcp_fail_all(struct tcp_state *s, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->broken, sizeof(s->broken), fmt, ap);
  va_end(ap);
  if (s->rank == 0) {
    int64_t deadline = mori_net_now_ms() + 1000;
    mori_wire_header_t h = {.op = MORI_WIRE_ABORT, .arg = code, .seq = s->seq};
    size_t len = strlen(s->broken) + 1;
    h.bytes = len < MORI_WIRE_TEXT_MAX ? len : MORI_WIRE_TEXT_MAX;
    char text[MORI_WIRE_TEXT_MAX];
    snprintf(text, sizeof(text), "%s", s->broken);
    for (int r = 1; r < s->size; r++)
      if (s->peers[r].fd >= 0) mori_tcp_send_frame(&s->peers[r], &h, text, deadline);
  }
  return mori_error_set(code, "%s", s->broken);
}
