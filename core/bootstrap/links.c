// SPDX-License-Identifier: MIT
/* The links between ranks, opened once, by the first collective whose data
 * is too large to go through rank 0 (tcp.c), so that it travels between the
 * ranks instead (exchange.c).
 *
 * In round k of an exchange, rank r talks to r + 2^k and r - 2^k (mod size):
 * it opens the first link (link_out[k]) and admits the second (link_in[k]),
 * ceil(log2(size)) of each. Every rank listens for its links on an
 * ephemeral port of the address it reached rank 0 from (a job on loopback
 * stays on loopback); rank 0 gathers the addresses and tells each rank the
 * ones it dials, so it handles O(size log size) bytes. Links are admitted
 * like ranks at rank 0 (startup.c: polled, bounded, strangers dropped) and
 * authenticated under a key of their own per pair (handshake.h); every
 * frame on them carries a MAC. A rank dials all its links at once
 * (non-blocking connects, dial.c) and the same poll loop admits the links
 * opened to it, under one deadline, so its 2 * ceil(log2 size) handshakes
 * overlap. A rank whose links fail tells rank 0, which
 * names it to every rank. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/bootstrap/internal/alloc.h"
#include "core/bootstrap/internal/net.h"
#include "core/bootstrap/internal/tcp.h"

int mori_tcp_fail_everywhere(struct tcp_state *s, int rc) {
  if (s->rank == 0) return mori_tcp_fail_all(s, rc, "%s", mori_last_error());
  char text[MORI_WIRE_TEXT_MAX];
  snprintf(text, sizeof(text), "%s", mori_last_error());
  mori_wire_header_t h = {.op = MORI_WIRE_ABORT, .rank = s->rank, .arg = rc, .seq = s->seq, .bytes = strlen(text) + 1};
  mori_tcp_send_frame(&s->peers[0], &h, text, mori_net_now_ms() + 1000);
  return mori_tcp_broken(s, rc, "%s", text);
}

/* Listens on an ephemeral port of the address this rank's connection to
 * rank 0 uses. */
static int listen_beside(struct tcp_state *s, int star_fd, int *listen_fd, mori_wire_link_address_t *mine) {
  struct sockaddr_storage sa;
  socklen_t len = sizeof(sa);
  if (getsockname(star_fd, (struct sockaddr *)&sa, &len) != 0)
    return mori_error_errno("bootstrap: rank %d cannot read its own address", s->rank);
  if (sa.ss_family == AF_INET)
    ((struct sockaddr_in *)&sa)->sin_port = 0;
  else
    ((struct sockaddr_in6 *)&sa)->sin6_port = 0;
  int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return mori_error_errno("bootstrap: rank %d: a socket for its links", s->rank);
  if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, s->rounds + 64) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    int rc = mori_error_errno("bootstrap: rank %d cannot listen for its links", s->rank);
    close(fd);
    return rc;
  }
  memset(mine, 0, sizeof(*mine));
  if (sa.ss_family == AF_INET) {
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&sa;
    mine->family = 4;
    mine->port = ntohs(v4->sin_port);
    memcpy(mine->addr, &v4->sin_addr, 4);
  } else {
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&sa;
    mine->family = 6;
    mine->port = ntohs(v6->sin6_port);
    memcpy(mine->addr, &v6->sin6_addr, 16);
  }
  *listen_fd = fd;
  return 0;
}

static socklen_t to_sockaddr(const mori_wire_link_address_t *a, struct sockaddr_storage *sa, char *text, size_t len) {
  memset(sa, 0, sizeof(*sa));
  char host[INET6_ADDRSTRLEN] = "?";
  if (a->family == 4) {
    struct sockaddr_in *v4 = (struct sockaddr_in *)sa;
    v4->sin_family = AF_INET;
    v4->sin_port = htons(a->port);
    memcpy(&v4->sin_addr, a->addr, 4);
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
    snprintf(text, len, "%s:%u", host, a->port);
    return sizeof(*v4);
  }
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)sa;
  v6->sin6_family = AF_INET6;
  v6->sin6_port = htons(a->port);
  memcpy(&v6->sin6_addr, a->addr, 16);
  inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
  snprintf(text, len, "[%s]:%u", host, a->port);
  return sizeof(*v6);
}

/* Rank 0: gathers every rank's link address and answers each rank with the
 * addresses of the ranks it dials (rank + 2^k). */
