// SPDX-License-Identifier: MIT
// A collective step too large for a node-channel mailbox goes through the
// bootstrap, after a channel step that carries its size. When the
// bootstrap's part fails on a rank (here rank 1 takes the channel's step of
// the size, then never comes to the bootstrap's part), the channel fails
// too: the later small steps, which go through the channel, fail on every
// rank (rank 0 naming the large step, rank 1 naming rank 0), rather than
// pass as if nothing had happened (they did, while the large one had
// failed on rank 0).
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/internal/comm.h"
#include "core/internal/node_channel.h"
#include "tests/support/world.h"

using mori_test::World;

namespace {

TEST(LargeStep, ABootstrapPartThatFailsFailsTheNodeChannelToo) {
  EXPECT_RANKS_PASS(2, [](int rank, int size) {
    World w(1500);
    ASSERT_TRUE(w.ok());
    ASSERT_NE(w.comm->channel, nullptr) << "ranks of one host: the comm has a node channel";
    std::vector<char> send(MORI_NODE_CHANNEL_PAYLOAD + 1, (char)rank), recv(send.size() * (size_t)size);
    if (rank == 0) {
      EXPECT_NE(mori_comm_allgather_named(w.comm, "big", send.data(), recv.data(), send.size()), 0);
    } else {
      // The channel's step of the size, as the comm takes it; then not the bootstrap's part.
      uint64_t mine = send.size(), sizes[2];
      ASSERT_EQ(mori_node_channel_allgather(w.comm->channel, "big (the size of a step through the bootstrap)", &mine,
                                            sizes, sizeof(mine)),
                0)
          << mori_last_error();
      usleep(3000 * 1000);  // past rank 0's timeout
    }
    uint64_t x = (uint64_t)rank, xs[2];
    EXPECT_NE(mori_comm_allgather(w.comm, &x, xs, sizeof(x)), 0) << "a small step passed after the large one failed";
    // Rank 0 names the step and why; rank 1, the rank that failed it.
    std::string want = rank == 0 ? "big (8193 bytes per rank, through the bootstrap)" : "rank 0 failed step";
    EXPECT_NE(std::string(mori_last_error()).find(want), std::string::npos) << mori_last_error();
  });
}

}  // namespace
