// SPDX-License-Identifier: MIT
/* libFuzzer target: one message of the fd channel as read from a connection
 * of a rank's process (handles/posix_fd/fd_message.c). The first byte says
 * how many descriptors came with it (0..3) and whether the kernel cut it,
 * the second the world size; the rest is the message. An accepted message
 * must name a rank of the job, carry only known flags and exactly the
 * descriptors its flags promise; encoding it again gives the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "handles/posix_fd/fd_message.h"

static void check(int ok) {
  if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  static const uint64_t token = 0xfeedfacecafebeefull;
  int fds = data[0] & 3;
  bool truncated = (data[0] & 4) != 0;
  int world = 1 + data[1];
  fd_message_t m;
  memset(&m, 0, sizeof(m));
  const char *why = fd_message_decode(data + 2, size - 2, fds, truncated, token, world, &m);
  if (why) {
    check(memchr(why, '\0', 128) != NULL);
    return 0;
  }
  check(!truncated && size - 2 == FD_MESSAGE_BYTES);
  check(m.rank >= 0 && m.rank < world);
  check((m.flags & ~(uint32_t)FD_KNOWN_FLAGS) == 0);
  check(fds == ((m.flags & FD_NO_HANDLE) ? 0 : 1));
  check(m.token == token);
  uint8_t again[FD_MESSAGE_BYTES];
  fd_message_encode(&m, again);
  check(memcmp(again, data + 2, FD_MESSAGE_BYTES) == 0);
  return 0;
}
