// SPDX-License-Identifier: MIT
// Memory a program made itself, as a test hands it to mori: a shared file
// mapping (the host platform's stand-in for a GPU program's own shareable
// device memory, which shmem_buffer_register and mori_mem_register adopt).
#ifndef MORI_TESTS_SUPPORT_USER_MEMORY_H
#define MORI_TESTS_SUPPORT_USER_MEMORY_H

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>

namespace mori_test {

// `bytes` of a fresh memfd, mapped shared; nullptr when it cannot be made.
inline void *SharedMapping(size_t bytes) {
  int fd = memfd_create("user-buffer", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  void *p = ftruncate(fd, (off_t)bytes) == 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace mori_test

#endif
