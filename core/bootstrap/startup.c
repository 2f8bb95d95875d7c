// SPDX-License-Identifier: MIT
/* Start-up of the TCP bootstrap: rank 0 admits ranks, the others join; and
 * the same admission for the links between ranks (links.c), whose poll loop
 * also steps the handshakes of the links the rank opens itself (dial.c).
 *
 * Rank 0 (and every rank's link listener) serves every connection that is not a rank yet at once, polled, so
 * that a silent or slow stranger holds up nobody: each only ever waits as
 * long as the start-up's one deadline. A connection is admitted when it has
 * proven that it holds the job's secret (handshake.h); a malformed, foreign
 * or duplicate one is dropped with a note, and the start-up goes on. When
 * accept() runs out of descriptors rank 0 backs off instead of spinning, and
 * says so if ranks are still missing at the deadline. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/bootstrap/internal/address.h"
#include "core/bootstrap/internal/alloc.h"
#include "core/bootstrap/internal/net.h"
#include "core/bootstrap/internal/secret.h"
#include "core/bootstrap/internal/tcp.h"

enum {
  /* Connections rank 0 serves at once beyond the ranks it expects: past
   * that the oldest is dropped (a real rank whose connection is dropped
   * before rank 0 answered tries again). */
  EXTRA_PENDING = 64,
  /* Pause after accept() ran out of descriptors or memory. */
  BACKOFF_MS = 100,
  NOTE_MAX = 320,
};

/* A connection that is not a rank yet. */
struct pending {
  int fd;
  bool hello_done; /* HELLO read and CHALLENGE sent; AUTH due */
  int rank;
  int size;        /* the world size its HELLO claims (proofs are made over it) */
  mori_hs_reader_t reader;
  uint8_t nonce_rank[MORI_WIRE_NONCE_BYTES], nonce_root[MORI_WIRE_NONCE_BYTES];
  char from[64];
};

struct admission {
  struct tcp_state *s;
  /* Rank 0 admits the ranks (acceptor -1, under the job key); a rank's link
   * listener admits the ranks that open links to it (under each link's key). */
  int acceptor;
  const int *slot_of;     /* rank -> its place in slots; -1: not expected here */
  struct tcp_peer *slots; /* the admitted connections */
  int expected;
  char who[MORI_TCP_ADDRESS_MAX + 32]; /* "rank 0 at ADDRESS" or "rank R's link listener" */
  int listen_fd;                       /* -1: none (only dials) */
  /* The links this rank opens, driven by the same loop (dial.c). */
  struct tcp_dial *dials;
  int ndials;
  struct pending *pending;
  int count, cap;
  int admitted;
  int64_t deadline, backoff_until;
  int accept_errno;    /* what accept() last ran out of */
  char note[NOTE_MAX]; /* the last connection dropped, and why */
  /* A rank that proved it holds the secret but believes in another world
   * size: the job cannot start. The ranks still missing get a short grace
   * to arrive and hear it instead of their full timeout. */
  char verdict[NOTE_MAX];
};

static void describe_peer(const struct sockaddr_storage *sa, char *out, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->ss_family == AF_INET) {
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
    port = ntohs(v4->sin_port);
  } else if (sa->ss_family == AF_INET6) {
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
    port = ntohs(v6->sin6_port);
  }
  snprintf(out, len, sa->ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host, port);
}

/* The key a connection claiming `rank` proves itself under. */
static void admission_key(const struct admission *a, int rank, uint8_t key[MORI_HS_KEY_BYTES]) {
  if (a->acceptor < 0)
    memcpy(key, a->s->key, MORI_HS_KEY_BYTES);
  else
    mori_hs_link_key(a->s->key, a->s->size, rank, a->acceptor, key);
}

/* Rank 0's failures reach every rank (mori_tcp_fail_all); a link listener,
 * which runs beside its rank's own dialing, only records its own. */
