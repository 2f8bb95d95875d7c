// SPDX-License-Identifier: MIT
/* See fd_message.h. */
#include "handles/posix_fd/fd_message.h"

#define FD_MAGIC 0x6d6f72692d666432ull /* "mori-fd2": the connection-oriented channel */

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

void fd_message_encode(const fd_message_t *m, uint8_t out[FD_MESSAGE_BYTES]) {
  put_u64(out, FD_MAGIC);
  put_u64(out + 8, m->token);
  put_u64(out + 16, (uint64_t)(uint32_t)m->rank | (uint64_t)m->flags << 32);
  put_u64(out + 24, m->seq);
}

const char *fd_message_decode(const uint8_t *buf, size_t n, int fds, bool truncated, uint64_t token, int world_size,
                              fd_message_t *m) {
  if (truncated) return "message or its descriptors cut short";
  if (n != FD_MESSAGE_BYTES || get_u64(buf) != FD_MAGIC) return "malformed message";
  /* Compared without an early exit: the time taken says nothing of the token. */
  if ((get_u64(buf + 8) ^ token) != 0) return "wrong token";
  uint64_t word = get_u64(buf + 16);
  m->token = token;
  m->rank = (int32_t)(uint32_t)word;
  m->flags = (uint32_t)(word >> 32);
  m->seq = get_u64(buf + 24);
  if (m->rank < 0 || m->rank >= world_size) return "rank out of range";
  if (m->flags & ~(uint32_t)FD_KNOWN_FLAGS) return "unknown flags";
  if ((m->flags & FD_NO_HANDLE) ? fds != 0 : fds != 1) return "wrong number of file descriptors";
  return NULL;
}
