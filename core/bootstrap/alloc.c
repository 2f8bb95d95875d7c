// SPDX-License-Identifier: MIT
/* The bootstrap's allocations, with the test hook that fails them
 * (internal/alloc.h). */
#include "core/bootstrap/internal/alloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/* The hook's state: armed, allocations still to let pass, failures so far. */
static pthread_mutex_t hook_lock = PTHREAD_MUTEX_INITIALIZER;
static bool hook_armed;
static int hook_skip, hook_failed;

void mori_bootstrap_test_fail_allocs(int skip) {
  pthread_mutex_lock(&hook_lock);
  hook_armed = skip >= 0;
  hook_skip = skip;
  hook_failed = 0;
  pthread_mutex_unlock(&hook_lock);
}

int mori_bootstrap_test_failed_allocs(void) {
  pthread_mutex_lock(&hook_lock);
  int failed = hook_failed;
  pthread_mutex_unlock(&hook_lock);
  return failed;
}

/* true when the hook fails this allocation. */
static bool injected_failure(void) {
  bool fail = false;
  pthread_mutex_lock(&hook_lock);
  if (hook_armed) {
    if (hook_skip > 0) {
      hook_skip--;
    } else {
      fail = true;
      hook_failed++;
    }
  }
  pthread_mutex_unlock(&hook_lock);
  if (fail) errno = ENOMEM;
  return fail;
}

void *mori_bs_malloc(size_t bytes) { return injected_failure() ? NULL : malloc(bytes); }

void *mori_bs_calloc(size_t count, size_t each) { return injected_failure() ? NULL : calloc(count, each); }

void *mori_bs_realloc(void *old, size_t bytes) { return injected_failure() ? NULL : realloc(old, bytes); }
