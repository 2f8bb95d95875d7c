// SPDX-License-Identifier: MIT
/* TCP bootstrap: every collective starts with one round through rank 0.
 * Each rank tells rank 0 it has arrived ({op, seq, contribution size}, no
 * data); rank 0 checks that all agree and answers once all have. Rank 0
 * therefore knows who is missing when a step times out and tells every other
 * rank, so all of them fail with the missing ranks named. The data then
 * travels between the ranks over their links (links.c, exchange.c), so that
 * rank 0 handles O(size) small frames per step, not size copies of the
 * gathered result -- except where those copies are small (at most
 * MORI_TCP_VIA_ROOT_MAX bytes in all): then the data rides in the arrival
 * round itself, two frames per rank, and the links are not needed. The
 * links are opened by the first collective that needs them, so a job whose
 * collectives are all small (a one-node start-up of a few hundred ranks)
 * never opens them. After a failure the bootstrap is broken and every later
 * call fails with the same message.
 *
 * Only ranks that hold the job's secret are admitted, and every frame after
 * start-up carries a MAC (startup.c, handshake.h, frame.c). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/bootstrap/internal/alloc.h"
#include "core/bootstrap/internal/net.h"
#include "core/bootstrap/internal/secret.h"
#include "core/bootstrap/internal/tcp.h"
#include "mori/bootstrap.h"

static int round_start(struct tcp_state *s) {
  if (s->broken[0]) return mori_error_set(MORI_ECANCELED, "bootstrap is broken by an earlier failure: %s", s->broken);
  s->seq++;
  return 0;
}

/* Every rank's arrival at this step, agreed through rank 0. */
static int arrive(struct tcp_state *s, uint32_t op, int arg, size_t bytes) {
  if (s->rank != 0) return mori_tcp_leaf_round(s, op, arg, NULL, bytes, NULL, 0);
  int rc = mori_tcp_root_gather(s, op, arg, NULL, bytes, NULL);
  return rc ? rc : mori_tcp_root_reply(s, NULL, 0, false);
}

static size_t via_root_max = MORI_TCP_VIA_ROOT_MAX;

void mori_tcp_test_via_root_max(size_t bytes) { via_root_max = bytes; }

/* Whether a collective of this result goes through rank 0 in its arrival
 * round: two frames per rank instead of an arrival and then 2 *
 * ceil(log2 size) over the links, as long as what rank 0 sends, (size - 1)
 * copies of the result, stays small. Every rank decides alike: the sizes
 * are the caller's, the same on every rank (rank 0 names one that differs). */
static bool via_root(const struct tcp_state *s, size_t result_bytes) {
  return result_bytes <= via_root_max / (size_t)(s->size > 1 ? s->size - 1 : 1);
}

/* The links, opened by the first collective that needs them (every rank is
 * in the same one: the decision above is alike everywhere). */
static int links(struct tcp_state *s) {
  if (s->links_up) return 0;
  int rc = mori_tcp_links_start(s);
  if (!rc) s->links_up = true;
  return rc;
}

static int allgather_via_root(struct tcp_state *s, const void *send, void *recv, size_t bytes) {
  size_t all = (size_t)s->size * bytes;
  if (s->rank != 0) return mori_tcp_leaf_round(s, MORI_WIRE_ALLGATHER_VIA_ROOT, 0, send, bytes, recv, all);
  int rc = mori_tcp_root_gather(s, MORI_WIRE_ALLGATHER_VIA_ROOT, 0, send, bytes, recv);
  return rc ? rc : mori_tcp_root_reply(s, recv, all, false);
}

static int bcast_via_root(struct tcp_state *s, void *buf, size_t bytes, int root) {
  if (s->rank != 0) return mori_tcp_leaf_round(s, MORI_WIRE_BCAST_VIA_ROOT, root, buf, bytes, buf, bytes);
  /* Rank 0's own data is in buf already; a root's arrives there. */
  int rc = mori_tcp_root_gather(s, MORI_WIRE_BCAST_VIA_ROOT, root, NULL, bytes, buf);
  return rc ? rc : mori_tcp_root_reply(s, buf, bytes, false);
}

static int tcp_allgather(void *state, const void *send, void *recv, size_t bytes) {
  struct tcp_state *s = state;
  int rc = round_start(s);
  if (rc) return rc;
  if (bytes > MORI_WIRE_BYTES_MAX / (uint64_t)s->size)
    return mori_error_set(MORI_EINVAL, "bootstrap allgather: %zu bytes per rank is more than the bootstrap carries",
                          bytes);
  if (via_root(s, (size_t)s->size * bytes)) return allgather_via_root(s, send, recv, bytes);
  rc = arrive(s, MORI_WIRE_ALLGATHER, 0, bytes);
  if (!rc) rc = links(s);
  return rc ? rc : mori_tcp_exchange_allgather(s, send, recv, bytes);
}

