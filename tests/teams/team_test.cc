// SPDX-License-Identifier: MIT
// Teams on a simulated 2-node layout (MORI_HOST_ID): predefined teams,
// splits and translations checked on every rank.
#include "mori/team.h"

#include <climits>
#include <initializer_list>
#include <string>
#include <vector>

#include "mori/locality.h"
#include "tests/support/world.h"

using mori_test::ExpectError;
using mori_test::TestRanks;
using mori_test::World;

namespace {

// The 2-node layout of the tests below: ranks [0, size/2) on node-0.
void SimulateTwoNodes(int rank, int size) { setenv("MORI_HOST_ID", rank < size / 2 ? "node-0" : "node-1", 1); }

// The last error names every piece of `parts` (the call, the values given).
void ExpectErrorNames(std::initializer_list<std::string> parts) {
  std::string msg = mori_last_error();
  for (const std::string &p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "\"" << p << "\" not in: " << msg;
}

TEST(Teams, TwoNodeLayoutGivesNodeLsaRailAndSplits) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    int per_node = size / 2;
    setenv("MORI_HOST_ID", rank < per_node ? "node-0" : "node-1", 1);
    World w;
    ASSERT_TRUE(w.ok());
    mori_team_t world, node, lsa, rail;
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_WORLD, &world));
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_NODE, &node));
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_LSA, &lsa));
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_RAIL, &rail));
    int my_node = rank / per_node, local = rank % per_node;
    EXPECT_EQ(world.size, size);
    EXPECT_EQ(world.rank, rank);
    EXPECT_EQ(node.start, my_node * per_node);
    EXPECT_EQ(node.size, per_node);
    EXPECT_EQ(node.rank, local);
    EXPECT_EQ(lsa.start, node.start) << "on the host platform LSA = node";
    EXPECT_EQ(lsa.size, per_node);
    EXPECT_EQ(rail.start, local);
    EXPECT_EQ(rail.stride, per_node);
    EXPECT_EQ(rail.size, 2);
    EXPECT_EQ(rail.rank, my_node);
    // Translations both ways.
    for (int i = 0; i < per_node; i++) {
      EXPECT_EQ(mori_team_to_world(node, i), my_node * per_node + i);
      EXPECT_EQ(mori_team_from_world(node, my_node * per_node + i), i);
      EXPECT_EQ(mori_team_translate(node, i, world), my_node * per_node + i);
    }
    EXPECT_EQ(mori_team_from_world(node, (1 - my_node) * per_node), -1);
    EXPECT_EQ(mori_team_translate(rail, 1 - my_node, node), -1) << "the other node's rail peer is not in my node";
    EXPECT_EQ(mori_team_to_world(rail, 1 - my_node), (1 - my_node) * per_node + local);
    EXPECT_EQ(mori_team_to_world(world, size), -1);
    // Transport per peer: p2p inside the node, none across (no rdma linked).
    for (int p = 0; p < size; p++)
      EXPECT_STREQ(mori_team_transport_name(w.comm, p), p / per_node == my_node ? "p2p" : "none") << "peer " << p;
    // Strided split: the even indices of the world.
    mori_team_t even;
    MORI_ASSERT_OK(mori_team_split_strided(&world, 0, 2, size / 2, &even));
    EXPECT_EQ(even.rank, rank % 2 == 0 ? rank / 2 : -1);
    if (size >= 4) {
      EXPECT_EQ(mori_team_to_world(even, 1), 2);
    }
    EXPECT_EQ(mori_team_split_strided(&world, 1, 2, size, &even), MORI_EINVAL);
    // 2-D split of the world by node width: rows are nodes, columns are rails.
    mori_team_t x, y;
    MORI_ASSERT_OK(mori_team_split_2d(&world, per_node, &x, &y));
    EXPECT_EQ(x.start, node.start);
    EXPECT_EQ(x.size, node.size);
    EXPECT_EQ(x.rank, node.rank);
    EXPECT_EQ(y.start, rail.start);
    EXPECT_EQ(y.stride, rail.stride);
    EXPECT_EQ(y.rank, rail.rank);
    EXPECT_EQ(mori_team_split_2d(&world, 3 * size, &x, &y), MORI_EINVAL);
    mori_team_destroy(&x);
    EXPECT_EQ(x.size, 0);
  });
}

