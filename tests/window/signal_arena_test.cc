// SPDX-License-Identifier: MIT
// Signal arenas (core/signal_arena.c): the slots every rank agrees on. The
// free maps fill from the front between reclaims and are searched a word at
// a time, so runs that start in a partly used word, cross word boundaries,
// or follow whole used words are the cases that matter; and slots come two
// ways, from the run every rank proposed (window creation's common case, no
// step of its own) or from an allgather of the free maps, so every case
// runs both ways.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/internal/signal_arena.h"
#include "mori/profile.h"
#include "tests/support/profile_calls.h"
#include "tests/support/world.h"

namespace {

constexpr size_t kGranule = 512;
constexpr size_t kArena = 2 << 20;

// How a test's slots are assigned.
enum class Path { kMaps, kProposals };
Path g_path = Path::kMaps;

// What window creation does: each rank proposes, the proposals are
// gathered, and an agreed one is passed on.
const mori_arena_proposal_t *Agree(mori_comm_t *comm, size_t first_bytes, size_t second_bytes,
                                   mori_arena_proposal_t &mine, std::vector<mori_arena_proposal_t> &all) {
  mori_signal_arena_propose(comm, first_bytes, second_bytes, &mine);
  all.assign((size_t)mori_comm_size(comm), mori_arena_proposal_t{});
  EXPECT_EQ(mori_comm_allgather(comm, &mine, all.data(), sizeof(mine)), 0) << mori_last_error();
  for (const mori_arena_proposal_t &p : all)
    if (std::memcmp(&p, &all[0], sizeof(p)) != 0) return nullptr;
  return &all[0];
}

struct ArenaRun {
  mori_arena_slot_t first, second;
  size_t begin() const { return first.offset; }
  size_t end() const { return second.bytes ? second.offset + second.bytes : first.offset + first.bytes; }
};

// Collective steps since the last reset (mori/profile.h).
uint64_t Steps() { return mori_test::ProfileCalls("collective_step"); }

// `steps`: how many collective steps assign_pair itself must take (-1: any).
ArenaRun Assign(mori_comm_t *comm, size_t first_bytes, size_t second_bytes, int steps = -1) {
  ArenaRun r;
  std::vector<mori_arena_proposal_t> all;
  mori_arena_proposal_t mine{-1, 0, 0, 0};
  const mori_arena_proposal_t *agreed =
      g_path == Path::kProposals ? Agree(comm, first_bytes, second_bytes, mine, all) : nullptr;
  mori_profile_reset();
  int rc = mori_signal_arena_assign_pair(comm, first_bytes, second_bytes, 0, g_path == Path::kProposals ? &mine : nullptr,
                                         agreed, &r.first, &r.second);
  if (steps >= 0) {
    EXPECT_EQ(Steps(), (uint64_t)steps) << "collective steps of this assignment";
  }
  EXPECT_EQ(rc, 0) << mori_last_error();
  return r;
}

void Release(mori_comm_t *comm, const ArenaRun &r) {
  mori_signal_arena_release(comm, &r.first);
  if (r.second.bytes) mori_signal_arena_release(comm, &r.second);
}

// Steps an assignment takes once the comm has an arena with room: none when
// every rank proposed the same run (each backed its proposal before the
// proposals were gathered), else two: the maps, then the agreement that
// every rank backed the run found in them.
int SteadySteps() { return g_path == Path::kProposals ? 0 : 2; }

class SignalArena : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override { g_path = GetParam(); }
};

