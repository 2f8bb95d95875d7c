// Signal arenas (core/signal_arena.c): the slots every rank agrees on. The
// free maps fill from the front between reclaims and are searched a word at
// a time, so runs that start in a partly used word, cross word boundaries,
// or follow whole used words are the cases that matter.
#include <random>
#include <vector>

#include "core/internal/signal_arena.h"
#include "tests/support/world.h"

namespace {

constexpr size_t kGranule = 512;

struct ArenaRun {
  mori_arena_slot_t first, second;
  size_t begin() const { return first.offset; }
  size_t end() const { return second.bytes ? second.offset + second.bytes : first.offset + first.bytes; }
};

ArenaRun Assign(mori_comm_t *comm, size_t first_bytes, size_t second_bytes) {
  ArenaRun r;
  int rc = mori_signal_arena_assign_pair(comm, first_bytes, second_bytes, 0, &r.first, &r.second);
  EXPECT_EQ(rc, 0) << mori_last_error();
  return r;
}

void Release(mori_comm_t *comm, const ArenaRun &r) {
  mori_signal_arena_release(comm, &r.first);
  if (r.second.bytes) mori_signal_arena_release(comm, &r.second);
}

// First fit over whole used words: the exact offsets a fresh comm hands out.
TEST(SignalArena, FirstFitAcrossWordBoundaries) {
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) {
    mori_test::World w;
    ASSERT_TRUE(w.ok());
    std::vector<ArenaRun> live;
    for (int i = 0; i < 62; i++) live.push_back(Assign(w.comm, kGranule, 0));
    EXPECT_EQ(live.back().first.offset, 61 * kGranule);
    // Three granules from the last two of word 0 into word 1.
    live.push_back(Assign(w.comm, kGranule, 2 * kGranule));
    EXPECT_EQ(live.back().begin(), 62 * kGranule);
    EXPECT_EQ(live.back().second.offset, 63 * kGranule);
    for (int i = 0; i < 63; i++) live.push_back(Assign(w.comm, kGranule, 0));
    EXPECT_EQ(live.back().first.offset, 127 * kGranule);
    // Words 0 and 1 are full: the next run opens word 2.
    live.push_back(Assign(w.comm, 100, 0));
    EXPECT_EQ(live.back().first.offset, 128 * kGranule);
    // A released run stays taken until a reclaim (kernels may still use it).
    Release(w.comm, live[70]);
    live.erase(live.begin() + 70);
    live.push_back(Assign(w.comm, kGranule, 0));
    EXPECT_EQ(live.back().first.offset, 129 * kGranule);
    for (const ArenaRun &r : live) EXPECT_EQ(r.first.arena, 0);
    for (const ArenaRun &r : live) Release(w.comm, r);
    (void)rank;
    (void)size;
  });
}

// Runs of mixed lengths, released by each rank in its own order: every rank
// gets the same slot, and no live run of a rank overlaps another.
TEST(SignalArena, RanksAgreeAndLiveRunsNeverOverlap) {
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) {
    mori_test::World w;
    ASSERT_TRUE(w.ok());
    std::mt19937 rng(rank * 7 + 1);
    std::vector<ArenaRun> live;
    for (int i = 0; i < 700; i++) {
      ArenaRun r = Assign(w.comm, kGranule * (1 + i % 3), (size_t)(i % 4) * 300);
      uint64_t mine[3] = {(uint64_t)r.first.arena, r.begin(), r.end()};
      std::vector<uint64_t> all(3 * (size_t)size);
      ASSERT_EQ(mori_comm_allgather(w.comm, mine, all.data(), sizeof(mine)), 0) << mori_last_error();
      for (int p = 0; p < size; p++)
        for (int k = 0; k < 3; k++) ASSERT_EQ(all[3 * p + k], mine[k]) << "run " << i << ": rank " << p << " differs";
      for (const ArenaRun &o : live) {
        bool apart = o.first.arena != r.first.arena || r.end() <= o.begin() || o.end() <= r.begin();
        ASSERT_TRUE(apart) << "run " << i << " [" << r.begin() << ", " << r.end() << ") overlaps [" << o.begin() << ", "
                           << o.end() << ")";
      }
      live.push_back(r);
      while (!live.empty() && rng() % 3 == 0) {
        size_t k = rng() % live.size();
        Release(w.comm, live[k]);
        live.erase(live.begin() + (long)k);
      }
    }
    for (const ArenaRun &r : live) Release(w.comm, r);
  });
}

}  // namespace
