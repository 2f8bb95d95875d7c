// SPDX-License-Identifier: MIT
// The device API driven by CPU ranks (host platform): the same inline
// functions kernels use, through both addressing models, with the timeout,
// abort and unreachable paths.
#include "mori/device.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

constexpr uint64_t kChunk = 8192 + 24;  // not a multiple of 16: exercises the byte tail
constexpr uint64_t kMs = 1000000ull;

struct Fixture {
  void *mem = nullptr;
  mori_window_t *win = nullptr;
  mori_window_dev_t view{};
  uint64_t signal_offset = 0;  // one uint64 signal per rank after the data
};

void Make(World &w, int size, Fixture &f) {
  mori_mem_attr_t attr;
  mori_mem_attr_init(&attr);
  attr.signal_pad_size = 4 * size * 8;  // 8 barrier channels
  f.signal_offset = (kChunk * size + 63) / 64 * 64;
  const int words = size < 4 ? 4 : size;  // one a rank, and at least four
  ASSERT_EQ(mori_mem_alloc(f.signal_offset + 8 * words, &attr, &f.mem), 0) << mori_last_error();
  memset((char *)f.mem + f.signal_offset, 0, 8 * words);  // signals start at 0 (allocations are not zeroed)
  ASSERT_EQ(mori_window_create(w.comm, f.mem, &f.win), 0) << mori_last_error();
  f.view = mori_window_device_view(f.win);
}

// Every rank's pad is all zero once every rank's barriers are done (torch's
// pad protocol; the barriers around the look keep peers' puts out of it).
void ExpectPadAllZero(World &w, Fixture &f, int rank, int size) {
  MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  const uint32_t *pad = (const uint32_t *)mori_window_signal_pads(f.win)[rank];
  for (int i = 0; i < 8 * size; i++) EXPECT_EQ(pad[i], 0u) << "pad slot " << i;
  MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
}

void Release(Fixture &f) {
  MORI_EXPECT_OK(mori_window_destroy(f.win));
  MORI_EXPECT_OK(mori_mem_free(f.mem));
}

// Deadline tests, made for a loaded machine (eight ranks on two cores,
// where a waiting rank yields its core and can oversleep its deadline by
// a few hundred milliseconds): rank 0 tells the peers when it starts (a
// signal in their signal word 0), so their delays count from its start;
// the peer a test names stays away until rank 0 is done (word 1), so no
// oversleeping lets it in; and rank 0 judges the deadline by its own
// clock, against what a timeout per step would have taken, seconds more.
void TellPeers(Fixture &f, int size, int word) {
  for (int p = 1; p < size; p++) ASSERT_EQ(mori_signal_set(f.view, p, f.signal_offset + 8 * (uint64_t)word, 1), MORI_DEVICE_OK);
}
void AwaitRankZero(Fixture &f, int word) {
  ASSERT_EQ(mori_signal_wait_until(f.view, f.signal_offset + 8 * (uint64_t)word, MORI_CMP_EQ, 1, 60000 * kMs, 0, 0, nullptr),
            MORI_DEVICE_OK);
}
int64_t SteadyMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