TEST(Teams, IrregularNodesRefuseNodeTeamsWithAReason) {
  int size = TestRanks();
  if (size < 4) GTEST_SKIP() << "needs 4 ranks";
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    // Interleaved: even ranks on one host, odd on the other.
    setenv("MORI_HOST_ID", rank % 2 ? "odd" : "even", 1);
    World w;
    ASSERT_TRUE(w.ok());
    mori_team_t t;
    EXPECT_EQ(mori_team_get(w.comm, MORI_TEAM_NODE, &t), MORI_ENOTSUP);
    EXPECT_NE(std::string(mori_last_error()).find("not laid out"), std::string::npos) << mori_last_error();
    // LSA must be contiguous: it collapses to self.
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_LSA, &t));
    EXPECT_EQ(t.size, 1);
    EXPECT_EQ(t.start, rank);
  });
}

// start + (size-1)*stride past INT_MAX wrapped negative and passed the
// bound check: the team then named world rank INT_MIN.
TEST(Teams, SplitWhoseIndicesOverflowIntIsRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    SimulateTwoNodes(rank, size);
    World w;
    ASSERT_TRUE(w.ok());
    mori_team_t world, t;
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_WORLD, &world));
    EXPECT_EQ(mori_team_split_strided(&world, 0, 1 << 30, 3, &t), MORI_EINVAL);
    ExpectErrorNames({"team_split_strided", "0 + k*1073741824 for k < 3", "size " + std::to_string(size)});
    EXPECT_EQ(mori_team_split_strided(&world, 1, INT_MAX, 2, &t), MORI_EINVAL);
    ExpectErrorNames({"team_split_strided", "1 + k*2147483647 for k < 2"});
    EXPECT_EQ(mori_team_split_strided(&world, size - 1, INT_MAX, INT_MAX, &t), MORI_EINVAL);
    // One member is inside the parent whatever the stride.
    MORI_ASSERT_OK(mori_team_split_strided(&world, size - 1, INT_MAX, 1, &t));
    EXPECT_EQ(mori_team_to_world(t, 0), size - 1);
    EXPECT_EQ(t.rank, rank == size - 1 ? 0 : -1);
  });
}

// A single member's stride is 1, whatever stride the split was given: the
// product with the parent's stride wrapped int (a split with stride
// INT_MAX got a negative stride, and later one of a valid parent was
// refused). For two members or more, the indices inside the parent bound
// the stride in world ranks below the parent's span, which fits int.
TEST(Teams, ASingleMemberSplitHasStrideOneWhateverStrideIsGiven) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    SimulateTwoNodes(rank, size);
    World w;
    ASSERT_TRUE(w.ok());
    mori_team_t world, rail, even, t;
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_WORLD, &world));
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_RAIL, &rail));
    MORI_ASSERT_OK(mori_team_split_strided(&rail, rail.rank, INT_MAX, 1, &t));
    EXPECT_EQ(t.stride, 1);
    EXPECT_EQ(mori_team_to_world(t, 0), rank);
    EXPECT_EQ(t.rank, 0);
    MORI_ASSERT_OK(mori_team_split_strided(&world, 0, 2, size / 2, &even));  // stride 2 at every rank count
    for (int stride : {INT_MAX, INT_MAX / 2, 1}) {
      SCOPED_TRACE("stride " + std::to_string(stride));
      MORI_ASSERT_OK(mori_team_split_strided(&even, 0, stride, 1, &t));
      EXPECT_EQ(t.stride, 1);
      EXPECT_EQ(mori_team_to_world(t, 0), 0);
      EXPECT_EQ(t.rank, rank == 0 ? 0 : -1);
    }
  });
}

