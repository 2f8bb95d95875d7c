// SPDX-License-Identifier: MIT
/* Warnings that can come in floods (a peer node dies and every request
 * in flight to it completes flushed; a kernel submits hundreds of bad
 * requests): at most RDMA_WARN_BURST lines of one kind per second; the
 * first line after a suppressed stretch says how many were left out, and
 * so does the last word (rdma_warn_limit_flush, at teardown). One limiter
 * per kind of warning, shared by the threads that warn (its own lock). */
#ifndef MORI_TRANSPORT_RDMA_WARN_LIMIT_H
#define MORI_TRANSPORT_RDMA_WARN_LIMIT_H

#include <pthread.h>
#include <stdint.h>

#include "core/base/error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { RDMA_WARN_BURST = 5, RDMA_WARN_PERIOD_MS = 1000 };

typedef struct rdma_warn_limit {
  pthread_mutex_t lock;
  int64_t period_start_ms;
  uint32_t in_period; /* lines printed in this period */
  uint64_t suppressed; /* since the last line printed */
  uint64_t suppressed_total;
  const char *kind; /* what the summary line calls them */
} rdma_warn_limit_t;

#define RDMA_WARN_LIMIT_INIT(kind_text) {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, kind_text}

/* A warning, printed or counted as suppressed. */
void rdma_warn_limited(rdma_warn_limit_t *l, const char *fmt, ...) MORI_PRINTF(2, 3);
/* Says how many were suppressed since the last line, if any. */
void rdma_warn_limit_flush(rdma_warn_limit_t *l);
/* How many warnings of this kind were suppressed so far (tests). */
uint64_t rdma_warn_suppressed_total(rdma_warn_limit_t *l);

#ifdef __cplusplus
}
#endif

#endif
