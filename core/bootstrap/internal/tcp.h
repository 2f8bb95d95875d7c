// SPDX-License-Identifier: MIT
/* The TCP bootstrap's state, shared by its start-up (startup.c), its frames
 * (frame.c), its collectives (tcp.c), the links between ranks (links.c) and
 * the exchanges over them (exchange.c). */
#ifndef MORI_CORE_BOOTSTRAP_TCP_H
#define MORI_CORE_BOOTSTRAP_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/base/hmac_sha256.h"
#include "core/bootstrap/internal/handshake.h"
#include "core/bootstrap/internal/wire.h"

enum {
  /* A non-root rank waits this much longer than the root, so that the
   * root's verdict (naming the missing ranks) arrives before its own timeout. */
  MORI_TCP_GRACE_MS = 3000,
  /* In an exchange over the links, round k's wait ends up to k of these
   * later than round 0's (all within the timeout, see exchange.c): a rank
   * that waits on a stalled rank waits in a later round than that rank waits
   * on whoever stalled it, so the first to time out is the one next to the
   * culprit, and its ABORT (naming it) arrives first. */
  MORI_TCP_ROUND_GRACE_MS = 1000,
  MORI_TCP_ERROR_MAX = 768,
  /* What a connection reads beyond what was asked for: the rest of a frame
   * (and the start of the next) comes in with the same system call. */
  MORI_TCP_READ_AHEAD = 2048,
  MORI_TCP_ADDRESS_MAX = 320,
};

/* A collective goes through rank 0 in its arrival round (tcp.c) when rank 0
 * would send at most this many bytes of results in all: (size - 1) times
 * the result. */
#define MORI_TCP_VIA_ROOT_MAX ((size_t)8 << 20)

/* One connection: before its handshake ends, plain frames; then sealed
 * ones (wire.h). */
struct tcp_peer {
  int fd;
  bool keyed; /* authenticated: the session keys are set and every frame is sealed */
  uint8_t key_tx[MORI_HS_KEY_BYTES]; /* session key of the frames this side sends */
  uint8_t key_rx[MORI_HS_KEY_BYTES];
  uint64_t sent, received; /* frames so far: each MAC covers its number */
  mori_sha256_t rx;        /* hash of the payload of the frame being received */
  uint8_t rx_head[MORI_WIRE_HEADER_BYTES]; /* and its header, both under its frame MAC */
  bool forged;             /* a frame failed its MAC: the connection is worth nothing more */
  /* A frame went out in part (a send that gave up mid-frame): the other end
   * reads whatever comes next as the rest of it, so no frame may follow (an
   * ABORT would arrive as a frame that fails its MAC, the sender blamed
   * for an altered frame instead of heard). */
  bool tx_cut;
  /* Bytes read from fd that no one has taken yet: ahead[ahead_at, ahead_end). */
  uint32_t ahead_at, ahead_end;
  uint8_t ahead[MORI_TCP_READ_AHEAD];
};

/* One frame on its way out, sealed as the connection requires: its parts go
 * out together, in one sendmsg when the socket takes them at once. */
struct tcp_outgoing {
  struct tcp_peer *peer;
  int fd;
  uint8_t head[MORI_WIRE_SEALED_HEADER_BYTES], mac[MORI_WIRE_MAC_BYTES];
  size_t head_bytes, mac_bytes; /* MORI_WIRE_HEADER_BYTES and 0 on a plain connection */
  const uint8_t *payload;
  size_t bytes, done;
};

struct tcp_state {
  int rank, size;
  int timeout_ms;
  uint64_t seq;
  struct tcp_peer *peers; /* rank 0: one per rank; others: one, peers[0], rank 0 */
  /* The links (links.c): in round k of an exchange this rank talks to rank
   * + 2^k over link_out[k], which it opened, and to rank - 2^k (mod size)
   * over link_in[k], which that rank opened. */
  int rounds; /* ceil(log2(size)) */
  struct tcp_peer *link_out, *link_in;
  bool links_up; /* opened by the first collective that travels over them */
  uint8_t key[MORI_HS_KEY_BYTES];
  bool local_secret; /* no secret given: the key comes from this machine */
  char broken[MORI_TCP_ERROR_MAX];
  char address[MORI_TCP_ADDRESS_MAX];
};

/* Frames (frame.c). Each returns 0, MORI_ETIMEDOUT, MORI_ECONNRESET, or
 * MORI_EPROTO (why says how; p->forged when a MAC failed). */
