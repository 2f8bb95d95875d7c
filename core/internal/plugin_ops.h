// SPDX-License-Identifier: MIT
/* Plug-in ops filled over a table of defaults (plugin_ops.c): core calls
 * every op without testing for NULL. */
#ifndef MORI_CORE_INTERNAL_PLUGIN_OPS_H
#define MORI_CORE_INTERNAL_PLUGIN_OPS_H

#include "mori/plugin.h"

MORI_EXTERN_C_BEGIN

/* Checks size, ABI version and mandatory ops of `given` (naming the library
 * and the op on failure), then copies what it has over the defaults. */
int mori_transport_ops_adopt(const mori_transport_ops_t *given, mori_transport_ops_t *out);
int mori_handle_ops_adopt(const mori_handle_ops_t *given, mori_handle_ops_t *out);

MORI_EXTERN_C_END

#endif