TEST(DeviceApi, PutSignalGetAndBarrierAtEveryScope) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    std::vector<uint8_t> src(kChunk), back(kChunk);
    int (*puts[])(mori_window_dev_t, int, uint64_t, const void *, uint64_t) = {mori_put_thread, mori_put_warp,
                                                                                mori_put_block};
    for (int round = 0; round < 3; round++) {
      for (uint64_t i = 0; i < kChunk; i++) src[i] = (uint8_t)(rank * 13 + i * 3 + round);
      for (int peer = 0; peer < size; peer++) {
        ASSERT_EQ(puts[round](f.view, peer, rank * kChunk, src.data(), kChunk), MORI_DEVICE_OK);
        mori_quiet();
        ASSERT_EQ(mori_signal_add(f.view, peer, f.signal_offset, 1), MORI_DEVICE_OK);
      }
      uint64_t seen = 0;
      ASSERT_EQ(mori_signal_wait_until(f.view, f.signal_offset, MORI_CMP_GE, (uint64_t)size * (round + 1), 10000 * kMs,
                                       -1, 0, &seen),
                MORI_DEVICE_OK);
      const uint8_t *mine = (const uint8_t *)f.mem;
      for (int writer = 0; writer < size; writer++)
        for (uint64_t i = 0; i < kChunk; i += 7)
          ASSERT_EQ(mine[writer * kChunk + i], (uint8_t)(writer * 13 + i * 3 + round)) << "round " << round;
      // Everyone has checked before anyone overwrites: a barrier on the pad.
      ASSERT_EQ(mori_lsa_barrier_block(f.view, round, 10000 * kMs), MORI_DEVICE_OK);
    }
    // get: read what this rank wrote into each peer, through both models.
    for (int peer = 0; peer < size; peer++) {
      ASSERT_EQ(mori_get_block(f.view, peer, back.data(), rank * kChunk, kChunk), MORI_DEVICE_OK);
      EXPECT_EQ(memcmp(back.data(), src.data(), kChunk), 0) << "get from " << peer;
      EXPECT_EQ(memcmp(mori_table_ptr(f.view, peer, rank * kChunk), src.data(), kChunk), 0) << "table " << peer;
    }
    // torch's pad protocol: the pad is all zero again after matched
    // barriers (torch's own kernels rely on it).
    for (uint32_t ch = 0; ch < 8; ch++) ASSERT_EQ(mori_lsa_pad_barrier_block(f.view, ch, 10000 * kMs), MORI_DEVICE_OK);
    ExpectPadAllZero(w, f, rank, size);
    Release(f);
  });
}

TEST(DeviceApi, WaitThatTimesOutLeavesARecordForTheHost) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    if (rank == 0) {
      // Waits for a signal from rank 1 that never comes.
      EXPECT_EQ(mori_signal_wait_until(f.view, f.signal_offset, MORI_CMP_GE, 1, 50 * kMs, 1, 3, nullptr),
                MORI_DEVICE_ETIMEDOUT);
      EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
      EXPECT_NE(std::string(mori_last_error()).find("kernel wait on rank 0 for rank 1 timed out"), std::string::npos)
          << mori_last_error();
      EXPECT_EQ(mori_window_check(f.win), 0) << "the record is consumed";
    }
    // A barrier that one rank skips times out on the others (both kinds).
    // The waiters arrive together (rank 0 comes from its own wait) and wait
    // 1 s: a waiter the machine stalls past the timeout would be named too.
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank != size - 1) {
      EXPECT_EQ(mori_lsa_barrier_block(f.view, 1, 1000 * kMs), MORI_DEVICE_ETIMEDOUT);
      EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
      EXPECT_NE(std::string(mori_last_error()).find("1 peer had not arrived: rank " + std::to_string(size - 1)),
                std::string::npos)
          << mori_last_error();
      EXPECT_EQ(mori_lsa_pad_barrier_block(f.view, 1, 1000 * kMs), MORI_DEVICE_ETIMEDOUT);
      EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Release(f);
  });
}

// A wait's start is marked taken with | 1, so it can sit ahead of a clock
// read in the same tick (a coarse clock: a virtual machine's, a GPU's). A
// look then must read no time waited, not 2^64 - 1 ns: a wait timed out at
// its first look (a GPU-initiated post's wait for room in the send queue
// failed so, reporting 18446744073709.551 ms). A start a second ahead
// stands in for that tick, so the test does not depend on the clock's.
TEST(DeviceApi, AWaitWhoseStartIsAheadOfTheClockHasWaitedNothing) {
  const mori_window_dev_t no_window{};  // no control block: no abort to see
  const uint64_t ahead = mori_clock_ns() + 1000 * kMs;
  EXPECT_EQ(mori_clock_since(ahead), 0u);
  uint64_t start = ahead, waited = 7;
  EXPECT_EQ(mori_wait_expired(no_window, MORI_WAIT_LOOK_MASK, &start, 50 * kMs, &waited), MORI_DEVICE_OK);
  EXPECT_EQ(waited, 0u);
  EXPECT_EQ(start, ahead) << "a started wait keeps its start";
  // What is left of a timeout from that start is all of it, not the one
  // nanosecond of a timeout spent.
  EXPECT_EQ(mori_time_left(ahead, 50 * kMs), 50 * kMs);
  // And a start behind the clock counts as before.
  start = mori_clock_ns() - 100 * kMs;
  EXPECT_EQ(mori_wait_expired(no_window, MORI_WAIT_LOOK_MASK, &start, 50 * kMs, &waited), MORI_DEVICE_ETIMEDOUT);
  EXPECT_GE(waited, 100 * kMs);
}