static int admission_fail(struct admission *a, int code, const char *fmt, ...) MORI_PRINTF(3, 4);
static int admission_fail(struct admission *a, int code, const char *fmt, ...) {
  char text[MORI_TCP_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (a->acceptor < 0) return mori_tcp_fail_all(a->s, code, "%s", text);
  return mori_error_set(code, "%s", text);
}

/* Closes pending connection i (it stays in the array until compacted). */
static void drop(struct admission *a, int i, bool loud, const char *fmt, ...) MORI_PRINTF(4, 5);
static void drop(struct admission *a, int i, bool loud, const char *fmt, ...) {
  struct pending *p = &a->pending[i];
  char why[NOTE_MAX - 80];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  snprintf(a->note, sizeof(a->note), "a connection from %s: %s", p->from, why);
  if (loud)
    MORI_WARN("bootstrap: %s dropped %s", a->who, a->note);
  else
    MORI_DEBUG("bootstrap: %s dropped %s", a->who, a->note);
  close(p->fd);
  p->fd = -1;
}

/* Refuses a connection with a REJECT it can read (it has not proven
 * anything, so the text says only what rank 0 expects), then drops it. */
static void reject(struct admission *a, int i, int code, const char *text) {
  struct tcp_peer plain = {.fd = a->pending[i].fd};
  mori_wire_header_t h = {.op = MORI_WIRE_REJECT, .arg = code, .bytes = strlen(text) + 1};
  mori_tcp_send_frame(&plain, &h, text, mori_net_now_ms() + 100);
  drop(a, i, true, "%s", text);
}

static void accept_some(struct admission *a) {
  for (int n = 0; n < 16; n++) {
    struct sockaddr_storage from;
    socklen_t len = sizeof(from);
    int fd = accept4(a->listen_fd, (struct sockaddr *)&from, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        if (!a->accept_errno)
          MORI_WARN("bootstrap: %s cannot accept connections: %s; retrying until its deadline", a->who,
                    strerror(errno));
        a->accept_errno = errno;
        a->backoff_until = mori_net_now_ms() + BACKOFF_MS;
      }
      return; /* EAGAIN, or a connection that vanished: the next poll says more */
    }
    mori_net_tune(fd);
    unsigned uid;
    if (mori_net_other_local_user(fd, &uid)) {
      /* Another user of this machine: even one that holds the job's secret
       * (read from a file left readable) is no rank of this job. */
      char from_text[64];
      describe_peer(&from, from_text, sizeof(from_text));
      snprintf(a->note, sizeof(a->note), "a connection from %s: another user (uid %u) of this machine", from_text, uid);
      MORI_DEBUG("bootstrap: %s dropped %s", a->who, a->note);
      close(fd);
      continue;
    }
    if (a->count == a->cap) { /* flooded: the oldest goes */
      drop(a, 0, true, "too many connections at once");
      memmove(a->pending, a->pending + 1, sizeof(*a->pending) * (size_t)(a->count - 1));
      a->count--;
    }
    struct pending *p = &a->pending[a->count++];
    memset(p, 0, sizeof(*p));
    p->fd = fd;
    p->rank = -1;
    describe_peer(&from, p->from, sizeof(p->from));
  }
}

static void on_hello(struct admission *a, int i, const mori_wire_header_t *h, const uint8_t nonce[]) {
  struct tcp_state *s = a->s;
  struct pending *p = &a->pending[i];
  char text[200];
  /* A rank of this job that believes in another world size is still
   * challenged (over the size it claims): if it proves it holds the secret,
   * the whole job hears about the disagreement, not only that rank. */
  if (a->acceptor < 0 && (h->arg < 2 || h->rank < 1 || h->rank >= s->size || h->rank >= h->arg)) {
    snprintf(text, sizeof(text),
             "rank 0 at %s runs a job of %d ranks (1..%d join it); this process says it is rank %d of %d", s->address,
             s->size, s->size - 1, h->rank, h->arg);
    reject(a, i, MORI_EMISMATCH, text);
    return;
  }
  /* A link's dialers are known: only they, of this world size. */
  if (a->acceptor >= 0 && (h->arg != s->size || h->rank < 0 || h->rank >= s->size || a->slot_of[h->rank] < 0)) {
    snprintf(text, sizeof(text), "%s takes links from certain ranks of a job of %d; this process says it is rank %d of %d",
             a->who, s->size, h->rank, h->arg);
    reject(a, i, MORI_EMISMATCH, text);
    return;
  }
  if (a->slots[a->slot_of[h->rank]].fd >= 0) {
    snprintf(text, sizeof(text), "rank %d is already connected to %s", h->rank, a->who);
    reject(a, i, MORI_EMISMATCH, text);
    return;
  }
  p->rank = h->rank;
  p->size = h->arg;
  memcpy(p->nonce_rank, nonce, MORI_WIRE_NONCE_BYTES);
  if (getrandom(p->nonce_root, sizeof(p->nonce_root), 0) != (ssize_t)sizeof(p->nonce_root)) {
    drop(a, i, true, "no random nonce: %s", strerror(errno));
    return;
  }
  uint8_t body[MORI_WIRE_NONCE_BYTES + MORI_WIRE_MAC_BYTES], key[MORI_HS_KEY_BYTES];
  memcpy(body, p->nonce_root, MORI_WIRE_NONCE_BYTES);
  admission_key(a, p->rank, key);
  mori_hs_proof(key, MORI_HS_ROOT, p->size, p->rank, p->nonce_rank, p->nonce_root, body + MORI_WIRE_NONCE_BYTES);
  struct tcp_peer plain = {.fd = p->fd};
  mori_wire_header_t challenge = {.op = MORI_WIRE_CHALLENGE, .arg = p->size, .bytes = sizeof(body)};
  /* A fresh socket's buffer takes 128 bytes at once; one that does not is
   * not worth waiting for. */
  if (mori_tcp_send_frame(&plain, &challenge, body, mori_net_now_ms()) != 0) {
    drop(a, i, false, "it did not take rank 0's challenge");
    return;
  }
  p->hello_done = true;
  mori_hs_reader_reset(&p->reader);
}

