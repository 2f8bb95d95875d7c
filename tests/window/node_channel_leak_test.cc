// SPDX-License-Identifier: MIT
// The node channel's shared-memory object exists, named, from its creation
// on rank 0 until every rank has mapped it. A rank 0 killed in between (a
// crash, the OOM killer, a launcher's SIGKILL) leaves it in /dev/shm; the
// next process's sweep of objects whose creator is gone must remove it, as
// it removes the host platform's other named memory.
#include <fcntl.h>
#include <signal.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "core/base/pid_namespace.h"
#include "core/platform/host_shm_sweep.h"
#include "tests/support/world.h"

namespace {

// Shared by this process and the ranks it forks (mapped before they fork).
struct Shared {
  int armed;
  pid_t pid;
  char name[128];
};
Shared *shared = nullptr;

}  // namespace

// The channel's creator unlinks the object's name once every rank has mapped
// it. mori is linked into this test statically, so its calls come here:
// armed, the caller is killed right there, within the channel's setup with
// the object made and its name not yet removed. Otherwise it does what
// glibc's does (the object is a file under /dev/shm).
extern "C" int shm_unlink(const char *name) noexcept {
  if (shared && shared->armed && std::strncmp(name, "/mori-node", 10) == 0) {
    std::snprintf(shared->name, sizeof(shared->name), "%s", name);
    shared->pid = getpid();
    raise(SIGKILL);
  }
  return unlink(("/dev/shm/" + std::string(name + strspn(name, "/"))).c_str());
}

namespace {

TEST(NodeChannelLeak, AnObjectLeftByACreatorKilledDuringSetupIsSweptByTheNextRun) {
  void *m = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  shared = static_cast<Shared *>(m);
  shared->armed = 1;
  std::string msg = mori_test::RunRanks(2, [](int, int) {
    // Not World: rank 1's comm fails once rank 0 is gone, as it should.
    mori_bootstrap_t *b = mori_test::Bootstrap(5000);
    if (!b) return;
    static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops};
    static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops};
    mori_comm_attr_t attr;
    mori_comm_attr_init(&attr);
    attr.bootstrap = b;
    attr.handles = handles;
    attr.num_handles = 2;
    attr.transports = transports;
    attr.num_transports = 1;
    mori_comm_t *c = nullptr;
    if (mori_comm_create(&attr, &c) == 0) mori_comm_destroy(c);
    mori_bootstrap_destroy(b);
  });
  shared->armed = 0;
  ASSERT_TRUE(msg.find("rank 0 was killed by signal 9") != std::string::npos) << msg;
  ASSERT_NE(shared->name[0], '\0') << "rank 0 never unlinked the channel's object";
  const std::string name = shared->name, path = "/dev/shm/" + name.substr(1);

  // The next run: its ranks make named memory (MORI_HANDLE_TYPE=fabric),
  // which sweeps /dev/shm first.
  EXPECT_RANKS_PASS(2, [](int, int) {
    mori_test::World w;
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
  struct stat st;
  bool left = stat(path.c_str(), &st) == 0;
  if (left) shm_unlink(name.c_str());  // a failing run must not leave it for good
  EXPECT_FALSE(left) << path << ", made by rank 0 (pid " << shared->pid << ", killed), outlived the next run's sweep";
  munmap(m, sizeof(Shared));
  shared = nullptr;
}

// The /dev/shm objects and descriptors of this process's node channels.
int NodeChannelLeftovers() {
  int n = 0;
  std::string prefix = "mori-node." + std::to_string(getpid()) + ".";
  if (DIR *d = opendir("/dev/shm")) {
    while (dirent *e = readdir(d)) n += std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0;
    closedir(d);
  }
  if (DIR *d = opendir("/proc/self/fd")) {
    while (dirent *e = readdir(d)) {
      char target[256] = {0};
      std::string link = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(link.c_str(), target, sizeof(target) - 1) > 0 && std::strstr(target, "/dev/shm/mori-node.")) n++;
    }
    closedir(d);
  }
  return n;
}

// Rank 0 creates the area and sizes it; when sizing fails (a file-size
// limit, a full /dev/shm) the comm goes on without the channel. The object
// and its descriptor stayed behind: the name was forgotten before anything
// closed or unlinked it.
TEST(NodeChannelLeak, ACreatorThatCannotSizeTheAreaKeepsNeitherItsNameNorItsDescriptor) {
  EXPECT_RANKS_PASS(2, [](int rank, int) {
    if (rank == 0) {
      signal(SIGXFSZ, SIG_IGN);  // the limit then fails the call (EFBIG) instead of killing
      rlimit small = {16 << 10, 16 << 10};
      ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    }
    mori_bootstrap_t *b = mori_test::Bootstrap(10000);
    ASSERT_NE(b, nullptr);
    mori_comm_t *c = nullptr;
    if (mori_test::MakeComm(b, &c) == 0) mori_comm_destroy(c);
    mori_bootstrap_destroy(b);
    EXPECT_EQ(NodeChannelLeftovers(), 0) << "rank " << rank << " kept the node channel's object or descriptor";
  });
}

// The sweep's reading of the channel's names, in a directory of the test's
// own: a dead creator's area goes (and one named as earlier versions did,
// without the pid namespace); a live creator's, one made in another pid
// namespace, and near misses stay.
TEST(NodeChannelLeak, TheSweepTellsChannelAreasOfDeadCreators) {
  ASSERT_NE(mori_pid_namespace(), 0u) << "/proc/self/ns/pid unreadable";
  const char *tmp = getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp ? tmp : "/tmp") + "/node_channel_sweep." + std::to_string(getpid());
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
  pid_t dead = fork();  // a pid that existed and is gone
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  int status = 0;
  waitpid(dead, &status, 0);
  auto named = [&](pid_t pid, const std::string &tail) { return dir + "/mori-node." + std::to_string(pid) + ".00112233aabbccdd" + tail; };
  char ns[32], other_ns[32];
  snprintf(ns, sizeof(ns), ".p%llx", (unsigned long long)mori_pid_namespace());
  snprintf(other_ns, sizeof(other_ns), ".p%llx", (unsigned long long)mori_pid_namespace() + 1);
  const std::string gone = named(dead, ns), legacy = dir + "/mori-node-" + std::to_string(dead) + "-00112233aabbccdd";
  const std::string live = named(getppid(), ns), foreign = named(dead, other_ns), odd = named(dead, std::string(ns) + ".x");
  for (const std::string &p : {gone, legacy, live, foreign, odd}) {
    int fd = open(p.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << p;
    close(fd);
  }
  EXPECT_EQ(mori_host_shm_sweep(dir.c_str()), 2);
  EXPECT_NE(access(gone.c_str(), F_OK), 0) << "a dead creator's area";
  EXPECT_NE(access(legacy.c_str(), F_OK), 0) << "a dead creator's area, named as earlier versions did";
  EXPECT_EQ(access(live.c_str(), F_OK), 0) << "a live creator's area";
  EXPECT_EQ(access(foreign.c_str(), F_OK), 0) << "another pid namespace's: its pid means nothing here";
  EXPECT_EQ(access(odd.c_str(), F_OK), 0) << "not exactly a channel's name";
  for (const std::string &p : {live, foreign, odd}) unlink(p.c_str());
  rmdir(dir.c_str());
}

}  // namespace
