// SPDX-License-Identifier: MIT
/* The links a rank opens (links.c), dialled all at once. Each is a
 * non-blocking connect followed by the joining handshake of startup.c
 * (HELLO with a fresh nonce; the listener's CHALLENGE checked against the
 * link's key, so only the rank it should be passes; AUTH), one step per
 * readiness event. The poll loop that admits this rank's incoming links
 * (startup.c, admit) drives them too, under the same deadline, so a rank's
 * 2 * ceil(log2 size) handshakes overlap instead of following one another.
 * A connect that finds nobody listening, or a listener that drops the
 * connection before answering (a flooded one drops its oldest), is tried
 * again 20 ms later; anything that proves the other end is not the rank it
 * should be fails at once. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/bootstrap/internal/net.h"
#include "core/bootstrap/internal/tcp.h"

enum { RETRY_MS = 20, CHALLENGE_BYTES = MORI_WIRE_NONCE_BYTES + MORI_WIRE_MAC_BYTES };

void mori_tcp_dial_init(struct tcp_dial *d, int acceptor, const struct sockaddr_storage *sa, socklen_t len,
                        const char *address, struct tcp_peer *peer) {
  memset(d, 0, sizeof(*d));
  d->acceptor = acceptor;
  d->sa = *sa;
  d->len = len;
  snprintf(d->address, sizeof(d->address), "%s", address);
  snprintf(d->who, sizeof(d->who), "rank %d's link listener at %s", acceptor, address);
  d->peer = peer;
  d->fd = -1;
  d->state = MORI_DIAL_IDLE;
  peer->fd = -1;
}

bool mori_tcp_dial_done(const struct tcp_dial *d) { return d->state == MORI_DIAL_DONE; }

short mori_tcp_dial_events(const struct tcp_dial *d) {
  return d->state == MORI_DIAL_CONNECTING ? POLLOUT : d->state == MORI_DIAL_CHALLENGE ? POLLIN : 0;
}

void mori_tcp_dial_abandon(struct tcp_dial *d) {
  if (d->state == MORI_DIAL_DONE) return;
  if (d->fd >= 0) close(d->fd);
  d->fd = -1;
  d->peer->fd = -1;
  d->state = MORI_DIAL_FAILED;
}

static int hard_fail(struct tcp_dial *d, int code, const char *text) {
  mori_tcp_dial_abandon(d);
  return mori_error_set(code, "%s", text);
}

/* The attempt ended in a way worth another: close and try again soon. */
static void again(struct tcp_dial *d, int64_t now, const char *why) {
  if (d->fd >= 0) close(d->fd);
  d->fd = -1;
  snprintf(d->why, sizeof(d->why), "%s", why);
  d->state = MORI_DIAL_IDLE;
  d->retry_at = now + RETRY_MS;
}

static bool worth_retrying(int err) {
  /* Nobody listening yet, or the route is not there yet. */
  return err == ECONNREFUSED || err == ECONNRESET || err == ENETUNREACH || err == EHOSTUNREACH || err == ETIMEDOUT ||
         err == ECONNABORTED || err == EADDRNOTAVAIL || err == EAGAIN || err == EINTR;
}

static int connect_failed(struct tcp_state *s, struct tcp_dial *d, int err, int64_t now) {
  if (worth_retrying(err)) {
    again(d, now, strerror(err));
    return 0;
  }
  char text[MORI_TCP_ERROR_MAX];
  snprintf(text, sizeof(text), "bootstrap: rank %d cannot connect to %s: %s", s->rank, d->who, strerror(err));
  return hard_fail(d, -err, text);
}

