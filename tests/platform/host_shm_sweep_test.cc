// SPDX-License-Identifier: MIT
// The host platform removes the shared-memory objects of processes that no
// longer exist, and nothing else: a live process's (this one's), another
// name, another user's, a directory are kept. Run in a directory of the
// test's own standing in for /dev/shm.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "core/platform/host_shm_sweep.h"

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

}  // namespace
