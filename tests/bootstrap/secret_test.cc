// SPDX-License-Identifier: MIT
// The job's secret: given in the environment or a private file (checked like
// an ssh key), or, on one machine with none given, published by rank 0 in a
// file only this user can read and withdrawn once the job has started.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/bootstrap/internal/secret.h"
#include "mori/bootstrap.h"
#include "tests/support/harness.h"

using mori_test::TestRanks;

namespace {

// A fresh private directory standing in for $XDG_RUNTIME_DIR.
std::string PrivateDir() {
  char tmpl[] = "/tmp/mori-secret-test-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  return tmpl;
}

int FilesIn(const std::string &dir) {
  DIR *d = opendir(dir.c_str());
  int n = 0;
  while (dirent *e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

void WriteFile(const std::string &path, const std::string &text, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, text.data(), text.size()), (ssize_t)text.size());
  close(fd);
  chmod(path.c_str(), mode);
}

TEST(BootstrapSecret, LocalSecretIsPrivateAndReadOnlyWhenPrivate) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    std::string dir = PrivateDir();
    setenv("XDG_RUNTIME_DIR", dir.c_str(), 1);
    uint8_t made[MORI_SECRET_LOCAL], read_back[MORI_SECRET_LOCAL];
    mori_secret_file_t file;
    MORI_ASSERT_OK(mori_secret_local_create("127.0.0.1:4242", made, &file));
    const char *path = file.path;
    EXPECT_EQ(std::string(path).rfind(dir + "/", 0), 0u) << path;
    struct stat st;
    ASSERT_EQ(stat(path, &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(st.st_uid, getuid());
    MORI_ASSERT_OK(mori_secret_local_read("127.0.0.1:4242", read_back));
    EXPECT_EQ(memcmp(made, read_back, sizeof(made)), 0);
    // Another job's address has another file: none here.
    EXPECT_EQ(mori_secret_local_read("127.0.0.1:4243", read_back), MORI_EACCES);
    EXPECT_NE(std::string(mori_last_error()).find("MORI_BOOTSTRAP_SECRET"), std::string::npos) << mori_last_error();
    // Readable by others: refused.
    chmod(path, 0644);
    EXPECT_EQ(mori_secret_local_read("127.0.0.1:4242", read_back), MORI_EACCES);
    EXPECT_NE(std::string(mori_last_error()).find("mode 600"), std::string::npos) << mori_last_error();
    mori_secret_local_remove(&file);
    EXPECT_EQ(FilesIn(dir), 0);
    rmdir(dir.c_str());
  });
}

TEST(BootstrapSecret, RuntimeDirectoryOthersCanEnterIsNotUsed) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    std::string dir = PrivateDir();
    chmod(dir.c_str(), 0755);
    setenv("XDG_RUNTIME_DIR", dir.c_str(), 1);
    uint8_t made[MORI_SECRET_LOCAL];
    mori_secret_file_t file;
    MORI_ASSERT_OK(mori_secret_local_create("127.0.0.1:4244", made, &file));
    const char *path = file.path;
    EXPECT_NE(std::string(path).rfind(dir + "/", 0), 0u) << path;
    struct stat st;
    std::string parent = std::string(path).substr(0, std::string(path).rfind('/'));
    ASSERT_EQ(lstat(parent.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u) << parent;
    mori_secret_local_remove(&file);
    rmdir(dir.c_str());
  });
}