// Teams are plain values (collectives take them by hand): a split checks
// its parent before dividing by its stride. Stride 0 was SIGFPE.
TEST(Teams, SplitOfAnUnsoundParentIsRefusedSayingWhy) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_team_t t, x, y;
    struct Case {
      mori_team_t parent;
      const char *why;
    } cases[] = {
        {{0, 0, size, rank}, "stride is below 1"},
        {{0, -1, size, rank}, "stride is below 1"},
        {{0, 1, 0, -1}, "size is below 1"},
        {{0, 1, -3, -1}, "size is below 1"},
        {{0, 1, size, size}, "rank is neither -1 nor"},
        {{0, 1, size, -2}, "rank is neither -1 nor"},
        {{-1, 1, size, rank}, "start is negative"},
        {{INT_MAX - 1, 2, 2, -1}, "does not fit int"},  // the last member's world rank
    };
    for (const Case &c : cases) {
      const mori_team_t &p = c.parent;
      std::string parent = "{start " + std::to_string(p.start) + ", stride " + std::to_string(p.stride) + ", size " +
                           std::to_string(p.size) + ", rank " + std::to_string(p.rank) + "}";
      EXPECT_EQ(mori_team_split_strided(&p, 0, 1, 1, &t), MORI_EINVAL) << parent;
      ExpectErrorNames({"team_split_strided", parent, c.why});
      EXPECT_EQ(mori_team_split_2d(&p, 1, &x, &y), MORI_EINVAL) << parent;
      ExpectErrorNames({"team_split_2d", parent, c.why});
    }
    // The same arithmetic on a sound parent works: the largest start that fits.
    mori_team_t top = {INT_MAX - 1, 1, 2, -1};
    MORI_ASSERT_OK(mori_team_split_strided(&top, 1, 1, 1, &t));
    EXPECT_EQ(mori_team_to_world(t, 0), INT_MAX);
  });
}

// A split of a valid parent whose column has one member: the member's
// stride (x_size times the parent's) wrapped int, so the split failed,
// named team_split_strided and a stride the caller never gave, and left x
// written. Now: stride 1 for a single member; both teams or neither.
TEST(Teams, A2dSplitWithASingleMemberColumnSucceedsAndWritesBothOrNeither) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    (void)rank;
    (void)size;
    mori_team_t wide = {0, 1 << 30, 2, 0}, x = {7, 7, 7, 7}, y = {7, 7, 7, 7};
    MORI_ASSERT_OK(mori_team_split_2d(&wide, 2, &x, &y));
    EXPECT_EQ(x.size, 2);
    EXPECT_EQ(x.stride, 1 << 30);
    EXPECT_EQ(x.rank, 0);
    EXPECT_EQ(y.size, 1);
    EXPECT_EQ(y.stride, 1);
    EXPECT_EQ(y.rank, 0);
    EXPECT_EQ(mori_team_to_world(y, 0), 0);
    // A failure leaves both as they were, and says which call.
    mori_team_t outside = {0, 1, 4, -1};
    x = y = {7, 7, 7, 7};
    ExpectError(mori_team_split_2d(&outside, 2, &x, &y), MORI_EINVAL,
                "team_split_2d: the calling rank is not a member of the parent team {start 0, stride 1, size 4}");
    EXPECT_EQ(x.start, 7);
    EXPECT_EQ(y.start, 7);
  });
}

// A peer outside the comm is an error, not a peer nothing reaches.
TEST(Teams, TransportNameOfAPeerOutsideTheCommSetsTheError) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    (void)rank;
    World w;
    ASSERT_TRUE(w.ok());
    for (int peer : {-1, size, size + 5}) {
      mori_clear_error();
      EXPECT_STREQ(mori_team_transport_name(w.comm, peer), "none");
      EXPECT_NE(std::string(mori_last_error()).find("team_transport_name: peer " + std::to_string(peer) +
                                                    " outside the comm of " + std::to_string(size) + " ranks"),
                std::string::npos)
          << mori_last_error();
    }
    mori_clear_error();
    EXPECT_STRNE(mori_team_transport_name(w.comm, (rank + 1) % size), "none");
    EXPECT_STREQ(mori_last_error(), "");
  });
}

