// SPDX-License-Identifier: MIT
/* The rounds through rank 0 that open every collective of the TCP
 * bootstrap (tcp.c) and that the links' set-up and exchanges use too
 * (links.c, exchange.c): rank 0 gathers each rank's arrival (or data) and
 * replies; a leaf sends its part and takes the reply; a broken connection
 * becomes the bootstrap's one verdict, which every later call repeats. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "core/bootstrap/internal/alloc.h"
#include "core/bootstrap/internal/net.h"
#include "core/bootstrap/internal/secret.h"
#include "core/bootstrap/internal/tcp.h"
#include "mori/bootstrap.h"

static void list_ranks(char *out, size_t len, const int *ranks, int n) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < n && used + 16 < len; i++)
    used += (size_t)snprintf(out + used, len - used, "%s%d", i ? ", " : "", ranks[i]);
}

/* A frame from rank r failed its MAC (rank 0 tells every rank). */
static int forged_from(struct tcp_state *s, int r) {
  return mori_tcp_fail_all(s, MORI_EPROTO, "bootstrap: a frame from rank %d failed its MAC at step %llu (altered on the way)",
                           r, (unsigned long long)s->seq);
}

/* Reads rank r's message of this round; 0 when done, 1 when it timed out
 * mid-way (reported with the missing ranks), else the failure. */
static int root_receive(struct tcp_state *s, int r, uint32_t op, int arg, size_t bytes, char *gathered,
                        int64_t deadline) {
  struct tcp_peer *p = &s->peers[r];
  mori_wire_header_t h;
  char why[160] = "";
  int e = mori_tcp_recv_header(p, &h, deadline, why, sizeof(why));
  if (e == MORI_ECONNRESET) {
    close(p->fd);
    p->fd = -1;
    return mori_tcp_fail_all(s, MORI_ERANK_TIMEOUT,
                             "bootstrap: rank %d closed its connection (exited or crashed) during step %llu", r,
                             (unsigned long long)s->seq);
  }
  if (e == MORI_EPROTO && p->forged) return forged_from(s, r);
  if (e == MORI_EPROTO)
    return mori_tcp_fail_all(s, MORI_EPROTO, "bootstrap: rank %d sent a malformed frame at step %llu: %s", r,
                             (unsigned long long)s->seq, why);
  if (e) return 1;
  if (h.op == MORI_WIRE_ABORT && h.rank == r) {
    /* The rank failed on its own (its links, its part of an exchange). */
    char text[MORI_WIRE_TEXT_MAX];
    e = mori_tcp_recv_text(p, &h, text, sizeof(text), deadline);
    if (e == MORI_EPROTO) return forged_from(s, r);
    if (e) return mori_tcp_fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: rank %d's ABORT broke off", r);
    return mori_tcp_fail_all(s, mori_wire_abort_code(h.arg), "%s (reported by rank %d)", text, r);
  }
  /* The header passed its MAC: a header other than the one due is the
   * rank's own, a real disagreement. */
  /* An allgather's size decides whether it goes through rank 0 (tcp.c):
   * a rank of another size may have chosen the other way. */
  bool allgathers = (h.op == MORI_WIRE_ALLGATHER || h.op == MORI_WIRE_ALLGATHER_VIA_ROOT) &&
                    (op == MORI_WIRE_ALLGATHER || op == MORI_WIRE_ALLGATHER_VIA_ROOT);
  if (h.seq == s->seq && allgathers && h.op != op && h.rank == r)
    return mori_tcp_fail_all(s, MORI_EMISMATCH, "bootstrap: rank %d contributes %llu bytes, rank 0 %zu bytes (step %llu)",
                             r, (unsigned long long)h.bytes, bytes, (unsigned long long)s->seq);
  if (h.seq != s->seq || h.op != op || h.arg != arg || h.rank != r)
    return mori_tcp_fail_all(s, MORI_EMISMATCH,
                             "bootstrap: rank %d is at step %llu op %s (arg %d) while rank 0 is at step %llu op %s (arg %d)",
                             r, (unsigned long long)h.seq, mori_wire_op_name(h.op), h.arg, (unsigned long long)s->seq,
                             mori_wire_op_name(op), arg);
  if (h.bytes != bytes)
    return mori_tcp_fail_all(s, MORI_EMISMATCH, "bootstrap: rank %d contributes %llu bytes, rank 0 %zu bytes (step %llu)",
                             r, (unsigned long long)h.bytes, bytes, (unsigned long long)s->seq);
  size_t payload = (size_t)mori_wire_payload_bytes(&h);
  /* A broadcast's data (the root's alone) goes to the one buffer. */
  char *dst = op == MORI_WIRE_BCAST_VIA_ROOT ? gathered : gathered + (size_t)r * bytes;
  if (payload && mori_tcp_recv_payload(p, dst, payload, deadline) != 0)
    return mori_tcp_fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: rank %d's message broke off", r);
  e = mori_tcp_recv_end(p, deadline);
  if (e == MORI_EPROTO) return forged_from(s, r);
  if (e) return mori_tcp_fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: rank %d's message broke off", r);
  return 0;
}

