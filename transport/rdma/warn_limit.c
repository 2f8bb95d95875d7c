// SPDX-License-Identifier: MIT
/* Rate-limited warnings (warn_limit.h). */
#include "transport/rdma/warn_limit.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "core/base/log.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rdma_warn_limited(rdma_warn_limit_t *l, const char *fmt, ...) {
  if (!mori_log_enabled(MORI_LOG_WARN)) return;
  int64_t now = now_ms();
  pthread_mutex_lock(&l->lock);
  if (now - l->period_start_ms >= RDMA_WARN_PERIOD_MS) {
    l->period_start_ms = now;
    l->in_period = 0;
  }
  bool print = l->in_period < RDMA_WARN_BURST;
  uint64_t left_out = 0;
  if (print) {
    l->in_period++;
    left_out = l->suppressed;
    l->suppressed = 0;
  } else {
    l->suppressed++;
    l->suppressed_total++;
  }
  pthread_mutex_unlock(&l->lock);
  if (!print) return;
  char text[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (left_out)
    mori_log_write(MORI_LOG_WARN, "%s (and %llu more %s before it, not shown: at most %d lines a second)", text,
                   (unsigned long long)left_out, l->kind, RDMA_WARN_BURST);
  else
    mori_log_write(MORI_LOG_WARN, "%s", text);
}

void rdma_warn_limit_flush(rdma_warn_limit_t *l) {
  pthread_mutex_lock(&l->lock);
  uint64_t left_out = l->suppressed;
  l->suppressed = 0;
  pthread_mutex_unlock(&l->lock);
  if (left_out)
    MORI_WARN("%llu more %s were not shown (at most %d lines a second)", (unsigned long long)left_out, l->kind,
              RDMA_WARN_BURST);
}

uint64_t rdma_warn_suppressed_total(rdma_warn_limit_t *l) {
  pthread_mutex_lock(&l->lock);
  uint64_t n = l->suppressed_total;
  pthread_mutex_unlock(&l->lock);
  return n;
}
