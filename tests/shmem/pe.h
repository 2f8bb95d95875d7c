// SPDX-License-Identifier: MIT
// Starting PEs the way the Shmem Guide's file example does: rank 0 makes
// the unique ID and writes it to a file (whole, then renamed into place);
// the other ranks wait for the file and read it.
#ifndef MORI_TESTS_SHMEM_PE_H
#define MORI_TESTS_SHMEM_PE_H

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "mori/heap.h"
#include "mori/shmem.h"
#include "mori/shmem_local_plugins.h"
#include "tests/support/harness.h"

namespace mori_shmem_test {

// A small vmm heap per PE (8 ranks fit anywhere) and bounded waits.
inline void UseSmallHeap() {
  setenv("MORI_SHMEM_MODE", "vmm", 1);
  setenv("MORI_SHMEM_VMM_CHUNK_SIZE", "4M", 1);
  setenv("MORI_SHMEM_HEAP_SIZE", "64M", 1);
  setenv("MORI_SHMEM_HEAP_TYPE", "normal", 1);  // the suites' choice; the guide's default (uncached) is tested apart
  setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "20000", 1);
}

// A file name no other test (or round) uses.
inline std::string IdFile(const std::string &tag) {
  const char *dir = getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/mori_uid_" + tag + "_" + std::to_string(getppid());
}

inline void WriteId(const std::string &path, const mori_shmem_uniqueid_t &id) {
  std::string tmp = path + ".part";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0) << tmp;
  ASSERT_EQ(write(fd, id.bytes, sizeof(id.bytes)), (ssize_t)sizeof(id.bytes));
  close(fd);
  ASSERT_EQ(rename(tmp.c_str(), path.c_str()), 0);
}

// Waits (at most 30 s) for the file and returns its bytes.
inline std::string ReadIdBytes(const std::string &path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (access(path.c_str(), R_OK) != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::string bytes(256, '\0');
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return "";
  ssize_t n = read(fd, &bytes[0], bytes.size());
  close(fd);
  bytes.resize(n > 0 ? (size_t)n : 0);
  return bytes;
}

// Rank 0 makes and publishes the ID; everyone gets it.
inline mori_shmem_uniqueid_t ShareId(int rank, const std::string &tag) {
  mori_shmem_uniqueid_t id{};
  std::string path = IdFile(tag);
  if (rank == 0) {
    MORI_EXPECT_OK(shmem_get_unique_id(&id));
    WriteId(path, id);
    return id;
  }
  std::string bytes = ReadIdBytes(path);
  MORI_EXPECT_OK(mori_shmem_uniqueid_from_bytes(bytes.data(), bytes.size(), &id));
  return id;
}

// Lists the plug-ins and initialises this PE through a file; returns the code.
inline int InitPe(int rank, int npes, const std::string &tag) {
  int rc = mori_shmem_use_local_plugins();
  if (rc) return rc;
  mori_shmem_uniqueid_t id = ShareId(rank, tag);
  return shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, rank, npes, &id);
}

// Offset of a heap address from its heap's base (what "symmetric" means).
inline uint64_t HeapOffset(const void *p) {
  mori_heap_location_t loc;
  if (mori_heap_locate(p, &loc) != 0) return ~0ull;
  return (uint64_t)loc.chunk * loc.chunk_size + loc.offset;
}

}  // namespace mori_shmem_test

#endif