int mori_tcp_root_gather(struct tcp_state *s, uint32_t op, int arg, const void *mine, size_t bytes, void *gathered_) {
  char *gathered = gathered_;
  int n = s->size;
  int64_t deadline = mori_net_now_ms() + s->timeout_ms;
  char *done = mori_bs_calloc((size_t)n, 1);
  int *missing = mori_bs_calloc((size_t)n, sizeof(int));
  struct pollfd *fds = mori_bs_calloc((size_t)n, sizeof(*fds));
  int *fd_rank = mori_bs_calloc((size_t)n, sizeof(int));
  if (!done || !missing || !fds || !fd_rank) {
    free(done);
    free(missing);
    free(fds);
    free(fd_rank);
    return mori_tcp_fail_all(s, MORI_ENOMEM, "bootstrap: rank 0 of %d has no memory for collecting step %llu (%zu bytes)",
                             n, (unsigned long long)s->seq, (size_t)n * (1 + 2 * sizeof(int) + sizeof(*fds)));
  }
  int rc = 0, pending = n - 1;
  if (bytes && mine && gathered) memmove(gathered, mine, bytes); /* in place: mine may be inside gathered */
  done[0] = 1;
  while (pending > 0 && !rc) {
    int count = 0, ahead = 0;
    for (int r = 1; r < n; r++)
      if (!done[r]) {
        fd_rank[count] = r;
        fds[count++] = (struct pollfd){.fd = s->peers[r].fd, .events = POLLIN};
        if (mori_tcp_read_ahead(&s->peers[r])) ahead++;
      }
    int64_t left = deadline - mori_net_now_ms();
    if (left <= 0) break;
    /* What a connection has read ahead is ready whatever poll says. */
    int ready = poll(fds, (nfds_t)count, ahead ? 0 : (int)(left > 500 ? 500 : left));
    if (ready < 0 && errno != EINTR) {
      rc = mori_tcp_fail_all(s, MORI_EIO, "bootstrap: poll failed: %s", strerror(errno));
      break;
    }
    for (int i = 0; i < count && ahead; i++)
      if (mori_tcp_read_ahead(&s->peers[fd_rank[i]])) {
        if (!fds[i].revents) ready = ready > 0 ? ready + 1 : 1;
        fds[i].revents |= POLLIN;
      }
    for (int i = 0; i < count && ready > 0 && !rc; i++) {
      if (!fds[i].revents) continue;
      int e = root_receive(s, fd_rank[i], op, arg, bytes, gathered, deadline);
      if (e == 1) break; /* timed out mid-message: reported below */
      if (e) rc = e;
      else {
        done[fd_rank[i]] = 1;
        pending--;
      }
    }
  }
  if (!rc && pending > 0) {
    int count = 0;
    for (int r = 1; r < n; r++)
      if (!done[r]) missing[count++] = r;
    char list[512];
    list_ranks(list, sizeof(list), missing, count);
    rc = mori_tcp_fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: rank(s) %s did not arrive at step %llu within %d ms", list,
                           (unsigned long long)s->seq, s->timeout_ms);
  }
  free(fds);
  free(fd_rank);
  free(done);
  free(missing);
  return rc;
}

int mori_tcp_root_reply(struct tcp_state *s, const void *results, size_t bytes, bool each) {
  int64_t deadline = mori_net_now_ms() + s->timeout_ms;
  mori_wire_header_t h = {.op = MORI_WIRE_RESULT, .seq = s->seq, .bytes = bytes};
  /* The same result for every rank: its hash is taken once, and each
   * rank's frame MAC is over a few dozen bytes (the hashing of a result of
   * a few hundred ranks' records was rank 0's largest cost of a step). */
  uint8_t digest[MORI_SHA256_BYTES];
  if (!each) mori_hs_payload_digest(results, bytes, digest);
  for (int r = 1; r < s->size; r++) {
    const char *result = each ? (const char *)results + (size_t)r * bytes : results;
    if (mori_tcp_send_frame_hashed(&s->peers[r], &h, result, each ? NULL : digest, deadline) != 0)
      return mori_tcp_fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: could not send the result of step %llu to rank %d",
                               (unsigned long long)s->seq, r);
  }
  return 0;
}

