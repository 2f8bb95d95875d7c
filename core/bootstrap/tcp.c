/* TCP bootstrap: a star around rank 0. Every collective is one round: each
 * rank sends {op, seq, bytes, payload} to rank 0, which checks that all
 * agree, assembles the result and sends it back. Rank 0 therefore knows who
 * is missing when a step times out and tells every other rank, so all of
 * them fail with the missing ranks named. After a failure the bootstrap is
 * broken and every later call fails with the same message. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "mori/bootstrap.h"

enum {
  TCP_MAGIC = 0x6d6f7269, /* "mori" */
  OP_HELLO = 1,
  OP_READY,
  OP_ALLGATHER,
  OP_BCAST,
  OP_BARRIER,
  OP_RESULT,
  OP_ABORT,
  /* A non-root rank waits this much longer than the root, so that the
   * root's verdict (naming the missing ranks) arrives before its own timeout. */
  GRACE_MS = 3000,
  ERROR_TEXT_MAX = 768,
};

struct tcp_header {
  uint32_t magic;
  uint32_t op;
  int32_t rank;
  int32_t arg; /* size in HELLO, root in BCAST */
  uint64_t seq;
  uint64_t bytes;
};

struct tcp_state {
  int rank, size;
  int timeout_ms;
  uint64_t job_token; /* travels in HELLO's seq; 0: none */
  uint64_t seq;
  int *peer_fd; /* rank 0: one socket per rank; others: peer_fd[0] */
  char broken[ERROR_TEXT_MAX];
  char address[128];
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for fd to be ready; MORI_ETIMEDOUT at the deadline. */
static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return MORI_ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return -errno;
  }
}

static int send_all(int fd, const void *buf, size_t len, int64_t deadline) {
  const char *p = buf;
  while (len) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      int rc = wait_fd(fd, POLLOUT, deadline);
      if (rc) return rc;
      continue;
    }
    return MORI_ECONNRESET;
  }
  return 0;
}

static int recv_all(int fd, void *buf, size_t len, int64_t deadline) {
  char *p = buf;
  while (len) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0) return MORI_ECONNRESET;
    if (errno == EAGAIN || errno == EINTR) {
      int rc = wait_fd(fd, POLLIN, deadline);
      if (rc) return rc;
      continue;
    }
    return MORI_ECONNRESET;
  }
  return 0;
}

static int send_msg(int fd, uint32_t op, int rank, int arg, uint64_t seq, const void *payload, uint64_t bytes,
                    int64_t deadline) {
  struct tcp_header h = {TCP_MAGIC, op, rank, arg, seq, bytes};
  int rc = send_all(fd, &h, sizeof(h), deadline);
  if (!rc && bytes && payload) rc = send_all(fd, payload, bytes, deadline);
  return rc;
}

/* Sets the sticky failure, tells every connected rank (rank 0 only). */
static int fail_all(struct tcp_state *s, int code, const char *fmt, ...) MORI_PRINTF(3, 4);
static int fail_all(struct tcp_state *s, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->broken, sizeof(s->broken), fmt, ap);
  va_end(ap);
  if (s->rank == 0) {
    int64_t deadline = now_ms() + 1000;
    for (int r = 1; r < s->size; r++)
      if (s->peer_fd[r] >= 0)
        send_msg(s->peer_fd[r], OP_ABORT, 0, code, s->seq, s->broken, strlen(s->broken) + 1, deadline);
  }
  return mori_error_set(code, "%s", s->broken);
}

static void list_ranks(char *out, size_t len, const int *ranks, int n) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < n && used + 16 < len; i++)
    used += (size_t)snprintf(out + used, len - used, "%s%d", i ? ", " : "", ranks[i]);
}

/* Rank 0's half of a round: gathers every rank's message into `gathered`
 * (size * bytes; for bcast only the root's slot is filled). */
