// SPDX-License-Identifier: MIT
// Multi-process test harness: runs a lambda in N forked ranks (each with the
// bootstrap environment of tools/launch), with a time limit. GoogleTest
// assertions work inside the ranks; a rank's exit code says whether any of
// them failed, and the harness names the ranks that failed or hung.
#ifndef MORI_TESTS_SUPPORT_HARNESS_H
#define MORI_TESTS_SUPPORT_HARNESS_H

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "mori/bootstrap.h"
#include "mori/error.h"

namespace mori_test {

// Rank counts come from the build (mori_multirank_test sets MORI_TEST_RANKS).
int TestRanks();

// "" when every rank passed, else which ranks failed or hung and how, and
// the first failure (file:line: message) of up to three ranks that met
// one, the earliest first (the cause before what it brought down).
std::string RunRanks(int size, const std::function<void(int rank, int size)> &fn, int timeout_ms = 120000);

// A TCP bootstrap from the environment the harness set; fails the test on error.
mori_bootstrap_t *Bootstrap(int timeout_ms = 0);

// What `fn` wrote to stderr (fd 2, so the library's log lines too).
std::string StderrOf(const std::function<void()> &fn);

// A call that must fail with `code` and a message (mori_last_error) that
// holds `words`; a test failure naming both otherwise.
inline void ExpectError(int rc, int code, const std::string &words) {
  EXPECT_EQ(rc, code) << mori_err_name(rc) << ": " << mori_last_error();
  EXPECT_NE(std::string(mori_last_error()).find(words), std::string::npos) << mori_last_error();
}

}  // namespace mori_test

// Succeeds when the call returned 0, else prints the code and mori_last_error().
#define MORI_ASSERT_OK(expr)                                                                 \
  do {                                                                                       \
    int mori_rc_ = (expr);                                                                   \
    ASSERT_EQ(mori_rc_, 0) << #expr << " -> " << mori_err_name(mori_rc_) << ": " << mori_last_error(); \
  } while (0)
#define MORI_EXPECT_OK(expr)                                                                 \
  do {                                                                                       \
    int mori_rc_ = (expr);                                                                   \
    EXPECT_EQ(mori_rc_, 0) << #expr << " -> " << mori_err_name(mori_rc_) << ": " << mori_last_error(); \
  } while (0)

// The failure's message starts with what the ranks said (a recap that
// quotes its first few hundred characters shows the rank's own failure).
#define EXPECT_RANKS_PASS(size, ...)                                   \
  do {                                                                 \
    std::string ranks_msg_ = mori_test::RunRanks(size, __VA_ARGS__);   \
    if (!ranks_msg_.empty()) ADD_FAILURE() << ranks_msg_;              \
  } while (0)

#endif
