// SPDX-License-Identifier: MIT
/* Frames: plain during a connection's handshake, then sealed (wire.h):
 * header, header MAC, payload, frame MAC, each MAC under the direction's
 * session key and over the frame's number. A frame whose header MAC fails
 * is not read further; one whose frame MAC fails was altered, injected or
 * replayed. A frame goes out in one sendmsg, and comes in through a small
 * read-ahead buffer, so that a frame that has arrived whole is read by one
 * system call. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "core/base/error.h"
#include "core/bootstrap/internal/net.h"
#include "core/bootstrap/internal/tcp.h"
#include "mori/error.h"

/* digest: the payload's SHA-256 when the caller has it, else NULL. */
static void seal_hashed(struct tcp_peer *p, const mori_wire_header_t *h, const void *payload,
                        const uint8_t digest[MORI_SHA256_BYTES], struct tcp_outgoing *o) {
  memset(o, 0, sizeof(*o));
  o->peer = p;
  o->fd = p->fd;
  o->payload = payload;
  o->bytes = (size_t)mori_wire_payload_bytes(h);
  if (!p->keyed) {
    mori_wire_encode(h, o->head);
    o->head_bytes = MORI_WIRE_HEADER_BYTES;
    return;
  }
  mori_hs_seal_header(p->key_tx, p->sent, h, o->head);
  o->head_bytes = MORI_WIRE_SEALED_HEADER_BYTES;
  uint8_t own[MORI_SHA256_BYTES];
  if (!digest) mori_hs_payload_digest(payload, o->bytes, own);
  mori_hs_frame_mac(p->key_tx, p->sent, o->head, digest ? digest : own, o->mac);
  o->mac_bytes = MORI_WIRE_MAC_BYTES;
  p->sent++;
}

void mori_tcp_seal(struct tcp_peer *p, const mori_wire_header_t *h, const void *payload, struct tcp_outgoing *o) {
  seal_hashed(p, h, payload, NULL, o);
}

bool mori_tcp_out_finished(const struct tcp_outgoing *o) { return o->done == o->head_bytes + o->bytes + o->mac_bytes; }

/* Sends what the socket takes now. The peer is cut while the frame is
 * part-way out; a frame abandoned there leaves it cut for good. */