// A barrier that several ranks skip: its record names every rank missing,
// not only the one the waiting thread gave up on.
TEST(DeviceApi, ABarrierThatTimesOutNamesEveryMissingRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    const int first_missing = (size + 1) / 2;  // ranks [first_missing, size) skip it
    std::string who = size - first_missing > 1 ? "ranks " : "rank ";
    for (int m = first_missing; m < size; m++)
      who += (m == first_missing ? "" : m + 1 == size ? " and " : ", ") + std::to_string(m);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));  // the waiters arrive together
    if (rank < first_missing) {
      // 2 s: a waiter the machine stalls past the timeout would be listed.
      EXPECT_EQ(mori_lsa_barrier_block(f.view, 2, 2000 * kMs), MORI_DEVICE_ETIMEDOUT);
      EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
      std::string want = "barrier on rank " + std::to_string(rank) + " (channel 2, round 1) timed out after";
      EXPECT_NE(std::string(mori_last_error()).find(want), std::string::npos) << mori_last_error();
      int missing = size - first_missing;
      want = ": " + std::to_string(missing) + (missing > 1 ? " peers" : " peer") + " had not arrived: " + who;
      EXPECT_NE(std::string(mori_last_error()).find(want), std::string::npos) << "want \"" << want << "\" in "
                                                                              << mori_last_error();
      // The signal-pad barrier names them too (its record has no round).
      EXPECT_EQ(mori_lsa_pad_barrier_block(f.view, 3, 2000 * kMs), MORI_DEVICE_ETIMEDOUT);
      EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
      std::string pad_want = "signal-pad barrier on rank " + std::to_string(rank) + " (channel 3) timed out after";
      EXPECT_NE(std::string(mori_last_error()).find(pad_want), std::string::npos) << mori_last_error();
      EXPECT_NE(std::string(mori_last_error()).find(want), std::string::npos) << "want \"" << want << "\" in "
                                                                              << mori_last_error();
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Release(f);
  });
}

// A barrier's waits for its peers end within its timeout together: the
// peers arrive one by one, 1 s apart from rank 0's start, each within the
// 1.5 s timeout of the one before, and the last stays away, so rank 0's
// barrier times out about 1.5 s after it starts (with a timeout per peer
// it took (size - 2) x 1 s + 1.5 s: 2.5 s at three ranks).
TEST(DeviceApi, ABarrierEndsWithinItsTimeoutAcrossPeers) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 3) GTEST_SKIP() << "needs peers that arrive one after another";
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank == 0) {
      ASSERT_NO_FATAL_FAILURE(TellPeers(f, size, 0));
      int64_t start = SteadyMs();
      EXPECT_EQ(mori_lsa_barrier_block(f.view, 4, 1500 * kMs), MORI_DEVICE_ETIMEDOUT);
      int64_t took = SteadyMs() - start;
      ASSERT_NO_FATAL_FAILURE(TellPeers(f, size, 1));
      EXPECT_LT(took, 2100) << "a 1.5 s barrier took " << took << " ms (a timeout per peer: 2.5 s or more)";
      EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
      std::string want = "barrier on rank 0 (channel 4, round 1) timed out after";
      EXPECT_NE(std::string(mori_last_error()).find(want), std::string::npos) << mori_last_error();
      std::string msg = mori_last_error();
      size_t list = msg.find("had not arrived: ");
      ASSERT_NE(list, std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(size - 1), list), std::string::npos) << "the last rank is named: " << msg;
    } else {
      ASSERT_NO_FATAL_FAILURE(AwaitRankZero(f, 0));
      if (rank == size - 1) {
        ASSERT_NO_FATAL_FAILURE(AwaitRankZero(f, 1));
      } else {
        usleep((useconds_t)rank * 1000000);
      }
      EXPECT_EQ(mori_lsa_barrier_block(f.view, 4, 60000 * kMs), MORI_DEVICE_OK);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Release(f);
  });
}