static int root_collect(struct tcp_state *s, uint32_t op, int arg, const void *mine, size_t bytes, char *gathered) {
  int n = s->size;
  int64_t deadline = now_ms() + s->timeout_ms;
  char *done = calloc((size_t)n, 1);
  int *missing = calloc((size_t)n, sizeof(int));
  if (!done || !missing) {
    free(done);
    free(missing);
    return mori_error_set(MORI_ENOMEM, "bootstrap: collect");
  }
  int rc = 0, pending = n - 1;
  if (bytes && (op == OP_ALLGATHER || arg == 0)) memcpy(gathered, mine, bytes);
  done[0] = 1;
  struct pollfd *fds = calloc((size_t)n, sizeof(*fds));
  while (pending > 0 && !rc) {
    int count = 0;
    for (int r = 1; r < n; r++)
      if (!done[r]) fds[count++] = (struct pollfd){.fd = s->peer_fd[r], .events = POLLIN};
    int64_t left = deadline - now_ms();
    if (left <= 0) break;
    int ready = poll(fds, (nfds_t)count, (int)(left > 500 ? 500 : left));
    if (ready < 0 && errno != EINTR) {
      rc = fail_all(s, MORI_EIO, "bootstrap: poll failed: %s", strerror(errno));
      break;
    }
    for (int r = 1; r < n && !rc; r++) {
      if (done[r]) continue;
      struct pollfd p = {.fd = s->peer_fd[r], .events = POLLIN};
      if (poll(&p, 1, 0) <= 0) continue;
      struct tcp_header h;
      int e = recv_all(s->peer_fd[r], &h, sizeof(h), deadline);
      if (e == MORI_ECONNRESET) {
        close(s->peer_fd[r]);
        s->peer_fd[r] = -1;
        rc = fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: rank %d closed its connection (exited or crashed) during step %llu",
                      r, (unsigned long long)s->seq);
        break;
      }
      if (e) break; /* timed out mid-message: reported below */
      if (h.magic != TCP_MAGIC || h.seq != s->seq || h.op != op || h.arg != arg) {
        rc = fail_all(s, MORI_EMISMATCH,
                      "bootstrap: rank %d is at step %llu op %u (arg %d) while rank 0 is at step %llu op %u (arg %d)", r,
                      (unsigned long long)h.seq, h.op, h.arg, (unsigned long long)s->seq, op, arg);
        break;
      }
      if (h.bytes != bytes) {
        rc = fail_all(s, MORI_EMISMATCH, "bootstrap: rank %d contributes %llu bytes, rank 0 %zu bytes (step %llu)", r,
                      (unsigned long long)h.bytes, bytes, (unsigned long long)s->seq);
        break;
      }
      bool has_payload = op == OP_ALLGATHER || (op == OP_BCAST && arg == r);
      if (has_payload && bytes) {
        char *dst = op == OP_ALLGATHER ? gathered + (size_t)r * bytes : gathered;
        if (recv_all(s->peer_fd[r], dst, bytes, deadline) != 0) {
          rc = fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: rank %d's message broke off", r);
          break;
        }
      }
      done[r] = 1;
      pending--;
    }
  }
  if (!rc && pending > 0) {
    int count = 0;
    for (int r = 1; r < n; r++)
      if (!done[r]) missing[count++] = r;
    char list[512];
    list_ranks(list, sizeof(list), missing, count);
    rc = fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: rank(s) %s did not arrive at step %llu within %d ms", list,
                  (unsigned long long)s->seq, s->timeout_ms);
  }
  free(fds);
  free(done);
  free(missing);
  return rc;
}

static int root_reply(struct tcp_state *s, const void *result, size_t bytes) {
  int64_t deadline = now_ms() + s->timeout_ms;
  for (int r = 1; r < s->size; r++) {
    if (send_msg(s->peer_fd[r], OP_RESULT, 0, 0, s->seq, result, bytes, deadline) != 0)
      return fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: could not send the result of step %llu to rank %d",
                      (unsigned long long)s->seq, r);
  }
  return 0;
}

