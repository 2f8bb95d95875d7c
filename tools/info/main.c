// SPDX-License-Identifier: MIT
/* mori_info: prints what mori finds on this machine (mori/info.h); with
 * --comm, run under a launcher (mori_launch -n 4 mori_info --comm), how each
 * rank reaches each peer. See docs/troubleshooting.md. */
#include <stdio.h>
#include <string.h>

#include "mori/info.h"

static void usage(FILE *to, const char *argv0) {
  fprintf(to,
          "usage: %s [--json] [--comm]\n"
          "\n"
          "Prints mori's version and platform, the devices and their architecture, the\n"
          "handle types that work, the transports (and why one is unavailable), the\n"
          "heap's settings and every MORI_* variable set, with a warning for a name\n"
          "mori does not know.\n"
          "\n"
          "  --json    one JSON document instead of text\n"
          "  --comm    under a launcher (mori_launch -n 4 %s --comm): make a comm\n"
          "            over every rank and add how each rank reaches each peer (LSA\n"
          "            team, transport and why, rail, NIC); rank 0 prints the report\n"
          "  -h, --help  this text\n",
          argv0, argv0);
}

int main(int argc, char **argv) {
  unsigned flags = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      flags |= MORI_INFO_JSON;
    } else if (!strcmp(argv[i], "--comm")) {
      flags |= MORI_INFO_COMM;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout, argv[0]);
      return 0;
    } else {
      fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], argv[i]);
      usage(stderr, argv[0]);
      return 2;
    }
  }
  int rc = mori_info_write(1, flags);
  if (rc) {
    fprintf(stderr, "mori_info: %s: %s\n", mori_err_name(rc), mori_last_error());
    return 1;
  }
  return 0;
}
