// SPDX-License-Identifier: MIT
/* mori_version() and the one INFO line per process that names it. */
#include <pthread.h>

#include "core/base/log.h"
#include "core/internal/version_log.h"
#include "core/platform/platform.h"
#include "mori/version.h"

const char *mori_version(void) { return MORI_VERSION_STRING; }

static void log_version(void) { MORI_INFO("mori %s (platform %s)", MORI_VERSION_STRING, mori_platform_name()); }

void mori_version_log_once(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, log_version);
}
