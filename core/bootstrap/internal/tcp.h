/* The TCP bootstrap's state, shared by its start-up (startup.c), its frames
 * (frame.c) and its collectives (tcp.c). */
#ifndef MORI_CORE_BOOTSTRAP_TCP_H
#define MORI_CORE_BOOTSTRAP_TCP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/base/hmac_sha256.h"
#include "core/bootstrap/internal/handshake.h"
#include "core/bootstrap/internal/wire.h"

enum {
  /* A non-root rank waits this much longer than the root, so that the
   * root's verdict (naming the missing ranks) arrives before its own timeout. */
  MORI_TCP_GRACE_MS = 3000,
  MORI_TCP_ERROR_MAX = 768,
  MORI_TCP_ADDRESS_MAX = 320,
};

/* One authenticated connection. */
struct tcp_peer {
  int fd;
  uint8_t key_tx[MORI_HS_KEY_BYTES]; /* session key of the frames this side sends */
  uint8_t key_rx[MORI_HS_KEY_BYTES];
  uint64_t sent, received; /* frames so far: each MAC covers its number */
  mori_hmac_sha256_t rx;   /* MAC of the frame being received */
};

struct tcp_state {
  int rank, size;
  int timeout_ms;
  uint64_t seq;
  struct tcp_peer *peers; /* rank 0: one per rank; others: peers[0] is rank 0 */
  uint8_t key[MORI_HS_KEY_BYTES];
  bool local_secret; /* no secret given: the key comes from this machine */
  char broken[MORI_TCP_ERROR_MAX];
  char address[MORI_TCP_ADDRESS_MAX];
};

/* Frames on an authenticated connection (frame.c). Each returns 0,
 * MORI_ETIMEDOUT, MORI_ECONNRESET, or MORI_EPROTO (why says how). */
int mori_tcp_send_frame(struct tcp_peer *p, const mori_wire_header_t *h, const void *payload, int64_t deadline);
int mori_tcp_recv_header(struct tcp_peer *p, mori_wire_header_t *h, int64_t deadline, char *why, size_t why_len);
int mori_tcp_recv_payload(struct tcp_peer *p, void *dst, size_t bytes, int64_t deadline);
/* Reads the frame's MAC and checks it: MORI_EPROTO when it does not match. */
int mori_tcp_recv_end(struct tcp_peer *p, int64_t deadline);
/* Reads the rest of an ABORT or REJECT whose header was read: its text into
 * text (printable, NUL-terminated) and, for ABORT, its MAC. */
int mori_tcp_recv_text(struct tcp_peer *p, const mori_wire_header_t *h, char *text, size_t len, int64_t deadline);

/* Start-up (startup.c): rank 0 admits every rank; every other rank joins. */
int mori_tcp_root_start(struct tcp_state *s, int listen_fd);
int mori_tcp_rank_start(struct tcp_state *s);
/* Rank 0's own socket at s->address. */
int mori_tcp_root_listen(struct tcp_state *s, int *listen_fd);

/* Rank 0: records a sticky failure and tells every admitted rank. */
int mori_tcp_fail_all(struct tcp_state *s, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
