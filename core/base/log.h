// SPDX-License-Identifier: MIT
/* Logging to stderr with a level from MORI_GLOBAL_LOG_LEVEL (TRACE, DEBUG,
 * INFO, WARN, ERROR; default WARN); MORI_LOG_LEVEL is read when the former
 * is unset. Each line names the process's rank when known; warnings and
 * errors of one call site are rate-limited (log.c). */
#ifndef MORI_CORE_BASE_LOG_H
#define MORI_CORE_BASE_LOG_H

#include "core/base/error.h"

MORI_EXTERN_C_BEGIN

enum mori_log_level { MORI_LOG_ERROR = 0, MORI_LOG_WARN, MORI_LOG_INFO, MORI_LOG_DEBUG, MORI_LOG_TRACE };

int mori_log_enabled(int level);
void mori_log_write(int level, const char *fmt, ...) MORI_PRINTF(2, 3);
/* The rank printed in log lines (-1: unknown). */
void mori_log_set_rank(int rank);
/* The rank set last (-1 before any comm): error messages name it. */
int mori_log_rank(void);
/* The level a variable's text names (case-insensitive names, or 0-4);
 * -1 when it names none. */
int mori_log_parse_level(const char *text);

#define MORI_LOG(level, ...)                                                   \
  do {                                                                         \
    if (mori_log_enabled(level)) mori_log_write(level, __VA_ARGS__);          \
  } while (0)
#define MORI_WARN(...) MORI_LOG(MORI_LOG_WARN, __VA_ARGS__)
#define MORI_INFO(...) MORI_LOG(MORI_LOG_INFO, __VA_ARGS__)
#define MORI_DEBUG(...) MORI_LOG(MORI_LOG_DEBUG, __VA_ARGS__)
#define MORI_TRACE(...) MORI_LOG(MORI_LOG_TRACE, __VA_ARGS__)

MORI_EXTERN_C_END

#endif
