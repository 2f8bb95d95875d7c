// SPDX-License-Identifier: MIT
/* Every allocation of the bootstrap (core/bootstrap) goes through these, so
 * that a test can make them fail (tests/bootstrap/alloc_failure_test.cc).
 * They behave as malloc, calloc and realloc; an injected failure looks like
 * a real one: NULL, with errno ENOMEM. */
#ifndef MORI_CORE_BOOTSTRAP_ALLOC_H
#define MORI_CORE_BOOTSTRAP_ALLOC_H

#include <stddef.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

void *mori_bs_malloc(size_t bytes);
void *mori_bs_calloc(size_t count, size_t each);
void *mori_bs_realloc(void *old, size_t bytes);

/* Test hook: after `skip` more allocations of the bootstrap in this process
 * succeed, every later one fails (until the hook is called again); skip < 0
 * clears it. Counted across threads. Nothing else sets it. */
void mori_bootstrap_test_fail_allocs(int skip);
/* Allocations the hook has failed since it was last set. */
int mori_bootstrap_test_failed_allocs(void);

MORI_EXTERN_C_END

#endif
