// SPDX-License-Identifier: MIT
/* Loading a runtime library at run time (libcuda, libamdhip64,
 * libhsa-runtime64, libibverbs): a program that does not use a runtime never
 * loads it, and a build for a GPU starts on a machine without one and fails
 * with a clear error instead of at link time. Each user lists its symbols
 * once, in an X-macro, and hands the table to mori_dynlib_load. */
#ifndef MORI_CORE_BASE_DYNLIB_H
#define MORI_CORE_BASE_DYNLIB_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mori_dynlib_symbol {
  const char *name; /* as exported by the library */
  void **slot;      /* receives the address */
} mori_dynlib_symbol_t;

/* Opens the first of `names` (a NULL-terminated list, e.g. {"libcuda.so.1",
 * NULL}) that loads, and resolves every symbol into its slot. Returns 0, or
 * `missing_code` when no library loads (with a message naming the libraries
 * and dlerror's reason) and MORI_ENOSYS when a symbol is absent (naming the
 * symbol and the library). On failure nothing stays loaded and every slot
 * is NULL. *handle (may be NULL) receives the dlopen handle. */
int mori_dynlib_load(const char *const *names, const mori_dynlib_symbol_t *symbols, size_t count, int missing_code,
                     void **handle);

/* Builds a mori_dynlib_symbol_t table entry from an X-macro: the slot is the
 * struct field of the same name. */
#define MORI_DYNLIB_ENTRY(table, field, symbol) {symbol, (void **)&(table).field},

#ifdef __cplusplus
}
#endif

#endif
