// SPDX-License-Identifier: MIT
// A bootstrap of one rank exchanges nothing: its collectives complete
// without calling the implementation (over torch's store each call would
// be a round trip, paid by every step of a one-rank rendezvous), and
// allgather still hands the rank its own contribution.
#include <gtest/gtest.h>

#include <cstring>

#include "mori/bootstrap.h"

namespace {

int calls = 0;
int Count(void *) { return ++calls, -5; }
int CountAllgather(void *, const void *, void *, size_t) { return ++calls, -5; }
int CountBcast(void *, void *, size_t, int) { return ++calls, -5; }
int Fini(void *) { return 0; }

mori_bootstrap_ops_t Ops() {
  mori_bootstrap_ops_t ops;
  memset(&ops, 0, sizeof(ops));
  ops.size = sizeof(ops);
  ops.abi_version = MORI_BOOTSTRAP_ABI_VERSION;
  ops.name = "counting";
  ops.allgather = CountAllgather;
  ops.barrier = Count;
  ops.bcast = CountBcast;
  ops.fini = Fini;
  return ops;
}

TEST(SingleRankBootstrap, CollectivesCompleteWithoutTheImplementation) {
  mori_bootstrap_ops_t ops = Ops();
  mori_bootstrap_t *b = nullptr;
  ASSERT_EQ(mori_bootstrap_create(&ops, nullptr, 0, 1, &b), 0);
  calls = 0;
  int mine = 42, all = 0;
  EXPECT_EQ(mori_bootstrap_allgather(b, &mine, &all, sizeof(int)), 0);
  EXPECT_EQ(all, 42);
  EXPECT_EQ(mori_bootstrap_allgather(b, &mine, &mine, sizeof(int)), 0) << "in place";
  EXPECT_EQ(mine, 42);
  EXPECT_EQ(mori_bootstrap_barrier(b), 0);
  char buf[8] = "abc";
  EXPECT_EQ(mori_bootstrap_bcast(b, buf, sizeof(buf), 0), 0);
  EXPECT_STREQ(buf, "abc");
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(mori_bootstrap_bcast(b, buf, sizeof(buf), 1), MORI_EINVAL) << "root outside the one rank";
  EXPECT_EQ(mori_bootstrap_allgather(b, nullptr, &all, sizeof(int)), MORI_EINVAL);
  EXPECT_EQ(mori_bootstrap_destroy(b), 0);
}

TEST(SingleRankBootstrap, TwoRanksStillCallTheImplementation) {
  mori_bootstrap_ops_t ops = Ops();
  mori_bootstrap_t *b = nullptr;
  ASSERT_EQ(mori_bootstrap_create(&ops, nullptr, 0, 2, &b), 0);
  calls = 0;
  int mine = 1, all[2] = {0, 0};
  EXPECT_EQ(mori_bootstrap_allgather(b, &mine, all, sizeof(int)), -5);
  EXPECT_EQ(mori_bootstrap_barrier(b), -5);
  EXPECT_EQ(mori_bootstrap_bcast(b, all, sizeof(all), 1), -5);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(mori_bootstrap_destroy(b), 0);
}

}  // namespace
