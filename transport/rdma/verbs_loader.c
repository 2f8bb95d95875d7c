// SPDX-License-Identifier: MIT
/* libibverbs, loaded once through the shared dlopen helper. */
#include "transport/rdma/verbs_loader.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/dynlib.h"
#include "core/base/error.h"
#include "transport/rdma/ce_nic.h"

static struct mori_verbs verbs;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_status;
static char load_message[512];

static void load(void) {
  static const char *const names[] = {"libibverbs.so.1", "libibverbs.so", NULL};
  static const mori_dynlib_symbol_t symbols[] = {
#define MORI_VERBS_SYMBOL(f) MORI_DYNLIB_ENTRY(verbs, f, #f)
      MORI_VERBS_FUNCS(MORI_VERBS_SYMBOL)
#undef MORI_VERBS_SYMBOL
  };
  load_status = mori_dynlib_load(names, symbols, sizeof(symbols) / sizeof(symbols[0]), MORI_ENODEV, NULL);
  if (load_status) snprintf(load_message, sizeof(load_message), "rdma: %s", mori_last_error());
}

static const struct mori_verbs *replacement;

void mori_verbs_replace(const struct mori_verbs *v) { __atomic_store_n(&replacement, v, __ATOMIC_RELEASE); }

int mori_verbs_load(const struct mori_verbs **out) {
  const struct mori_verbs *r = __atomic_load_n(&replacement, __ATOMIC_ACQUIRE);
  if (r) {
    *out = r;
    return 0;
  }
  /* The executor: libibverbs, or mori's copy-engine NIC (ce_nic.h). */
  const char *executor = getenv("MORI_RDMA_EXECUTOR");
  if (executor && !strcmp(executor, "copy_engine")) {
    *out = mori_ce_nic_verbs();
    return 0;
  }
  if (executor && *executor && strcmp(executor, "verbs") != 0)
    return mori_error_set(MORI_EINVAL, "rdma: MORI_RDMA_EXECUTOR=\"%s\": expected verbs (libibverbs, the default) or copy_engine",
                          executor);
  pthread_once(&once, load);
  if (load_status) return mori_error_set(load_status, "%s", load_message);
  *out = &verbs;
  return 0;
}
