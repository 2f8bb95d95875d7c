// SPDX-License-Identifier: MIT
// The host platform's zeroing of shared memory: the range reads as zero
// through every mapping of the file, the bytes just outside it keep their
// values, the file keeps the pages reserved for it (handing them back to the
// file, as zeroing once did, lost the reservation: a later touch could die
// of SIGBUS), and memory that is not a shared file mapping is zeroed too.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

#include "core/platform/platform.h"

namespace {

constexpr size_t kBytes = 4 << 20;

// Zeroes [from, from + size) of `mine` and checks all of `seen` (the same
// bytes); for shared memory (`fd` >= 0, reserved whole) first that the file
// still holds every page (a read of a page handed back brings it back).
void ZeroAndCheck(uint8_t *mine, const uint8_t *seen, size_t from, size_t size, int fd = -1) {
  memset(mine, 0xab, kBytes);
  ASSERT_EQ(mori_platform_memset_zero(0, mine + from, size), 0);
  struct stat st;
  if (fd >= 0) {
    ASSERT_EQ(fstat(fd, &st), 0);
    EXPECT_GE((size_t)st.st_blocks * 512, kBytes) << "zeroing [" << from << ", " << from + size
                                                  << ") gave reserved pages back to the file";
  }
  for (size_t i = 0; i < kBytes; i++) {
    uint8_t want = i >= from && i < from + size ? 0 : 0xab;
    ASSERT_EQ(seen[i], want) << "byte " << i << " after zeroing [" << from << ", " << from + size << ")";
  }
}

TEST(HostZero, SharedMemoryReadsZeroInEveryMappingAndOnlyInTheRange) {
  int fd = memfd_create("mori-host-zero-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, kBytes), 0);
  ASSERT_EQ(fallocate(fd, 0, 0, kBytes), 0);  // reserved, as mori_platform_mem_create does
  auto *a = static_cast<uint8_t *>(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  auto *b = static_cast<uint8_t *>(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(a, MAP_FAILED);
  ASSERT_NE(b, MAP_FAILED);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  ZeroAndCheck(a, b, 0, kBytes, fd);                          // whole pages
  ZeroAndCheck(a, b, 123, (2 << 20) + 777, fd);               // partial pages at both ends
  ZeroAndCheck(a, b, page + 1, page - 2, fd);                 // less than a page
  ZeroAndCheck(a, b, 3 * page + 5, (1 << 20) - 3 * page, fd); // from inside a page, ending inside one
  munmap(a, kBytes);
  munmap(b, kBytes);
  close(fd);
}

TEST(HostZero, PrivateMemoryIsZeroedToo) {
  auto *a = static_cast<uint8_t *>(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(a, MAP_FAILED);
  ZeroAndCheck(a, a, 0, kBytes);
  ZeroAndCheck(a, a, 99, (3 << 20) + 5);
  munmap(a, kBytes);
}

}  // namespace
