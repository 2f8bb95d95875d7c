// SPDX-License-Identifier: MIT
/* libFuzzer target: rank 0's address as a launcher's environment gives it.
 * The first input byte picks the size of the host buffer (1..256), which is
 * allocated exactly, so that AddressSanitizer sees any write past it or
 * before it; the rest is the address. A split that succeeds must give a
 * NUL-terminated host that fits and a port in 1..65535. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/bootstrap/internal/address.h"
#include "mori/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t host_len = 1 + data[0] % MORI_TCP_HOST_MAX;
  char *address = malloc(size);
  char *host = malloc(host_len);
  if (!address || !host) abort();
  memcpy(address, data + 1, size - 1);
  address[size - 1] = '\0';
  uint16_t port = 0;
  int rc = mori_tcp_split_address(address, host, host_len, &port);
  if (rc == 0) {
    size_t n = strnlen(host, host_len);
    if (n == 0 || n >= host_len || port == 0 || !strstr(address, host)) abort();
  } else if (rc != MORI_EINVAL) {
    abort();
  }
  free(host);
  free(address);
  return 0;
}