/* A non-root rank's half: send, then wait for rank 0's result or verdict. */
static int leaf_round(struct tcp_state *s, uint32_t op, int arg, const void *mine, size_t bytes, void *result,
                      size_t result_bytes) {
  int fd = s->peer_fd[0];
  int64_t deadline = now_ms() + s->timeout_ms;
  bool has_payload = op == OP_ALLGATHER || (op == OP_BCAST && arg == s->rank);
  struct tcp_header h = {TCP_MAGIC, op, s->rank, arg, s->seq, bytes};
  int rc = send_all(fd, &h, sizeof(h), deadline);
  if (!rc && has_payload && bytes) rc = send_all(fd, mine, bytes, deadline);
  if (rc) {
    /* Rank 0 may have given up on this step already and said why. */
    if (recv_all(fd, &h, sizeof(h), now_ms() + 200) == 0 && h.op == OP_ABORT) goto aborted;
    snprintf(s->broken, sizeof(s->broken), "bootstrap: rank 0 (%s) is gone: sending step %llu failed", s->address,
             (unsigned long long)s->seq);
    return mori_error_set(MORI_ERANK_TIMEOUT, "%s", s->broken);
  }
  rc = recv_all(fd, &h, sizeof(h), deadline + GRACE_MS);
  if (rc) {
    snprintf(s->broken, sizeof(s->broken), "bootstrap: rank 0 (%s) %s at step %llu (waited %d ms)", s->address,
             rc == MORI_ETIMEDOUT ? "did not answer" : "closed its connection", (unsigned long long)s->seq,
             s->timeout_ms + GRACE_MS);
    return mori_error_set(MORI_ERANK_TIMEOUT, "%s", s->broken);
  }
  if (h.op == OP_ABORT) {
  aborted:;
    char text[ERROR_TEXT_MAX] = {0};
    size_t len = h.bytes < sizeof(text) ? h.bytes : sizeof(text) - 1;
    recv_all(fd, text, len, now_ms() + 1000);
    snprintf(s->broken, sizeof(s->broken), "%s (reported by rank 0)", text);
    return mori_error_set(h.arg ? h.arg : MORI_ERANK_TIMEOUT, "%s", s->broken);
  }
  if (h.magic != TCP_MAGIC || h.op != OP_RESULT || h.seq != s->seq || h.bytes != result_bytes) {
    snprintf(s->broken, sizeof(s->broken), "bootstrap: unexpected reply from rank 0 at step %llu",
             (unsigned long long)s->seq);
    return mori_error_set(MORI_EPROTO, "%s", s->broken);
  }
  if (result_bytes && recv_all(fd, result, result_bytes, deadline + GRACE_MS) != 0) {
    snprintf(s->broken, sizeof(s->broken), "bootstrap: rank 0's result of step %llu broke off", (unsigned long long)s->seq);
    return mori_error_set(MORI_ERANK_TIMEOUT, "%s", s->broken);
  }
  return 0;
}

static int round_start(struct tcp_state *s) {
  if (s->broken[0]) return mori_error_set(MORI_ECANCELED, "bootstrap is broken by an earlier failure: %s", s->broken);
  s->seq++;
  return 0;
}

static int tcp_allgather(void *state, const void *send, void *recv, size_t bytes) {
  struct tcp_state *s = state;
  int rc = round_start(s);
  if (rc) return rc;
  size_t total = bytes * (size_t)s->size;
  if (s->rank != 0) return leaf_round(s, OP_ALLGATHER, 0, send, bytes, recv, total);
  rc = root_collect(s, OP_ALLGATHER, 0, send, bytes, recv);
  return rc ? rc : root_reply(s, recv, total);
}

static int tcp_barrier(void *state) {
  struct tcp_state *s = state;
  int rc = round_start(s);
  if (rc) return rc;
  if (s->rank != 0) return leaf_round(s, OP_BARRIER, 0, NULL, 0, NULL, 0);
  rc = root_collect(s, OP_BARRIER, 0, NULL, 0, NULL);
  return rc ? rc : root_reply(s, NULL, 0);
}

static int tcp_bcast(void *state, void *buf, size_t bytes, int root) {
  struct tcp_state *s = state;
  int rc = round_start(s);
  if (rc) return rc;
  if (s->rank != 0) return leaf_round(s, OP_BCAST, root, buf, bytes, buf, bytes);
  rc = root_collect(s, OP_BCAST, root, buf, bytes, buf);
  return rc ? rc : root_reply(s, buf, bytes);
}

static int tcp_fini(void *state) {
  struct tcp_state *s = state;
  if (!s) return 0;
  for (int r = 0; r < (s->rank == 0 ? s->size : 1); r++)
    if (s->peer_fd[r] >= 0) close(s->peer_fd[r]);
  free(s->peer_fd);
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
};

