// SPDX-License-Identifier: MIT
/* The data of a collective, over the links between ranks (links.c), once
 * every rank has arrived (tcp.c):
 *
 * - allgather (Bruck): in round k, with d = 2^k, rank r sends the blocks it
 *   holds (its own and those of ranks r+1 .. r+d-1, at most size - d of
 *   them) to rank r - d and receives as many from rank r + d. After
 *   ceil(log2(size)) rounds each rank holds every block, and each has sent
 *   and received (size - 1) blocks: no rank carries more than its share.
 * - bcast (binomial tree from the root): in round k the ranks that hold the
 *   data (the root and those d - 1 after it) send it d ranks on.
 *
 * A round sends and receives at once (a rank never waits for its send to
 * drain before reading, so no ring of full socket buffers can stall). Round
 * k's wait ends a step (MORI_TCP_ROUND_GRACE_MS at most) later than round
 * k-1's, and the last round's before the timeout: a rank that waits on a
 * stalled rank waits in a later round than the one the stalled rank waits
 * in, so the rank next to the culprit times out first and its ABORT, naming
 * it, reaches the others before their own timeouts, and rank 0 before its
 * wait for the next step ends. A failure is told on every link and to rank
 * 0, which names it at the next step; a rank whose link breaks reads the
 * ABORT the other end may have left on it before blaming that end. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/bootstrap/internal/alloc.h"
#include "core/bootstrap/internal/net.h"
#include "core/bootstrap/internal/tcp.h"

/* A frame going out on one link, its parts sent together as the socket
 * takes them. */
struct outgoing {
  struct tcp_peer *p;
  struct tcp_outgoing f;
};

/* A DATA frame (or an ABORT instead) coming in on one link: the sealed
 * header, then the payload, then the frame's MAC. */
struct incoming {
  struct tcp_peer *p;
  int from; /* the rank at its other end */
  uint8_t head[MORI_WIRE_SEALED_HEADER_BYTES], mac[MORI_WIRE_MAC_BYTES];
  uint8_t text[MORI_WIRE_TEXT_MAX];
  mori_wire_header_t h;
  uint8_t *dst; /* where a DATA frame's payload goes; then the frame's */
  size_t want, bytes, done;
};

static void out_start(struct outgoing *o, struct tcp_peer *p, const mori_wire_header_t *h, const void *payload) {
  o->p = p;
  mori_tcp_seal(p, h, payload, &o->f);
}

static bool out_finished(const struct outgoing *o) { return !o->p || mori_tcp_out_finished(&o->f); }

/* Sends what the socket takes now: 0, or MORI_ECONNRESET. */
static int out_progress(struct outgoing *o) { return mori_tcp_out_progress(&o->f); }

static void in_start(struct incoming *in, struct tcp_peer *p, int from, void *dst, size_t want) {
  memset(in, 0, sizeof(*in));
  in->p = p;
  in->from = from;
  in->dst = dst;
  in->want = want;
}

static bool in_finished(const struct incoming *in) {
  return !in->p || (in->done && in->done == sizeof(in->head) + in->bytes + sizeof(in->mac));
}

/* Reads what has arrived (what the link read ahead, then one read):
 * 0 (more to come, or finished), MORI_ECONNRESET, or MORI_EPROTO with why
 * (and in->p->forged when a MAC failed). The header's MAC is checked as
 * soon as the header is in, before any of its fields is used. */