static void on_auth(struct admission *a, int i, const mori_wire_header_t *h, const uint8_t proof[]) {
  struct tcp_state *s = a->s;
  struct pending *p = &a->pending[i];
  if (h->rank != p->rank || h->arg != p->size) {
    drop(a, i, true, "its AUTH (rank %d of %d) does not match its HELLO (rank %d of %d)", h->rank, h->arg, p->rank,
         p->size);
    return;
  }
  uint8_t want[MORI_WIRE_MAC_BYTES], key[MORI_HS_KEY_BYTES];
  admission_key(a, p->rank, key);
  mori_hs_proof(key, MORI_HS_RANK, p->size, p->rank, p->nonce_rank, p->nonce_root, want);
  if (!mori_equal_secret(want, proof, sizeof(want))) {
    drop(a, i, true, "it claims rank %d but does not hold the job's secret", p->rank);
    return;
  }
  struct tcp_peer peer = {.fd = p->fd};
  mori_hs_session_keys(key, p->size, p->rank, p->nonce_rank, p->nonce_root, peer.key_rx, peer.key_tx);
  peer.keyed = true;
  memset(key, 0, sizeof(key));
  if (p->size != s->size) {
    char text[200];
    snprintf(text, sizeof(text), "bootstrap: rank %d says the world has %d ranks, rank 0 says %d", p->rank, p->size,
             s->size);
    mori_wire_header_t abort = {.op = MORI_WIRE_ABORT, .arg = MORI_EMISMATCH, .bytes = strlen(text) + 1};
    mori_tcp_send_frame(&peer, &abort, text, mori_net_now_ms() + 100);
    drop(a, i, true, "%s", text);
    if (!a->verdict[0]) {
      snprintf(a->verdict, sizeof(a->verdict), "%s", text);
      int64_t grace = mori_net_now_ms() + MORI_TCP_GRACE_MS;
      if (grace < a->deadline) a->deadline = grace;
    }
    return;
  }
  struct tcp_peer *slot = &a->slots[a->slot_of[p->rank]];
  if (slot->fd >= 0) {
    /* Proven, so it may hear why: most likely two processes of this job
     * were given the same rank. */
    char text[200];
    snprintf(text, sizeof(text), "rank %d is already connected to %s; a second process claiming it (from %s) is turned away",
             p->rank, a->who, p->from);
    mori_wire_header_t abort = {.op = MORI_WIRE_ABORT, .arg = MORI_EMISMATCH, .bytes = strlen(text) + 1};
    mori_tcp_send_frame(&peer, &abort, text, mori_net_now_ms() + 100);
    drop(a, i, true, "%s", text);
    return;
  }
  *slot = peer;
  p->fd = -1; /* the rank's now */
  a->admitted++;
  MORI_DEBUG("bootstrap: %s admitted rank %d from %s", a->who, p->rank, p->from);
}

