// SPDX-License-Identifier: MIT
/* Which pid namespace this process lives in. A pid means something only in
 * its own namespace: two ranks in two containers on one host (sharing the
 * network and /dev/shm, each with its own pids) cannot compare each other's
 * pids with what the kernel reports, and must not judge them by kill(). */
#ifndef MORI_CORE_BASE_PID_NAMESPACE_H
#define MORI_CORE_BASE_PID_NAMESPACE_H

#include <stdint.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

/* The inode number of /proc/self/ns/pid, or 0 when it cannot be read
 * (then a peer's pid is compared as it stands, as before namespaces were
 * known: the handle libraries treat 0 as "same namespace"). The host
 * platform's sweep of /dev/shm is the exception: it removes only objects
 * whose creator's namespace is known to be its own (0 and 0 included), as
 * deleting a live process's memory is worse than leaving a dead one's. */
uint64_t mori_pid_namespace(void);

MORI_EXTERN_C_END

#endif
