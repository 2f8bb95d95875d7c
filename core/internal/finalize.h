// SPDX-License-Identifier: MIT
/* What layers above core need of mori_finalize (core/teardown.c), which
 * releases every window and allocation of the process, theirs too. */
#ifndef MORI_CORE_INTERNAL_FINALIZE_H
#define MORI_CORE_INTERNAL_FINALIZE_H

#include <stdint.h>

#include "mori/types.h"

MORI_EXTERN_C_BEGIN

/* How many times mori_finalize has run in this process. An object above
 * core that holds windows or memory (a collective or EP context) keeps the
 * count it was made at: once the count moved, what it holds is gone, and
 * its calls refuse instead of reading freed memory. One relaxed load. */
uint64_t mori_finalize_count(void);

/* Process-wide state over core objects (MORI Shmem's heap and comm) is
 * released by its own layer first when mori_finalize runs, so that layer
 * does not go on using what mori_finalize frees: `release` is called with
 * no lock of core's held, hooks in the reverse order of their adding.
 * Adding the same function again does nothing. At most 8 hooks. */
int mori_finalize_hook_add(void (*release)(void));

MORI_EXTERN_C_END

#endif