/* Reads what connection i has sent and acts on each complete message. */
static void serve(struct admission *a, int i) {
  struct pending *p = &a->pending[i];
  uint8_t buf[MORI_WIRE_HEADER_BYTES + MORI_WIRE_NONCE_BYTES];
  ssize_t n = recv(p->fd, buf, mori_hs_reader_want(&p->reader), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    drop(a, i, false, "it closed before finishing its start-up");
    return;
  }
  mori_wire_header_t h;
  uint8_t body[MORI_WIRE_NONCE_BYTES];
  char why[160];
  int rc = mori_hs_reader_feed(&p->reader, buf, (size_t)n, p->hello_done ? MORI_WIRE_AUTH : MORI_WIRE_HELLO, &h,
                               body, why, sizeof(why));
  if (rc < 0) {
    char text[240];
    snprintf(text, sizeof(text), "not a mori rank's start-up: %s", why);
    if (p->hello_done)
      drop(a, i, true, "%s", text);
    else
      reject(a, i, MORI_EPROTO, text);
  } else if (rc == 1) {
    if (p->hello_done)
      on_auth(a, i, &h, body);
    else
      on_hello(a, i, &h, body);
  }
}

static void compact(struct admission *a) {
  int kept = 0;
  for (int i = 0; i < a->count; i++)
    if (a->pending[i].fd >= 0) a->pending[kept++] = a->pending[i];
  a->count = kept;
}

/* The error when ranks are missing at the deadline: who, and what rank 0
 * saw that may explain it. */
static int report_missing(struct admission *a) {
  struct tcp_state *s = a->s;
  char list[512];
  size_t used = 0;
  list[0] = '\0';
  for (int r = 0; r < s->size && used + 16 < sizeof(list); r++)
    if (a->slot_of[r] >= 0 && a->slots[a->slot_of[r]].fd < 0)
      used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", used ? ", " : "", r);
  char extra[NOTE_MAX + 200] = "";
  int code = MORI_ERANK_TIMEOUT;
  if (a->accept_errno) {
    code = a->accept_errno == ENOBUFS || a->accept_errno == ENOMEM ? MORI_ENOMEM : MORI_EMFILE;
    snprintf(extra, sizeof(extra), "; rank 0 could not accept connections: %s",
             a->accept_errno == EMFILE   ? "too many open files (EMFILE): raise the limit (ulimit -n)"
             : a->accept_errno == ENFILE ? "too many open files in the system (ENFILE)"
                                         : "out of memory for sockets");
  } else if (a->note[0]) {
    snprintf(extra, sizeof(extra), "; last dropped: %s", a->note);
  }
  if (a->acceptor >= 0)
    return admission_fail(a, code, "bootstrap: rank(s) %s never opened their link to %s within %d ms%s", list, a->who,
                          s->timeout_ms, extra);
  if (s->local_secret && code == MORI_ERANK_TIMEOUT)
    snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
             " (no secret was given: only ranks on this machine can join; a job across machines needs "
             "MORI_BOOTSTRAP_SECRET on every rank)");
  return mori_tcp_fail_all(s, code, "bootstrap: rank(s) %s never connected to rank 0 at %s within %d ms%s", list,
                           s->address, s->timeout_ms, extra);
}

static bool dials_left(const struct admission *a) {
  for (int j = 0; j < a->ndials; j++)
    if (!mori_tcp_dial_done(&a->dials[j])) return true;
  return false;
}

/* Serves listen_fd until every expected rank is admitted, and steps every
 * dial until it is up, or the deadline (a->deadline, or the timeout from
 * now): one poll over the listener, the connections not admitted yet and
 * the dials' connections. */
