// SPDX-License-Identifier: MIT
// The code in rank 0's ABORT (after the handshake) or REJECT (before it) is
// the peer's data, never the caller's return code: whatever rank 0 puts
// there, the caller sees a negative mori code and the peer's text.
#include <sys/wait.h>

#include <cstring>
#include <string>

#include "mori/bootstrap.h"
#include "tests/bootstrap/scripted_root.h"
#include "tests/support/harness.h"
#include "tests/support/sockets.h"

namespace {

// The abort codes a faulty or hostile rank 0 might send.
const int kCodes[] = {12345, 1, -12345, 0x7fffffff, MORI_EMISMATCH};

constexpr char kSecret[] = "abort-code-test-secret-0123456789";

// One refusal by the scripted rank 0, in a process of its own.
void ExpectRefusalIsNegative(mori_test::RootRefuses when, int code) {
  int port = 0;
  int listen_fd = mori_test::ListenLoopback(4, &port);
  ASSERT_GE(listen_fd, 0);
  std::string address = "127.0.0.1:" + std::to_string(port);
  pid_t root = fork();
  if (root == 0) _exit(mori_test::ScriptedRootRefuses(listen_fd, 2, kSecret, when, code, "scripted failure") ? 0 : 1);
  close(listen_fd);
  const char *stage = when == mori_test::RootRefuses::kAtHello ? "REJECT" : "ABORT";
  EXPECT_RANKS_PASS(1, [&](int, int) {
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
    EXPECT_LT(rc, 0) << stage << " code " << code << " came back as " << rc;
    EXPECT_STRNE(mori_err_name(rc), "MORI_E_UNKNOWN") << stage << " code " << code << " came back as " << rc;
    if (code == MORI_EMISMATCH) {
      EXPECT_EQ(rc, MORI_EMISMATCH);
    }
    EXPECT_NE(std::string(mori_last_error()).find("scripted failure"), std::string::npos) << mori_last_error();
  });
  int status = 0;
  waitpid(root, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the scripted rank 0 failed (" << stage << ")";
}

TEST(BootstrapAbort, AbortCodeFromRankZeroIsNegative) {
  for (int code : kCodes) ExpectRefusalIsNegative(mori_test::RootRefuses::kAtReady, code);
}

TEST(BootstrapAbort, RejectCodeFromRankZeroIsNegative) {
  for (int code : kCodes) ExpectRefusalIsNegative(mori_test::RootRefuses::kAtHello, code);
}

}  // namespace