// The inline arithmetic divides by the stride: a team whose stride is below 1
// or that has no members has no members, on the host and in kernels; so has
// one with a negative start (world - start overflowed: UBSan, and
// from_world returned -2147483644), and a member whose world rank would
// pass INT_MAX is none (start + index * stride overflowed).
TEST(Teams, ArithmeticOnAStrideBelowOneOrNoMembersFindsNone) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_team_t huge = {INT_MAX - 1, INT_MAX / 2, 4, -1};
    EXPECT_EQ(mori_team_to_world(huge, 0), INT_MAX - 1);
    EXPECT_EQ(mori_team_to_world(huge, 1), -1) << "past INT_MAX";
    EXPECT_EQ(mori_team_to_world(huge, 3), -1) << "past INT_MAX";
    mori_team_t bad[] = {{0, 0, size, rank}, {0, -2, size, rank}, {0, 1, 0, -1}, {0, 1, -1, -1}, {-4, 1, size + 4, -1},
                         {INT_MIN, 3, 8, -1}};
    mori_team_t world = {0, 1, size, rank};
    for (const mori_team_t &t : bad) {
      for (int r = -1; r <= size; r++) {
        EXPECT_FALSE(mori_team_is_member(t, r)) << t.stride << " " << t.size << " world " << r;
        EXPECT_EQ(mori_team_from_world(t, r), -1);
        EXPECT_EQ(mori_team_to_world(t, r), -1);
        EXPECT_EQ(mori_team_translate(world, r, t), -1);
        EXPECT_EQ(mori_team_translate(t, r, world), -1);
      }
      EXPECT_EQ(mori_team_from_world(t, INT_MIN), -1);
      EXPECT_EQ(mori_team_from_world(t, INT_MAX), -1);
    }
  });
}

// destroy used to zero the team: stride 0, so is_member divided by zero.
TEST(Teams, DestroyedTeamHasNoMembers) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    SimulateTwoNodes(rank, size);
    World w;
    ASSERT_TRUE(w.ok());
    mori_team_t world, node, t, x, y;
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_WORLD, &world));
    MORI_ASSERT_OK(mori_team_get(w.comm, MORI_TEAM_NODE, &node));
    mori_team_destroy(&node);
    EXPECT_EQ(mori_team_size(node), 0);
    EXPECT_EQ(mori_team_rank(node), -1);
    EXPECT_GE(node.stride, 1);
    for (int r = -1; r <= size; r++) {
      EXPECT_FALSE(mori_team_is_member(node, r)) << "world " << r;
      EXPECT_EQ(mori_team_to_world(node, r), -1) << "index " << r;
      EXPECT_EQ(mori_team_from_world(node, r), -1) << "world " << r;
      EXPECT_EQ(mori_team_translate(world, r, node), -1);
      EXPECT_EQ(mori_team_translate(node, r, world), -1);
    }
    EXPECT_EQ(mori_team_split_strided(&node, 0, 1, 1, &t), MORI_EINVAL);
    EXPECT_EQ(mori_team_split_2d(&node, 1, &x, &y), MORI_EINVAL);
    mori_team_destroy(&node);  // twice is fine
    EXPECT_EQ(node.size, 0);
    mori_team_destroy(nullptr);
  });
}

// A NULL or destroyed comm is refused by name by the team and locality
// queries: each read the freed comm before (crashes, or a team made of
// freed memory with rc 0).
TEST(Teams, ANullOrDestroyedCommIsRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    (void)rank;
    World w;
    ASSERT_TRUE(w.ok());
    EXPECT_STREQ(mori_team_transport_name(nullptr, 0), "none");
    mori_comm_t *gone = nullptr;
    MORI_ASSERT_OK(mori_test::MakeComm(w.bootstrap, &gone));
    MORI_ASSERT_OK(mori_comm_destroy(gone));
    mori_team_t team;
    for (mori_team_kind_t kind : {MORI_TEAM_WORLD, MORI_TEAM_NODE, MORI_TEAM_LSA}) {
      EXPECT_EQ(mori_team_get(gone, kind, &team), MORI_EINVAL) << "kind " << kind;
      EXPECT_NE(std::string(mori_last_error()).find("not a live comm"), std::string::npos) << mori_last_error();
    }
    EXPECT_STREQ(mori_team_transport_name(gone, 0), "none");
    std::vector<uint32_t> words(size);
    EXPECT_EQ(mori_comm_locality(gone, words.data(), size), MORI_EINVAL);
    const uint32_t *dev = nullptr;
    EXPECT_EQ(mori_comm_locality_dev(gone, &dev), MORI_EINVAL);
    EXPECT_EQ(dev, nullptr);
    MORI_EXPECT_OK(mori_team_get(w.comm, MORI_TEAM_WORLD, &team));  // a live one still works
    EXPECT_EQ(team.size, size);
  });
}

}  // namespace
