// SPDX-License-Identifier: MIT
/* Agreement (agreement.c): every rank of a comm contributes its status of a
 * step, and either every rank succeeds or every rank fails with the same
 * verdict, naming the rank(s) that failed and carrying each one's own
 * message. The one place mori writes "all succeed, or all fail naming who":
 * core's collective steps (segments, heap chunks, the window rendezvous,
 * symmetric allocation) and shmem's (init, malloc, free, barrier, MPI start)
 * use it. */
#ifndef MORI_CORE_INTERNAL_AGREEMENT_H
#define MORI_CORE_INTERNAL_AGREEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "mori/comm.h"

MORI_EXTERN_C_BEGIN

/* A failed rank's message as its peers receive it: at most this many bytes
 * (longer ones are cut); the failed rank itself keeps its whole message. */
enum { MORI_AGREEMENT_TEXT = 236 };

/* One rank's status and, when it failed, its message. */
typedef struct mori_agreement_note {
  int32_t status; /* 0, or a negative MORI_E* */
  char text[MORI_AGREEMENT_TEXT];
} mori_agreement_note_t;

/* Collective over the comm. 0 when every rank's status is 0. Otherwise every
 * rank returns the same verdict:
 *   code: this rank's own status when it failed, else the first failed
 *         rank's (a code that is not one of mori's reads as MORI_EIO);
 *   message: "<step>: rank(s) 1, 3 failed; rank 1: <its message>; rank 3:
 *         <its message>" (a failed rank's message is its thread's last error
 *         when it called; its own entry is whole on that rank).
 * The happy path is one collective step of a 4-byte status; only when some
 * rank failed does a second step carry the messages. A failure of the
 * exchange itself (a peer gone) is returned as the transport reported it. */
int mori_agree(mori_comm_t *comm, int my_status, const char *step);
/* The same, waiting grace_ms beyond the comm's timeout for ranks that may
 * come late (mori_comm_allgather_grace). */
int mori_agree_grace(mori_comm_t *comm, int my_status, const char *step, int grace_ms);

/* The same step carrying `bytes` of payload per rank: on success all[r]
 * (all: comm size × bytes) holds rank r's `mine`, so a caller can check
 * what the ranks sent in the same step. On failure `all` is undefined. A
 * rank whose my_status is nonzero may pass NULL for `all` (the step fails,
 * and nothing is written there): a rank that had no memory for the table
 * still takes the step, so the peers learn of it at once. */
int mori_agree_gather(mori_comm_t *comm, int my_status, const char *step, const void *mine, void *all, size_t bytes);

/* The halves of an agreement whose exchange is not a comm's (MPI at shmem
 * start-up): fill this rank's note (its status and, when nonzero, the
 * thread's last error), exchange the notes however, then read the verdict.
 * notes: n notes, `stride` bytes apart (a note may sit inside a larger
 * record); `who` names a rank in the message ("rank", "MPI rank"). */
void mori_agreement_note_fill(mori_agreement_note_t *note, int my_status);
int mori_agreement_verdict(const void *notes, size_t stride, int n, int me, const char *own, const char *step,
                           const char *who);

MORI_EXTERN_C_END

#endif