/* The same step with every deadline of it grace_ms later: each wait of a
 * step (rank 0's gather, a leaf's wait for the result, the links) takes
 * its deadline from timeout_ms when it starts. */
static int tcp_allgather_grace(void *state, const void *send, void *recv, size_t bytes, int grace_ms) {
  struct tcp_state *s = state;
  int kept = s->timeout_ms;
  s->timeout_ms = kept > INT_MAX - grace_ms ? INT_MAX : kept + grace_ms;
  int rc = tcp_allgather(state, send, recv, bytes);
  s->timeout_ms = kept;
  return rc;
}

static int tcp_barrier(void *state) {
  struct tcp_state *s = state;
  int rc = round_start(s);
  return rc ? rc : arrive(s, MORI_WIRE_BARRIER, 0, 0);
}

static int tcp_bcast(void *state, void *buf, size_t bytes, int root) {
  struct tcp_state *s = state;
  int rc = round_start(s);
  if (rc) return rc;
  if (bytes > MORI_WIRE_BYTES_MAX)
    return mori_error_set(MORI_EINVAL, "bootstrap bcast: %zu bytes is more than the bootstrap carries", bytes);
  if (via_root(s, bytes)) return bcast_via_root(s, buf, bytes, root);
  rc = arrive(s, MORI_WIRE_BCAST, root, bytes);
  if (!rc) rc = links(s);
  return rc ? rc : mori_tcp_exchange_bcast(s, buf, bytes, root);
}

static int tcp_fini(void *state) {
  struct tcp_state *s = state;
  if (!s) return 0;
  for (int r = 0; r < (s->rank == 0 ? s->size : 1); r++)
    if (s->peers[r].fd >= 0) close(s->peers[r].fd);
  for (int k = 0; k < s->rounds; k++) {
    if (s->link_out && s->link_out[k].fd >= 0) close(s->link_out[k].fd);
    if (s->link_in && s->link_in[k].fd >= 0) close(s->link_in[k].fd);
  }
  free(s->link_out);
  free(s->link_in);
  free(s->peers);
  memset(s, 0, sizeof(*s)); /* keys included */
  free(s);
  return 0;
}

static const mori_bootstrap_ops_t tcp_ops = {
    .size = sizeof(mori_bootstrap_ops_t),
    .abi_version = MORI_BOOTSTRAP_ABI_VERSION,
    .name = "tcp",
    .allgather = tcp_allgather,
    .barrier = tcp_barrier,
    .bcast = tcp_bcast,
    .fini = tcp_fini,
    .allgather_grace = tcp_allgather_grace,
};

void mori_bootstrap_tcp_attr_init(mori_bootstrap_tcp_attr_t *attr) {
  memset(attr, 0, sizeof(*attr));
  attr->listen_fd = -1;
}

/* Rank 0's start-up: with no secret given, publish one for this machine's
 * ranks once rank 0 holds its address (a second job's rank 0 that cannot
 * bind it publishes nothing), and withdraw that file, and only that one,
 * once start-up is over. */
static int root_start(struct tcp_state *s, int listen_fd) {
  mori_secret_file_t file = {.path = ""};
  int rc = 0;
  if (listen_fd < 0) rc = mori_tcp_root_listen(s, &listen_fd);
  if (!rc && s->local_secret) {
    uint8_t secret[MORI_SECRET_LOCAL];
    rc = mori_secret_local_create(s->address, secret, &file);
    if (!rc) mori_hs_job_key(secret, sizeof(secret), s->key);
    memset(secret, 0, sizeof(secret));
  }
  if (!rc) rc = mori_tcp_root_start(s, listen_fd);
  if (listen_fd >= 0) close(listen_fd);
  mori_secret_local_remove(&file);
  return rc;
}

/* A failure before the start-up began: rank 0's listening socket is the
 * bootstrap's once the attributes are valid, so it is closed here too. */
static int fail_early(const mori_bootstrap_tcp_attr_t *attr, int rc) {
  if (attr->rank == 0 && attr->listen_fd >= 0) close(attr->listen_fd);
  return rc;
}

