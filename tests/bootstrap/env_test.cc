// SPDX-License-Identifier: MIT
// The launcher's variables as the TCP bootstrap reads them: a value that is
// not what it claims to be is refused with MORI_EINVAL naming the variable
// and the value, never read as some other number.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "mori/bootstrap.h"
#include "tests/support/harness.h"
#include "tests/support/sockets.h"

namespace {

void RankZeroOfTwo() {
  setenv("MORI_RANK", "0", 1);
  setenv("MORI_WORLD_SIZE", "2", 1);
  setenv("MORI_BOOTSTRAP_ADDR", ("127.0.0.1:" + std::to_string(mori_test::FreePort())).c_str(), 1);
  setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "1000", 1);
}

void ExpectRefused(const char *variable, const std::string &value, const std::string &why) {
  mori_bootstrap_t *b = nullptr;
  int rc = mori_bootstrap_tcp_from_env(&b);
  EXPECT_EQ(rc, MORI_EINVAL) << variable << "=" << value << " -> " << mori_err_name(rc) << ": " << mori_last_error();
  EXPECT_EQ(b, nullptr);
  std::string msg = mori_last_error();
  EXPECT_NE(msg.find(variable), std::string::npos) << msg;
  EXPECT_NE(msg.find(why), std::string::npos) << msg;
}

TEST(BootstrapEnv, ListenFdThatIsNotANumberIsRefused) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    RankZeroOfTwo();
    for (const char *value : {"abc", "3x", "-1", "99999999999", " 3", "0x3"}) {
      setenv("MORI_BOOTSTRAP_LISTEN_FD", value, 1);
      ExpectRefused("MORI_BOOTSTRAP_LISTEN_FD", value, "'" + std::string(value) + "'");
    }
  }, 30000);
}

// A time limit that does not parse is refused where it is read, before
// anything starts: it was "using the default" there (a warning) and then an
// error at comm creation, both for one value.
TEST(BootstrapEnv, ATimeLimitThatDoesNotParseIsRefusedAtOnce) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    RankZeroOfTwo();
    unsetenv("MORI_BOOTSTRAP_LISTEN_FD");
    for (const char *value : {"-1", "abc", "5 s"}) {
      setenv("MORI_BOOTSTRAP_TIMEOUT_MS", value, 1);
      ExpectRefused("MORI_BOOTSTRAP_TIMEOUT_MS", value, "\"" + std::string(value) + "\"");
    }
  }, 30000);
}

TEST(BootstrapEnv, ListenFdThatIsNotAListeningSocketIsRefused) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    RankZeroOfTwo();
    int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int unbound = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int datagram = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    for (int fd : {file, unbound, datagram, 987}) {
      std::string value = std::to_string(fd);
      setenv("MORI_BOOTSTRAP_LISTEN_FD", value.c_str(), 1);
      ExpectRefused("MORI_BOOTSTRAP_LISTEN_FD", value, "not a listening");
    }
    // Refused, not taken over: the descriptors are still the caller's.
    EXPECT_EQ(fcntl(file, F_GETFD), FD_CLOEXEC);
    EXPECT_EQ(fcntl(unbound, F_GETFD), FD_CLOEXEC);
  }, 30000);
}

TEST(BootstrapEnv, RankAndSizeThatAreNotNumbersAreRefused) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    RankZeroOfTwo();
    unsetenv("MORI_BOOTSTRAP_LISTEN_FD");
    setenv("MORI_RANK", "one", 1);
    ExpectRefused("MORI_RANK", "one", "'one'");
    setenv("MORI_RANK", "0", 1);
    setenv("MORI_WORLD_SIZE", "2 ranks", 1);
    ExpectRefused("MORI_WORLD_SIZE", "2 ranks", "'2 ranks'");
    setenv("MORI_WORLD_SIZE", "2", 1);
    setenv("MORI_BOOTSTRAP_PORT", "http", 1);
    unsetenv("MORI_BOOTSTRAP_ADDR");
    ExpectRefused("MORI_BOOTSTRAP_PORT", "http", "'http'");
  }, 30000);
}