int mori_tcp_out_progress(struct tcp_outgoing *o) {
  while (!mori_tcp_out_finished(o)) {
    struct iovec iov[3];
    int n = 0;
    size_t at = o->done;
    const uint8_t *base[3] = {o->head, o->payload, o->mac};
    size_t len[3] = {o->head_bytes, o->bytes, o->mac_bytes};
    for (int i = 0; i < 3; i++) {
      if (at >= len[i]) {
        at -= len[i];
        continue;
      }
      iov[n++] = (struct iovec){.iov_base = (void *)(base[i] + at), .iov_len = len[i] - at};
      at = 0;
    }
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t sent = sendmsg(o->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (sent <= 0) return MORI_ECONNRESET;
    o->done += (size_t)sent;
    o->peer->tx_cut = !mori_tcp_out_finished(o); /* o->peer: every frame is sealed for its peer */
  }
  return 0;
}

int mori_tcp_send_frame_hashed(struct tcp_peer *p, const mori_wire_header_t *h, const void *payload,
                               const uint8_t digest[MORI_SHA256_BYTES], int64_t deadline) {
  if (p->tx_cut) return MORI_EPROTO; /* see tcp_peer.tx_cut: the link is only good for closing */
  struct tcp_outgoing o;
  seal_hashed(p, h, payload, digest, &o);
  for (;;) {
    int rc = mori_tcp_out_progress(&o);
    if (rc || mori_tcp_out_finished(&o)) return rc;
    rc = mori_net_wait(p->fd, POLLOUT, deadline);
    if (rc) return rc;
  }
}

int mori_tcp_send_frame(struct tcp_peer *p, const mori_wire_header_t *h, const void *payload, int64_t deadline) {
  return mori_tcp_send_frame_hashed(p, h, payload, NULL, deadline);
}

size_t mori_tcp_read_ahead(const struct tcp_peer *p) { return p->ahead_end - p->ahead_at; }

long mori_tcp_read_some(struct tcp_peer *p, void *dst, size_t len) {
  if (!len) return 0;
  size_t ahead = mori_tcp_read_ahead(p);
  if (ahead) {
    size_t n = ahead < len ? ahead : len;
    memcpy(dst, p->ahead + p->ahead_at, n);
    p->ahead_at += (uint32_t)n;
    return (long)n;
  }
  p->ahead_at = p->ahead_end = 0;
  struct iovec iov[2] = {{.iov_base = dst, .iov_len = len}, {.iov_base = p->ahead, .iov_len = sizeof(p->ahead)}};
  struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
  ssize_t n = recvmsg(p->fd, &msg, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  if (n <= 0) return MORI_ECONNRESET;
  if ((size_t)n <= len) return (long)n;
  p->ahead_end = (uint32_t)((size_t)n - len);
  return (long)len;
}

int mori_tcp_read_all(struct tcp_peer *p, void *dst, size_t len, int64_t deadline) {
  uint8_t *to = dst;
  while (len) {
    long n = mori_tcp_read_some(p, to, len);
    if (n < 0) return (int)n;
    if (n == 0) {
      int rc = mori_net_wait(p->fd, POLLIN, deadline);
      if (rc) return rc;
      continue;
    }
    to += n;
    len -= (size_t)n;
  }
  return 0;
}

int mori_tcp_recv_header(struct tcp_peer *p, mori_wire_header_t *h, int64_t deadline, char *why, size_t why_len) {
  uint8_t head[MORI_WIRE_SEALED_HEADER_BYTES];
  memset(h, 0, sizeof(*h));
  if (!p->keyed) {
    int rc = mori_tcp_read_all(p, head, MORI_WIRE_HEADER_BYTES, deadline);
    return rc ? rc : mori_wire_decode(head, h, why, why_len);
  }
  int rc = mori_tcp_read_all(p, head, sizeof(head), deadline);
  if (rc) return rc;
  if (!mori_hs_header_authentic(p->key_rx, p->received, head)) {
    p->forged = true;
    snprintf(why, why_len, "its frame failed its MAC (altered on the way)");
    return MORI_EPROTO;
  }
  rc = mori_wire_decode(head, h, why, why_len);
  if (rc) return rc;
  mori_sha256_init(&p->rx);
  memcpy(p->rx_head, head, MORI_WIRE_HEADER_BYTES);
  return 0;
}

int mori_tcp_recv_payload(struct tcp_peer *p, void *dst, size_t bytes, int64_t deadline) {
  int rc = mori_tcp_read_all(p, dst, bytes, deadline);
  if (!rc && p->keyed && bytes) mori_sha256_update(&p->rx, dst, bytes);
  return rc;
}

int mori_tcp_recv_end(struct tcp_peer *p, int64_t deadline) {
  if (!p->keyed) return 0;
  uint8_t got[MORI_WIRE_MAC_BYTES], want[MORI_WIRE_MAC_BYTES], digest[MORI_SHA256_BYTES];
  int rc = mori_tcp_read_all(p, got, sizeof(got), deadline);
  if (rc) return rc;
  mori_sha256_final(&p->rx, digest);
  mori_hs_frame_mac(p->key_rx, p->received, p->rx_head, digest, want);
  p->received++;
  if (mori_equal_secret(got, want, sizeof(want))) return 0;
  p->forged = true;
  return MORI_EPROTO;
}

int mori_tcp_recv_text(struct tcp_peer *p, const mori_wire_header_t *h, char *text, size_t len, int64_t deadline) {
  uint8_t raw[MORI_WIRE_TEXT_MAX]; /* the decoder bounds an ABORT's or REJECT's bytes by this */
  size_t bytes = (size_t)h->bytes;
  int rc = mori_tcp_recv_payload(p, raw, bytes, deadline);
  if (!rc) rc = mori_tcp_recv_end(p, deadline);
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
