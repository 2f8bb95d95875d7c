// SPDX-License-Identifier: MIT
/* mori_info_write (mori/info.h): gathers the report, then rank 0 (every
 * process without MORI_INFO_COMM) writes it, text or JSON, to the fd. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/error.h"
#include "mori/info.h"
#include "tools/info/report.h"

static int write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return mori_error_set(MORI_EIO, "mori_info: writing the report to fd %d: %s", fd, strerror(errno));
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int mori_info_write(int fd, unsigned flags) {
  if (flags & ~(unsigned)(MORI_INFO_JSON | MORI_INFO_COMM))
    return mori_error_set(MORI_EINVAL, "mori_info_write: unknown flags 0x%x", flags);
  info_report_t r;
  memset(&r, 0, sizeof(r));
  int rc = info_gather_local(&r);
  if (!rc) rc = info_gather_comm(&r, (flags & MORI_INFO_COMM) != 0);
  char saved[512];
  snprintf(saved, sizeof(saved), "%s", rc ? mori_last_error() : "");
  int wrc = 0;
  /* A failed comm is shown by the one that failed, whichever rank it is. */
  if (r.rank == 0 || !r.comm_made) {
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
      info_report_free(&r);
      return mori_error_set(MORI_ENOMEM, "mori_info: the report's buffer");
    }
    if (flags & MORI_INFO_JSON)
      info_print_json(out, &r);
    else
      info_print_text(out, &r);
    fclose(out);
    wrc = write_all(fd, text, len);
    free(text);
  }
  info_report_free(&r);
  if (rc) return mori_error_report(rc, "%s", saved);
  return wrc;
}
