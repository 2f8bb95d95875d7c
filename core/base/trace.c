// SPDX-License-Identifier: MIT
/* See trace.h. The file sink keeps finished events in a ring under a mutex
 * (mori's traced calls are host API calls and op launches, microseconds
 * apart at the most, so a lock is cheap next to them) and writes the ring
 * at mori_finalize and at exit. Times are CLOCK_MONOTONIC; the file also
 * records CLOCK_REALTIME - CLOCK_MONOTONIC so that tools can put its events
 * on another trace's timeline (tools/trace_merge.py). */
#include "core/base/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/base/dynlib.h"
#include "core/base/env.h"
#include "core/base/log.h"

_Atomic unsigned mori_trace_sinks;

#define TEXT_LEN 48

typedef struct event {
  const char *name;
  uint64_t start_ns, dur_ns;
  int32_t tid;
  int nargs;
  const char *keys[MORI_TRACE_MAX_ARGS];
  long long nums[MORI_TRACE_MAX_ARGS];
  bool is_text[MORI_TRACE_MAX_ARGS];
  char texts[MORI_TRACE_MAX_ARGS][TEXT_LEN];
} event_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static event_t *ring;
static size_t ring_cap, ring_next, ring_count;
static uint64_t dropped;
static char file_path[4096];
static int trace_rank = -1;
static pid_t owner; /* the process that configured: a forked child never writes its parent's file */
static int64_t realtime_minus_monotonic_ns;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int32_t thread_id(void) {
  static _Thread_local int32_t tid;
  if (!tid) tid = (int32_t)syscall(SYS_gettid);
  return tid;
}

/* ---- NVTX / ROCTX, loaded at run time ---- */

static struct {
  int (*push)(const char *message);
  int (*pop)(void);
} ranges;

static int load_ranges(void) {
#if defined(MORI_TRACE_NVTX_LIB)
  static const char *const names[] = {"libnvToolsExt.so.1", "libnvToolsExt.so", NULL};
  static const mori_dynlib_symbol_t symbols[] = {MORI_DYNLIB_ENTRY(ranges, push, "nvtxRangePushA")
                                                     MORI_DYNLIB_ENTRY(ranges, pop, "nvtxRangePop")};
  const char *what = "NVTX";
#elif defined(MORI_TRACE_ROCTX_LIB)
  static const char *const names[] = {"libroctx64.so", "libroctx64.so.4", "librocprofiler-sdk-roctx.so.0", NULL};
  static const mori_dynlib_symbol_t symbols[] = {MORI_DYNLIB_ENTRY(ranges, push, "roctxRangePushA")
                                                     MORI_DYNLIB_ENTRY(ranges, pop, "roctxRangePop")};
  const char *what = "ROCTX";
#endif
#if defined(MORI_TRACE_NVTX_LIB) || defined(MORI_TRACE_ROCTX_LIB)
  if (ranges.push) return 0;
  mori_error_saved_t saved;
  mori_error_save(&saved);
  int rc = mori_dynlib_load(names, symbols, sizeof(symbols) / sizeof(symbols[0]), MORI_ENOSYS, NULL);
  if (rc) MORI_WARN("MORI_TRACE=nvtx: no %s ranges: %s", what, mori_last_error());
  mori_error_restore(&saved);
  return rc;
#else
  MORI_INFO("MORI_TRACE=nvtx: no ranges on the host platform (NVTX and ROCTX are GPU tools' ranges); ignored");
  return MORI_ENOSYS;
#endif
}

static void range_push(const mori_trace_scope_t *s) {
  char msg[256];
  int used = snprintf(msg, sizeof(msg), "mori:%s", s->name);
  for (int i = 0; i < s->nargs && used > 0 && (size_t)used < sizeof(msg); i++) {
    if (s->args[i].str)
      used += snprintf(msg + used, sizeof(msg) - (size_t)used, " %s=%s", s->args[i].key, s->args[i].str);
    else
      used += snprintf(msg + used, sizeof(msg) - (size_t)used, " %s=%lld", s->args[i].key, s->args[i].num);
  }
  ranges.push(msg);
}

/* ---- configuration ---- */

int mori_trace_parse(const char *text, unsigned *sinks, char *path, size_t path_len) {
  *sinks = 0;
  if (path_len) path[0] = '\0';
  if (!text) return 0;
  const char *p = text;
  while (*p) {
    size_t n = strcspn(p, ",");
    if (n == 4 && strncmp(p, "nvtx", 4) == 0) {
      *sinks |= MORI_TRACE_NVTX;
    } else if (n >= 5 && strncmp(p, "file:", 5) == 0) {
      if (n == 5) return mori_error_set(MORI_EINVAL, "MORI_TRACE=%s: file: needs a path (file:PATH)", text);
      if (n - 5 >= path_len)
        return mori_error_set(MORI_EINVAL, "MORI_TRACE=%s: the path is longer than %zu characters", text, path_len - 1);
      memcpy(path, p + 5, n - 5);
      path[n - 5] = '\0';
      *sinks |= MORI_TRACE_FILE;
    } else if (n > 0) {
      return mori_error_set(MORI_EINVAL,
                            "MORI_TRACE=%s: unknown value '%.*s' (expected nvtx, file:PATH, or both separated by a comma)",
                            text, (int)n, p);
    }
    p += n;
    if (*p == ',') p++;
  }
  return 0;
}

