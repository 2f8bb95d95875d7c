// SPDX-License-Identifier: MIT
// Teams on a simulated 2-node layout (MORI_HOST_ID): predefined teams,
// splits and translations checked on every rank.
#include "mori/team.h"

#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

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

}  // namespace
