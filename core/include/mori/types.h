// SPDX-License-Identifier: MIT
/* Small public types shared by the mori headers. */
#ifndef MORI_TYPES_H
#define MORI_TYPES_H

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

/* How physical memory travels between processes. */
typedef enum mori_handle_type {
  MORI_HANDLE_NONE = 0,
  MORI_HANDLE_POSIX_FD = 1, /* a file descriptor passed with SCM_RIGHTS */
  MORI_HANDLE_FABRIC = 2,   /* an opaque 64-byte blob carried by the bootstrap */
  /* The GPU runtime's IPC handle of a whole runtime allocation
   * (cudaIpcMemHandle_t / hipIpcMemHandle_t: memory from cudaMalloc /
   * hipMalloc, e.g. torch's caching allocator), plus where the shared range
   * starts inside it. A peer opens it at an address the runtime picks, so
   * such memory is reached through the pointer table, never a flat span. */
  MORI_HANDLE_LEGACY_IPC = 3,
} mori_handle_type_t;

enum { MORI_FABRIC_BLOB_SIZE = 64 };

/* One exported allocation, as it leaves a process. */
typedef struct mori_shareable {
  int type; /* mori_handle_type_t */
  int fd;   /* MORI_HANDLE_POSIX_FD: owned by the holder, close() when done */
  uint8_t blob[MORI_FABRIC_BLOB_SIZE]; /* MORI_HANDLE_FABRIC, MORI_HANDLE_LEGACY_IPC */
  uint64_t offset; /* MORI_HANDLE_LEGACY_IPC: the shared range's start inside the allocation */
  uint64_t size;   /* MORI_HANDLE_LEGACY_IPC: the whole allocation's bytes */
} mori_shareable_t;

MORI_API const char *mori_handle_type_name(int type);

MORI_EXTERN_C_END

#endif