/* Connected: the HELLO, which a fresh socket's buffer takes at once. */
static int connected(struct tcp_state *s, struct tcp_dial *d, int64_t now) {
  mori_net_tune(d->fd);
  unsigned uid;
  if (mori_net_other_local_user(d->fd, &uid)) {
    char text[MORI_TCP_ERROR_MAX];
    snprintf(text, sizeof(text), "bootstrap: rank %d: %s is held by another user (uid %u) of this machine", s->rank, d->who,
             uid);
    return hard_fail(d, MORI_EACCES, text);
  }
  if (getrandom(d->nonce, sizeof(d->nonce), 0) != (ssize_t)sizeof(d->nonce)) {
    char text[MORI_TCP_ERROR_MAX];
    snprintf(text, sizeof(text), "bootstrap: rank %d cannot draw a nonce: %s", s->rank, strerror(errno));
    return hard_fail(d, MORI_EIO, text);
  }
  struct tcp_peer plain = {.fd = d->fd};
  mori_wire_header_t h = {.op = MORI_WIRE_HELLO, .rank = s->rank, .arg = s->size, .bytes = sizeof(d->nonce)};
  if (mori_tcp_send_frame(&plain, &h, d->nonce, now) != 0) {
    again(d, now, "the listener closed the connection before answering");
    return 0;
  }
  d->state = MORI_DIAL_CHALLENGE;
  d->have = 0;
  return 0;
}

