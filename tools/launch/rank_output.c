// SPDX-License-Identifier: MIT
/* Ranks' output with rank prefixes; see rank_output.h. */
#include "tools/launch/rank_output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { LINE_MAX_BYTES = 4096, STREAMS = 2 };

typedef struct stream {
  int read_fd;  /* -1 once at end of file */
  int write_fd; /* the rank's end; -1 once handed over */
  int rank;
  int dest;     /* STDOUT_FILENO or STDERR_FILENO */
  size_t used;
  char line[LINE_MAX_BYTES];
} stream_t;

struct rank_output {
  int count; /* size * STREAMS */
  stream_t *streams;
  struct pollfd *fds;
  unsigned long long bytes_read; /* from every stream so far */
  long long write_until; /* how long a write may wait for our reader (ms, monotonic; 0: no limit) */
  int stalled;           /* a write waited that long: the rest is dropped at once */
};

long long rank_output_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Pieces of at most PIPE_BUF bytes, each once poll says there is room: a
 * pipe that has room for any takes one without blocking, so a reader that
 * never reads holds us only until until_ms, never past the job's limit. */
int rank_output_write_until(int fd, const char *p, size_t n, long long until_ms) {
  while (n > 0) {
    if (until_ms) {
      struct pollfd pfd = {.fd = fd, .events = POLLOUT, .revents = 0};
      long long left = until_ms - rank_output_now_ms();
      int ready = poll(&pfd, 1, left > 0 ? (left > 1000 ? 1000 : (int)left) : 0);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0 || (ready == 0 && left <= 0)) return -1;
      if (ready == 0) continue;
      if (pfd.revents & (POLLERR | POLLNVAL)) return -1;
    }
    ssize_t w = write(fd, p, n > PIPE_BUF ? PIPE_BUF : n);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return -1; /* the stream is gone: drop the output */
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* One write per line, so that concurrent lines never interleave. */
static void emit(rank_output_t *o, stream_t *s, const char *text, size_t n) {
  if (o->stalled) return;
  char out[LINE_MAX_BYTES + 32];
  int head = snprintf(out, 32, "[%d] ", s->rank);
  memcpy(out + head, text, n);
  size_t total = (size_t)head + n;
  if (n == 0 || text[n - 1] != '\n') out[total++] = '\n';
  if (rank_output_write_until(s->dest, out, total, o->write_until) != 0 && o->write_until &&
      rank_output_now_ms() >= o->write_until)
    o->stalled = 1;
}

static void take(rank_output_t *o, stream_t *s, const char *p, size_t n) {
  while (n > 0) {
    size_t room = sizeof(s->line) - s->used;
    size_t k = n < room ? n : room;
    memcpy(s->line + s->used, p, k);
    s->used += k;
    p += k;
    n -= k;
    size_t start = 0;
    for (size_t i = 0; i < s->used; i++) {
      if (s->line[i] != '\n') continue;
      emit(o, s, s->line + start, i + 1 - start);
      start = i + 1;
    }
    if (start == 0 && s->used == sizeof(s->line)) { /* a line longer than the buffer: split it */
      emit(o, s, s->line, s->used);
      start = s->used;
    }
    memmove(s->line, s->line + start, s->used - start);
    s->used -= start;
  }
}

rank_output_t *rank_output_create(int size) {
  rank_output_t *o = calloc(1, sizeof(*o));
  if (!o) return NULL;
  o->count = size * STREAMS;
  o->streams = calloc((size_t)o->count, sizeof(stream_t));
  o->fds = calloc((size_t)o->count, sizeof(struct pollfd));
  if (!o->streams || !o->fds) {
    free(o->streams);
    free(o->fds);
    free(o);
    errno = ENOMEM;
    return NULL;
  }
  for (int i = 0; i < o->count; i++) o->streams[i].read_fd = o->streams[i].write_fd = -1;
  for (int i = 0; i < o->count; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      int saved = errno;
      rank_output_finish(o, 0);
      errno = saved;
      return NULL;
    }
    stream_t *s = &o->streams[i];
    s->read_fd = p[0];
    s->write_fd = p[1];
    s->rank = i / STREAMS;
    s->dest = i % STREAMS == 0 ? STDOUT_FILENO : STDERR_FILENO;
    fcntl(p[0], F_SETFL, O_NONBLOCK);
  }
  return o;
}

/* Every pipe end is close-on-exec, so the exec closes the rest: closing
 * them here, one call each, cost every child a call per rank (N^2 in all). */
void rank_output_attach_child(rank_output_t *o, int rank) {
  for (int i = rank * STREAMS; i < (rank + 1) * STREAMS; i++)
    dup2(o->streams[i].write_fd, o->streams[i].dest); /* dup2 clears close-on-exec */
}

void rank_output_forked(rank_output_t *o, int rank) {
  for (int i = rank * STREAMS; i < (rank + 1) * STREAMS; i++) {
    if (o->streams[i].write_fd >= 0) close(o->streams[i].write_fd);
    o->streams[i].write_fd = -1;
  }
}

/* Reads every stream poll found ready; returns how many are still open. */
static int read_ready(rank_output_t *o, int wait_ms) {
  int n = 0;
  for (int i = 0; i < o->count; i++) {
    if (o->streams[i].read_fd < 0) continue;
    o->fds[n].fd = o->streams[i].read_fd;
    o->fds[n].events = POLLIN;
    o->fds[n].revents = 0;
    n++;
  }
  if (n == 0) return 0;
  if (poll(o->fds, (nfds_t)n, wait_ms) <= 0) return n;
  int open_streams = 0;
  for (int i = 0, k = 0; i < o->count; i++) {
    stream_t *s = &o->streams[i];
    if (s->read_fd < 0) continue;
    short ev = o->fds[k++].revents;
    if (ev & (POLLIN | POLLHUP | POLLERR)) {
      char buf[LINE_MAX_BYTES];
      ssize_t r = read(s->read_fd, buf, sizeof(buf));
      if (r > 0) {
        o->bytes_read += (unsigned long long)r;
        take(o, s, buf, (size_t)r);
      }
      else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(s->read_fd);
        s->read_fd = -1;
      }
    }
    if (s->read_fd >= 0) open_streams++;
  }
  return open_streams;
}

void rank_output_pump(rank_output_t *o, int wait_ms, long long write_until) {
  o->write_until = write_until;
  read_ready(o, wait_ms);
}

void rank_output_finish(rank_output_t *o, int linger_ms) {
  if (!o) return;
  /* Until every stream ends, while output still flows (a slow reader of
   * ours paces it), for at most linger_ms; a stream idle for 200 ms is one
   * a process the rank started still holds open, not worth waiting for. */
  long long end = rank_output_now_ms() + linger_ms, idle_since = rank_output_now_ms();
  o->write_until = end;
  for (unsigned long long seen = o->bytes_read; read_ready(o, 10) > 0 && rank_output_now_ms() < end;) {
    if (o->bytes_read != seen) {
      seen = o->bytes_read;
      idle_since = rank_output_now_ms();
    } else if (rank_output_now_ms() - idle_since >= 200) {
      break;
    }
  }
  for (int i = 0; i < o->count; i++) {
    stream_t *s = &o->streams[i];
    if (s->used) emit(o, s, s->line, s->used);
    if (s->read_fd >= 0) close(s->read_fd);
    if (s->write_fd >= 0) close(s->write_fd);
  }
  free(o->streams);
  free(o->fds);
  free(o);
}
