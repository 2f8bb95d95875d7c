// SPDX-License-Identifier: MIT
/* Leveled logging to stderr, configured once from MORI_GLOBAL_LOG_LEVEL
 * (the Shmem Guide's name) or its older alias MORI_LOG_LEVEL; WARN when
 * neither is set (a run that goes well prints nothing). Warnings and errors
 * of one call site are rate-limited: a burst (one per dropped connection,
 * one per flushed request) prints its first lines and then how many were
 * suppressed. */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/base/log.h"

static atomic_int log_level = -1; /* -1: not read from the environment yet */
static atomic_int log_rank = -1;

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

int mori_log_parse_level(const char *text) {
  if (!text) return -1;
  for (int i = 0; i <= MORI_LOG_TRACE; i++)
    if (!strcasecmp(text, level_names[i])) return i;
  if (!strcasecmp(text, "warning")) return MORI_LOG_WARN;
  if (text[0] >= '0' && text[0] <= '4' && text[1] == '\0') return text[0] - '0';
  return -1;
}

static int level_from_env(void) {
  static const char *const names[] = {"MORI_GLOBAL_LOG_LEVEL", "MORI_LOG_LEVEL"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    const char *s = getenv(names[i]);
    if (!s || !*s) continue;
    int level = mori_log_parse_level(s);
    if (level >= 0) return level;
    /* Said once, whatever the level: a misspelt level silences nothing. */
    char line[200];
    int n = snprintf(line, sizeof(line), "[mori WARN pid %d] %s=\"%.40s\" is not one of TRACE, DEBUG, INFO, WARN, ERROR; using WARN\n",
                     (int)getpid(), names[i], s);
    ssize_t unused = write(2, line, (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1));
    (void)unused;
    return MORI_LOG_WARN;
  }
  return MORI_LOG_WARN;
}

int mori_log_enabled(int level) {
  int current = atomic_load(&log_level);
  if (current < 0) {
    current = level_from_env();
    atomic_store(&log_level, current);
  }
  return level <= current;
}

void mori_log_set_rank(int rank) { atomic_store(&log_rank, rank); }
int mori_log_rank(void) { return atomic_load(&log_rank); }

/* The rate limit: per call site (its format string), at most
 * LOG_BURST lines in LOG_WINDOW_S seconds; the first line after a window
 * that suppressed some says how many. A few sites are tracked at once; the
 * least recently used one makes room. */
enum { LOG_BURST = 5, LOG_WINDOW_S = 10, LOG_SITES = 32 };
struct log_site {
  const char *fmt;
  int64_t window_start, last_use;
  int printed, suppressed;
};
static struct log_site log_sites[LOG_SITES];
static pthread_mutex_t log_sites_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec;
}

/* Whether a line of `fmt` prints now; *suppressed: how many of its lines
 * the last window held back (to be said with this one). */
static bool log_admit(const char *fmt, int *suppressed) {
  *suppressed = 0;
  int64_t now = now_s();
  pthread_mutex_lock(&log_sites_lock);
  struct log_site *site = NULL, *oldest = &log_sites[0];
  for (int i = 0; i < LOG_SITES && !site; i++) {
    if (log_sites[i].fmt == fmt) site = &log_sites[i];
    else if (log_sites[i].last_use < oldest->last_use) oldest = &log_sites[i];
  }
  if (!site) {
    site = oldest;
    *site = (struct log_site){.fmt = fmt, .window_start = now};
  }
  site->last_use = now;
  if (now - site->window_start >= LOG_WINDOW_S) {
    *suppressed = site->suppressed;
    site->window_start = now;
    site->printed = 0;
    site->suppressed = 0;
  }
  bool admit = site->printed < LOG_BURST;
  if (admit) site->printed++;
  else site->suppressed++;
  pthread_mutex_unlock(&log_sites_lock);
  return admit;
}

void mori_log_write(int level, const char *fmt, ...) {
  int suppressed = 0;
  if (level <= MORI_LOG_WARN && !log_admit(fmt, &suppressed)) return;
  char line[1200];
  int n = snprintf(line, sizeof(line), "[mori %s pid %d rank %d] ",
                   level_names[level < 0 ? 0 : level > MORI_LOG_TRACE ? MORI_LOG_TRACE : level], (int)getpid(),
                   atomic_load(&log_rank));
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = strlen(line);
  if (suppressed)
    len += (size_t)snprintf(line + len, sizeof(line) - len - 1, " (%d more like this suppressed in the last %d s)", suppressed,
                            LOG_WINDOW_S);
  if (len > sizeof(line) - 2) len = sizeof(line) - 2;
  line[len] = '\n';
  /* One write per line so lines of concurrent ranks do not interleave. */
  ssize_t unused = write(2, line, len + 1);
  (void)unused;
}
