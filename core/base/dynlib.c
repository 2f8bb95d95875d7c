// SPDX-License-Identifier: MIT
/* See dynlib.h. */
#include "core/base/dynlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"

int mori_dynlib_load(const char *const *names, const mori_dynlib_symbol_t *symbols, size_t count, int missing_code,
                     void **handle) {
  char tried[512] = "";
  size_t used = 0;
  void *lib = NULL;
  const char *name = NULL;
  for (const char *const *n = names; *n && !lib; n++) {
    lib = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      name = *n;
    } else {
      const char *why = dlerror();
      used += (size_t)snprintf(tried + used, used < sizeof(tried) ? sizeof(tried) - used : 0, "%s%s (%s)",
                               used ? "; " : "", *n, why ? why : "?");
      if (used >= sizeof(tried)) used = sizeof(tried) - 1;
    }
  }
  for (size_t i = 0; i < count; i++) *symbols[i].slot = NULL;
  if (!lib) return mori_error_set(missing_code, "cannot load %s", tried[0] ? tried : "(no library named)");
  for (size_t i = 0; i < count; i++) {
    void *addr = dlsym(lib, symbols[i].name);
    if (!addr) {
      for (size_t j = 0; j < count; j++) *symbols[j].slot = NULL;
      dlclose(lib);
      return mori_error_set(MORI_ENOSYS, "%s lacks %s", name, symbols[i].name);
    }
    *symbols[i].slot = addr;
  }
  if (handle) *handle = lib;
  return 0;
}