TEST(BootstrapSecret, SecretFromTheEnvironmentIsChecked) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    uint8_t buf[MORI_SECRET_MAX];
    size_t len = 99;
    unsetenv("MORI_BOOTSTRAP_SECRET");
    unsetenv("MORI_BOOTSTRAP_SECRET_FILE");
    MORI_ASSERT_OK(mori_secret_from_env(buf, sizeof(buf), &len));
    EXPECT_EQ(len, 0u);
    setenv("MORI_BOOTSTRAP_SECRET", "too-short", 1);
    EXPECT_EQ(mori_secret_from_env(buf, sizeof(buf), &len), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("at least 16"), std::string::npos) << mori_last_error();
    unsetenv("MORI_BOOTSTRAP_SECRET");
    std::string dir = PrivateDir(), file = dir + "/job-secret";
    setenv("MORI_BOOTSTRAP_SECRET_FILE", file.c_str(), 1);
    WriteFile(file, "0123456789abcdef0123\n", 0644);
    EXPECT_EQ(mori_secret_from_env(buf, sizeof(buf), &len), MORI_EACCES);
    EXPECT_NE(std::string(mori_last_error()).find("chmod 600"), std::string::npos) << mori_last_error();
    chmod(file.c_str(), 0600);
    MORI_ASSERT_OK(mori_secret_from_env(buf, sizeof(buf), &len));
    EXPECT_EQ(std::string((char *)buf, len), "0123456789abcdef0123");  // the newline is not part of it
    unlink(file.c_str());
    EXPECT_EQ(mori_secret_from_env(buf, sizeof(buf), &len), MORI_EACCES);
    EXPECT_NE(std::string(mori_last_error()).find(file), std::string::npos) << mori_last_error();
    rmdir(dir.c_str());
  });
}

TEST(BootstrapSecret, JobOnOneMachineNeedsNoSecretAndLeavesNoFile) {
  std::string dir = PrivateDir();
  EXPECT_RANKS_PASS(TestRanks(), [&](int rank, int size) {
    unsetenv("MORI_BOOTSTRAP_SECRET");
    unsetenv("MORI_BOOTSTRAP_SECRET_FILE");
    setenv("XDG_RUNTIME_DIR", dir.c_str(), 1);
    mori_bootstrap_t *b = mori_test::Bootstrap(10000);
    ASSERT_NE(b, nullptr);
    int32_t mine = rank + 100;
    std::vector<int32_t> all(size);
    MORI_ASSERT_OK(mori_bootstrap_allgather(b, &mine, all.data(), sizeof(mine)));
    for (int r = 0; r < size; r++) EXPECT_EQ(all[r], r + 100);
    MORI_ASSERT_OK(mori_bootstrap_barrier(b));  // rank 0 withdrew the secret before this returns
    EXPECT_EQ(FilesIn(dir), 0) << "the job's secret is still on disk";
    MORI_EXPECT_OK(mori_bootstrap_destroy(b));
  });
  rmdir(dir.c_str());
}

TEST(BootstrapSecret, JobWithASecretFileRuns) {
  std::string dir = PrivateDir(), file = dir + "/job-secret";
  WriteFile(file, "a-secret-shared-by-every-rank-of-the-job\n", 0600);
  EXPECT_RANKS_PASS(TestRanks(), [&](int rank, int size) {
    unsetenv("MORI_BOOTSTRAP_SECRET");
    setenv("MORI_BOOTSTRAP_SECRET_FILE", file.c_str(), 1);
    mori_bootstrap_t *b = mori_test::Bootstrap(10000);
    ASSERT_NE(b, nullptr);
    MORI_ASSERT_OK(mori_bootstrap_barrier(b));
    MORI_EXPECT_OK(mori_bootstrap_destroy(b));
  });
  unlink(file.c_str());
  rmdir(dir.c_str());
}