// A launcher's descriptor is rank 0's once: the bootstrap closes it. A
// second bootstrap in the process read the same number again and took
// whatever socket held it by then (a listening socket of the program's own
// was waited on, and then closed).
TEST(BootstrapEnv, AListenFdIsTakenOnceAndALaterBootstrapLeavesThatNumberAlone) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    int port = 0;
    int launcher = mori_test::ListenLoopback(4, &port);
    ASSERT_GE(launcher, 0);
    setenv("MORI_RANK", "0", 1);
    setenv("MORI_WORLD_SIZE", "1", 1);
    setenv("MORI_BOOTSTRAP_ADDR", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
    setenv("MORI_BOOTSTRAP_LISTEN_FD", std::to_string(launcher).c_str(), 1);
    mori_bootstrap_t *b = nullptr;
    ASSERT_EQ(mori_bootstrap_tcp_from_env(&b), 0) << mori_last_error();
    mori_bootstrap_destroy(b);
    int own_port = 0;
    int own = mori_test::ListenLoopback(4, &own_port);
    ASSERT_EQ(own, launcher) << "the test needs the program's socket on the launcher's old number";
    b = nullptr;
    ASSERT_EQ(mori_bootstrap_tcp_from_env(&b), 0) << mori_last_error();
    mori_bootstrap_destroy(b);
    EXPECT_NE(fcntl(own, F_GETFD), -1) << "the bootstrap closed the program's own socket";
    close(own);
  }, 30000);
}

// The descriptor must listen where the other ranks are sent.
TEST(BootstrapEnv, AListenFdOnAnotherPortThanTheAddressIsRefusedNamingBoth) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    RankZeroOfTwo();
    int port = 0;
    int fd = mori_test::ListenLoopback(4, &port);
    ASSERT_GE(fd, 0);
    int other = port == 65535 ? port - 1 : port + 1;
    setenv("MORI_BOOTSTRAP_ADDR", ("127.0.0.1:" + std::to_string(other)).c_str(), 1);
    std::string value = std::to_string(fd);
    setenv("MORI_BOOTSTRAP_LISTEN_FD", value.c_str(), 1);
    ExpectRefused("MORI_BOOTSTRAP_LISTEN_FD", value, "port " + std::to_string(port));
    EXPECT_NE(std::string(mori_last_error()).find(std::to_string(other)), std::string::npos) << mori_last_error();
    EXPECT_NE(fcntl(fd, F_GETFD), -1) << "a refused descriptor stays the caller's";
    close(fd);
  }, 30000);
}

// docs/environment.md: MORI_BOOTSTRAP_PORT is rank 0's port with an
// address that gives none (it was ignored, and the address refused).
TEST(BootstrapEnv, AnAddressWithoutAPortTakesMoriBootstrapPort) {
  int port = mori_test::FreePort();
  EXPECT_RANKS_PASS(2, [port](int rank, int) {
    setenv("MORI_RANK", std::to_string(rank).c_str(), 1);
    setenv("MORI_WORLD_SIZE", "2", 1);
    setenv("MORI_BOOTSTRAP_ADDR", "127.0.0.1", 1);
    setenv("MORI_BOOTSTRAP_PORT", std::to_string(port).c_str(), 1);
    setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "10000", 1);
    unsetenv("MORI_BOOTSTRAP_LISTEN_FD");
    mori_bootstrap_t *b = nullptr;
    ASSERT_EQ(mori_bootstrap_tcp_from_env(&b), 0) << mori_last_error();
    mori_bootstrap_destroy(b);
  }, 30000);
}

TEST(BootstrapEnv, TwoPortsThatDisagreeAreRefusedNamingBoth) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    RankZeroOfTwo();
    unsetenv("MORI_BOOTSTRAP_LISTEN_FD");
    setenv("MORI_BOOTSTRAP_ADDR", "127.0.0.1:29600", 1);
    setenv("MORI_BOOTSTRAP_PORT", "29700", 1);
    ExpectRefused("MORI_BOOTSTRAP_PORT", "29700", "29600");
    unsetenv("MORI_BOOTSTRAP_PORT");
  }, 30000);
}

}  // namespace