static int root_addresses(struct tcp_state *s, const uint8_t *mine, uint8_t *targets) {
  int n = s->size, K = s->rounds;
  size_t each = (size_t)K * MORI_WIRE_LINK_ADDRESS_BYTES;
  uint8_t *all = mori_bs_malloc((size_t)n * MORI_WIRE_LINK_ADDRESS_BYTES), *replies = mori_bs_malloc((size_t)n * each);
  int rc = all && replies ? 0
                          : mori_tcp_fail_all(s, MORI_ENOMEM,
                                              "bootstrap: rank 0 of %d has no memory for the ranks' link addresses "
                                              "(%zu bytes)",
                                              n, (size_t)n * (MORI_WIRE_LINK_ADDRESS_BYTES + each));
  if (!rc) rc = mori_tcp_root_gather(s, MORI_WIRE_LINKS, 0, mine, MORI_WIRE_LINK_ADDRESS_BYTES, all);
  for (int r = 0; r < n && !rc; r++) {
    mori_wire_link_address_t a;
    char why[120];
    if (mori_wire_link_address_decode(all + (size_t)r * MORI_WIRE_LINK_ADDRESS_BYTES, &a, why, sizeof(why)) != 0)
      rc = mori_tcp_fail_all(s, MORI_EPROTO, "bootstrap: rank %d sent %s", r, why);
  }
  for (int r = 0; r < n && !rc; r++)
    for (int k = 0; k < K; k++)
      memcpy(replies + (size_t)r * each + (size_t)k * MORI_WIRE_LINK_ADDRESS_BYTES,
             all + (size_t)((r + (1LL << k)) % n) * MORI_WIRE_LINK_ADDRESS_BYTES, MORI_WIRE_LINK_ADDRESS_BYTES);
  if (!rc) rc = mori_tcp_root_reply(s, replies, each, true);
  if (!rc) memcpy(targets, replies, each);
  free(all);
  free(replies);
  return rc;
}

/* Dials every link this rank opens (rank + 2^k, after decoding what rank 0
 * sent) while admitting those it takes (rank - 2^k), all in one poll loop
 * under one deadline: every rank does both at once, so neither may wait
 * for the other, and no handshake waits for another. */
static int link_up(struct tcp_state *s, int listen_fd, const int *slot_of, const uint8_t *targets) {
  struct tcp_dial *dials = mori_bs_calloc((size_t)s->rounds, sizeof(*dials));
  if (!dials)
    return mori_error_set(MORI_ENOMEM, "bootstrap: rank %d of %d has no memory for dialing its links (%d; %zu bytes)",
                          s->rank, s->size, s->rounds, (size_t)s->rounds * sizeof(*dials));
  for (int k = 0; k < s->rounds; k++) {
    int peer = (int)((s->rank + (1LL << k)) % s->size);
    mori_wire_link_address_t a;
    char why[120], text[MORI_TCP_ADDRESS_MAX];
    if (mori_wire_link_address_decode(targets + (size_t)k * MORI_WIRE_LINK_ADDRESS_BYTES, &a, why, sizeof(why)) != 0) {
      free(dials);
      return mori_error_set(MORI_EPROTO, "bootstrap: rank 0 sent rank %d %s for rank %d", s->rank, why, peer);
    }
    struct sockaddr_storage sa;
    socklen_t len = to_sockaddr(&a, &sa, text, sizeof(text));
    mori_tcp_dial_init(&dials[k], peer, &sa, len, text, &s->link_out[k]);
  }
  int rc = mori_tcp_link_up(s, listen_fd, slot_of, s->link_in, s->rounds, dials, s->rounds, 0);
  free(dials);
  return rc;
}

int mori_tcp_links_start(struct tcp_state *s) {
  int n = s->size, K = s->rounds;
  size_t each = (size_t)K * MORI_WIRE_LINK_ADDRESS_BYTES;
  uint8_t mine[MORI_WIRE_LINK_ADDRESS_BYTES] = {0};
  uint8_t *targets = mori_bs_calloc(1, each);
  int *slot_of = mori_bs_malloc(sizeof(int) * (size_t)n);
  int listen_fd = -1;
  mori_wire_link_address_t address;
  int rc = targets && slot_of ? 0
                              : mori_error_set(MORI_ENOMEM,
                                               "bootstrap: rank %d of %d has no memory for its links' addresses (%zu "
                                               "bytes)",
                                               s->rank, n, each + sizeof(int) * (size_t)n);
  if (!rc) rc = listen_beside(s, s->peers[s->rank == 0 ? 1 : 0].fd, &listen_fd, &address);
  if (rc) {
    free(targets);
    free(slot_of);
    return mori_tcp_fail_everywhere(s, rc);
  }
  mori_wire_link_address_encode(&address, mine);
  rc = s->rank == 0 ? root_addresses(s, mine, targets)
                    : mori_tcp_leaf_round(s, MORI_WIRE_LINKS, 0, mine, sizeof(mine), targets, each);
  if (rc) { /* already told (rank 0) or heard from rank 0 */
    close(listen_fd);
    free(targets);
    free(slot_of);
    return rc;
  }
  for (int r = 0; r < n; r++) slot_of[r] = -1;
  for (int k = 0; k < K; k++) slot_of[((s->rank - (1LL << k)) % n + n) % n] = k;
  rc = link_up(s, listen_fd, slot_of, targets);
  close(listen_fd);
  free(targets);
  free(slot_of);
  if (rc) return mori_tcp_fail_everywhere(s, rc);
  /* Every rank has all its links, or rank 0 names the one that has not. */
  if (s->rank != 0) return mori_tcp_leaf_round(s, MORI_WIRE_BARRIER, 0, NULL, 0, NULL, 0);
  rc = mori_tcp_root_gather(s, MORI_WIRE_BARRIER, 0, NULL, 0, NULL);
  return rc ? rc : mori_tcp_root_reply(s, NULL, 0, false);
}