static int in_progress(struct incoming *in, const struct tcp_state *s, int round, char *why, size_t why_len) {
  size_t hb = sizeof(in->head);
  while (!in_finished(in)) {
    uint8_t *to;
    size_t len;
    if (in->done < hb) {
      to = in->head + in->done;
      len = hb - in->done;
    } else if (in->done < hb + in->bytes) {
      to = in->dst + (in->done - hb);
      len = hb + in->bytes - in->done;
    } else {
      to = in->mac + (in->done - hb - in->bytes);
      len = hb + in->bytes + sizeof(in->mac) - in->done;
    }
    long n = mori_tcp_read_some(in->p, to, len);
    if (n == 0) return 0;
    if (n < 0) return MORI_ECONNRESET;
    in->done += (size_t)n;
    if (in->done == hb) {
      if (!mori_hs_header_authentic(in->p->key_rx, in->p->received, in->head)) {
        in->p->forged = true;
        snprintf(why, why_len, "its frame failed its MAC (altered on the way)");
        return MORI_EPROTO;
      }
      int rc = mori_wire_decode(in->head, &in->h, why, why_len);
      if (rc) return rc;
      if (in->h.op == MORI_WIRE_ABORT) { /* bounded by the decoder */
        in->dst = in->text;
        in->bytes = (size_t)in->h.bytes;
      } else if (in->h.op != MORI_WIRE_DATA || in->h.rank != in->from || in->h.seq != s->seq || in->h.arg != round ||
                 in->h.bytes != in->want) {
        /* The sender's own header (its MAC passed): a real disagreement. */
        snprintf(why, why_len, "%s frame of rank %d, step %llu, round %d, %llu bytes where DATA of rank %d, step %llu, "
                 "round %d, %zu bytes was due", mori_wire_op_name(in->h.op), in->h.rank,
                 (unsigned long long)in->h.seq, in->h.arg, (unsigned long long)in->h.bytes, in->from,
                 (unsigned long long)s->seq, round, in->want);
        return MORI_EPROTO;
      } else {
        in->bytes = in->want;
      }
    }
  }
  uint8_t want[MORI_WIRE_MAC_BYTES], digest[MORI_SHA256_BYTES];
  mori_hs_payload_digest(in->dst, in->bytes, digest);
  mori_hs_frame_mac(in->p->key_rx, in->p->received++, in->head, digest, want);
  if (!mori_equal_secret(want, in->mac, sizeof(want))) {
    in->p->forged = true;
    snprintf(why, why_len, "its frame failed its MAC (altered on the way)");
    return MORI_EPROTO;
  }
  return 0;
}

/* This rank failed in an exchange: the reason is kept and told on every
 * link (so that ranks waiting on this one hear it, not a timeout) and to
 * rank 0 (which names it to every rank at the next step). */
static int exchange_failed(struct tcp_state *s, int code, const char *text) {
  int64_t deadline = mori_net_now_ms() + 100;
  char msg[MORI_WIRE_TEXT_MAX];
  snprintf(msg, sizeof(msg), "%s", text);
  mori_wire_header_t h = {.op = MORI_WIRE_ABORT, .rank = s->rank, .arg = code, .seq = s->seq, .bytes = strlen(msg) + 1};
  for (int k = 0; k < s->rounds; k++) {
    if (s->link_out[k].fd >= 0) mori_tcp_send_frame(&s->link_out[k], &h, msg, deadline);
    if (s->link_in[k].fd >= 0) mori_tcp_send_frame(&s->link_in[k], &h, msg, deadline);
  }
  if (s->rank == 0) return mori_tcp_fail_all(s, code, "%s", msg);
  mori_tcp_send_frame(&s->peers[0], &h, msg, mori_net_now_ms() + 1000);
  return mori_tcp_broken(s, code, "%s", msg);
}

/* A link to `rank` broke (the send failed, or it closed mid-way): if that
 * rank failed first, it sent an ABORT on every link before it closed them,
 * and the ABORT may still wait unread on this one (the kernel keeps what was
 * received after the connection is reset). Then that is the failure to
 * report, not the closed link: a rank that failed for another's sake and
 * then left is not named as the culprit. */
static bool pending_abort(struct tcp_state *s, struct tcp_peer *p, int rank, char *text, size_t len, int *code) {
  (void)s;
  mori_wire_header_t h;
  char why[160];
  /* Only what arrives at once (a closed connection's last bytes are all
   * there); the header's MAC is checked before its op is believed. */
  if (!p || p->fd < 0 || mori_tcp_recv_header(p, &h, mori_net_now_ms() + 100, why, sizeof(why)) != 0 ||
      h.op != MORI_WIRE_ABORT || h.rank != rank)
    return false;
  char peer_text[MORI_WIRE_TEXT_MAX];
  if (mori_tcp_recv_text(p, &h, peer_text, sizeof(peer_text), mori_net_now_ms() + 100) != 0) return false;
  *code = mori_wire_abort_code(h.arg);
  snprintf(text, len, "%s (reported by rank %d)", peer_text, rank);
  return true;
}

/* One round: sends `out` (if any) while receiving `in` (if any), until both
 * are done or the deadline. */