static int admit(struct admission *a_in) {
  struct admission a = *a_in;
  struct tcp_state *s = a.s;
  int listen_fd = a.listen_fd;
  a.cap = a.expected > INT_MAX - EXTRA_PENDING ? INT_MAX : a.expected + EXTRA_PENDING; /* no signed overflow */
  if (!a.deadline) a.deadline = mori_net_now_ms() + s->timeout_ms;
  a.pending = mori_bs_calloc((size_t)a.cap, sizeof(*a.pending));
  struct pollfd *fds = mori_bs_calloc((size_t)a.cap + 1 + (size_t)a.ndials, sizeof(*fds));
  int *dial_at = mori_bs_calloc((size_t)a.ndials + 1, sizeof(int)); /* a dial's place in fds, -1: none */
  int dial_rc = 0;
  if (!a.pending || !fds || !dial_at) {
    free(a.pending);
    free(fds);
    free(dial_at);
    return mori_error_set(MORI_ENOMEM, "bootstrap: %s (rank %d of %d) has no memory for serving %d connections (%zu bytes)",
                          a.who, s->rank, s->size, a.cap,
                          (size_t)a.cap * sizeof(*a.pending) + ((size_t)a.cap + 1 + (size_t)a.ndials) * sizeof(*fds) +
                              ((size_t)a.ndials + 1) * sizeof(int));
  }
  int flags = listen_fd >= 0 ? fcntl(listen_fd, F_GETFL) : 0;
  if (listen_fd >= 0 && (flags < 0 || fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) != 0)) {
    free(a.pending);
    free(fds);
    free(dial_at);
    return mori_error_errno("bootstrap: a listening socket");
  }
  while (!dial_rc && (a.admitted < a.expected || dials_left(&a))) {
    int64_t now = mori_net_now_ms(), left = a.deadline - now;
    if (left <= 0) break;
    int nfds = 0, wait_ms = (int)(left < 1000 ? left : 1000);
    /* Once every expected rank is in, the rest waits for the dials alone. */
    bool serving = a.admitted < a.expected, listening = serving && listen_fd >= 0 && now >= a.backoff_until;
    if (listening)
      fds[nfds++] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
    else if (serving && listen_fd >= 0 && a.backoff_until - now < wait_ms)
      wait_ms = (int)(a.backoff_until - now);
    int first = nfds, count = serving ? a.count : 0;
    for (int i = 0; i < count; i++) fds[nfds++] = (struct pollfd){.fd = a.pending[i].fd, .events = POLLIN};
    for (int j = 0; j < a.ndials && !dial_rc; j++) {
      struct tcp_dial *d = &a.dials[j];
      dial_at[j] = -1;
      if (d->state == MORI_DIAL_IDLE && now >= d->retry_at) dial_rc = mori_tcp_dial_step(s, d, 0, now);
      short events = mori_tcp_dial_events(d);
      if (events) {
        dial_at[j] = nfds;
        fds[nfds++] = (struct pollfd){.fd = d->fd, .events = events};
      } else if (d->state == MORI_DIAL_IDLE && d->retry_at - now < wait_ms) {
        wait_ms = d->retry_at - now > 0 ? (int)(d->retry_at - now) : 0;
      }
    }
    if (dial_rc) break;
    int ready = poll(fds, (nfds_t)nfds, wait_ms);
    if (ready < 0 && errno != EINTR) {
      dial_rc = admission_fail(&a, MORI_EIO, "bootstrap: %s: poll failed: %s", a.who, strerror(errno));
      break;
    }
    if (ready <= 0) continue;
    now = mori_net_now_ms();
    for (int i = 0; i < count && a.admitted < a.expected; i++)
      if (fds[first + i].revents) serve(&a, i);
    compact(&a);
    if (listening && fds[0].revents) accept_some(&a);
    for (int j = 0; j < a.ndials && !dial_rc; j++)
      if (dial_at[j] >= 0 && fds[dial_at[j]].revents)
        dial_rc = mori_tcp_dial_step(s, &a.dials[j], fds[dial_at[j]].revents, now);
  }
  for (int i = 0; i < a.count; i++) close(a.pending[i].fd);
  free(a.pending);
  free(fds);
  free(dial_at);
  int rc = 0;
  if (a.verdict[0])
    rc = mori_tcp_fail_all(s, MORI_EMISMATCH, "%s", a.verdict);
  else if (dial_rc)
    rc = dial_rc; /* the error is set */
  else if (a.admitted < a.expected)
    rc = report_missing(&a);
  for (int j = 0; j < a.ndials; j++)
    if (!mori_tcp_dial_done(&a.dials[j])) {
      if (rc)
        mori_tcp_dial_abandon(&a.dials[j]);
      else
        rc = mori_tcp_dial_timeout(s, &a.dials[j]);
    }
  return rc;
}

int mori_tcp_link_up(struct tcp_state *s, int listen_fd, const int *slot_of, struct tcp_peer *slots, int expected,
                     struct tcp_dial *dials, int ndials, int64_t deadline) {
  struct admission a = {.s = s, .acceptor = s->rank, .slot_of = slot_of, .slots = slots, .expected = expected,
                        .listen_fd = listen_fd, .dials = dials, .ndials = ndials, .deadline = deadline};
  snprintf(a.who, sizeof(a.who), "rank %d's link listener", s->rank);
  return admit(&a);
}

int mori_tcp_admit_links(struct tcp_state *s, int listen_fd, const int *slot_of, struct tcp_peer *slots, int expected) {
  return mori_tcp_link_up(s, listen_fd, slot_of, slots, expected, NULL, 0, 0);
}

