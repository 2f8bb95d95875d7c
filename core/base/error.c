// SPDX-License-Identifier: MIT
/* Error codes and the thread-local last-error message. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"

enum { ERROR_MESSAGE_MAX = 1024 };
static _Thread_local char last_error[ERROR_MESSAGE_MAX];

const char *mori_strerror(int code) {
  switch (code) {
#define MORI_ERRNO_DESC(name, value, desc) \
  case value:                              \
    return desc;
    MORI_ERRNO_MAP(MORI_ERRNO_DESC)
#undef MORI_ERRNO_DESC
  }
  return "unknown error";
}

const char *mori_err_name(int code) {
  switch (code) {
#define MORI_ERRNO_NAME(name, value, desc) \
  case value:                              \
    return "MORI_" #name;
    MORI_ERRNO_MAP(MORI_ERRNO_NAME)
#undef MORI_ERRNO_NAME
  }
  return "MORI_E_UNKNOWN";
}

const char *mori_last_error(void) { return last_error; }

void mori_clear_error(void) { last_error[0] = '\0'; }

int mori_error_set(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof(last_error), fmt, ap);
  va_end(ap);
  return code;
}

int mori_error_report(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof(last_error), fmt, ap);
  va_end(ap);
  return code;
}

int mori_error_context(int code, const char *fmt, ...) {
  char prefix[ERROR_MESSAGE_MAX];
  char previous[ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof(prefix), fmt, ap);
  va_end(ap);
  memcpy(previous, last_error, sizeof(previous));
  if (previous[0])
    snprintf(last_error, sizeof(last_error), "%s: %s", prefix, previous);
  else
    snprintf(last_error, sizeof(last_error), "%s: %s", prefix, mori_strerror(code));
  return code;
}

int mori_error_errno(const char *fmt, ...) {
  int saved = errno;
  char msg[ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  snprintf(last_error, sizeof(last_error), "%s: %s", msg, strerror(saved));
  return saved > 0 ? -saved : MORI_EIO;
}

void mori_error_save(mori_error_saved_t *saved) { snprintf(saved->text, sizeof(saved->text), "%s", last_error); }

void mori_error_restore(const mori_error_saved_t *saved) { snprintf(last_error, sizeof(last_error), "%s", saved->text); }
