// SPDX-License-Identifier: MIT
/* The launcher's side of ranks' output: one pipe per rank and stream, read
 * without blocking, each complete line written to the launcher's own stream
 * at once with "[rank] " in front (so lines of different ranks never mix). */
#ifndef MORI_TOOLS_LAUNCH_RANK_OUTPUT_H
#define MORI_TOOLS_LAUNCH_RANK_OUTPUT_H

#include <stddef.h>

typedef struct rank_output rank_output_t;

/* Pipes for `size` ranks; NULL (errno set) when they cannot be made. */
rank_output_t *rank_output_create(int size);
/* In the child of `rank`, before it runs: its stdout and stderr become the
 * pipes' write ends; every other pipe end is closed when it execs. */
void rank_output_attach_child(rank_output_t *o, int rank);
/* In the launcher, after forking `rank`: drops that rank's write ends. */
void rank_output_forked(rank_output_t *o, int rank);
/* Copies what has arrived, waiting at most wait_ms for something. A write
 * to the launcher's own stream waits for its reader until write_until (ms
 * of CLOCK_MONOTONIC; 0: no limit); once one waited that long, every later
 * line is dropped, so a reader that never reads cannot hold the launcher
 * (and its ranks, blocked on their full pipes) past the job's limit. */
void rank_output_pump(rank_output_t *o, int wait_ms, long long write_until);
/* After the ranks have ended: copies what is left while it still flows
 * (at most linger_ms, the writes included; a pipe idle for 200 ms, which a
 * rank's own children may hold, is not waited for), ends partial lines,
 * frees. */
void rank_output_finish(rank_output_t *o, int linger_ms);
/* Writes n bytes to fd, waiting for room at most until until_ms (as above;
 * 0: no limit): 0 when all went, -1 when the reader took longer or the
 * stream is gone (the rest is not written). */
int rank_output_write_until(int fd, const char *p, size_t n, long long until_ms);
/* Now, in the ms of CLOCK_MONOTONIC every deadline above counts in. */
long long rank_output_now_ms(void);

#endif
