// SPDX-License-Identifier: MIT
// A rank waiting in one of the comm's collective steps (the node channel:
// every rank on one host) for a late peer sleeps rather than spinning or
// yielding — with more ranks than cores those would take the core from the
// rank it waits for — and wakes as soon as the peer arrives; many steps in
// a row still pair every rank's call k with every other rank's call k.
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "tests/support/world.h"

using mori_test::World;

namespace {

double Seconds(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

TEST(NodeChannelWait, AWaitingRankSleepsAndWakesWhenTheLastRankArrives) {
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    std::vector<int64_t> all((size_t)size);
    int64_t mine = rank;
    MORI_ASSERT_OK(mori_comm_allgather(w.comm, &mine, all.data(), sizeof(mine)));  // every rank is here
    const double late_s = 0.6;
    double wall = Seconds(CLOCK_MONOTONIC), cpu = Seconds(CLOCK_PROCESS_CPUTIME_ID);
    if (rank == size - 1) usleep((useconds_t)(late_s * 1e6));
    MORI_ASSERT_OK(mori_comm_allgather(w.comm, &mine, all.data(), sizeof(mine)));
    wall = Seconds(CLOCK_MONOTONIC) - wall;
    cpu = Seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu;
    for (int r = 0; r < size; r++) EXPECT_EQ(all[(size_t)r], r) << "rank " << rank << " from rank " << r;
    if (rank != size - 1) {
      // Bounds with room for a loaded machine: a waiter that reads its clock
      // late measures less than the lateness, one stalled waits longer.
      EXPECT_GE(wall, late_s * 0.5) << "rank " << rank << " left the step before the last rank arrived";
      // A waiter that spins, yields or sleeps in microsecond steps burns tens
      // to hundreds of milliseconds here; one that sleeps on the step, almost none.
      EXPECT_LT(cpu, 0.020) << "rank " << rank << " used " << cpu * 1e3 << " ms of CPU waiting " << wall * 1e3 << " ms";
      EXPECT_LT(wall, late_s + 3.0) << "rank " << rank << " waited " << wall * 1e3 << " ms for a rank " << late_s * 1e3
                                    << " ms late";
    }
    for (int64_t k = 0; k < 2000; k++) {  // many steps: both mailboxes, wakes and arrivals in every order
      int64_t v = k * size + rank;
      MORI_ASSERT_OK(mori_comm_allgather(w.comm, &v, all.data(), sizeof(v)));
      for (int r = 0; r < size; r++) ASSERT_EQ(all[(size_t)r], k * size + r) << "step " << k << " on rank " << rank;
    }
  });
}

}  // namespace