void mori_tcp_seal(struct tcp_peer *p, const mori_wire_header_t *h, const void *payload, struct tcp_outgoing *o);
bool mori_tcp_out_finished(const struct tcp_outgoing *o);
/* Sends what the socket takes now (one sendmsg of every part left): 0, or
 * MORI_ECONNRESET. */
int mori_tcp_out_progress(struct tcp_outgoing *o);
int mori_tcp_send_frame(struct tcp_peer *p, const mori_wire_header_t *h, const void *payload, int64_t deadline);
/* The same, with the payload's SHA-256 already taken (a payload sent to
 * many ranks is hashed once); digest NULL: taken here. */
int mori_tcp_send_frame_hashed(struct tcp_peer *p, const mori_wire_header_t *h, const void *payload,
                               const uint8_t digest[MORI_SHA256_BYTES], int64_t deadline);

/* Reading: what was read ahead first, then one recvmsg into dst and, behind
 * it, the read-ahead buffer. read_some: bytes taken (> 0), 0 when nothing
 * has arrived, MORI_ECONNRESET. read_all waits until the deadline. */
long mori_tcp_read_some(struct tcp_peer *p, void *dst, size_t len);
int mori_tcp_read_all(struct tcp_peer *p, void *dst, size_t len, int64_t deadline);
/* Bytes already read and not yet taken (poll says nothing about these). */
size_t mori_tcp_read_ahead(const struct tcp_peer *p);

/* The header of the next frame: on an authenticated connection, checked
 * against its MAC before anything of it is used (MORI_EPROTO with
 * p->forged when it fails); then decoded, its size bounded. */
int mori_tcp_recv_header(struct tcp_peer *p, mori_wire_header_t *h, int64_t deadline, char *why, size_t why_len);
int mori_tcp_recv_payload(struct tcp_peer *p, void *dst, size_t bytes, int64_t deadline);
/* Reads the frame's MAC and checks it: MORI_EPROTO (p->forged) when it does
 * not match. */
int mori_tcp_recv_end(struct tcp_peer *p, int64_t deadline);
/* Reads the rest of an ABORT or REJECT whose header was read: its text into
 * text (printable, NUL-terminated) and, when sealed, its MAC. */
int mori_tcp_recv_text(struct tcp_peer *p, const mori_wire_header_t *h, char *text, size_t len, int64_t deadline);

/* Start-up (startup.c): rank 0 admits every rank; every other rank joins. */
int mori_tcp_root_start(struct tcp_state *s, int listen_fd);
int mori_tcp_rank_start(struct tcp_state *s);
/* Rank 0's own socket at s->address. */
int mori_tcp_root_listen(struct tcp_state *s, int *listen_fd);

/* One link this rank opens (dial.c): a non-blocking connect and the joining
 * handshake under the link's key, stepped by the poll loop that admits this
 * rank's incoming links, so that all of a rank's handshakes overlap. */
enum mori_dial_state { MORI_DIAL_IDLE, MORI_DIAL_CONNECTING, MORI_DIAL_CHALLENGE, MORI_DIAL_DONE, MORI_DIAL_FAILED };
struct tcp_dial {
  int acceptor;
  struct sockaddr_storage sa;
  socklen_t len;
  char address[MORI_TCP_ADDRESS_MAX];
  char who[MORI_TCP_ADDRESS_MAX + 32];
  struct tcp_peer *peer; /* receives the authenticated connection */
  enum mori_dial_state state;
  int fd;           /* the attempt in progress */
  int attempts;
  int64_t retry_at; /* MORI_DIAL_IDLE: when the next attempt starts */
  char why[200];    /* how the last attempt ended */
  uint8_t nonce[MORI_WIRE_NONCE_BYTES];
  uint8_t buf[MORI_WIRE_HEADER_BYTES + MORI_WIRE_TEXT_MAX]; /* the CHALLENGE or a REJECT */
  size_t have;
  mori_wire_header_t h;
};
void mori_tcp_dial_init(struct tcp_dial *d, int acceptor, const struct sockaddr_storage *sa, socklen_t len,
                        const char *address, struct tcp_peer *peer);
/* What to poll d->fd for; 0 while waiting to try again (or finished). */
short mori_tcp_dial_events(const struct tcp_dial *d);
bool mori_tcp_dial_done(const struct tcp_dial *d);
/* One step on readiness (or, idle, at retry_at): 0, or a failure that no
 * retry can mend (the other end is not the rank it should be, refused this
 * one, ...), with the error set and the attempt closed. */
