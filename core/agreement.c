// SPDX-License-Identifier: MIT
/* See internal/agreement.h. Two steps at most: the statuses (with the
 * caller's payload), and only when some rank failed, the messages. Both
 * use one buffer allocated before the first, so that no rank can drop out
 * between them for want of memory. */
#include "core/internal/agreement.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/trace.h"
#include "core/internal/comm.h"

/* A peer's code is data: only mori's own negative codes are passed on. */
static int code_of(int32_t status) {
  return status < 0 && strcmp(mori_err_name(status), "MORI_E_UNKNOWN") != 0 ? status : MORI_EIO;
}

static const mori_agreement_note_t *note_at(const void *notes, size_t stride, int r) {
  return (const mori_agreement_note_t *)((const char *)notes + (size_t)r * stride);
}

void mori_agreement_note_fill(mori_agreement_note_t *note, int my_status) {
  memset(note, 0, sizeof(*note));
  note->status = my_status;
  if (my_status) snprintf(note->text, sizeof(note->text), "%s", mori_last_error());
}

int mori_agreement_verdict(const void *notes, size_t stride, int n, int me, const char *own, const char *step,
                           const char *who) {
  int first = -1;
  char list[160] = "";
  size_t listed = 0;
  bool cut = false;
  for (int r = 0; r < n; r++) {
    if (!note_at(notes, stride, r)->status) continue;
    if (first < 0) first = r;
    if (listed + 16 < sizeof(list)) {
      listed += (size_t)snprintf(list + listed, sizeof(list) - listed, "%s%d", listed ? ", " : "", r);
    } else if (!cut) {
      snprintf(list + listed, sizeof(list) - listed, ", ..."); /* no room for more */
      cut = true;
    }
  }
  if (first < 0) return 0;
  char msg[1024];
  size_t used = (size_t)snprintf(msg, sizeof(msg), "%s: %s(s) %s failed", step, who, list);
  /* This rank's own message first, whole: at many ranks the others' would
   * fill the message before it. */
  bool own_first = me >= 0 && me < n && note_at(notes, stride, me)->status && own && *own;
  if (own_first) used += (size_t)snprintf(msg + used, sizeof(msg) - used, "; %s %d: %s", who, me, own);
  for (int r = first; r < n && used + 8 < sizeof(msg); r++) {
    const mori_agreement_note_t *note = note_at(notes, stride, r);
    if (!note->status || (r == me && own_first)) continue;
    used += (size_t)snprintf(msg + used, sizeof(msg) - used, "; %s %d: %.*s", who, r, (int)sizeof(note->text),
                             note->text[0] ? note->text : mori_err_name(code_of(note->status)));
  }
  int32_t mine = me >= 0 && me < n ? note_at(notes, stride, me)->status : 0;
  return mori_error_set(mine ? mine : code_of(note_at(notes, stride, first)->status), "%s", msg);
}

static int agree(mori_comm_t *comm, int my_status, const char *step, const void *mine, void *all, size_t bytes,
                 int grace_ms) {
  MORI_TRACE_SCOPE("agree", MORI_TS("step", step), MORI_TA("bytes", bytes), MORI_TA("status", my_status));
  char own[1024] = "";
  if (my_status) snprintf(own, sizeof(own), "%s", mori_last_error());
  int n = comm->size;
  /* A status word (8 bytes, keeping the payload aligned), then the payload. */
  size_t entry = 8 + (bytes + 7) / 8 * 8;
  size_t slot = entry > sizeof(mori_agreement_note_t) ? entry : sizeof(mori_agreement_note_t);
  /* The one allocation this step cannot do without: a rank that fails it
   * cannot take the step, and its peers learn of it only at their timeout. */
  char *send = calloc(1, slot), *table = calloc((size_t)n, slot);
  if (!send || !table) {
    free(send);
    free(table);
    return mori_error_set(MORI_ENOMEM, "%s: rank %d's agreement table (%d x %zu bytes)", step, comm->rank, n,
                          slot);
  }
  int32_t status = my_status;
  memcpy(send, &status, sizeof(status));
  if (bytes) memcpy(send + 8, mine, bytes);
  int rc = mori_comm_allgather_grace(comm, step, send, table, entry, grace_ms);
  int failed = 0;
  for (int r = 0; !rc && r < n; r++) {
    int32_t s;
    memcpy(&s, table + (size_t)r * entry, sizeof(s));
    failed += s != 0;
  }
  if (rc) {
    rc = mori_error_context(rc, "%s: exchanging the ranks' status", step);
  } else if (!failed) {
    for (int r = 0; bytes && r < n; r++) memcpy((char *)all + (size_t)r * bytes, table + (size_t)r * entry + 8, bytes);
  } else {
    /* Every rank saw the same statuses, so every rank takes this step. */
    mori_agreement_note_t note;
    memset(&note, 0, sizeof(note));
    note.status = my_status;
    if (my_status) snprintf(note.text, sizeof(note.text), "%s", own);
    rc = mori_comm_allgather_named(comm, step, &note, table, sizeof(note));
    if (rc)
      rc = mori_error_context(rc, "%s: %d rank(s) failed, and their messages could not be gathered", step, failed);
    else
      rc = mori_agreement_verdict(table, sizeof(note), n, comm->rank, own, step, "rank");
  }
  free(send);
  free(table);
  return rc;
}

int mori_agree_gather(mori_comm_t *comm, int my_status, const char *step, const void *mine, void *all, size_t bytes) {
  return agree(comm, my_status, step, mine, all, bytes, 0);
}

int mori_agree(mori_comm_t *comm, int my_status, const char *step) {
  return agree(comm, my_status, step, NULL, NULL, 0, 0);
}

int mori_agree_grace(mori_comm_t *comm, int my_status, const char *step, int grace_ms) {
  return agree(comm, my_status, step, NULL, NULL, 0, grace_ms);
}
