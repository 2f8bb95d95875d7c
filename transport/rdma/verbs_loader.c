#include "transport/rdma/verbs_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "core/internal/error.h"

static struct mori_verbs verbs;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_status;
static char load_message[256];

static void load(void) {
  void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    load_status = MORI_ENODEV;
    snprintf(load_message, sizeof(load_message), "rdma: cannot load libibverbs.so.1: %s", dlerror());
    return;
  }
#define MORI_VERBS_LOAD(f)                                                              \
  verbs.f = (__typeof__(f) *)dlsym(lib, #f);                                            \
  if (!verbs.f) {                                                                       \
    load_status = MORI_ENOSYS;                                                          \
    snprintf(load_message, sizeof(load_message), "rdma: libibverbs lacks %s", #f);      \
    return;                                                                             \
  }
  MORI_VERBS_FUNCS(MORI_VERBS_LOAD)
#undef MORI_VERBS_LOAD
}

int mori_verbs_load(const struct mori_verbs **out) {
  pthread_once(&once, load);
  if (load_status) return mori_error_set(load_status, "%s", load_message);
  *out = &verbs;
  return 0;
}