static int transfer(struct tcp_state *s, int round, struct outgoing *out, struct incoming *in, int to,
                    int64_t deadline) {
  char why[320] = "", text[MORI_TCP_ERROR_MAX];
  int rc = 0;
  while (!rc && (!out_finished(out) || !in_finished(in))) {
    struct pollfd fds[2];
    int nfds = 0, oi = -1, ii = -1;
    if (!out_finished(out)) {
      oi = nfds;
      fds[nfds++] = (struct pollfd){.fd = out->p->fd, .events = POLLOUT};
    }
    if (!in_finished(in)) {
      ii = nfds;
      fds[nfds++] = (struct pollfd){.fd = in->p->fd, .events = POLLIN};
    }
    int64_t left = deadline - mori_net_now_ms();
    if (left <= 0) break;
    /* What the link read ahead is there whatever poll says. */
    bool ahead = ii >= 0 && mori_tcp_read_ahead(in->p) > 0;
    int ready = poll(fds, (nfds_t)nfds, ahead ? 0 : (int)(left > 1000 ? 1000 : left));
    if (ready < 0 && errno != EINTR) {
      snprintf(text, sizeof(text), "bootstrap: rank %d: poll failed in step %llu: %s", s->rank,
               (unsigned long long)s->seq, strerror(errno));
      return exchange_failed(s, MORI_EIO, text);
    }
    if (ahead) {
      fds[ii].revents |= POLLIN;
      if (ready <= 0) ready = 1;
    }
    if (ready <= 0) continue;
    if (oi >= 0 && fds[oi].revents && out_progress(out) != 0) {
      int code = MORI_ERANK_TIMEOUT;
      if (!pending_abort(s, out->p, to, text, sizeof(text), &code))
        snprintf(text, sizeof(text), "bootstrap: rank %d closed its link (exited or crashed) during step %llu", to,
                 (unsigned long long)s->seq);
      return exchange_failed(s, code, text);
    }
    if (ii >= 0 && fds[ii].revents) rc = in_progress(in, s, round, why, sizeof(why));
  }
  if (rc == MORI_ECONNRESET) {
    int code = MORI_ERANK_TIMEOUT;
    if (in->done != 0 || !pending_abort(s, in->p, in->from, text, sizeof(text), &code))
      snprintf(text, sizeof(text), "bootstrap: rank %d closed its link (exited or crashed) during step %llu",
               in->from, (unsigned long long)s->seq);
    return exchange_failed(s, code, text);
  }
  if (rc == MORI_EPROTO && in->p->forged) {
    snprintf(text, sizeof(text), "bootstrap: a frame from rank %d failed its MAC at step %llu (altered on the way)",
             in->from, (unsigned long long)s->seq);
    return exchange_failed(s, MORI_EPROTO, text);
  }
  if (rc == MORI_EPROTO) {
    snprintf(text, sizeof(text), "bootstrap: rank %d sent a malformed frame at step %llu: %s", in->from,
             (unsigned long long)s->seq, why);
    return exchange_failed(s, MORI_EPROTO, text);
  }
  if (in_finished(in) && in->p && in->h.op == MORI_WIRE_ABORT) {
    char peer_text[MORI_WIRE_TEXT_MAX];
    mori_wire_text(in->text, in->bytes, peer_text, sizeof(peer_text));
    int code = mori_wire_abort_code(in->h.arg);
    snprintf(text, sizeof(text), "%s (reported by rank %d)", peer_text, in->from);
    return exchange_failed(s, code, text);
  }
  if (!in_finished(in)) {
    snprintf(text, sizeof(text), "bootstrap: rank %d did not send its part of step %llu (round %d) to rank %d within %d ms",
             in->from, (unsigned long long)s->seq, round, s->rank, s->timeout_ms);
    return exchange_failed(s, MORI_ERANK_TIMEOUT, text);
  }
  if (!out_finished(out)) {
    snprintf(text, sizeof(text), "bootstrap: rank %d did not take its part of step %llu (round %d) within %d ms", to,
             (unsigned long long)s->seq, round, s->timeout_ms);
    return exchange_failed(s, MORI_ERANK_TIMEOUT, text);
  }
  return 0;
}

