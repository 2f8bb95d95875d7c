// SPDX-License-Identifier: MIT
// mori/profile.h on the host platform, across separate processes: a window
// over a carve of an already mapped heap chunk makes no mapping call at all
// (one collective step; its tables are copied at first device use), while the window that needs
// a new chunk shows the whole chain a peer pays for it — create, export,
// handle exchange, import, address space, maps, access, transport
// registration — each kind counted and timed.
#include <stdlib.h>

#include <map>
#include <string>

#include "mori/heap.h"
#include "mori/profile.h"
#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

constexpr size_t kMiB = 1 << 20;

std::map<std::string, mori_profile_entry_t> Snapshot() {
  mori_profile_entry_t e[MORI_PROFILE_KINDS];
  int n = mori_profile_read(e, MORI_PROFILE_KINDS);
  std::map<std::string, mori_profile_entry_t> out;
  for (int i = 0; i < n; i++) out[e[i].name] = e[i];
  return out;
}

uint64_t Calls(const std::map<std::string, mori_profile_entry_t> &p, const char *kind) {
  auto it = p.find(kind);
  return it == p.end() ? 0 : it->second.calls;
}

TEST(Profile, ASteadyHeapWindowMapsNothingAndANewChunkShowsEveryStep) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    (void)rank;
    setenv("MORI_SHMEM_MODE", "vmm", 1);
    setenv("MORI_SHMEM_VMM_CHUNK_SIZE", std::to_string(4 * kMiB).c_str(), 1);
    setenv("MORI_SHMEM_HEAP_SIZE", std::to_string(64 * kMiB).c_str(), 1);
    World w;
    ASSERT_TRUE(w.ok());
    void *first = nullptr;
    mori_window_t *first_win = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(kMiB, nullptr, &first));
    MORI_ASSERT_OK(mori_window_create(w.comm, first, &first_win));

    // Steady state: a carve of the mapped chunk and its window.
    mori_profile_reset();
    EXPECT_TRUE(Snapshot().empty()) << "reset leaves no kind with calls";
    void *p = nullptr;
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(kMiB, nullptr, &p));
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    auto steady = Snapshot();
    for (const char *kind : {"mem_create", "mem_export", "handle_share", "mem_import", "va_reserve", "mem_map",
                             "set_access", "transport_register", "device_wait"})
      EXPECT_EQ(Calls(steady, kind), 0u) << kind << " in a steady-state heap window";
    // Step 1 alone: the chunk is mapped and the signal slots' proposals agree.
    EXPECT_EQ(Calls(steady, "collective_step"), 1u) << "a steady heap window needs one exchange";
    EXPECT_EQ(Calls(steady, "table_upload"), 0u) << "the tables are copied at first device use, not at creation";
    (void)mori_window_device_view(win);
    (void)mori_window_ptrs_dev(win);
    EXPECT_EQ(Calls(Snapshot(), "table_upload"), 1u) << "the first device use copies the tables, once";
    for (auto &kv : steady) {
      EXPECT_GE(kv.second.total_ns, kv.second.max_ns) << kv.first;
      EXPECT_GT(kv.second.max_ns, 0u) << kv.first;
    }

    // Growth: 3 MiB more does not fit the first chunk's 2 MiB left.
    mori_profile_reset();
    void *big = nullptr;
    mori_window_t *big_win = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(3 * kMiB, nullptr, &big));
    MORI_ASSERT_OK(mori_window_create(w.comm, big, &big_win));
    auto grown = Snapshot();
    EXPECT_EQ(Calls(grown, "mem_create"), 1u) << "the new chunk";
    EXPECT_GE(Calls(grown, "mem_export"), 1u);
    EXPECT_GE(Calls(grown, "handle_share"), 1u);
    EXPECT_EQ(Calls(grown, "mem_import"), (uint64_t)(size - 1)) << "one import per peer";
    EXPECT_GE(Calls(grown, "va_reserve"), 1u) << "the chunk's flat span";
    // The chunk at the heap's address, this rank's slot of the span, and
    // every peer's slot (the p2p transport).
    EXPECT_GE(Calls(grown, "mem_map"), (uint64_t)(size + 1));
    EXPECT_GE(Calls(grown, "set_access"), (uint64_t)(size + 1));
    EXPECT_GE(Calls(grown, "transport_register"), 1u);
    mori_heap_stats_t st;
    MORI_ASSERT_OK(mori_heap_stats(-1, &st));
    EXPECT_EQ(st.chunks, 2);

    EXPECT_EQ(mori_profile_read(nullptr, MORI_PROFILE_KINDS), 0) << "no buffer, nothing copied";
    MORI_EXPECT_OK(mori_window_destroy(big_win));
    MORI_EXPECT_OK(mori_mem_free(big));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
    MORI_EXPECT_OK(mori_window_destroy(first_win));
    MORI_EXPECT_OK(mori_mem_free(first));
  });
}

}  // namespace