// First fit over whole used words: the exact offsets a fresh comm hands out.
TEST_P(SignalArena, FirstFitAcrossWordBoundaries) {
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) {
    mori_test::World w;
    ASSERT_TRUE(w.ok());
    std::vector<ArenaRun> live;
    for (int i = 0; i < 62; i++) live.push_back(Assign(w.comm, kGranule, 0, i == 0 ? -1 : SteadySteps()));
    EXPECT_EQ(live.back().first.offset, 61 * kGranule);
    // Three granules from the last two of word 0 into word 1.
    live.push_back(Assign(w.comm, kGranule, 2 * kGranule, SteadySteps()));
    EXPECT_EQ(live.back().begin(), 62 * kGranule);
    EXPECT_EQ(live.back().second.offset, 63 * kGranule);
    for (int i = 0; i < 63; i++) live.push_back(Assign(w.comm, kGranule, 0, SteadySteps()));
    EXPECT_EQ(live.back().first.offset, 127 * kGranule);
    // Words 0 and 1 are full: the next run opens word 2.
    live.push_back(Assign(w.comm, 100, 0, SteadySteps()));
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
TEST_P(SignalArena, RanksAgreeAndLiveRunsNeverOverlap) {
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) {
    mori_test::World w;
    ASSERT_TRUE(w.ok());
    std::mt19937 rng(rank * 7 + 1);
    std::vector<ArenaRun> live;
    for (int i = 0; i < 700; i++) {
      // Ranks release at different times but nothing is reclaimed (one
      // arena suffices): their maps stay equal and so do their proposals.
      ArenaRun r = Assign(w.comm, kGranule * (1 + i % 3), (size_t)(i % 4) * 300, i == 0 ? -1 : SteadySteps());
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

// The last granule of an arena is handed out, and the run after it opens
// the next arena.
TEST_P(SignalArena, TheLastGranuleOfAnArenaIsUsed) {
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) {
    mori_test::World w;
    ASSERT_TRUE(w.ok());
    std::vector<ArenaRun> live;
    live.push_back(Assign(w.comm, kArena - 2 * kGranule, 0));
    live.push_back(Assign(w.comm, kGranule, 0, SteadySteps()));
    live.push_back(Assign(w.comm, kGranule, 0, SteadySteps()));
    EXPECT_EQ(live.back().first.arena, 0);
    EXPECT_EQ(live.back().first.offset, kArena - kGranule);
    live.push_back(Assign(w.comm, kGranule, 0));
    EXPECT_EQ(live.back().first.arena, 1);
    EXPECT_EQ(live.back().first.offset, 0u);
    for (const ArenaRun &r : live) Release(w.comm, r);
    (void)rank;
    (void)size;
  });
}

// Released runs are reused once the comm has 8 arenas and none is free: the
// device is synchronised, the runs are zeroed and handed out again from the
// front. One rank still holds a run when the others have released theirs,
// so the ranks' maps differ afterwards (their proposals disagree): the run
// it holds is never handed out, and every rank still gets the same slots.
TEST_P(SignalArena, ReclaimReusesReleasedRunsZeroedAndSkipsHeldOnes) {
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) {
    mori_test::World w;
    ASSERT_TRUE(w.ok());
    const size_t half = kArena / 2;
    std::vector<ArenaRun> runs;
    for (int i = 0; i < 16; i++) runs.push_back(Assign(w.comm, half, 0)); // arenas 0..7, two runs each
    EXPECT_EQ(runs.back().first.arena, 7);
    for (const ArenaRun &r : runs) std::memset(mori_signal_arena_peer_ptr(w.comm, &r.first, rank), 0xab, r.first.bytes);
    // Each rank releases in its own order; rank 0 keeps run 1 (arena 0's second half).
    std::mt19937 rng(rank + 3);
    std::vector<int> order(16);
    for (int i = 0; i < 16; i++) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (int i : order)
      if (!(rank == 0 && i == 1)) Release(w.comm, runs[i]);
    ArenaRun again = Assign(w.comm, half, 0);
    EXPECT_EQ(again.first.arena, 0);
    EXPECT_EQ(again.first.offset, 0u);
    EXPECT_GE(mori_test::ProfileCalls("device_wait"), 1u) << "reusing released runs synchronises the device first";
    const auto *bytes = static_cast<const unsigned char *>(mori_signal_arena_peer_ptr(w.comm, &again.first, rank));
    for (size_t b = 0; b < again.first.bytes; b++) ASSERT_EQ(bytes[b], 0) << "byte " << b << " of a reused run";
    // Arena 0's second half is held on rank 0: the next run goes elsewhere
    // on every rank, though the others have it free.
    // Rank 0's first fit (arena 1) differs from the others' (arena 0's
    // second half): no agreement, so one step gathers the maps (and one
    // agrees that the run found is backed everywhere).
    ArenaRun next = Assign(w.comm, half, 0, size > 1 ? 2 : SteadySteps());
    uint64_t mine[2] = {(uint64_t)next.first.arena, next.first.offset};
    std::vector<uint64_t> all(2 * (size_t)size);
    ASSERT_EQ(mori_comm_allgather(w.comm, mine, all.data(), sizeof(mine)), 0) << mori_last_error();
    for (int p = 0; p < size; p++) EXPECT_EQ(all[2 * p], mine[0]) << "rank " << p;
    for (int p = 0; p < size; p++) EXPECT_EQ(all[2 * p + 1], mine[1]) << "rank " << p;
    EXPECT_FALSE(next.first.arena == 0 && next.first.offset == half) << "rank 0 still holds that run";
    Release(w.comm, again);
    Release(w.comm, next);
    if (rank == 0) Release(w.comm, runs[1]);
  });
}

// Bytes this process holds in its shared-memory objects (memfds and
// /dev/shm files of mori): what the host platform has reserved for them.
size_t ReservedBytes() {
  size_t total = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d)) != nullptr;) {
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    char target[512];
    ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = 0;
    std::string t(target);
    if (t.find("memfd:mori") == std::string::npos && t.find("/dev/shm/mori.") == std::string::npos) continue;
    struct stat st;
    if (stat(path.c_str(), &st) == 0) total += (size_t)st.st_blocks * 512;
  }
  closedir(d);
  return total;
}

// Every slot handed out is backed, whichever way it was found: its pages of
// /dev/shm are reserved when it is assigned, so a peer's first signal into
// it cannot meet a full /dev/shm (a SIGBUS). The arena itself is not
// reserved whole.
TEST_P(SignalArena, EverySlotHandedOutIsBacked) {
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) {
    mori_test::World w;
    ASSERT_TRUE(w.ok());
    std::vector<ArenaRun> live;
    live.push_back(Assign(w.comm, kGranule, 0));  // opens arena 0
    size_t before = ReservedBytes();
    EXPECT_LT(before, kArena) << "arena 0 is not reserved whole";
    // 16 KiB from granule 8 on: four pages no slot had touched.
    live.push_back(Assign(w.comm, 7 * kGranule, 0, SteadySteps()));
    live.push_back(Assign(w.comm, 16 << 10, 0, SteadySteps()));
    EXPECT_EQ(live.back().first.offset, 8 * kGranule);
    EXPECT_GE(ReservedBytes(), before + (16 << 10)) << "the slot's pages are reserved";
    for (const ArenaRun &r : live) Release(w.comm, r);
    (void)rank;
    (void)size;
  });
}

INSTANTIATE_TEST_SUITE_P(BothWays, SignalArena, ::testing::Values(Path::kMaps, Path::kProposals),
                         [](const ::testing::TestParamInfo<Path> &p) {
                           return std::string(p.param == Path::kMaps ? "FromMaps" : "FromProposals");
                         });

}  // namespace