/* The file's path with %r (rank) and %p (pid) filled in. */
static int expand_path(const char *pattern, int rank, char *out, size_t len) {
  size_t used = 0;
  for (const char *p = pattern; *p; p++) {
    char piece[32];
    const char *add = piece;
    if (p[0] == '%' && (p[1] == 'r' || p[1] == 'p')) {
      snprintf(piece, sizeof(piece), "%d", p[1] == 'r' ? rank : (int)getpid());
      p++;
    } else {
      piece[0] = *p;
      piece[1] = '\0';
    }
    size_t n = strlen(add);
    if (used + n >= len) return mori_error_set(MORI_EINVAL, "MORI_TRACE: the file path %s is too long", pattern);
    memcpy(out + used, add, n);
    used += n;
  }
  out[used] = '\0';
  return 0;
}

static void flush_at_exit(void) { mori_trace_flush(); }

/* A file that cannot be written fails here, when the comm is made, rather
 * than at the end of the run. */
static int check_writable(const char *path) {
  char dir[sizeof(file_path)];
  snprintf(dir, sizeof(dir), "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, sizeof(dir), ".");
  else if (slash == dir) dir[1] = '\0';
  else *slash = '\0';
  if (access(dir, W_OK) != 0)
    return mori_error_set(MORI_EINVAL, "MORI_TRACE: cannot write %s: folder %s: %s", path, dir, strerror(errno));
  return 0;
}

int mori_trace_configure(const char *text, int rank, size_t capacity) {
  unsigned sinks;
  char pattern[sizeof(file_path)];
  int rc = mori_trace_parse(text, &sinks, pattern, sizeof(pattern));
  if (rc) return rc;
  char path[sizeof(file_path)] = "";
  if ((sinks & MORI_TRACE_FILE) && (rc = expand_path(pattern, rank, path, sizeof(path))) != 0) return rc;
  if ((sinks & MORI_TRACE_FILE) && (rc = check_writable(path)) != 0) return rc;
  if ((sinks & MORI_TRACE_NVTX) && load_ranges() != 0) sinks &= ~(unsigned)MORI_TRACE_NVTX;
  mori_trace_flush(); /* what an earlier configuration kept */
  event_t *fresh = NULL;
  if (sinks & MORI_TRACE_FILE) {
    if (capacity == 0) capacity = 1;
    fresh = calloc(capacity, sizeof(*fresh));
    if (!fresh) return mori_error_set(MORI_ENOMEM, "MORI_TRACE: %zu events of trace buffer", capacity);
  }
  atomic_store_explicit(&mori_trace_sinks, 0, memory_order_relaxed);
  pthread_mutex_lock(&lock);
  free(ring);
  ring = fresh;
  ring_cap = fresh ? capacity : 0;
  ring_next = ring_count = 0;
  dropped = 0;
  snprintf(file_path, sizeof(file_path), "%s", path);
  trace_rank = rank;
  owner = getpid();
  struct timespec mono, real;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  realtime_minus_monotonic_ns = ((int64_t)real.tv_sec - (int64_t)mono.tv_sec) * 1000000000ll +
                                ((int64_t)real.tv_nsec - (int64_t)mono.tv_nsec);
  pthread_mutex_unlock(&lock);
  static bool at_exit;
  if (fresh && !at_exit) at_exit = atexit(flush_at_exit) == 0;
  atomic_store_explicit(&mori_trace_sinks, sinks, memory_order_release);
  if (sinks & MORI_TRACE_FILE) MORI_INFO("MORI_TRACE: rank %d writes %s", rank, path);
  return 0;
}

int mori_trace_setup(int rank) {
  static pthread_mutex_t once_lock = PTHREAD_MUTEX_INITIALIZER;
  static bool done;
  static int first_rc;
  static char first_error[512];
  pthread_mutex_lock(&once_lock);
  if (!done) {
    first_rc = mori_trace_configure(mori_env_string("MORI_TRACE"), rank, MORI_TRACE_DEFAULT_CAPACITY);
    if (first_rc) snprintf(first_error, sizeof(first_error), "%s", mori_last_error());
    done = true;
  }
  int rc = first_rc ? mori_error_set(first_rc, "%s", first_error) : 0;
  pthread_mutex_unlock(&once_lock);
  return rc;
}

const char *mori_trace_file_path(void) { return file_path; }

unsigned mori_trace_enabled(void) { return atomic_load_explicit(&mori_trace_sinks, memory_order_relaxed); }

/* ---- events ---- */

void mori_trace_begin(mori_trace_scope_t *s, const char *name, const mori_trace_arg_t *args, int nargs) {
  unsigned sinks = atomic_load_explicit(&mori_trace_sinks, memory_order_acquire);
  if (!sinks) return;
  s->name = name;
  s->sinks = sinks;
  s->nargs = nargs < MORI_TRACE_MAX_ARGS ? nargs : MORI_TRACE_MAX_ARGS;
  if (s->nargs > 0) memcpy(s->args, args, (size_t)s->nargs * sizeof(*args));
  if (sinks & MORI_TRACE_NVTX) range_push(s);
  s->start_ns = now_ns();
}

void mori_trace_set_arg(mori_trace_scope_t *s, const char *key, long long value) {
  int i = 0;
  while (i < s->nargs && strcmp(s->args[i].key, key) != 0) i++;
  if (i == MORI_TRACE_MAX_ARGS) return;
  if (i == s->nargs) s->nargs++;
  s->args[i] = MORI_TA(key, value);
}

void mori_trace_end(mori_trace_scope_t *s) {
  uint64_t end = now_ns();
  if (s->sinks & MORI_TRACE_NVTX) ranges.pop();
  if (!(s->sinks & MORI_TRACE_FILE)) return;
  int32_t tid = thread_id();
  pthread_mutex_lock(&lock);
  if (ring) {
    event_t *e = &ring[ring_next];
    ring_next = (ring_next + 1) % ring_cap;
    if (ring_count < ring_cap) ring_count++;
    else dropped++;
    e->name = s->name;
    e->start_ns = s->start_ns;
    e->dur_ns = end - s->start_ns;
    e->tid = tid;
    e->nargs = s->nargs;
    for (int i = 0; i < s->nargs; i++) {
      e->keys[i] = s->args[i].key;
      e->nums[i] = s->args[i].num;
      e->is_text[i] = s->args[i].str != NULL;
      if (e->is_text[i]) snprintf(e->texts[i], TEXT_LEN, "%s", s->args[i].str);
    }
  }
  pthread_mutex_unlock(&lock);
}

/* ---- the file ---- */

static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static void put_time_us(FILE *f, uint64_t ns) { fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000)); }

