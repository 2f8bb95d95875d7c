// SPDX-License-Identifier: MIT
/* Tracing of mori's host calls (MORI_TRACE; docs/tracing.md): scoped events
 * with a name and up to MORI_TRACE_MAX_ARGS arguments, sent to NVTX (CUDA)
 * or ROCTX (HIP) ranges, loaded at run time, and/or kept in memory and
 * written as a Chrome/Perfetto trace-event JSON file per rank.
 *
 * One line at the top of a block traces it, up to the block's end:
 *   MORI_TRACE_SCOPE("window_create", MORI_TA("bytes", size), MORI_TS("step", what));
 * When tracing is off this costs one relaxed load of a global and a test;
 * the arguments are not evaluated. Names and argument keys must be string
 * literals (kept by pointer); string values are copied. */
#ifndef MORI_CORE_BASE_TRACE_H
#define MORI_CORE_BASE_TRACE_H

#ifndef __cplusplus
#include <stdatomic.h>
#endif
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/base/error.h"

MORI_EXTERN_C_BEGIN

#define MORI_TRACE_MAX_ARGS 4
/* The events a rank keeps in memory for the file: past this many, the oldest
 * are dropped and the file says how many. */
#define MORI_TRACE_DEFAULT_CAPACITY 65536

enum { MORI_TRACE_NVTX = 1u << 0, MORI_TRACE_FILE = 1u << 1 };


typedef struct mori_trace_arg {
  const char *key; /* a literal; NULL: unused */
  long long num;
  const char *str; /* non-NULL: a text value (copied), num unused */
} mori_trace_arg_t;

typedef struct mori_trace_scope {
  const char *name; /* NULL: tracing was off at the start */
  uint64_t start_ns;
  unsigned sinks;
  int nargs;
  mori_trace_arg_t args[MORI_TRACE_MAX_ARGS];
} mori_trace_scope_t;

#define MORI_TA(key, value) ((mori_trace_arg_t){(key), (long long)(value), NULL})
#define MORI_TS(key, text) ((mori_trace_arg_t){(key), 0, (text)})

/* Parses a MORI_TRACE value ("nvtx", "file:PATH", both comma-separated; empty:
 * off) into sinks and the file path (cut to path_len). MORI_EINVAL naming
 * the variable and the part it does not understand. */
int mori_trace_parse(const char *text, unsigned *sinks, char *path, size_t path_len);

/* Configures tracing from MORI_TRACE, once per process (the first comm; later
 * calls return the first result). `rank` names the file (%r) and the trace's
 * process. */
int mori_trace_setup(int rank);

/* Configures from `text` now, replacing any earlier configuration (its events
 * are written first): for tests, and what mori_trace_setup calls. */
int mori_trace_configure(const char *text, int rank, size_t capacity);

/* Writes the file (all events kept so far) when the file sink is on: at
 * mori_finalize and at exit. Safe to call again: each call rewrites it
 * whole, through a temporary file renamed into place. */
int mori_trace_flush(void);

/* The path the file sink writes ("" when off). */
const char *mori_trace_file_path(void);

/* The sinks in use now (MORI_TRACE_* bits); 0 when off. */
unsigned mori_trace_enabled(void);

void mori_trace_begin(mori_trace_scope_t *s, const char *name, const mori_trace_arg_t *args, int nargs);
void mori_trace_end(mori_trace_scope_t *s);

void mori_trace_set_arg(mori_trace_scope_t *s, const char *key, long long value);

#ifndef __cplusplus
/* The sinks in use (MORI_TRACE_* bits); 0 when off. The macros below are C
 * (the SDK's language); C++ tests call the functions above. */
extern _Atomic unsigned mori_trace_sinks;

static inline void mori_trace_scope_close(mori_trace_scope_t *s) {
  if (s->name) mori_trace_end(s);
}

#define MORI_TRACE_ON() (atomic_load_explicit(&mori_trace_sinks, memory_order_relaxed) != 0)

/* Traces the rest of the enclosing block; one per block. */
#define MORI_TRACE_SCOPE(event, ...)                                                                       \
  mori_trace_scope_t mori_trace_scope_ __attribute__((cleanup(mori_trace_scope_close)));                   \
  mori_trace_scope_.name = NULL; /* the rest is set only when tracing: nothing else to clear when off */   \
  if (MORI_TRACE_ON()) {                                                                                   \
    const mori_trace_arg_t mori_trace_args_[] = {__VA_ARGS__};                                             \
    mori_trace_begin(&mori_trace_scope_, (event), mori_trace_args_,                                        \
                     (int)(sizeof(mori_trace_args_) / sizeof(mori_trace_args_[0])));                       \
  }

/* Sets (or adds) an argument of the block's scope, for values known only
 * after the start (a window's id, a result). */
#define MORI_TRACE_SET(key, value)                                                   \
  do {                                                                               \
    if (mori_trace_scope_.name) mori_trace_set_arg(&mori_trace_scope_, (key), (long long)(value)); \
  } while (0)
#endif

MORI_EXTERN_C_END

#endif
