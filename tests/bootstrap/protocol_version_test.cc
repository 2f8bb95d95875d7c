// SPDX-License-Identifier: MIT
// Ranks of different bootstrap protocols never talk past each other: a rank
// that meets a rank 0 of protocol 3, and a rank 0 that meets a rank of
// protocol 3, each refuse the other with an error naming both versions.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

extern "C" {
#include "core/bootstrap/internal/wire.h"
}
#include "mori/bootstrap.h"
#include "mori/error.h"
#include "tests/bootstrap/scripted_root.h"
#include "tests/support/sockets.h"

namespace {

constexpr char kSecret[] = "protocol-version-test-secret-0123456789";

TEST(BootstrapProtocol, ARankRefusesARankZeroOfProtocol3NamingBoth) {
  int port = 0;
  int listen_fd = mori_test::ListenLoopback(4, &port);
  ASSERT_GE(listen_fd, 0);
  std::string address = "127.0.0.1:" + std::to_string(port);
  pid_t root = fork();
  if (root == 0)
    _exit(mori_test::ScriptedRootRefuses(listen_fd, 2, kSecret, mori_test::RootRefuses::kSpeaksProtocol3, 0, "") ? 0
                                                                                                                   : 1);
  close(listen_fd);
  mori_bootstrap_tcp_attr_t attr;
  mori_bootstrap_tcp_attr_init(&attr);
  attr.rank = 1;
  attr.size = 2;
  attr.address = address.c_str();
  attr.timeout_ms = 5000;
  attr.secret = kSecret;
  attr.secret_len = sizeof(kSecret) - 1;
  mori_bootstrap_t *b = nullptr;
  int rc = mori_bootstrap_tcp_create(&attr, &b);
  std::string msg = mori_last_error();
  EXPECT_EQ(rc, MORI_EPROTO) << msg;
  EXPECT_NE(msg.find("protocol 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("speaks " + std::to_string(MORI_WIRE_VERSION)), std::string::npos) << msg;
  int status = 0;
  waitpid(root, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the scripted rank 0 failed";
}

TEST(BootstrapProtocol, RankZeroRefusesARankOfProtocol3NamingBoth) {
  int port = mori_test::FreePort();
  ASSERT_GT(port, 0);
  std::string address = "127.0.0.1:" + std::to_string(port);
  pid_t root = fork();
  if (root == 0) {
    mori_bootstrap_tcp_attr_t attr;
    mori_bootstrap_tcp_attr_init(&attr);
    attr.rank = 0;
    attr.size = 2;
    attr.address = address.c_str();
    attr.timeout_ms = 3000;
    attr.secret = kSecret;
    attr.secret_len = sizeof(kSecret) - 1;
    mori_bootstrap_t *b = nullptr;
    // Nobody of this protocol joins: rank 0 times out, which is not the test.
    _exit(mori_bootstrap_tcp_create(&attr, &b) == 0 ? 1 : 0);
  }
  int fd = -1;
  for (int i = 0; i < 200 && fd < 0; i++) {
    fd = mori_test::ConnectRaw(address);
    if (fd < 0) usleep(10 * 1000);
  }
  ASSERT_GE(fd, 0) << "rank 0 never listened at " << address;
  // A HELLO as a rank of protocol 3 sends it: version field 3.
  mori_wire_header_t hello = {};
  hello.op = MORI_WIRE_HELLO;
  hello.rank = 1;
  hello.arg = 2;
  hello.bytes = MORI_WIRE_NONCE_BYTES;
  uint8_t frame[MORI_WIRE_HEADER_BYTES + MORI_WIRE_NONCE_BYTES] = {};
  mori_wire_encode(&hello, frame);
  frame[4] = 3;
  frame[5] = 0;
  ASSERT_EQ(send(fd, frame, sizeof(frame), MSG_NOSIGNAL), (ssize_t)sizeof(frame));
  std::string answer = mori_test::ReadUntilQuiet(fd, 2000);
  close(fd);
  ASSERT_GE(answer.size(), (size_t)MORI_WIRE_HEADER_BYTES);
  mori_wire_header_t h;
  char why[160];
  ASSERT_EQ(mori_wire_decode(reinterpret_cast<const uint8_t *>(answer.data()), &h, why, sizeof(why)), 0) << why;
  EXPECT_EQ(h.op, (uint32_t)MORI_WIRE_REJECT);
  std::string text = answer.substr(MORI_WIRE_HEADER_BYTES);
  EXPECT_NE(text.find("protocol 3"), std::string::npos) << text;
  EXPECT_NE(text.find("speaks " + std::to_string(MORI_WIRE_VERSION)), std::string::npos) << text;
  int status = 0;
  waitpid(root, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