int mori_tcp_root_start(struct tcp_state *s, int listen_fd) {
  int *slot_of = mori_bs_malloc(sizeof(int) * (size_t)s->size);
  if (!slot_of)
    return mori_error_set(MORI_ENOMEM, "bootstrap: rank 0 of %d has no memory for its table of ranks (%zu bytes)",
                          s->size, sizeof(int) * (size_t)s->size);
  for (int r = 0; r < s->size; r++) slot_of[r] = r ? r : -1;
  struct admission a = {.s = s, .acceptor = -1, .slot_of = slot_of, .slots = s->peers, .expected = s->size - 1,
                        .listen_fd = listen_fd};
  snprintf(a.who, sizeof(a.who), "rank 0 at %s", s->address);
  int rc = admit(&a);
  free(slot_of);
  if (rc) return rc;
  int64_t send_deadline = mori_net_now_ms() + s->timeout_ms;
  for (int r = 1; r < s->size; r++) {
    mori_wire_header_t ready = {.op = MORI_WIRE_READY};
    if (mori_tcp_send_frame(&s->peers[r], &ready, NULL, send_deadline) != 0)
      return mori_tcp_fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: rank %d left during start-up", r);
  }
  return 0;
}

static bool is_loopback(const struct sockaddr_storage *sa) {
  if (sa->ss_family == AF_INET) return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127);
}

int mori_tcp_root_listen(struct tcp_state *s, int *listen_fd) {
  struct sockaddr_storage sa;
  socklen_t len;
  bool numeric;
  int rc = mori_tcp_resolve_address(s->address, &sa, &len, &numeric);
  if (rc) return rc;
  char host[MORI_TCP_HOST_MAX];
  uint16_t port;
  mori_tcp_split_address(s->address, host, sizeof(host), &port);
  /* Exactly the address given. One exception: a machine's own name that
   * resolves to loopback here (Debian's 127.0.1.1 line in /etc/hosts) while
   * the other machines reach it by its real address; then every interface,
   * and the secret keeps strangers out. */
  if (!numeric && is_loopback(&sa) && strcmp(host, "localhost") != 0 && strncmp(host, "localhost.", 10) != 0) {
    MORI_INFO("bootstrap: %s resolves to a loopback address here; rank 0 listens on every interface", s->address);
    if (sa.ss_family == AF_INET)
      ((struct sockaddr_in *)&sa)->sin_addr.s_addr = htonl(INADDR_ANY);
    else
      ((struct sockaddr_in6 *)&sa)->sin6_addr = in6addr_any;
  }
  int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return mori_error_errno("bootstrap: rank 0: socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 1024) != 0) {
    int err = errno;
    close(fd);
    if (err == EADDRINUSE)
      return mori_error_set(MORI_EBUSY,
                            "bootstrap: rank 0 cannot listen at %s: another process holds that address (give the job "
                            "a free port)",
                            s->address);
    if (err == EADDRNOTAVAIL)
      return mori_error_set(MORI_EINVAL, "bootstrap: rank 0 cannot listen at %s: not an address of this machine",
                            s->address);
    return mori_error_set(MORI_EIO, "bootstrap: rank 0 cannot listen at %s: %s", s->address, strerror(err));
  }
  *listen_fd = fd;
  return 0;
}

/* Whom a rank joins: rank 0, under the job key, which a job without a given
 * secret reads only once rank 0 has answered. (The links a rank opens to
 * other ranks are joined the same way, but all at once: dial.c.) */
struct join_target {
  struct tcp_peer *peer; /* receives the authenticated connection */
  const char *address;   /* as given, for messages */
  char who[MORI_TCP_ADDRESS_MAX + 32];
};

/* One attempt to join: connect, HELLO, CHALLENGE checked, AUTH. 1 when the
 * acceptor closed the connection before answering (worth another attempt). */