static int parse_address(const char *address, struct sockaddr_storage *sa, socklen_t *len) {
  char host[128];
  const char *colon = strrchr(address, ':');
  if (!colon || colon == address || (size_t)(colon - address) >= sizeof(host))
    return mori_error_set(MORI_EINVAL, "bootstrap: address '%s' is not host:port", address);
  memcpy(host, address, (size_t)(colon - address));
  host[colon - address] = '\0';
  if (host[0] == '[') { /* [v6]:port */
    memmove(host, host + 1, strlen(host));
    host[strlen(host) - 1] = '\0';
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  int e = getaddrinfo(host, colon + 1, &hints, &res);
  if (e != 0 || !res)
    return mori_error_set(MORI_EINVAL, "bootstrap: cannot resolve '%s': %s", address, gai_strerror(e));
  memcpy(sa, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

static void tune_socket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* Rank 0's start-up: accepts one connection per rank. A process with
 * another job's token is turned away (told why) without harming this job.
 * A process that disagrees on the world size, or claims a rank that is out
 * of range or taken, is told why and the start-up fails for every rank; the
 * ranks still missing then get a short grace to arrive and hear the same
 * verdict, rather than their full timeout. */
static int root_accept_all(struct tcp_state *s, int listen_fd) {
  int64_t deadline = now_ms() + s->timeout_ms;
  int connected = 0, refused = 0;
  char *arrived = calloc((size_t)s->size, 1);
  if (!arrived) return mori_error_set(MORI_ENOMEM, "bootstrap: start-up");
  arrived[0] = 1;
  char verdict[ERROR_TEXT_MAX] = "";
  while (connected + refused < s->size - 1) {
    if (wait_fd(listen_fd, POLLIN, deadline) != 0) break;
    int fd = accept(listen_fd, NULL, NULL);
    if (fd < 0) continue;
    tune_socket(fd);
    struct tcp_header h;
    if (recv_all(fd, &h, sizeof(h), now_ms() + 5000) != 0 || h.magic != TCP_MAGIC || h.op != OP_HELLO) {
      MORI_WARN("bootstrap: dropped a connection that did not introduce itself as a mori rank");
      close(fd);
      continue;
    }
    char why[ERROR_TEXT_MAX];
    if (h.seq != s->job_token) {
      snprintf(why, sizeof(why),
               "bootstrap: rank 0 at %s belongs to another job (its job token is %016llx, this process holds %016llx): "
               "was the unique ID from another run?",
               s->address, (unsigned long long)s->job_token, (unsigned long long)h.seq);
      MORI_WARN("bootstrap: turned away a process (rank %d of %d) holding another job's token %016llx", h.rank, h.arg,
                (unsigned long long)h.seq);
      send_msg(fd, OP_ABORT, 0, MORI_EMISMATCH, 0, why, strlen(why) + 1, now_ms() + 1000);
      close(fd);
      continue;
    }
    bool in_range = h.rank > 0 && h.rank < s->size;
    if (h.arg != s->size)
      snprintf(why, sizeof(why), "bootstrap: rank %d says the world has %d ranks, rank 0 says %d", h.rank, h.arg, s->size);
    else if (!in_range)
      snprintf(why, sizeof(why), "bootstrap: a process says it is rank %d; rank 0 expects ranks 1..%d of %d", h.rank,
               s->size - 1, s->size);
    else if (arrived[h.rank])
      snprintf(why, sizeof(why), "bootstrap: two processes say they are rank %d of %d", h.rank, s->size);
    else
      why[0] = '\0';
    if (why[0]) {
      send_msg(fd, OP_ABORT, 0, MORI_EMISMATCH, 0, why, strlen(why) + 1, now_ms() + 1000);
      close(fd);
      if (in_range && !arrived[h.rank]) {
        arrived[h.rank] = 1;
        refused++;
      }
      if (!verdict[0]) {
        snprintf(verdict, sizeof(verdict), "%s", why);
        int64_t grace = now_ms() + GRACE_MS;
        if (grace < deadline) deadline = grace;
      }
      continue;
    }
    arrived[h.rank] = 1;
    s->peer_fd[h.rank] = fd;
    connected++;
  }
  if (verdict[0]) {
    free(arrived);
    return fail_all(s, MORI_EMISMATCH, "%s", verdict);
  }
  if (connected < s->size - 1) {
    int *missing = calloc((size_t)s->size, sizeof(int));
    int count = 0;
    for (int r = 1; missing && r < s->size; r++)
      if (!arrived[r]) missing[count++] = r;
    char list[512];
    list_ranks(list, sizeof(list), missing, count);
    free(missing);
    free(arrived);
    return fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: rank(s) %s never connected to rank 0 at %s within %d ms", list,
                    s->address, s->timeout_ms);
  }
  free(arrived);
  int64_t send_deadline = now_ms() + s->timeout_ms;
  for (int r = 1; r < s->size; r++)
    if (send_msg(s->peer_fd[r], OP_READY, 0, 0, 0, NULL, 0, send_deadline) != 0)
      return fail_all(s, MORI_ERANK_TIMEOUT, "bootstrap: rank %d left during start-up", r);
  return 0;
}

static int leaf_connect(struct tcp_state *s) {
  struct sockaddr_storage sa;
  socklen_t len;
  int rc = parse_address(s->address, &sa, &len);
  if (rc) return rc;
  int64_t deadline = now_ms() + s->timeout_ms;
  int fd = -1;
  for (;;) {
    fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return mori_error_errno("bootstrap: socket");
    if (connect(fd, (struct sockaddr *)&sa, len) == 0) break;
    close(fd);
    fd = -1;
    if (now_ms() >= deadline)
      return mori_error_set(MORI_ERANK_TIMEOUT, "bootstrap: rank %d could not reach rank 0 at %s within %d ms", s->rank,
                            s->address, s->timeout_ms);
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  tune_socket(fd);
  s->peer_fd[0] = fd;
  if (send_msg(fd, OP_HELLO, s->rank, s->size, s->job_token, NULL, 0, deadline) != 0)
    return mori_error_set(MORI_ERANK_TIMEOUT, "bootstrap: rank 0 at %s dropped the connection", s->address);
  struct tcp_header h;
  rc = recv_all(fd, &h, sizeof(h), deadline + GRACE_MS);
  if (rc)
    return mori_error_set(MORI_ERANK_TIMEOUT, "bootstrap: rank 0 at %s did not confirm start-up (%s)", s->address,
                          rc == MORI_ETIMEDOUT ? "timed out" : "connection closed");
  if (h.op == OP_ABORT) {
    char text[ERROR_TEXT_MAX] = {0};
    recv_all(fd, text, h.bytes < sizeof(text) ? h.bytes : sizeof(text) - 1, now_ms() + 1000);
    return mori_error_set(h.arg ? h.arg : MORI_ERANK_TIMEOUT, "%s (reported by rank 0)", text);
  }
  if (h.op != OP_READY) return mori_error_set(MORI_EPROTO, "bootstrap: unexpected start-up reply from rank 0");
  return 0;
}

void mori_bootstrap_tcp_attr_init(mori_bootstrap_tcp_attr_t *attr) {
  memset(attr, 0, sizeof(*attr));
  attr->listen_fd = -1;
}

static int root_listen(struct tcp_state *s, int *listen_fd) {
  struct sockaddr_storage sa;
  socklen_t len;
  int rc = parse_address(s->address, &sa, &len);
  if (rc) return rc;
  /* Listen on every interface at that port: the name may resolve to an
   * address other ranks use differently. */
  if (sa.ss_family == AF_INET) ((struct sockaddr_in *)&sa)->sin_addr.s_addr = htonl(INADDR_ANY);
  int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return mori_error_errno("bootstrap: socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 1024) != 0) {
    rc = mori_error_errno("bootstrap: rank 0 cannot listen at %s", s->address);
    close(fd);
    return rc;
  }
  *listen_fd = fd;
  return 0;
}

int mori_bootstrap_tcp_create(const mori_bootstrap_tcp_attr_t *attr, mori_bootstrap_t **out) {
  if (!attr || !out) return mori_error_set(MORI_EINVAL, "bootstrap tcp: attr and out are required");
  if (attr->size < 1 || attr->rank < 0 || attr->rank >= attr->size)
    return mori_error_set(MORI_EINVAL, "bootstrap tcp: rank %d of size %d is out of range", attr->rank, attr->size);
  if (attr->size > 1 && (!attr->address || !*attr->address) && !(attr->rank == 0 && attr->listen_fd >= 0))
    return mori_error_set(MORI_EINVAL, "bootstrap tcp: rank %d needs rank 0's address", attr->rank);
  struct tcp_state *s = calloc(1, sizeof(*s));
  if (!s) return mori_error_set(MORI_ENOMEM, "bootstrap tcp");
  s->rank = attr->rank;
  s->size = attr->size;
  s->timeout_ms = attr->timeout_ms > 0 ? attr->timeout_ms : mori_bootstrap_default_timeout_ms();
  s->job_token = attr->job_token;
  snprintf(s->address, sizeof(s->address), "%s", attr->address ? attr->address : "(inherited socket)");
  s->peer_fd = malloc(sizeof(int) * (size_t)s->size);
  for (int r = 0; r < s->size; r++) s->peer_fd[r] = -1;
  int rc = 0;
  if (s->size > 1) {
    if (s->rank == 0) {
      int listen_fd = attr->listen_fd;
      if (listen_fd < 0) rc = root_listen(s, &listen_fd);
      if (!rc) rc = root_accept_all(s, listen_fd);
      if (listen_fd >= 0) close(listen_fd);
    } else {
      rc = leaf_connect(s);
    }
  } else if (attr->listen_fd >= 0) {
    close(attr->listen_fd);
  }
  if (!rc) rc = mori_bootstrap_create(&tcp_ops, s, s->rank, s->size, out);
  if (rc) {
    tcp_fini(s);
    return mori_error_context(rc, "bootstrap tcp (rank %d of %d)", attr->rank, attr->size);
  }
  return 0;
}

static const char *first_env(const char *const *names) {
  for (; *names; names++) {
    const char *v = getenv(*names);
    if (v && *v) return v;
  }
  return NULL;
}

int mori_bootstrap_tcp_from_env(mori_bootstrap_t **out) {
  static const char *const rank_vars[] = {"MORI_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
  static const char *const size_vars[] = {"MORI_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                          "SLURM_NTASKS", NULL};
  static const char *const job_vars[] = {"SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", NULL};
  const char *rank_s = first_env(rank_vars), *size_s = first_env(size_vars);
  if (!rank_s || !size_s)
    return mori_error_set(MORI_EINVAL,
                          "bootstrap: no rank/world size in the environment (set MORI_RANK and MORI_WORLD_SIZE, or "
                          "launch with torchrun, mpirun or srun)");
  mori_bootstrap_tcp_attr_t attr;
  mori_bootstrap_tcp_attr_init(&attr);
  attr.rank = atoi(rank_s);
  attr.size = atoi(size_s);
  char address[160];
  const char *addr = getenv("MORI_BOOTSTRAP_ADDR");
  const char *port_s = getenv("MORI_BOOTSTRAP_PORT");
  if (addr && *addr) {
    snprintf(address, sizeof(address), "%s", addr);
  } else if (getenv("MASTER_ADDR")) {
    int port = port_s ? atoi(port_s) : (getenv("MASTER_PORT") ? atoi(getenv("MASTER_PORT")) + 1 : 29501);
    snprintf(address, sizeof(address), "%s:%d", getenv("MASTER_ADDR"), port);
  } else {
    const char *host = getenv("SLURM_LAUNCH_NODE_IPADDR");
    const char *job = first_env(job_vars);
    unsigned hash = 0;
    for (const char *p = job ? job : ""; *p; p++) hash = hash * 31u + (unsigned char)*p;
    int port = port_s ? atoi(port_s) : 20000 + (int)(hash % 20000u);
    snprintf(address, sizeof(address), "%s:%d", host ? host : "127.0.0.1", port);
  }
  attr.address = address;
  const char *fd_s = getenv("MORI_BOOTSTRAP_LISTEN_FD");
  if (attr.rank == 0 && fd_s) attr.listen_fd = atoi(fd_s);
  mori_log_set_rank(attr.rank);
  return mori_bootstrap_tcp_create(&attr, out);
}
