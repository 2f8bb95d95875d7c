// SPDX-License-Identifier: MIT
/* The provider seam (provider.h): the provider a program set, else
 * libibverbs loaded once through the shared dlopen helper. */
#include "transport/rdma/provider.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "core/base/dynlib.h"
#include "core/base/error.h"

static struct mori_verbs verbs;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_status;
static char load_message[512];

static mori_rdma_provider_t libibverbs = {
    .size = sizeof(mori_rdma_provider_t),
    .name = "libibverbs",
    .verbs = &verbs,
    .use_device = NULL,
};

static void load(void) {
  static const char *const names[] = {"libibverbs.so.1", "libibverbs.so", NULL};
  static const mori_dynlib_symbol_t symbols[] = {
#define MORI_VERBS_SYMBOL(f) MORI_DYNLIB_ENTRY(verbs, f, #f)
      MORI_VERBS_FUNCS(MORI_VERBS_SYMBOL)
#undef MORI_VERBS_SYMBOL
  };
  void *lib = NULL;
  load_status = mori_dynlib_load(names, symbols, sizeof(symbols) / sizeof(symbols[0]), MORI_ENODEV, &lib);
  if (load_status) snprintf(load_message, sizeof(load_message), "rdma: %s", mori_last_error());
  /* Optional: rdma-core 34 and later (IBVERBS_1.12); without it GPU memory
   * is registered with ibv_reg_mr. */
  else *(void **)&libibverbs.ibv_reg_dmabuf_mr = dlsym(lib, "ibv_reg_dmabuf_mr");
}

static const mori_rdma_provider_t *chosen;

int mori_rdma_use_provider(const mori_rdma_provider_t *p) {
  if (p) {
    /* The fields up to use_device are what every provider fills. */
    if (p->size < offsetof(mori_rdma_provider_t, use_device) || !p->verbs)
      return mori_error_set(MORI_EINVAL, "rdma: provider \"%s\" (%zu bytes) has no verbs table", p->name ? p->name : "?",
                            p->size);
#define MORI_VERBS_CHECK(f) \
  if (!p->verbs->f) return mori_error_set(MORI_EINVAL, "rdma: provider \"%s\" has no %s", p->name ? p->name : "?", #f);
    MORI_VERBS_FUNCS(MORI_VERBS_CHECK)
#undef MORI_VERBS_CHECK
  }
  __atomic_store_n(&chosen, p, __ATOMIC_RELEASE);
  return 0;
}

int mori_rdma_provider(const mori_rdma_provider_t **out) {
  const mori_rdma_provider_t *p = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
  if (p) {
    *out = p;
    return 0;
  }
  pthread_once(&once, load);
  if (load_status) return mori_error_set(load_status, "%s", load_message);
  *out = &libibverbs;
  return 0;
}
