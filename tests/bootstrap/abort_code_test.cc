// An ABORT frame's argument is the peer's data, never the caller's return
// code: whatever rank 0 puts there, the caller sees a negative mori code and
// the peer's text.
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

TEST(BootstrapAbort, AbortCodeFromRankZeroIsNegative) {
  for (int code : kCodes) {
    int port = 0;
    int listen_fd = mori_test::ListenLoopback(4, &port);
    ASSERT_GE(listen_fd, 0);
    std::string address = "127.0.0.1:" + std::to_string(port);
    // Rank 0 in its own process: answers the start-up with an ABORT.
    pid_t root = fork();
    if (root == 0) _exit(mori_test::ScriptedRootAborts(listen_fd, 2, code, "scripted failure") ? 0 : 1);
    close(listen_fd);
    EXPECT_RANKS_PASS(1, [&](int, int) {
      mori_bootstrap_tcp_attr_t attr;
      mori_bootstrap_tcp_attr_init(&attr);
      attr.rank = 1;
      attr.size = 2;
      attr.address = address.c_str();
      attr.timeout_ms = 5000;
      mori_bootstrap_t *b = nullptr;
      int rc = mori_bootstrap_tcp_create(&attr, &b);
      EXPECT_LT(rc, 0) << "code " << code << " came back as " << rc;
      EXPECT_STRNE(mori_err_name(rc), "MORI_E_UNKNOWN") << "code " << code << " came back as " << rc;
      if (code == MORI_EMISMATCH) {
        EXPECT_EQ(rc, MORI_EMISMATCH);
      }
      EXPECT_NE(std::string(mori_last_error()).find("scripted failure"), std::string::npos) << mori_last_error();
    });
    int status = 0;
    waitpid(root, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the scripted rank 0 failed";
  }
}

}  // namespace
