// SPDX-License-Identifier: MIT
// Flat spans of windows (mori_window_flat_span), for contiguous views:
// where the span exists its arithmetic lands on every rank's memory (the
// peers' addresses of the pointer table, and what peers wrote through it,
// own slot included);
// carves at different heap offsets and a comm spanning nodes are refused,
// naming why.
#include <cstring>
#include <string>

#include "mori/mem.h"
#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

bool Says(const std::string &what) { return std::string(mori_last_error()).find(what) != std::string::npos; }

// Every rank writes its rank into its slot of every rank's memory through
// the span, then reads back what each peer wrote into its own.
void ExchangeThroughTheSpan(World &w, const mori_flat_span_t &s, void *mine, int rank, int size) {
  for (int p = 0; p < size; p++) {
    int64_t v = 500 + rank;
    memcpy((char *)(uintptr_t)(s.base + (uint64_t)p * s.stride) + 8 * (size_t)rank, &v, sizeof(v));
  }
  MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  for (int src = 0; src < size; src++) {
    int64_t v = 0;
    memcpy(&v, (char *)mine + 8 * (size_t)src, sizeof(v));
    EXPECT_EQ(v, 500 + src) << "what rank " << src << " wrote through the flat span";
  }
  MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
}

void CheckSpanOf(World &w, void *mem, size_t bytes, int rank, int size) {
  mori_window_t *win = nullptr;
  MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
  mori_flat_span_t s;
  MORI_ASSERT_OK(mori_window_flat_span(win, &s));
  EXPECT_EQ(s.world_size, size);
  EXPECT_EQ(s.bytes, bytes);
  EXPECT_GE(s.stride, bytes);
  EXPECT_EQ(s.span, (uint64_t)(size - 1) * s.stride + bytes);
  // A peer's slot is where the pointer table points; this rank's own slot
  // is an alias of the memory alloc returned (the table holds the latter).
  for (int p = 0; p < size; p++) {
    if (p == rank) continue;
    EXPECT_EQ(s.base + (uint64_t)p * s.stride, (uint64_t)(uintptr_t)mori_window_peer_ptr(win, p)) << "rank " << p;
  }
  ExchangeThroughTheSpan(w, s, mem, rank, size);
  MORI_EXPECT_OK(mori_window_destroy(win));
}

TEST(FlatSpan, AWindowOfItsOwnMemoryHasOne) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    setenv("MORI_SHMEM_MODE", "isolation", 1);
    World w;
    ASSERT_TRUE(w.ok());
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(12288, nullptr, &mem));
    CheckSpanOf(w, mem, 12288, rank, size);
    MORI_EXPECT_OK(mori_mem_free(mem));
  });
}

TEST(FlatSpan, HeapCarvesAtEqualOffsetsHaveOne) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(8192, nullptr, &mem));
    CheckSpanOf(w, mem, 8192, rank, size);
    MORI_EXPECT_OK(mori_mem_free(mem));
  });
}

// An allocation larger than a vmm heap chunk gets a mapping of its own, so
// it has a flat span even where the ranks' heaps differ (odd ranks carve
// something first), as torch's contiguous view relies on.
TEST(FlatSpan, AnAllocationAboveAHeapChunkHasOne) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    setenv("MORI_SHMEM_MODE", "vmm", 1);
    setenv("MORI_SHMEM_VMM_CHUNK_SIZE", "64K", 1);
    World w;
    ASSERT_TRUE(w.ok());
    void *pad = nullptr, *mem = nullptr;
    if (rank % 2) MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &pad));
    MORI_ASSERT_OK(mori_mem_alloc(256 << 10, nullptr, &mem));
    CheckSpanOf(w, mem, 256 << 10, rank, size);
    MORI_EXPECT_OK(mori_mem_free(mem));
    if (pad) MORI_EXPECT_OK(mori_mem_free(pad));
  });
}

TEST(FlatSpan, HeapCarvesAtDifferentOffsetsHaveNone) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    // Odd ranks carve something first, so their buffer lands elsewhere.
    void *pad = nullptr, *mem = nullptr;
    if (rank % 2) MORI_ASSERT_OK(mori_mem_alloc(65536, nullptr, &pad));
    MORI_ASSERT_OK(mori_mem_alloc(8192, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    mori_flat_span_t s;
    memset(&s, 0xff, sizeof(s));
    EXPECT_EQ(mori_window_flat_span(win, &s), MORI_ENOTSUP);
    EXPECT_TRUE(Says("different heap offsets")) << mori_last_error();
    EXPECT_TRUE(Says("8192 bytes on rank " + std::to_string(rank))) << mori_last_error();
    EXPECT_EQ(s.base, 0u) << "a refused span is zeroed";
    EXPECT_NE(mori_window_peer_ptr(win, (rank + 1) % size), nullptr) << "the tables still reach every rank";
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
    MORI_EXPECT_OK(mori_mem_free(pad));
  });
}

TEST(FlatSpan, ACommSpanningNodesHasNone) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    setenv("MORI_SHMEM_MODE", "isolation", 1);
    setenv("MORI_HOST_ID", rank < size / 2 ? "node-0" : "node-1", 1);
    World w;
    ASSERT_TRUE(w.ok());
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    mori_flat_span_t s;
    EXPECT_EQ(mori_window_flat_span(win, &s), MORI_EUNREACHABLE);
    int lo = rank < size / 2 ? 0 : size / 2;
    EXPECT_TRUE(Says("rank " + std::to_string(rank) + " reaches ranks [" + std::to_string(lo) + ", " +
                     std::to_string(lo + size / 2) + ") of the world of " + std::to_string(size)))
        << mori_last_error();
    EXPECT_EQ(mori_window_flat_span(nullptr, &s), MORI_EINVAL);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
  });
}

// A destroyed window (by its destroy, or by mori_finalize) is refused by
// name, as the address maps refuse it: the span read the freed window
// (its comm, its allocation) and answered from whatever was there.
TEST(FlatSpan, ADestroyedWindowIsRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(8192, nullptr, &mem));
    for (bool by_finalize : {false, true}) {
      if (by_finalize) MORI_ASSERT_OK(mori_mem_alloc(8192, nullptr, &mem));
      mori_window_t *win = nullptr;
      MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      if (by_finalize) MORI_ASSERT_OK(mori_finalize());
      else MORI_ASSERT_OK(mori_window_destroy(win));
      mori_flat_span_t s;
      EXPECT_EQ(mori_window_flat_span(win, &s), MORI_EINVAL) << (by_finalize ? "after finalize" : "after destroy");
      EXPECT_TRUE(Says("window_flat_span")) << mori_last_error();
      EXPECT_TRUE(Says("not a live window")) << mori_last_error();
      if (!by_finalize) MORI_EXPECT_OK(mori_mem_free(mem));
    }
  });
}

}  // namespace
