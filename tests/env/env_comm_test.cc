// SPDX-License-Identifier: MIT
// Making a comm checks the environment: a time or size that does not parse
// fails the comm on every rank naming the variable and the value (it was a
// silent default: MORI_BOOTSTRAP_TIMEOUT_MS=abc meant 60 s), and a MORI_*
// name mori does not know is said once, with the name it resembles.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/world.h"

using mori_test::MakeComm;
using mori_test::TestRanks;

namespace {

TEST(EnvComm, ATimeThatDoesNotParseFailsEveryRankNamingIt) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int) {
    mori_bootstrap_t *b = mori_test::Bootstrap(10000);
    ASSERT_NE(b, nullptr);
    setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "abc", 1);
    mori_comm_t *comm = nullptr;
    EXPECT_EQ(MakeComm(b, &comm), MORI_EINVAL);
    EXPECT_EQ(comm, nullptr);
    EXPECT_NE(std::string(mori_last_error()).find("MORI_BOOTSTRAP_TIMEOUT_MS=\"abc\" is not a duration"), std::string::npos)
        << mori_last_error();
    unsetenv("MORI_BOOTSTRAP_TIMEOUT_MS");
    mori_bootstrap_destroy(b);
  });
}

TEST(EnvComm, ASizeOutOfRangeFailsEveryRankNamingIt) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int) {
    mori_bootstrap_t *b = mori_test::Bootstrap(10000);
    ASSERT_NE(b, nullptr);
    setenv("MORI_SHMEM_HEAP_SIZE", "99999999999999999999999", 1);
    mori_comm_t *comm = nullptr;
    EXPECT_EQ(MakeComm(b, &comm), MORI_ERANGE);
    EXPECT_NE(std::string(mori_last_error()).find("MORI_SHMEM_HEAP_SIZE=\"99999999999999999999999\" is out of range"),
              std::string::npos)
        << mori_last_error();
    unsetenv("MORI_SHMEM_HEAP_SIZE");
    mori_bootstrap_destroy(b);
  });
}

TEST(EnvComm, AnUnknownNameIsSaidOnceWithTheLikelyOne) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int) {
    setenv("MORI_SHMEM_HEAP_SZIE", "1G", 1);  // env-check: ignore (a typo on purpose)
    std::string out = mori_test::StderrOf([] {
      mori_bootstrap_t *b = mori_test::Bootstrap(10000);
      ASSERT_NE(b, nullptr);
      for (int i = 0; i < 2; i++) {
        mori_comm_t *comm = nullptr;
        MORI_EXPECT_OK(MakeComm(b, &comm));
        if (comm) MORI_EXPECT_OK(mori_comm_destroy(comm));
      }
      mori_bootstrap_destroy(b);
    });
    const std::string said = "MORI_SHMEM_HEAP_SZIE (did you mean MORI_SHMEM_HEAP_SIZE?)";  // env-check: ignore (the typo)
    EXPECT_NE(out.find(said), std::string::npos) << out;
    EXPECT_EQ(out.find(said), out.rfind(said)) << "once per process: " << out;
  });
}

}  // namespace
