// SPDX-License-Identifier: MIT
/* See internal/heap_config.h. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/base/error.h"
#include "core/internal/heap_config.h"
#include "core/platform/platform.h"

enum { GIB_SHIFT = 30 };

int mori_parse_size(const char *text, size_t *out) {
  const char *p = text;
  while (isspace((unsigned char)*p)) p++;
  if (!isdigit((unsigned char)*p)) return MORI_EINVAL;
  char *end = NULL;
  unsigned long long value = strtoull(p, &end, 10);
  int shift = 0;
  switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
  }
  if (shift && (*end == 'i' || *end == 'I')) end++;
  if (*end == 'B' || *end == 'b') end++;
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0' || value == 0) return MORI_EINVAL;
  if (shift && value > (~0ull >> shift)) return MORI_ERANGE;
  *out = (size_t)(value << shift);
  return 0;
}

static int size_from_env(const char *name, size_t fallback, size_t *out) {
  const char *v = getenv(name);
  *out = fallback;
  if (!v || !*v) return 0;
  if (mori_parse_size(v, out) != 0)
    return mori_error_set(MORI_EINVAL, "%s=\"%s\" is not a size (examples: \"6G\", \"512M\", \"1048576\")", name, v);
  return 0;
}

int mori_heap_config_from_env(const mori_heap_defaults_t *defaults, mori_heap_config_t *out) {
  static const mori_heap_defaults_t core_defaults = {MORI_HEAP_VMM, false, "mori's"};
  if (!defaults) defaults = &core_defaults;
  memset(out, 0, sizeof(*out));
  out->mode = defaults->mode;
  out->uncached = defaults->uncached;
  const char *mode = getenv("MORI_SHMEM_MODE");
  if (mode && *mode) {
    if (strcasecmp(mode, "static") == 0) out->mode = MORI_HEAP_STATIC;
    else if (strcasecmp(mode, "vmm") == 0) out->mode = MORI_HEAP_VMM;
    else if (strcasecmp(mode, "isolation") == 0) out->mode = MORI_HEAP_ISOLATION;
    else return mori_error_set(MORI_EINVAL, "MORI_SHMEM_MODE=\"%s\": expected static, vmm or isolation", mode);
  }
  const char *type = getenv("MORI_SHMEM_HEAP_TYPE");
  if (type && *type) {
    if (strcasecmp(type, "uncached") == 0) out->uncached = true;
    else if (strcasecmp(type, "normal") == 0) out->uncached = false;
    else
      return mori_error_set(MORI_EINVAL, "MORI_SHMEM_HEAP_TYPE=\"%s\": expected normal or uncached", type);
  }
  const char *defer = getenv("MORI_HEAP_DEFER_FREES");
  out->defer_frees = mori_platform_device_is_async() || (defer && strcmp(defer, "1") == 0);
  int rc = size_from_env("MORI_SHMEM_HEAP_SIZE", 0, &out->heap_size);
  if (!rc) rc = size_from_env("MORI_SHMEM_VMM_CHUNK_SIZE", (size_t)1 << GIB_SHIFT, &out->chunk_size);
  if (rc) return rc;
  if (out->mode == MORI_HEAP_STATIC && out->heap_size == 0) {
    if (mode && *mode) return mori_error_set(MORI_EINVAL, "MORI_SHMEM_MODE=static needs MORI_SHMEM_HEAP_SIZE (e.g. \"6G\")");
    return mori_error_set(MORI_EINVAL,
                          "MORI_SHMEM_HEAP_SIZE must be set before the heap is made: the heap is static by %s default "
                          "(e.g. MORI_SHMEM_HEAP_SIZE=6G; or MORI_SHMEM_MODE=vmm, which grows on demand)",
                          defaults->who);
  }
  if (out->mode == MORI_HEAP_VMM && out->heap_size == 0) out->heap_size = (size_t)512 << GIB_SHIFT;
  if (out->mode == MORI_HEAP_VMM && out->chunk_size > out->heap_size)
    return mori_error_set(MORI_EINVAL, "MORI_SHMEM_VMM_CHUNK_SIZE (%zu bytes) is larger than MORI_SHMEM_HEAP_SIZE (%zu bytes)",
                          out->chunk_size, out->heap_size);
  return 0;
}
