// SPDX-License-Identifier: MIT
/* The fd channel's one message, as bytes: encoded by the sender, decoded and
 * checked by the receiver before anything in it is used. Kept apart from
 * the socket code so that it can be fuzzed (tests/fuzz/fd_message_fuzz.c). */
#ifndef MORI_HANDLES_POSIX_FD_MESSAGE_H
#define MORI_HANDLES_POSIX_FD_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

/* Little-endian: magic u64, token u64, rank i32, flags u32, seq u64. */
enum { FD_MESSAGE_BYTES = 32 };

/* flags: FD_NO_HANDLE says the sender has no handle for this step (its
 * export failed): the step goes on everywhere, and the receiver learns it. */
enum { FD_NO_HANDLE = 1u, FD_KNOWN_FLAGS = FD_NO_HANDLE };

typedef struct fd_message {
  uint64_t token;
  int32_t rank;
  uint32_t flags;
  uint64_t seq;
} fd_message_t;

void fd_message_encode(const fd_message_t *m, uint8_t out[FD_MESSAGE_BYTES]);

/* Decodes `n` bytes read as one message that came with `fds` descriptors
 * (`truncated`: the kernel cut the message or its control data). Returns
 * NULL with *m filled when the message is well formed, carries `token`,
 * claims a rank in [0, world_size) and exactly one descriptor unless it
 * says "no handle" (then none); else the reason it is refused. */
const char *fd_message_decode(const uint8_t *buf, size_t n, int fds, bool truncated, uint64_t token, int world_size,
                              fd_message_t *m);

MORI_EXTERN_C_END

#endif