// The signal-pad barrier's signal and its waits share one clock too: rank
// 0's signal to rank 1 waits 1.5 s for rank 1 to take an earlier one, and
// rank 1 stays away after that, so rank 0's 2 s barrier times out about 2 s
// after it starts (with a clock per step the signal's wait was not
// counted: 3.5 s). The other ranks arrive at once.
TEST(DeviceApi, APadBarrierEndsWithinItsTimeoutSignalAndWaitsTogether) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    const uint32_t ch = 6;
    if (rank == 0) MORI_ASSERT_OK(mori_pad_put(f.view, 1, ch, 1000 * kMs));  // the earlier, untaken signal
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank == 0) {
      // Rank 1 hears when the barrier starts (word 2: the system-wide
      // monotonic clock every rank of this machine reads), to know whether
      // it freed its slot before the barrier gave up on it.
      ASSERT_EQ(mori_signal_set(f.view, 1, f.signal_offset + 16, (uint64_t)SteadyMs()), MORI_DEVICE_OK);
      ASSERT_NO_FATAL_FAILURE(TellPeers(f, size, 0));
      int64_t start = SteadyMs();
      EXPECT_EQ(mori_lsa_pad_barrier_block(f.view, ch, 2000 * kMs), MORI_DEVICE_ETIMEDOUT);
      int64_t took = SteadyMs() - start;
      ASSERT_NO_FATAL_FAILURE(TellPeers(f, size, 1));
      EXPECT_LT(took, 2900) << "a 2 s barrier took " << took << " ms (a clock per step: 3.5 s or more)";
      EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
      EXPECT_NE(std::string(mori_last_error()).find("rank 1"), std::string::npos) << mori_last_error();
      // Take what the peers left in this pad (rank 1's comes late).
      for (int p = 1; p < size; p++) EXPECT_EQ(mori_pad_wait(f.view, p, ch, 10000 * kMs), MORI_DEVICE_OK) << p;
    } else if (rank == 1) {
      ASSERT_NO_FATAL_FAILURE(AwaitRankZero(f, 0));
      usleep(1500000);
      EXPECT_EQ(mori_pad_wait(f.view, 0, ch, 10000 * kMs), MORI_DEVICE_OK);  // the earlier signal
      int64_t freed_at = SteadyMs() - (int64_t)__atomic_load_n((uint64_t *)((char *)f.mem + f.signal_offset + 16),
                                                                   __ATOMIC_ACQUIRE);
      ASSERT_NO_FATAL_FAILURE(AwaitRankZero(f, 1));
      EXPECT_EQ(mori_pad_put(f.view, 0, ch, 10000 * kMs), MORI_DEVICE_OK);  // arrives, late
      // Rank 0's barrier signal followed the earlier one if rank 1 freed the
      // slot in time; a loaded machine can start rank 1's sleep so late that
      // the barrier gave up first, and then there is none.
      uint32_t *mine = mori_pad_slot(f.view, 1, 0, ch);
      if (freed_at < 1700) {
        EXPECT_EQ(mori_pad_wait(f.view, 0, ch, 10000 * kMs), MORI_DEVICE_OK) << "freed " << freed_at << " ms in";
      } else if (__atomic_load_n(mine, __ATOMIC_ACQUIRE)) {
        EXPECT_EQ(mori_pad_wait(f.view, 0, ch, 10000 * kMs), MORI_DEVICE_OK);
      }
    } else {
      EXPECT_EQ(mori_pad_put(f.view, 0, ch, 10000 * kMs), MORI_DEVICE_OK);
      EXPECT_EQ(mori_pad_wait(f.view, 0, ch, 10000 * kMs), MORI_DEVICE_OK);
    }
    ExpectPadAllZero(w, f, rank, size);
    Release(f);
  });
}