// A rank 0 killed while its secret was published (between start-up's
// publish and withdraw) cannot withdraw it: the next rank 0 of this user
// sweeps such files once they are ten minutes old, telling them by the lock
// a live owner holds; a live rank 0's file (however old), a temporary name
// still being written, and what else the directory holds are never touched.
TEST(BootstrapSecret, SecretOfAKilledRankZeroIsSweptALiveOnesNever) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    std::string dir = PrivateDir();
    setenv("XDG_RUNTIME_DIR", dir.c_str(), 1);
    uint8_t secret[MORI_SECRET_LOCAL];
    // A rank 0 killed mid start-up.
    pid_t killed = fork();
    if (killed == 0) {
      mori_secret_file_t file;
      if (mori_secret_local_create("127.0.0.1:5001", secret, &file) != 0) _exit(3);
      raise(SIGKILL);
      _exit(4);
    }
    int status = 0;
    ASSERT_EQ(waitpid(killed, &status, 0), killed);
    ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
    MORI_ASSERT_OK(mori_secret_local_read("127.0.0.1:5001", secret));
    // A live rank 0, in its start-up.
    int ready[2], done[2];
    ASSERT_EQ(pipe(ready), 0);
    ASSERT_EQ(pipe(done), 0);
    pid_t live = fork();
    if (live == 0) {
      mori_secret_file_t file;
      char c = 1;
      if (mori_secret_local_create("127.0.0.1:5002", secret, &file) != 0) c = 0;
      if (write(ready[1], &c, 1) != 1 || read(done[0], &c, 1) != 1) _exit(5);
      mori_secret_local_remove(&file);
      _exit(0);
    }
    char c = 0;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    ASSERT_EQ(c, 1) << "the live rank 0 could not publish";
    // A temporary name of an old crash, one being written now, and a file
    // of something else.
    std::string old_tmp = dir + "/mori-bootstrap-00112233445566778899aabbccddeeff.Ab12Cd";
    std::string new_tmp = dir + "/mori-bootstrap-ffeeddccbbaa99887766554433221100.Xy34Zw";
    std::string other = dir + "/mori-bootstrap-notes.txt";
    WriteFile(old_tmp, "x", 0600);
    WriteFile(new_tmp, "x", 0600);
    WriteFile(other, "x", 0600);
    struct timespec hour_ago[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, old_tmp.c_str(), hour_ago, 0), 0);
    // The killed rank 0's secret and the live one's, both an hour old.
    DIR *d = opendir(dir.c_str());
    ASSERT_NE(d, nullptr);
    int aged = 0;
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("mori-bootstrap-", 0) != 0 || name.size() != 15 + 32) continue;
      EXPECT_EQ(utimensat(AT_FDCWD, (dir + "/" + name).c_str(), hour_ago, 0), 0);
      aged++;
    }
    closedir(d);
    EXPECT_EQ(aged, 2);
    // A fresh secret nobody locks (a rank 0 of a release before the lock,
    // in its start-up) is not taken for a dead one.
    std::string unlocked = dir + "/mori-bootstrap-0123456789abcdef0123456789abcdef";
    WriteFile(unlocked, std::string(MORI_SECRET_LOCAL, 'k'), 0600);
    // The next rank 0.
    mori_secret_file_t mine;
    MORI_ASSERT_OK(mori_secret_local_create("127.0.0.1:5003", secret, &mine));
    EXPECT_EQ(mori_secret_local_read("127.0.0.1:5001", secret), MORI_EACCES) << "the killed rank 0's secret is left";
    EXPECT_EQ(mori_secret_local_read("127.0.0.1:5002", secret), 0) << "the live rank 0's secret was swept";
    MORI_EXPECT_OK(mori_secret_local_read("127.0.0.1:5003", secret));
    EXPECT_NE(access(old_tmp.c_str(), F_OK), 0) << "an hour-old temporary file is left";
    EXPECT_EQ(access(new_tmp.c_str(), F_OK), 0) << "a temporary file being written was swept";
    EXPECT_EQ(access(other.c_str(), F_OK), 0) << "a file that is not a secret was swept";
    EXPECT_EQ(access(unlocked.c_str(), F_OK), 0) << "a fresh secret without a lock was swept";
    mori_secret_local_remove(&mine);
    c = 1;
    ASSERT_EQ(write(done[1], &c, 1), 1);
    ASSERT_EQ(waitpid(live, &status, 0), live);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    EXPECT_EQ(mori_secret_local_read("127.0.0.1:5002", secret), MORI_EACCES) << "the live rank 0 did not withdraw";
    unlink(new_tmp.c_str());
    unlink(other.c_str());
    unlink(unlocked.c_str());
    EXPECT_EQ(FilesIn(dir), 0);
    for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
    rmdir(dir.c_str());
  });
}

}  // namespace