int mori_bootstrap_tcp_create(const mori_bootstrap_tcp_attr_t *attr, mori_bootstrap_t **out) {
  if (!attr || !out) return mori_error_set(MORI_EINVAL, "bootstrap tcp: attr and out are required");
  *out = NULL;
  if (attr->size < 1 || attr->rank < 0 || attr->rank >= attr->size)
    return mori_error_set(MORI_EINVAL, "bootstrap tcp: rank %d of size %d is out of range", attr->rank, attr->size);
  bool has_address = attr->address && *attr->address;
  if (attr->size > 1 && !has_address && !(attr->rank == 0 && attr->listen_fd >= 0))
    return mori_error_set(MORI_EINVAL, "bootstrap tcp: rank %d needs rank 0's address", attr->rank);
  if (attr->secret_len && !attr->secret)
    return mori_error_set(MORI_EINVAL, "bootstrap tcp: secret_len is %zu but secret is NULL", attr->secret_len);
  if (attr->secret && attr->secret_len < MORI_HS_SECRET_MIN)
    return mori_error_set(MORI_EINVAL, "bootstrap tcp: the secret is %zu bytes; at least %d are needed",
                          attr->secret_len, MORI_HS_SECRET_MIN);
  if (attr->size > 1 && !attr->secret && !has_address)
    return mori_error_set(MORI_EINVAL,
                          "bootstrap tcp: rank 0 with an inherited socket and no address needs the job's secret");
  if (has_address && strlen(attr->address) >= MORI_TCP_ADDRESS_MAX)
    return mori_error_set(MORI_EINVAL, "bootstrap tcp: address '%.64s...' is too long", attr->address);
  /* The time limit, read strictly: a bad MORI_BOOTSTRAP_TIMEOUT_MS fails
   * here, named, before anything starts (it was "using the default" here
   * and an error at comm creation, after the job had started). */
  int timeout_ms = attr->timeout_ms;
  if (timeout_ms <= 0) {
    timeout_ms = 60000;
    int trc = mori_env_ms("MORI_BOOTSTRAP_TIMEOUT_MS", &timeout_ms);
    if (trc) return fail_early(attr, mori_error_context(trc, "bootstrap tcp (rank %d of %d)", attr->rank, attr->size));
  }
  struct tcp_state *s = mori_bs_calloc(1, sizeof(*s));
  if (!s)
    return fail_early(attr, mori_error_set(MORI_ENOMEM,
                                                "bootstrap tcp: rank %d of %d has no memory for its state (%zu bytes)",
                                                attr->rank, attr->size, sizeof(*s)));
  s->rank = attr->rank;
  s->size = attr->size;
  s->timeout_ms = timeout_ms;
  snprintf(s->address, sizeof(s->address), "%s", has_address ? attr->address : "(inherited socket)");
  /* Rank 0 holds a connection to every rank, any other rank one to rank 0
   * (each with its read-ahead buffer: 256 of them, touched here, were 150
   * page faults in every rank of a 256-rank job). */
  int connections = s->rank == 0 ? s->size : 1;
  s->peers = mori_bs_calloc((size_t)connections, sizeof(*s->peers));
  if (!s->peers) {
    free(s);
    return fail_early(attr, mori_error_set(MORI_ENOMEM,
                                                "bootstrap tcp: rank %d of %d has no memory for its %d connections "
                                                "(%zu bytes)",
                                                attr->rank, attr->size, connections,
                                                (size_t)connections * sizeof(struct tcp_peer)));
  }
  for (int r = 0; r < connections; r++) s->peers[r].fd = -1;
  while ((1LL << s->rounds) < s->size) s->rounds++;
  s->link_out = mori_bs_calloc((size_t)s->rounds + 1, sizeof(*s->link_out));
  s->link_in = mori_bs_calloc((size_t)s->rounds + 1, sizeof(*s->link_in));
  if (!s->link_out || !s->link_in) {
    size_t bytes = 2 * ((size_t)s->rounds + 1) * sizeof(struct tcp_peer);
    s->rounds = 0;
    tcp_fini(s);
    return fail_early(attr, mori_error_set(MORI_ENOMEM,
                                                "bootstrap tcp: rank %d of %d has no memory for its links (%zu bytes)",
                                                attr->rank, attr->size, bytes));
  }
  for (int k = 0; k < s->rounds; k++) s->link_out[k].fd = s->link_in[k].fd = -1;
  s->local_secret = !attr->secret;
  if (attr->secret) mori_hs_job_key(attr->secret, attr->secret_len, s->key);
  int rc = 0;
  if (s->size > 1) {
    /* root_start closes rank 0's socket whatever happens. */
    rc = s->rank == 0 ? root_start(s, attr->listen_fd) : mori_tcp_rank_start(s);
  } else if (attr->listen_fd >= 0) {
    close(attr->listen_fd);
  }
  if (!rc) {
    rc = mori_bootstrap_create(&tcp_ops, s, s->rank, s->size, out);
    if (!rc) mori_bootstrap_set_timeout_ms(*out, s->timeout_ms);
    /* Every rank is up but this one cannot go on: the others hear why at
     * their next step (through rank 0), not only that a connection closed. */
    if (rc && s->size > 1) rc = mori_tcp_fail_everywhere(s, rc);
  }
  if (rc) {
    tcp_fini(s);
    return mori_error_context(rc, "bootstrap tcp (rank %d of %d)", attr->rank, attr->size);
  }
  return 0;
}