int mori_trace_flush(void) {
  pthread_mutex_lock(&lock);
  if (!ring || !file_path[0] || getpid() != owner) {
    pthread_mutex_unlock(&lock);
    return 0;
  }
  char tmp[sizeof(file_path) + 32];
  snprintf(tmp, sizeof(tmp), "%s.tmp%d", file_path, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) {
    int err = errno;
    pthread_mutex_unlock(&lock);
    return mori_error_set(MORI_EIO, "MORI_TRACE: cannot write %s: %s", tmp, strerror(err));
  }
  /* pid: the rank (one track per rank when files are viewed together). */
  int pid = trace_rank >= 0 ? trace_rank : (int)getpid();
  fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"CLOCK_MONOTONIC\",\"rank\":%d,\"os_pid\":%d,"
             "\"realtime_minus_monotonic_us\":%lld,\"dropped_events\":%" PRIu64 "},\n\"traceEvents\":[\n",
          trace_rank, (int)getpid(), (long long)(realtime_minus_monotonic_ns / 1000), dropped);
  fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"mori rank %d\"}}", pid,
          trace_rank);
  size_t first = ring_count < ring_cap ? 0 : ring_next;
  if (dropped) {
    fprintf(f, ",\n{\"name\":\"mori_trace_dropped\",\"ph\":\"X\",\"ts\":");
    put_time_us(f, ring[first].start_ns);
    fprintf(f, ",\"dur\":0,\"pid\":%d,\"tid\":%d,\"args\":{\"dropped\":%" PRIu64 ",\"kept\":%zu}}", pid,
            ring[first].tid, dropped, ring_count);
  }
  for (size_t k = 0; k < ring_count; k++) {
    const event_t *e = &ring[(first + k) % ring_cap];
    fprintf(f, ",\n{\"name\":");
    put_string(f, e->name);
    fprintf(f, ",\"cat\":\"mori\",\"ph\":\"X\",\"ts\":");
    put_time_us(f, e->start_ns);
    fprintf(f, ",\"dur\":");
    put_time_us(f, e->dur_ns);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"args\":{", pid, (int)e->tid);
    for (int i = 0; i < e->nargs; i++) {
      if (i) fputc(',', f);
      put_string(f, e->keys[i]);
      fputc(':', f);
      if (e->is_text[i]) put_string(f, e->texts[i]);
      else fprintf(f, "%lld", e->nums[i]);
    }
    fprintf(f, "}}");
  }
  fprintf(f, "\n]}\n");
  int bad = ferror(f);
  bad |= fclose(f);
  int rc = 0;
  if (bad || rename(tmp, file_path) != 0) {
    int err = errno;
    unlink(tmp);
    rc = mori_error_set(MORI_EIO, "MORI_TRACE: cannot write %s: %s", file_path, strerror(err));
  }
  pthread_mutex_unlock(&lock);
  return rc;
}