static int join_once(struct tcp_state *s, const struct join_target *t, const struct sockaddr_storage *sa,
                     socklen_t len, int64_t deadline, char *why, size_t why_len) {
  const char *what = "rank 0";
  int fd = -1;
  int rc = mori_net_connect((const struct sockaddr *)sa, len, deadline, &fd, why, why_len);
  if (rc == MORI_ETIMEDOUT)
    return mori_error_set(MORI_ERANK_TIMEOUT, "bootstrap: rank %d could not reach %s within %d ms (%s)", s->rank,
                          t->who, s->timeout_ms, why);
  if (rc) return mori_error_set(rc, "bootstrap: rank %d cannot connect to %s: %s", s->rank, t->who, why);
  mori_net_tune(fd);
  unsigned uid;
  if (mori_net_other_local_user(fd, &uid)) {
    close(fd);
    return mori_error_set(MORI_EACCES, "bootstrap: %s is held by another user (uid %u) of this machine, not by this job's %s",
                          t->address, uid, what);
  }
  struct tcp_peer *peer = t->peer;
  *peer = (struct tcp_peer){.fd = fd};
  uint8_t nonce_rank[MORI_WIRE_NONCE_BYTES];
  if (getrandom(nonce_rank, sizeof(nonce_rank), 0) != (ssize_t)sizeof(nonce_rank))
    return mori_error_set(MORI_EIO, "bootstrap: rank %d cannot draw a nonce: %s", s->rank, strerror(errno));
  mori_wire_header_t h = {.op = MORI_WIRE_HELLO, .rank = s->rank, .arg = s->size, .bytes = sizeof(nonce_rank)};
  rc = mori_tcp_send_frame(peer, &h, nonce_rank, deadline);
  char detail[160] = "";
  if (!rc) rc = mori_tcp_recv_header(peer, &h, deadline, detail, sizeof(detail));
  if (rc == MORI_ECONNRESET) {
    snprintf(why, why_len, "rank 0 closed the connection before answering");
    return 1;
  }
  if (rc == MORI_ETIMEDOUT)
    return mori_error_set(MORI_ERANK_TIMEOUT, "bootstrap: %s did not answer rank %d within %d ms", t->who, s->rank,
                          s->timeout_ms);
  if (rc) return mori_error_set(MORI_EPROTO, "bootstrap: what answers at %s is not a mori %s: %s", t->address, what, detail);
  if (h.op == MORI_WIRE_REJECT) {
    char text[MORI_WIRE_TEXT_MAX];
    mori_tcp_recv_text(peer, &h, text, sizeof(text), mori_net_now_ms() + 1000);
    return mori_error_set(mori_wire_abort_code(h.arg), "bootstrap: %s refused rank %d: %s", t->who, s->rank, text);
  }
  uint8_t body[MORI_WIRE_NONCE_BYTES + MORI_WIRE_MAC_BYTES];
  if (h.op != MORI_WIRE_CHALLENGE || h.bytes != sizeof(body) ||
      mori_tcp_read_all(peer, body, sizeof(body), deadline) != 0)
    return mori_error_set(MORI_EPROTO, "bootstrap: what answers at %s is not a mori %s (%s frame of %llu bytes)",
                          t->address, what, mori_wire_op_name(h.op), (unsigned long long)h.bytes);
  uint8_t key[MORI_HS_KEY_BYTES];
  if (s->local_secret) {
    /* Read only now: rank 0 publishes it before it answers anyone. */
    uint8_t secret[MORI_SECRET_LOCAL];
    rc = mori_secret_local_read(s->address, secret);
    if (rc) return rc;
    mori_hs_job_key(secret, sizeof(secret), s->key);
    memset(secret, 0, sizeof(secret));
  }
  memcpy(key, s->key, sizeof(key));
  const uint8_t *nonce_root = body;
  uint8_t want[MORI_WIRE_MAC_BYTES];
  mori_hs_proof(key, MORI_HS_ROOT, s->size, s->rank, nonce_rank, nonce_root, want);
  if (!mori_equal_secret(want, body + MORI_WIRE_NONCE_BYTES, sizeof(want))) {
    memset(key, 0, sizeof(key));
    return mori_error_set(MORI_EACCES,
                          "bootstrap: rank 0 at %s does not hold this job's secret: another process may have taken "
                          "the address, or rank 0 was given a different secret (MORI_BOOTSTRAP_SECRET); rank %d refuses "
                          "it",
                          s->address, s->rank);
  }
  uint8_t proof[MORI_WIRE_MAC_BYTES];
  mori_hs_proof(key, MORI_HS_RANK, s->size, s->rank, nonce_rank, nonce_root, proof);
  h = (mori_wire_header_t){.op = MORI_WIRE_AUTH, .rank = s->rank, .arg = s->size, .bytes = sizeof(proof)};
  if (mori_tcp_send_frame(peer, &h, proof, deadline) != 0) {
    memset(key, 0, sizeof(key));
    return mori_error_set(MORI_ERANK_TIMEOUT, "bootstrap: %s dropped rank %d during its start-up", t->who, s->rank);
  }
  mori_hs_session_keys(key, s->size, s->rank, nonce_rank, nonce_root, peer->key_tx, peer->key_rx);
  peer->keyed = true;
  memset(key, 0, sizeof(key));
  return 0;
}

