// SPDX-License-Identifier: MIT
// The host platform removes the shared-memory objects of processes that no
// longer exist, and nothing else: a live process's (this one's), another
// name, another user's, a directory, and those made in another pid
// namespace (a container sharing /dev/shm, whose pids mean nothing here)
// are kept. Run in a directory of the test's own standing in for /dev/shm.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "core/base/pid_namespace.h"
#include "core/platform/host_shm_sweep.h"
#include "core/platform/platform.h"
#include "mori/error.h"

namespace {

std::string Dir() {
  const char *tmp = getenv("TEST_TMPDIR");
  std::string d = std::string(tmp ? tmp : "/tmp") + "/shm_sweep." + std::to_string(getpid());
  mkdir(d.c_str(), 0700);
  return d;
}

void Touch(const std::string &path) {
  int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0) << path;
  close(fd);
}

bool Exists(const std::string &path) { return access(path.c_str(), F_OK) == 0; }

// A pid that existed and is gone: a child that exited and was reaped.
pid_t DeadPid() {
  pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

TEST(HostShmSweep, ObjectsOfExitedProcessesGoTheRestStays) {
  std::string dir = Dir();
  pid_t dead = DeadPid();
  std::string gone1 = dir + "/mori." + std::to_string(dead) + ".1.0a0b0c0d";
  std::string gone2 = dir + "/mori." + std::to_string(dead) + ".17.deadbeef";
  std::string mine = dir + "/mori." + std::to_string(getpid()) + ".1.12345678";
  std::string parent = dir + "/mori." + std::to_string(getppid()) + ".2.12345678";
  std::string other = dir + "/other." + std::to_string(dead) + ".1.12345678";
  std::string odd = dir + "/mori." + std::to_string(dead) + ".1.12345678.extra";
  std::string subdir = dir + "/mori." + std::to_string(dead) + ".3.87654321";
  for (const std::string &p : {gone1, gone2, mine, parent, other, odd}) Touch(p);
  ASSERT_EQ(mkdir(subdir.c_str(), 0700), 0);
  EXPECT_EQ(mori_host_shm_sweep(dir.c_str()), 2);
  EXPECT_FALSE(Exists(gone1));
  EXPECT_FALSE(Exists(gone2));
  EXPECT_TRUE(Exists(mine)) << "this process's own object";
  EXPECT_TRUE(Exists(parent)) << "a live process's object";
  EXPECT_TRUE(Exists(other)) << "not a mori name";
  EXPECT_TRUE(Exists(odd)) << "not exactly a mori name";
  EXPECT_TRUE(Exists(subdir)) << "not a file";
  EXPECT_EQ(mori_host_shm_sweep(dir.c_str()), 0) << "nothing left to remove";
  EXPECT_EQ(mori_host_shm_sweep((dir + "/missing").c_str()), 0) << "no such directory: nothing";
}

// Names carry their creator's pid namespace: a dead pid of this namespace
// goes, the same number made in another namespace stays (before, a rank in
// its own pid namespace removed every other live rank's objects: their pids
// do not exist in its namespace).
TEST(HostShmSweep, ObjectsOfAnotherPidNamespaceStay) {
  std::string dir = Dir();
  pid_t dead = DeadPid();
  char mine_ns[32], other_ns[32];
  snprintf(mine_ns, sizeof(mine_ns), ".p%llx", (unsigned long long)mori_pid_namespace());
  snprintf(other_ns, sizeof(other_ns), ".p%llx", (unsigned long long)mori_pid_namespace() + 1);
  ASSERT_NE(mori_pid_namespace(), 0u) << "/proc/self/ns/pid unreadable";
  std::string gone = dir + "/mori." + std::to_string(dead) + ".1.0a0b0c0d" + mine_ns;
  std::string foreign = dir + "/mori." + std::to_string(dead) + ".2.0a0b0c0d" + other_ns;
  std::string bad = dir + "/mori." + std::to_string(dead) + ".3.0a0b0c0d.pxyz";
  for (const std::string &p : {gone, foreign, bad}) Touch(p);
  EXPECT_EQ(mori_host_shm_sweep(dir.c_str()), 1);
  EXPECT_FALSE(Exists(gone)) << "a dead pid of this namespace";
  EXPECT_TRUE(Exists(foreign)) << "a pid of another namespace: unknown here, kept";
  EXPECT_TRUE(Exists(bad)) << "not exactly a mori name";
}

// End to end: this process makes a named object in /dev/shm; a process in a
// new pid namespace (where this process's pid does not exist) sweeps
// /dev/shm; the object must still be there. Before, it was removed.
TEST(HostShmSweep, ASweepFromAnotherPidNamespaceKeepsALiveProcesssObject) {
  mori_pmem_t mem;
  ASSERT_EQ(mori_platform_mem_create(0, 1 << 20, MORI_HANDLE_FABRIC, 0, &mem), 0) << mori_last_error();
  std::string path = std::string("/dev/shm") + mem.name;
  ASSERT_TRUE(Exists(path)) << path;
  int result[2];
  ASSERT_EQ(pipe(result), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char r = unshare(CLONE_NEWPID) == 0 ? 'y' : 'n';  // root (or CAP_SYS_ADMIN) only
    if (r == 'n') {
      (void)!write(result[1], &r, 1);
      _exit(0);
    }
    pid_t inner = fork();  // the first child of the new namespace: its pid 1
    if (inner == 0) {
      char ran = getpid() == 1 ? 's' : 'x';
      mori_host_shm_sweep("/dev/shm");
      (void)!write(result[1], &ran, 1);
      _exit(0);
    }
    int st = 0;
    waitpid(inner, &st, 0);
    _exit(0);
  }
  char r = 0;
  ASSERT_EQ(read(result[0], &r, 1), 1);
  int status = 0;
  waitpid(child, &status, 0);
  if (r == 'n') {
    mori_platform_mem_release(&mem);
    GTEST_SKIP() << "no new pid namespace without CAP_SYS_ADMIN";
  }
  EXPECT_EQ(r, 's') << "the sweep did not run as pid 1 of a new namespace";
  EXPECT_TRUE(Exists(path)) << "a sweep in another pid namespace removed this live process's " << path;
  mori_platform_mem_release(&mem);
}

}  // namespace
