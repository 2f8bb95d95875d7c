// SPDX-License-Identifier: MIT
// The host platform's copy queue: one worker per queue, FIFO; the finished
// count covers exactly the work that ran; an aligned 8-byte copy lands as
// one store, as a DMA engine's does (signals travel that way from the
// software ConnectX's bounce buffer; a torn one read as a value 256 ahead).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/platform/platform.h"

namespace {

TEST(HostQueue, RunsInOrderAndCountsWhatRan) {
  mori_platform_queue_t *q = nullptr;
  ASSERT_EQ(mori_platform_queue_create(0, &q), 0);
  std::vector<uint64_t> src(1000), dst(1000, 0);
  for (size_t i = 0; i < src.size(); i++) src[i] = i * 3 + 1;
  alignas(8) uint64_t word = 0;
  for (size_t i = 0; i < src.size(); i++) {
    ASSERT_EQ(mori_platform_queue_copy(q, &dst[i], &src[i], sizeof(uint64_t)), 0);
    ASSERT_EQ(mori_platform_queue_word(q, &word, i + 1, false), 0);  // after copy i: copy i is there
  }
  ASSERT_EQ(mori_platform_queue_word(q, &word, 5, true), 0);
  ASSERT_EQ(mori_platform_queue_wait(q), 0);
  uint64_t finished = 0;
  ASSERT_EQ(mori_platform_queue_finished(q, &finished), 0);
  EXPECT_EQ(finished, 2 * src.size() + 1);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(word, src.size() + 5);
  EXPECT_EQ(mori_platform_queue_destroy(q), 0);
}

// A reader polls a word while the queue copies into it, again and again,
// values whose every byte differs from the last (a byte-wise copy would be
// seen half done): the reader sees only whole values.
TEST(HostQueue, AnAlignedWordCopyIsNeverSeenTorn) {
  constexpr uint64_t kA = 0x00ff00ff00ff00ffull, kB = 0xff00ff00ff00ff00ull;
  constexpr int kCopies = 200000;
  mori_platform_queue_t *q = nullptr;
  ASSERT_EQ(mori_platform_queue_create(0, &q), 0);
  alignas(8) static uint64_t target = kA;
  alignas(8) static const uint64_t kSources[2] = {kA, kB};
  std::atomic<bool> done{false};
  std::atomic<uint64_t> torn{0}, torn_value{0}, reads{0};
  std::thread reader([&] {
    while (!done.load(std::memory_order_acquire)) {
      uint64_t v = __atomic_load_n(&target, __ATOMIC_RELAXED);
      if (v != kA && v != kB) {
        torn++;
        torn_value = v;
      }
      reads++;
    }
  });
  for (int i = 0; i < kCopies; i++) ASSERT_EQ(mori_platform_queue_copy(q, &target, &kSources[(i + 1) % 2], 8), 0);
  ASSERT_EQ(mori_platform_queue_wait(q), 0);
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0u) << "e.g. 0x" << std::hex << torn_value.load() << " in " << std::dec << reads.load() << " reads";
  EXPECT_EQ(target, kSources[kCopies % 2]);
  EXPECT_EQ(mori_platform_queue_destroy(q), 0);
}

}  // namespace
