// SPDX-License-Identifier: MIT
// The host platform's shared memory: a program that exits without
// mori_finalize leaves nothing it made in /dev/shm (it left a 1 GiB sparse
// file per rank and heap chunk), and memory that /dev/shm cannot back is an
// error naming the size and the free space (it was a SIGBUS at first touch).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/internal/heap.h"
#include "core/platform/platform.h"
#include "mori/heap.h"
#include "mori/mem.h"

namespace {

// Names in /dev/shm made by `pid` (host.c names them mori.<pid>.<serial>.<salt>).
std::vector<std::string> ObjectsOf(pid_t pid) {
  std::vector<std::string> found;
  std::string prefix = "mori." + std::to_string(pid) + ".";
  DIR *d = opendir("/dev/shm");
  if (!d) return found;
  for (struct dirent *e; (e = readdir(d)) != nullptr;)
    if (std::string(e->d_name).rfind(prefix, 0) == 0) found.push_back(e->d_name);
  closedir(d);
  return found;
}

// A child allocates from the heap (named objects: MORI_HANDLE_TYPE=fabric),
// says so, waits for the word to go, and returns from "main" with exit():
// no mori_mem_free, no mori_finalize.
TEST(HostExit, AProgramThatExitsWithoutFinalizeLeavesNothingInDevShm) {
  int ready[2], go[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("MORI_HANDLE_TYPE", "fabric", 1);
    setenv("MORI_SHMEM_MODE", "vmm", 1);
    setenv("MORI_SHMEM_HEAP_SIZE", "64M", 1);
    setenv("MORI_SHMEM_VMM_CHUNK_SIZE", "4M", 1);
    void *p = nullptr;
    char c = mori_mem_alloc(1 << 20, nullptr, &p) == 0 ? 'y' : 'n';
    if (p) memset(p, 1, 1 << 20);
    if (write(ready[1], &c, 1) != 1) _exit(3);
    if (read(go[0], &c, 1) != 1) _exit(4);
    exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, 'y') << "the child's allocation failed";
  EXPECT_FALSE(ObjectsOf(child).empty()) << "while the child runs, its heap chunk is in /dev/shm";
  ASSERT_EQ(write(go[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::vector<std::string> left = ObjectsOf(child);
  EXPECT_TRUE(left.empty()) << "left in /dev/shm: " << (left.empty() ? "" : left[0]);
  for (const std::string &n : left) shm_unlink(("/" + n).c_str());
}

// More than /dev/shm has free: an error naming the size and the free space.
TEST(HostExit, MemoryDevShmCannotBackIsAnErrorNotASigbus) {
  struct statvfs fs;
  ASSERT_EQ(statvfs("/dev/shm", &fs), 0);
  size_t avail = (size_t)fs.f_bavail * fs.f_frsize;
  mori_pmem_t mem;
  int rc = mori_platform_mem_create(0, avail + ((size_t)64 << 30), MORI_HANDLE_FABRIC, 0, &mem);
  EXPECT_EQ(rc, MORI_ENOMEM);
  std::string msg = mori_last_error();
  EXPECT_NE(msg.find("of shared memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is free"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GiB"), std::string::npos) << "sizes as people read them: " << msg;
  if (rc == 0) mori_platform_mem_release(&mem);
  EXPECT_TRUE(ObjectsOf(getpid()).empty()) << "a failed creation leaves no object";
  // Within what is free: fine.
  ASSERT_EQ(mori_platform_mem_create(0, 1 << 20, MORI_HANDLE_FABRIC, 0, &mem), 0) << mori_last_error();
  EXPECT_EQ(ObjectsOf(getpid()).size(), 1u);
  mori_platform_mem_release(&mem);
  EXPECT_TRUE(ObjectsOf(getpid()).empty());
}

// Bytes the file behind `mem` holds pages for (st_blocks counts 512-byte units).
size_t BackedBytes(const mori_pmem_t &mem) {
  struct stat st;
  if (fstat((int)mem.handle, &st) != 0) return 0;
  return (size_t)st.st_blocks * 512;
}

// Memory made whole (a window's allocation, a signal arena) holds its pages
// from creation, named objects and memfds alike: before, the file was
// sparse (0 bytes held) until touched.
TEST(HostExit, MemoryHoldsItsPagesFromCreationNotFromItsFirstTouch) {
  for (int type : {MORI_HANDLE_FABRIC, MORI_HANDLE_POSIX_FD}) {
    mori_pmem_t mem;
    ASSERT_EQ(mori_platform_mem_create(0, 8 << 20, type, 0, &mem), 0) << mori_last_error();
    EXPECT_GE(BackedBytes(mem), (size_t)8 << 20) << mori_handle_type_name(type);
    mori_platform_mem_release(&mem);
  }
}

// A heap chunk holds the pages of what the heap has handed out, not the
// whole chunk: a 16 MiB chunk with 3 MiB allocated holds 3 MiB and no more
// than a few pages past it; the next allocation adds its own.
TEST(HostExit, AHeapChunkHoldsThePagesOfItsBlocksAsTheyAreHandedOut) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the heap's settings are the process's: a process of its own
    setenv("MORI_SHMEM_MODE", "vmm", 1);
    setenv("MORI_SHMEM_HEAP_SIZE", "64M", 1);
    setenv("MORI_SHMEM_VMM_CHUNK_SIZE", "16M", 1);
    void *a = nullptr, *b = nullptr;
    mori_heap_t *h = nullptr;
    if (mori_mem_alloc(3 << 20, nullptr, &a) != 0 || mori_heap_of_device(0, &h) != 0) _exit(2);
    mori_pmem_t chunk;
    void *base = nullptr;
    mori_heap_chunk(h, 0, &chunk, &base);
    size_t held = BackedBytes(chunk);
    if (held < ((size_t)3 << 20) || held > ((size_t)3 << 20) + (64 << 10)) _exit(3);
    if (mori_mem_alloc(5 << 20, nullptr, &b) != 0) _exit(4);
    held = BackedBytes(chunk);
    if (held < ((size_t)8 << 20) || held > ((size_t)8 << 20) + (128 << 10)) _exit(5);
    memset(a, 1, 3 << 20);
    memset(b, 2, 5 << 20);
    mori_mem_free(a);
    mori_mem_free(b);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: allocation failed; 3: the chunk does not hold exactly the first block's pages; "
                                       "4: second allocation failed; 5: the second block's pages are not held";
}

// A forked child (a test's rank, a worker) that releases memory it
// inherited leaves the object's name to its parent, which made it and
// still uses it: only the creator unlinks.
TEST(HostExit, AForkedChildReleasingInheritedMemoryLeavesItsParentsName) {
  mori_pmem_t mem;
  ASSERT_EQ(mori_platform_mem_create(0, 1 << 20, MORI_HANDLE_FABRIC, 0, &mem), 0) << mori_last_error();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(mori_platform_mem_release(&mem) == 0 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  int fd = shm_open(mem.name, O_RDWR, 0);
  EXPECT_GE(fd, 0) << mem.name << " is gone: the child unlinked its parent's object";
  if (fd >= 0) close(fd);
  EXPECT_EQ(mori_platform_mem_release(&mem), 0) << mori_last_error();
  fd = shm_open(mem.name, O_RDWR, 0);
  EXPECT_LT(fd, 0) << "the creator's release unlinks it";
  if (fd >= 0) close(fd);
}

}  // namespace