int mori_tcp_broken(struct tcp_state *s, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->broken, sizeof(s->broken), fmt, ap);
  va_end(ap);
  return mori_error_set(code, "%s", s->broken);
}

static int forged_from_root(struct tcp_state *s) {
  return mori_tcp_broken(s, MORI_EPROTO, "bootstrap: a frame from rank 0 failed its MAC at step %llu (altered on the way)",
                         (unsigned long long)s->seq);
}

/* Rank 0's ABORT, whose header was read. */
static int leaf_aborted(struct tcp_state *s, const mori_wire_header_t *h) {
  char text[MORI_WIRE_TEXT_MAX];
  if (mori_tcp_recv_text(&s->peers[0], h, text, sizeof(text), mori_net_now_ms() + 1000) == MORI_EPROTO)
    return forged_from_root(s);
  int code = mori_wire_abort_code(h->arg);
  if (code != h->arg)
    return mori_tcp_broken(s, code, "%s (reported by rank 0, whose code %d is not a mori error)", text, h->arg);
  return mori_tcp_broken(s, code, "%s (reported by rank 0)", text);
}

/* A non-root rank's half: send, then wait for rank 0's result or verdict. */
int mori_tcp_leaf_round(struct tcp_state *s, uint32_t op, int arg, const void *mine, size_t bytes, void *result,
                      size_t result_bytes) {
  struct tcp_peer *root = &s->peers[0];
  int64_t deadline = mori_net_now_ms() + s->timeout_ms;
  mori_wire_header_t h = {.op = op, .rank = s->rank, .arg = arg, .seq = s->seq, .bytes = bytes};
  char why[160] = "";
  int rc = mori_tcp_send_frame(root, &h, mine, deadline);
  if (rc) {
    /* Rank 0 may have given up on this step already and said why. */
    if (mori_tcp_recv_header(root, &h, mori_net_now_ms() + 200, why, sizeof(why)) == 0 && h.op == MORI_WIRE_ABORT)
      return leaf_aborted(s, &h);
    return mori_tcp_broken(s, MORI_ERANK_TIMEOUT, "bootstrap: rank 0 (%s) is gone: sending step %llu failed", s->address,
                       (unsigned long long)s->seq);
  }
  rc = mori_tcp_recv_header(root, &h, deadline + MORI_TCP_GRACE_MS, why, sizeof(why));
  if (rc == MORI_EPROTO && root->forged) return forged_from_root(s);
  if (rc == MORI_EPROTO)
    return mori_tcp_broken(s, MORI_EPROTO, "bootstrap: rank 0 (%s) sent a malformed frame at step %llu: %s", s->address,
                       (unsigned long long)s->seq, why);
  if (rc)
    return mori_tcp_broken(s, MORI_ERANK_TIMEOUT, "bootstrap: rank 0 (%s) %s at step %llu (waited up to %lld ms)", s->address,
                       rc == MORI_ETIMEDOUT ? "did not answer" : "closed its connection", (unsigned long long)s->seq,
                       (long long)s->timeout_ms + MORI_TCP_GRACE_MS); /* 64-bit: the timeout may be INT_MAX */
  if (h.op == MORI_WIRE_ABORT) return leaf_aborted(s, &h);
  if (h.op != MORI_WIRE_RESULT || h.seq != s->seq || h.bytes != result_bytes)
    return mori_tcp_broken(s, MORI_EPROTO, "bootstrap: unexpected reply from rank 0 at step %llu (%s of %llu bytes)",
                       (unsigned long long)s->seq, mori_wire_op_name(h.op), (unsigned long long)h.bytes);
  if (result_bytes && mori_tcp_recv_payload(root, result, result_bytes, deadline + MORI_TCP_GRACE_MS) != 0)
    return mori_tcp_broken(s, MORI_ERANK_TIMEOUT, "bootstrap: rank 0's result of step %llu broke off",
                       (unsigned long long)s->seq);
  rc = mori_tcp_recv_end(root, deadline + MORI_TCP_GRACE_MS);
  if (rc == MORI_EPROTO) return forged_from_root(s);
  if (rc)
    return mori_tcp_broken(s, MORI_ERANK_TIMEOUT, "bootstrap: rank 0's result of step %llu broke off",
                       (unsigned long long)s->seq);
  return 0;
}