int mori_tcp_dial_step(struct tcp_state *s, struct tcp_dial *d, short revents, int64_t now);
/* Unfinished at the deadline: MORI_ERANK_TIMEOUT naming the acceptor. */
int mori_tcp_dial_timeout(struct tcp_state *s, struct tcp_dial *d);
/* Closes an unfinished attempt. */
void mori_tcp_dial_abandon(struct tcp_dial *d);

/* Links between ranks (startup.c): a rank's listener (listen_fd, or -1 for
 * none) admits the ranks that slot_of names (rank -> index into slots, -1
 * for any other) until `expected` are in, while the rank dials its own
 * `dials`, all in one poll loop until everything is up or the deadline
 * (deadline 0: the timeout from now). The first failure that no retry can
 * mend ends it; at the deadline the ranks that never opened their link are
 * named, else the first link that never came up. */
int mori_tcp_link_up(struct tcp_state *s, int listen_fd, const int *slot_of, struct tcp_peer *slots, int expected,
                     struct tcp_dial *dials, int ndials, int64_t deadline);
/* The same with only a listener, and with only one dial. */
int mori_tcp_admit_links(struct tcp_state *s, int listen_fd, const int *slot_of, struct tcp_peer *slots, int expected);
int mori_tcp_join_link(struct tcp_state *s, int acceptor, const struct sockaddr_storage *sa, socklen_t len,
                       const char *address, struct tcp_peer *peer, int64_t deadline);
/* Every rank opens and admits its links (links.c): in the first
 * collective whose data travels over them, after its arrival round. */
int mori_tcp_links_start(struct tcp_state *s);
/* Once rank 0 has admitted every rank, a rank that failed on its own (with
 * its error set, rc its code) tells rank 0, which names it to every rank at
 * its next step; rank 0 tells every rank at once. The bootstrap is broken. */
int mori_tcp_fail_everywhere(struct tcp_state *s, int rc);

/* One round through rank 0 (tcp.c). Rank 0 gathers every rank's frame of
 * op (a contribution of `bytes`, carried as payload when the op has one)
 * into gathered[rank * bytes], checking that all agree and naming who is
 * missing; mori_tcp_root_reply then answers each rank (results + rank *
 * bytes when each, else the same results for all). Every other rank sends
 * and waits for its answer of result_bytes. */
int mori_tcp_root_gather(struct tcp_state *s, uint32_t op, int arg, const void *mine, size_t bytes, void *gathered);
int mori_tcp_root_reply(struct tcp_state *s, const void *results, size_t bytes, bool each);
int mori_tcp_leaf_round(struct tcp_state *s, uint32_t op, int arg, const void *mine, size_t bytes, void *result,
                        size_t result_bytes);

/* The data of a collective over the links (exchange.c), once every rank has
 * arrived: a Bruck allgather (ceil(log2 size) rounds, each rank sends and
 * receives (size - 1) * bytes in all) and a binomial broadcast. A failure is
 * sticky, told on every link and to rank 0, and names the rank at fault. */
int mori_tcp_exchange_allgather(struct tcp_state *s, const void *send, void *recv, size_t bytes);
int mori_tcp_exchange_bcast(struct tcp_state *s, void *buf, size_t bytes, int root);
/* Test hook (tests/scale/scale_test.cc), for the failure path inside an
 * exchange: this process leaves its next allgather just before it sends
 * round `round`, either at once (stall_ms 0: _exit(0), and the kernel closes
 * its sockets, as when a rank crashes) or after stall_ms of silence with
 * every socket open (a rank that hangs), then _exit(0). round < 0 clears it.
 * Nothing else sets it. */
void mori_tcp_test_leave_before_round(int round, int stall_ms);
/* Test hook: the bound on what rank 0 sends in a collective that goes
 * through it (MORI_TCP_VIA_ROOT_MAX unless set; 0 sends every collective
 * with data over the links), for tests of either path. Set it alike on
 * every rank, before a collective. */
void mori_tcp_test_via_root_max(size_t bytes);

/* A non-root rank's sticky failure (not told to anyone). */
int mori_tcp_broken(struct tcp_state *s, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Rank 0: records a sticky failure and tells every admitted rank. */
int mori_tcp_fail_all(struct tcp_state *s, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