/* Joins t until the deadline, trying again while the acceptor drops the
 * connection before answering (a flooded acceptor drops its oldest). */
static int join(struct tcp_state *s, const struct join_target *t, const struct sockaddr_storage *sa, socklen_t len,
                int64_t deadline) {
  char why[200] = "";
  for (;;) {
    int rc = join_once(s, t, sa, len, deadline, why, sizeof(why));
    if (rc != 1) return rc;
    close(t->peer->fd);
    t->peer->fd = -1;
    int64_t left = deadline - mori_net_now_ms();
    if (left <= 0)
      return mori_error_set(MORI_ERANK_TIMEOUT, "bootstrap: rank %d could not join %s within %d ms (%s)", s->rank,
                            t->who, s->timeout_ms, why);
    struct timespec pause = {0, (left < 20 ? left : 20) * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
}

int mori_tcp_join_link(struct tcp_state *s, int acceptor, const struct sockaddr_storage *sa, socklen_t len,
                       const char *address, struct tcp_peer *peer, int64_t deadline) {
  struct tcp_dial d;
  mori_tcp_dial_init(&d, acceptor, sa, len, address, peer);
  return mori_tcp_link_up(s, -1, NULL, NULL, 0, &d, 1, deadline);
}

int mori_tcp_rank_start(struct tcp_state *s) {
  struct sockaddr_storage sa;
  socklen_t len;
  bool numeric;
  int rc = mori_tcp_resolve_address(s->address, &sa, &len, &numeric);
  if (rc) return rc;
  int64_t deadline = mori_net_now_ms() + s->timeout_ms;
  struct join_target t = {.peer = &s->peers[0], .address = s->address};
  snprintf(t.who, sizeof(t.who), "rank 0 at %s", s->address);
  rc = join(s, &t, &sa, len, deadline);
  if (rc) return rc;
  struct tcp_peer *root = &s->peers[0];
  mori_wire_header_t h;
  char detail[160] = "";
  rc = mori_tcp_recv_header(root, &h, deadline + MORI_TCP_GRACE_MS, detail, sizeof(detail));
  if (rc == MORI_EPROTO && root->forged)
    return mori_error_set(MORI_EPROTO, "bootstrap: a frame from rank 0 at %s failed its MAC during start-up (altered on "
                          "the way)", s->address);
  if (rc == MORI_EPROTO) return mori_error_set(MORI_EPROTO, "bootstrap: rank 0 at %s: %s", s->address, detail);
  if (rc)
    return mori_error_set(MORI_ERANK_TIMEOUT, "bootstrap: rank 0 at %s did not confirm rank %d's start-up (%s)",
                          s->address, s->rank,
                          rc == MORI_ETIMEDOUT ? "timed out" : "connection closed; see rank 0's error");
  if (h.op == MORI_WIRE_ABORT) {
    char text[MORI_WIRE_TEXT_MAX];
    if (mori_tcp_recv_text(root, &h, text, sizeof(text), mori_net_now_ms() + 1000) == MORI_EPROTO)
      return mori_error_set(MORI_EPROTO, "bootstrap: a frame from rank 0 at %s (an ABORT) failed its MAC (altered on "
                            "the way)", s->address);
    return mori_error_set(mori_wire_abort_code(h.arg), "%s (reported by rank 0)", text);
  }
  if (h.op != MORI_WIRE_READY || h.bytes != 0)
    return mori_error_set(MORI_EPROTO, "bootstrap: rank 0 at %s: unexpected start-up reply (%s of %llu bytes)",
                          s->address, mori_wire_op_name(h.op), (unsigned long long)h.bytes);
  rc = mori_tcp_recv_end(root, mori_net_now_ms() + 1000);
  if (rc == MORI_EPROTO)
    return mori_error_set(MORI_EPROTO, "bootstrap: a frame from rank 0 at %s (READY) failed its MAC (altered on the "
                          "way)", s->address);
  if (rc)
    return mori_error_set(MORI_ERANK_TIMEOUT, "bootstrap: rank 0 at %s: its READY broke off (%s)", s->address,
                          rc == MORI_ETIMEDOUT ? "timed out" : "connection closed; see rank 0's error");
  return 0;
}