static int attempt(struct tcp_state *s, struct tcp_dial *d, int64_t now) {
  d->fd = socket(d->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (d->fd < 0) {
    char text[MORI_TCP_ERROR_MAX];
    int err = errno;
    snprintf(text, sizeof(text), "bootstrap: rank %d cannot connect to %s: socket: %s", s->rank, d->who,
             strerror(err));
    return hard_fail(d, err == EMFILE || err == ENFILE ? MORI_EMFILE : MORI_EIO, text);
  }
  d->attempts++;
  if (connect(d->fd, (const struct sockaddr *)&d->sa, d->len) == 0) return connected(s, d, now);
  if (errno == EINPROGRESS || errno == EINTR) {
    d->state = MORI_DIAL_CONNECTING;
    return 0;
  }
  return connect_failed(s, d, errno, now);
}

/* The CHALLENGE is complete: check the listener's proof, prove this rank. */
static int challenged(struct tcp_state *s, struct tcp_dial *d, int64_t now) {
  const uint8_t *nonce_root = d->buf + MORI_WIRE_HEADER_BYTES, *proof = nonce_root + MORI_WIRE_NONCE_BYTES;
  uint8_t key[MORI_HS_KEY_BYTES], want[MORI_WIRE_MAC_BYTES];
  char text[MORI_TCP_ERROR_MAX];
  mori_hs_link_key(s->key, s->size, s->rank, d->acceptor, key);
  mori_hs_proof(key, MORI_HS_ROOT, s->size, s->rank, d->nonce, nonce_root, want);
  if (!mori_equal_secret(want, proof, sizeof(want))) {
    memset(key, 0, sizeof(key));
    snprintf(text, sizeof(text),
             "bootstrap: what answers at %s as %s does not hold this job's secret; rank %d refuses it", d->address,
             d->who, s->rank);
    return hard_fail(d, MORI_EACCES, text);
  }
  uint8_t mine[MORI_WIRE_MAC_BYTES];
  mori_hs_proof(key, MORI_HS_RANK, s->size, s->rank, d->nonce, nonce_root, mine);
  struct tcp_peer *peer = d->peer;
  *peer = (struct tcp_peer){.fd = d->fd};
  mori_wire_header_t h = {.op = MORI_WIRE_AUTH, .rank = s->rank, .arg = s->size, .bytes = sizeof(mine)};
  /* 64 bytes after the HELLO's 64: the socket's buffer takes them at once. */
  if (mori_tcp_send_frame(peer, &h, mine, now) != 0) {
    memset(key, 0, sizeof(key));
    snprintf(text, sizeof(text), "bootstrap: %s dropped rank %d during its start-up", d->who, s->rank);
    return hard_fail(d, MORI_ERANK_TIMEOUT, text);
  }
  mori_hs_session_keys(key, s->size, s->rank, d->nonce, nonce_root, peer->key_tx, peer->key_rx);
  peer->keyed = true;
  memset(key, 0, sizeof(key));
  d->fd = -1; /* the link's now */
  d->state = MORI_DIAL_DONE;
  return 0;
}

/* Reads what the listener sent: a CHALLENGE, or a REJECT saying why not. */
static int read_answer(struct tcp_state *s, struct tcp_dial *d, int64_t now) {
  char text[MORI_TCP_ERROR_MAX];
  for (;;) {
    size_t total = MORI_WIRE_HEADER_BYTES + (d->have >= MORI_WIRE_HEADER_BYTES ? (size_t)d->h.bytes : 0);
    if (d->have == total && d->have >= MORI_WIRE_HEADER_BYTES) break;
    ssize_t n = recv(d->fd, d->buf + d->have, total - d->have, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (n <= 0) {
      if (d->have == 0) {
        again(d, now, "the listener closed the connection before answering");
        return 0;
      }
      snprintf(text, sizeof(text), "bootstrap: what answers at %s is not a mori rank's link listener (its answer "
               "broke off)", d->address);
      return hard_fail(d, MORI_EPROTO, text);
    }
    d->have += (size_t)n;
    if (d->have == MORI_WIRE_HEADER_BYTES) {
      char why[160];
      if (mori_wire_decode(d->buf, &d->h, why, sizeof(why)) != 0) {
        snprintf(text, sizeof(text), "bootstrap: what answers at %s is not a mori rank's link listener: %s",
                 d->address, why);
        return hard_fail(d, MORI_EPROTO, text);
      }
      /* The decoder bounds a REJECT's text by MORI_WIRE_TEXT_MAX, which buf holds. */
      if (d->h.op != MORI_WIRE_REJECT && (d->h.op != MORI_WIRE_CHALLENGE || d->h.bytes != CHALLENGE_BYTES)) {
        snprintf(text, sizeof(text),
                 "bootstrap: what answers at %s is not a mori rank's link listener (%s frame of %llu bytes)",
                 d->address, mori_wire_op_name(d->h.op), (unsigned long long)d->h.bytes);
        return hard_fail(d, MORI_EPROTO, text);
      }
    }
  }
  if (d->h.op == MORI_WIRE_REJECT) {
    char peer_text[MORI_WIRE_TEXT_MAX];
    mori_wire_text(d->buf + MORI_WIRE_HEADER_BYTES, (size_t)d->h.bytes, peer_text, sizeof(peer_text));
    snprintf(text, sizeof(text), "bootstrap: %s refused rank %d: %s", d->who, s->rank, peer_text);
    return hard_fail(d, mori_wire_abort_code(d->h.arg), text);
  }
  return challenged(s, d, now);
}

int mori_tcp_dial_step(struct tcp_state *s, struct tcp_dial *d, short revents, int64_t now) {
  switch (d->state) {
  case MORI_DIAL_IDLE:
    return now >= d->retry_at ? attempt(s, d, now) : 0;
  case MORI_DIAL_CONNECTING: {
    if (!revents) return 0;
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == 0) return connected(s, d, now);
    return connect_failed(s, d, err, now);
  }
  case MORI_DIAL_CHALLENGE:
    return revents ? read_answer(s, d, now) : 0;
  default:
    return 0;
  }
}

int mori_tcp_dial_timeout(struct tcp_state *s, struct tcp_dial *d) {
  int rc;
  if (d->state == MORI_DIAL_CHALLENGE)
    rc = mori_error_set(MORI_ERANK_TIMEOUT, "bootstrap: %s did not answer rank %d within %d ms", d->who, s->rank,
                        s->timeout_ms);
  else
    rc = mori_error_set(MORI_ERANK_TIMEOUT, "bootstrap: rank %d could not reach %s within %d ms (%s)", s->rank, d->who,
                        s->timeout_ms,
                        d->why[0] ? d->why
                                  : "the connection was never accepted: the listener's accept queue may be full, or "
                                    "the network drops it");
  mori_tcp_dial_abandon(d);
  return rc;
}