static int test_leave_round = -1, test_leave_stall_ms;

void mori_tcp_test_leave_before_round(int round, int stall_ms) {
  test_leave_round = round;
  test_leave_stall_ms = stall_ms;
}

static void test_leave(int round) {
  if (round != test_leave_round) return;
  if (test_leave_stall_ms > 0) {
    struct timespec pause = {test_leave_stall_ms / 1000, (long)(test_leave_stall_ms % 1000) * 1000000};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
  }
  _exit(0);
}

/* Round k's wait ends one step later than round k-1's, and the last
 * round's one step before the timeout: an exchange never outlasts the
 * timeout, so a rank stuck in it (waiting on a culprit) has timed out and
 * told rank 0 why before rank 0's own wait for the next step ends; rank 0
 * then names the culprit, not every rank still waiting on it. The step is
 * MORI_TCP_ROUND_GRACE_MS, or less when the timeout is short (round 0 keeps
 * at least half the timeout). */
static int64_t round_deadline(const struct tcp_state *s, int64_t start, int round) {
  int64_t step = (int64_t)s->timeout_ms / (2 * (s->rounds + 1));
  if (step > MORI_TCP_ROUND_GRACE_MS) step = MORI_TCP_ROUND_GRACE_MS;
  return start + s->timeout_ms - (int64_t)(s->rounds - round) * step;
}

int mori_tcp_exchange_allgather(struct tcp_state *s, const void *send, void *recv, size_t bytes) {
  int n = s->size;
  if (bytes == 0) return 0;
  if (n == 1) {
    memmove(recv, send, bytes);
    return 0;
  }
  /* blocks[j] is rank (rank + j) % n's contribution. */
  uint8_t *blocks = mori_bs_malloc((size_t)n * bytes);
  if (!blocks) {
    char text[200];
    snprintf(text, sizeof(text),
             "bootstrap: rank %d of %d has no memory for step %llu, an allgather of %zu bytes per rank (%zu bytes)",
             s->rank, n, (unsigned long long)s->seq, bytes, (size_t)n * bytes);
    return exchange_failed(s, MORI_ENOMEM, text);
  }
  memcpy(blocks, send, bytes);
  int64_t start = mori_net_now_ms();
  int rc = 0;
  for (int k = 0; k < s->rounds && !rc; k++) {
    int d = 1 << k, count = d < n - d ? d : n - d;
    int to = ((s->rank - d) % n + n) % n, from = (s->rank + d) % n;
    mori_wire_header_t h = {.op = MORI_WIRE_DATA, .rank = s->rank, .arg = k, .seq = s->seq,
                            .bytes = (uint64_t)count * bytes};
    struct outgoing out;
    struct incoming in;
    test_leave(k);
    out_start(&out, &s->link_in[k], &h, blocks);
    in_start(&in, &s->link_out[k], from, blocks + (size_t)d * bytes, (size_t)count * bytes);
    rc = transfer(s, k, &out, &in, to, round_deadline(s, start, k));
  }
  for (int j = 0; j < n && !rc; j++)
    memcpy((uint8_t *)recv + (size_t)((s->rank + j) % n) * bytes, blocks + (size_t)j * bytes, bytes);
  free(blocks);
  return rc;
}

int mori_tcp_exchange_bcast(struct tcp_state *s, void *buf, size_t bytes, int root) {
  int n = s->size, v = ((s->rank - root) % n + n) % n; /* this rank's place counted from the root */
  if (bytes == 0 || n == 1) return 0;
  int64_t start = mori_net_now_ms();
  for (int k = 0; k < s->rounds; k++) {
    int d = 1 << k;
    mori_wire_header_t h = {.op = MORI_WIRE_DATA, .rank = s->rank, .arg = k, .seq = s->seq, .bytes = bytes};
    struct outgoing out = {0};
    struct incoming in = {0};
    int to = (s->rank + d) % n;
    if (v < d && v + d < n)
      out_start(&out, &s->link_out[k], &h, buf);
    else if (v >= d && v < 2 * d)
      in_start(&in, &s->link_in[k], ((s->rank - d) % n + n) % n, buf, bytes);
    else
      continue;
    int rc = transfer(s, k, &out, &in, to, round_deadline(s, start, k));
    if (rc) return rc;
  }
  return 0;
}