struct PadRounds {
  mori_window_dev_t view;
  int rounds;
  int failed = 0;
};

void *PadBarrierRounds(void *arg) {
  auto *r = static_cast<PadRounds *>(arg);
  for (int i = 0; i < r->rounds; i++)
    if (mori_lsa_pad_barrier_block(r->view, 5, 10000 * kMs) != MORI_DEVICE_OK) r->failed++;
  return nullptr;
}

// Two blocks of every rank (two threads here) in pad barriers on one
// channel at once: each signal has one taker, so every round of both
// completes and the pad is all zero after them (a barrier that read a
// signal and stored the 0 later let two takers pass on one signal, and
// one of them then wiped out or stranded the next).
TEST(DeviceApi, PadBarriersOfTwoBlocksOnOneChannelLoseNoSignal) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    PadRounds a{f.view, 300}, b{f.view, 300};
    pthread_t ta, tb;
    pthread_create(&ta, nullptr, PadBarrierRounds, &a);
    pthread_create(&tb, nullptr, PadBarrierRounds, &b);
    pthread_join(ta, nullptr);
    pthread_join(tb, nullptr);
    EXPECT_EQ(a.failed + b.failed, 0) << mori_last_error();
    EXPECT_EQ(mori_window_check(f.win), 0) << mori_last_error();
    ExpectPadAllZero(w, f, rank, size);
    Release(f);
  });
}

void *AbortLater(void *arg) {
  usleep(50000);
  mori_window_abort(static_cast<mori_window_t *>(arg));
  return nullptr;
}

TEST(DeviceApi, AbortFlagEndsAnEndlessWait) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    pthread_t t;
    pthread_create(&t, nullptr, AbortLater, f.win);
    EXPECT_EQ(mori_signal_wait_until(f.view, f.signal_offset, MORI_CMP_EQ, 42, 0, -1, 0, nullptr), MORI_DEVICE_EABORTED);
    pthread_join(t, nullptr);
    EXPECT_EQ(mori_window_check(f.win), MORI_EABORTED);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Release(f);
  });
}

TEST(DeviceApi, PadChannelBeyondThePadIsRefusedWithARecord) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);  // a pad of 8 channels
    int peer = (rank + 1) % size;
    uint64_t pad_bytes = f.view.signal_pad_size;
    for (uint32_t channel : {8u, 1000u, 0x7fffffffu, 0xffffffffu}) {
      EXPECT_EQ(mori_pad_put(f.view, peer, channel, 10 * kMs), MORI_DEVICE_ECHANNEL) << "channel " << channel;
      EXPECT_EQ(mori_window_check(f.win), MORI_ECHANNEL);
      std::string msg = mori_last_error();
      EXPECT_NE(msg.find("channel " + std::to_string(channel)), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(pad_bytes) + " bytes"), std::string::npos) << msg;
      EXPECT_EQ(mori_pad_wait(f.view, peer, channel, 10 * kMs), MORI_DEVICE_ECHANNEL);
      EXPECT_EQ(mori_window_check(f.win), MORI_ECHANNEL);
    }
    EXPECT_EQ(mori_lsa_pad_barrier_block(f.view, 8, 10 * kMs), MORI_DEVICE_ECHANNEL);
    EXPECT_EQ(mori_window_check(f.win), MORI_ECHANNEL);
    // A peer outside the comm is refused, never an index past the table.
    EXPECT_EQ(mori_pad_put(f.view, size, 0, 10 * kMs), MORI_DEVICE_EINVAL);
    EXPECT_EQ(mori_pad_wait(f.view, -1, 0, 10 * kMs), MORI_DEVICE_EINVAL);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // Nothing was written: every slot of this rank's pad still reads 0.
    const uint32_t *pad = (const uint32_t *)mori_window_signal_pads(f.win)[rank];
    for (uint64_t i = 0; i < pad_bytes / 4; i++) EXPECT_EQ(pad[i], 0u) << "pad slot " << i;
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // The last channel that fits still works.
    ASSERT_EQ(mori_lsa_pad_barrier_block(f.view, 7, 10000 * kMs), MORI_DEVICE_OK);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Release(f);
  });
}

