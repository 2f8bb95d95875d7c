// SPDX-License-Identifier: MIT
/* Handle library: physical memory travels as opaque 64-byte fabric blobs
 * carried by the bootstrap (works across hosts where the platform allows). */
#ifndef MORI_HANDLE_FABRIC_H
#define MORI_HANDLE_FABRIC_H

#include "mori/plugin.h"

MORI_EXTERN_C_BEGIN
extern MORI_API const mori_handle_ops_t mori_handle_fabric_ops;
MORI_EXTERN_C_END

#endif
