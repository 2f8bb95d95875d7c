// SPDX-License-Identifier: MIT
/* Starts N ranks of a job on this machine: forks N processes, gives each
 * MORI_RANK / MORI_WORLD_SIZE / MORI_LOCAL_RANK / MORI_LOCAL_SIZE /
 * MORI_BOOTSTRAP_ADDR and a fresh MORI_BOOTSTRAP_SECRET, and hands rank 0
 * an already-listening bootstrap socket (no port race). Then waits, with a
 * time limit. The first rank that exits non-zero or dies is the job's
 * failure: every other rank is stopped at once (SIGTERM, SIGKILL after
 * MORI_LAUNCH_GRACE_MS), so nobody waits for a peer that is gone. A rank
 * that hangs past the limit is stopped the same way. The result names the
 * failed rank and how it failed. Used by the mori_launch tool and by the
 * test harness. */
#ifndef MORI_TOOLS_LAUNCH_H
#define MORI_TOOLS_LAUNCH_H

#include <signal.h>

#include "mori/error.h"

MORI_EXTERN_C_BEGIN

enum {
  MORI_LAUNCH_MAX_RANKS = 1024,
  MORI_LAUNCH_GRACE_MS = 500,        /* from SIGTERM to SIGKILL for a rank being stopped */
  MORI_LAUNCH_HUNG = -1000,          /* exit_code: still running at the time limit */
  MORI_LAUNCH_STOPPED = -2000,       /* exit_code: stopped because another rank failed */
};

/* Runs in the child; its return value is the child's exit code. */
typedef int (*mori_rank_fn)(int rank, int size, void *arg);

typedef struct mori_launch_options {
  int size;          /* ranks, 1..MORI_LAUNCH_MAX_RANKS */
  int timeout_ms;    /* the job's time limit; <= 0: 600 s */
  /* Each line a rank writes to stdout or stderr reaches the same stream of
   * the launcher with "[rank] " in front (ranks' output goes through pipes). */
  int prefix_output;
  /* Every rank gets SIGKILL if the launcher itself dies. */
  int die_with_launcher;
  /* Each rank leads its own process group, and stopping a rank signals the
   * group: what the rank started itself (a shell's children) stops too. A
   * terminal's Ctrl-C then reaches the launcher alone: watch it through
   * `stop`. */
  int process_groups;
  /* When *stop becomes non-zero (a signal handler sets it), every rank is
   * stopped and the job ends as interrupted. NULL: not watched. */
  volatile sig_atomic_t *stop;
} mori_launch_options_t;

typedef struct mori_launch_result {
  int failed_rank;      /* the rank that failed first (the cause), or -1 */
  int timed_out;        /* 1 when the time limit ended the job */
  int interrupted;      /* 1 when *stop ended the job */
  /* per rank: >= 0 exit code, -N killed by signal N, MORI_LAUNCH_HUNG,
   * MORI_LAUNCH_STOPPED */
  int exit_code[MORI_LAUNCH_MAX_RANKS];
  char message[512];    /* what went wrong, naming the rank(s) */
} mori_launch_result_t;

/* 0 when every rank exited 0; else MORI_EIO (a rank failed), MORI_ETIMEDOUT
 * (the time limit), MORI_ECANCELED (stopped through opts->stop) or the
 * launcher's own failure, with result->message naming the ranks. */
MORI_API int mori_launch_run(const mori_launch_options_t *opts, mori_rank_fn fn, void *arg,
                             mori_launch_result_t *result);

/* mori_launch_run with ranks' output as it is (no prefixes). */
MORI_API int mori_launch_local(int size, int timeout_ms, mori_rank_fn fn, void *arg, mori_launch_result_t *result);

MORI_EXTERN_C_END

#endif
