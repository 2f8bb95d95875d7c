// SPDX-License-Identifier: MIT
/* The version line of the log: written once per process, at the first
 * communicator's creation (the SDK's init), at INFO. */
#ifndef MORI_CORE_INTERNAL_VERSION_LOG_H
#define MORI_CORE_INTERNAL_VERSION_LOG_H

void mori_version_log_once(void);

#endif
