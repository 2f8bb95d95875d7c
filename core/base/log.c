// SPDX-License-Identifier: MIT
/* Leveled logging to stderr, configured once from MORI_GLOBAL_LOG_LEVEL
 * (the Shmem Guide's name) or its older alias MORI_LOG_LEVEL. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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
    int n = snprintf(line, sizeof(line), "[mori WARN pid %d] %s=\"%.40s\" is not one of TRACE, DEBUG, INFO, WARN, ERROR; using INFO\n",
                     (int)getpid(), names[i], s);
    ssize_t unused = write(2, line, (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1));
    (void)unused;
    return MORI_LOG_INFO;
  }
  return MORI_LOG_INFO;
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

void mori_log_write(int level, const char *fmt, ...) {
  char line[1200];
  int n = snprintf(line, sizeof(line), "[mori %s pid %d rank %d] ",
                   level_names[level < 0 ? 0 : level > MORI_LOG_TRACE ? MORI_LOG_TRACE : level], (int)getpid(),
                   atomic_load(&log_rank));
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = strlen(line);
  line[len] = '\n';
  /* One write per line so lines of concurrent ranks do not interleave. */
  ssize_t unused = write(2, line, len + 1);
  (void)unused;
}
