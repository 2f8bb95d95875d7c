/* Leveled logging to stderr, configured once from MORI_LOG_LEVEL. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/log.h"

static atomic_int log_level = -1; /* -1: not read from the environment yet */
static atomic_int log_rank = -1;

static int level_from_env(void) {
  const char *s = getenv("MORI_LOG_LEVEL");
  if (!s) return MORI_LOG_WARN;
  if (!strcasecmp(s, "error")) return MORI_LOG_ERROR;
  if (!strcasecmp(s, "warn")) return MORI_LOG_WARN;
  if (!strcasecmp(s, "info")) return MORI_LOG_INFO;
  if (!strcasecmp(s, "debug")) return MORI_LOG_DEBUG;
  return atoi(s);
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
  static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
  char line[1200];
  int n = snprintf(line, sizeof(line), "[mori %s pid %d rank %d] ",
                   names[level < 0 ? 0 : level > 3 ? 3 : level], (int)getpid(),
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