// The mailbox's claim lives in device memory (this rank's barrier area),
// not in the host-mapped control block: a kernel never does an atomic
// read-modify-write on host memory, which many hosts cannot carry (no
// PCIe AtomicOps). Many threads failing at once leave one complete record;
// once the host has read it, the next failure is recorded again.
struct Reporter {
  mori_window_dev_t view;
  int index;
  volatile int *go;
};

void *ReportOnce(void *arg) {
  Reporter *r = static_cast<Reporter *>(arg);
  while (!*r->go) {
  }
  uint64_t v = 1000 + (uint64_t)r->index;  // every field says which thread wrote it
  mori_device_report(r->view, MORI_DEVICE_ETIMEDOUT, r->index, (uint32_t)v, v * kMs, v, v);
  return nullptr;
}

TEST(DeviceApi, ConcurrentFailuresLeaveOneCompleteRecordClaimedInDeviceMemory) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    (void)rank;
    (void)size;
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    uint32_t *claim = mori_error_claim_word(f.view);
    ASSERT_NE(claim, nullptr);
    uint64_t area = f.view.barrier_base + (uint64_t)f.view.lsa_rank * f.view.barrier_stride;
    EXPECT_GE((uint64_t)(uintptr_t)claim, area);
    EXPECT_LT((uint64_t)(uintptr_t)claim, area + MORI_BARRIER_AREA_BYTES(f.view.lsa_size));
    const char *ctl = (const char *)f.view.control;
    EXPECT_TRUE((const char *)claim < ctl || (const char *)claim >= ctl + sizeof(mori_device_control_t))
        << "the claim word must not be in the host-mapped control block";
    EXPECT_EQ(*claim, 0u) << "a fresh window has claimed nothing";
    for (uint32_t round = 1; round <= 3; round++) {
      constexpr int kThreads = 8;
      volatile int go = 0;
      Reporter r[kThreads];
      pthread_t t[kThreads];
      for (int i = 0; i < kThreads; i++) {
        r[i] = Reporter{f.view, i, &go};
        ASSERT_EQ(pthread_create(&t[i], nullptr, ReportOnce, &r[i]), 0);
      }
      go = 1;
      for (int i = 0; i < kThreads; i++) pthread_join(t[i], nullptr);
      EXPECT_EQ(*claim, round) << "one claim per record";
      EXPECT_EQ(f.view.control->records_read, round - 1);
      mori_device_error_t e = f.view.control->error;
      ASSERT_GE(e.peer, 0);
      ASSERT_LT(e.peer, kThreads);
      uint64_t v = 1000 + (uint64_t)e.peer;
      EXPECT_EQ(e.channel, (uint32_t)v) << "a record mixed from two writers";
      EXPECT_EQ(e.expected, v);
      EXPECT_EQ(e.seen, v);
      EXPECT_EQ(e.waited_ns, v * kMs);
      EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
      std::string msg = mori_last_error();
      EXPECT_NE(msg.find("for rank " + std::to_string(e.peer) + " timed out"), std::string::npos) << msg;
      EXPECT_NE(msg.find("channel " + std::to_string(v)), std::string::npos) << msg;
      EXPECT_EQ(f.view.control->records_read, round);
      EXPECT_EQ(mori_window_check(f.win), 0) << "the record is consumed";
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Release(f);
  });
}

// A record the host finds without a claim (written some other way) is read
// once; the mailbox keeps working after it.
TEST(DeviceApi, MailboxWorksAfterARecordThatWasNotClaimed) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    f.view.control->error.waiter_rank = rank;
    f.view.control->error.peer = -1;
    __atomic_store_n(&f.view.control->error.code, (uint32_t)MORI_EDEVICE_TIMEOUT, __ATOMIC_RELEASE);
    EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
    EXPECT_EQ(mori_window_check(f.win), 0);
    EXPECT_EQ(mori_device_report(f.view, MORI_DEVICE_ETIMEDOUT, 0, 5, 0, 1, 0), MORI_DEVICE_ETIMEDOUT);
    EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
    EXPECT_NE(std::string(mori_last_error()).find("channel 5"), std::string::npos) << mori_last_error();
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Release(f);
  });
}

