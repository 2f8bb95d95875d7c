// SPDX-License-Identifier: MIT
/* Starts N ranks of a job on this machine: forks N processes, gives each
 * MORI_RANK / MORI_WORLD_SIZE / MORI_LOCAL_RANK / MORI_BOOTSTRAP_ADDR and a
 * fresh MORI_BOOTSTRAP_SECRET, and hands rank 0 an already-listening
 * bootstrap socket (no port race). Waits
 * with a time limit; a rank that fails or hangs is named, the rest are
 * stopped. Used by the mori_launch tool and by the test harness. */
#ifndef MORI_TOOLS_LAUNCH_H
#define MORI_TOOLS_LAUNCH_H

#include "mori/error.h"

MORI_EXTERN_C_BEGIN

enum { MORI_LAUNCH_MAX_RANKS = 1024 };

/* Runs in the child; its return value is the child's exit code. */
typedef int (*mori_rank_fn)(int rank, int size, void *arg);

typedef struct mori_launch_result {
  int failed_rank;      /* first rank that failed or hung, or -1 */
  int exit_code[MORI_LAUNCH_MAX_RANKS]; /* >= 0 exit code, -N killed by signal N, -1000 hung */
  char message[512];    /* what went wrong, naming the rank(s) */
} mori_launch_result_t;

/* 0 when every rank exited 0; else MORI_EIO / MORI_ETIMEDOUT with
 * result->message naming the ranks. */
MORI_API int mori_launch_local(int size, int timeout_ms, mori_rank_fn fn, void *arg, mori_launch_result_t *result);

MORI_EXTERN_C_END

#endif