// A barrier record of a team larger than its mask (an NVL72 domain): the
// mask starts at the first missing rank, and those past it are counted.
TEST(DeviceApi, ABarrierRecordOfMoreThan64MissingRanksNamesTheFirstAndCountsTheRest) {
  EXPECT_RANKS_PASS(1, [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    mori_missing_peers_t missing = {~0ull, 65, 70};  // ranks 65..128 in the mask, 6 more
    EXPECT_EQ(mori_device_report_missing(f.view, MORI_DEVICE_ETIMEDOUT, 65, 3, 2000000, 9, 0, missing),
              MORI_DEVICE_ETIMEDOUT);
    EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
    std::string msg = mori_last_error();
    EXPECT_NE(msg.find("barrier on rank 0 (channel 3, round 9) timed out after 2.000 ms: 70 peers had not arrived: "
                       "ranks 65, 66, 67"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find(" more"), std::string::npos) << msg;
    EXPECT_EQ(msg.find(", 129"), std::string::npos) << "past the mask: " << msg;
    // The count alone, for a record whose mask names nobody.
    missing = {0, 0, 3};
    mori_device_report_missing(f.view, MORI_DEVICE_ETIMEDOUT, 1, 3, 1000000, 9, 0, missing);
    EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
    EXPECT_NE(std::string(mori_last_error()).find("3 peers had not arrived: ranks (3 not named)"), std::string::npos)
        << mori_last_error();
    Release(f);
  });
}

// A wait through the barrier area's own view (remote_sync.h) records into
// the window's mailbox: that view finds the same claim word.
TEST(DeviceApi, SyncViewFailureLandsInTheWindowsMailbox) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    mori_window_dev_t sync = mori_window_sync_view(f.win);
    EXPECT_EQ(mori_error_claim_word(sync), mori_error_claim_word(f.view));
    uint64_t *word = mori_remote_word(sync, 0);  // this rank's first barrier word: nobody writes it here
    uint64_t seen = 99;
    EXPECT_EQ(mori_wait_word(sync, word, MORI_CMP_GE, 1, 20 * kMs, (rank + 1) % size, 2, &seen), MORI_DEVICE_ETIMEDOUT);
    EXPECT_EQ(seen, 0u) << "a failed wait says what it read last";
    EXPECT_EQ(mori_window_check(f.win), MORI_EDEVICE_TIMEOUT);
    EXPECT_NE(std::string(mori_last_error()).find("on channel 2"), std::string::npos) << mori_last_error();
    // A comparison mori does not know is refused at once (it meant ">").
    EXPECT_EQ(mori_wait_word(sync, word, (mori_cmp_t)7, 1, 20 * kMs, (rank + 1) % size, 2, nullptr), MORI_DEVICE_EINVAL);
    MORI_EXPECT_OK(mori_window_check(f.win));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Release(f);
  });
}

TEST(DeviceApi, PeerOnAnotherNodeIsUnreachableNotANoOp) {
  int size = TestRanks();
  if (size < 4) GTEST_SKIP() << "needs two simulated nodes of two ranks";
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    setenv("MORI_HOST_ID", rank < size / 2 ? "a" : "b", 1);
    World w;
    ASSERT_TRUE(w.ok());
    Fixture f;
    Make(w, size, f);
    int remote = (rank + size / 2) % size;
    char byte = 1;
    EXPECT_EQ(mori_put_thread(f.view, remote, 0, &byte, 1), MORI_DEVICE_EUNREACHABLE);
    EXPECT_EQ(mori_get_warp(f.view, remote, &byte, 0, 1), MORI_DEVICE_EUNREACHABLE);
    EXPECT_EQ(mori_signal_set(f.view, remote, f.signal_offset, 1), MORI_DEVICE_EUNREACHABLE);
    EXPECT_EQ(mori_peer_ptr(f.view, remote, 0), nullptr);
    EXPECT_EQ(mori_lsa_index(f.view, remote), -1);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Release(f);
  });
}

}  // namespace
