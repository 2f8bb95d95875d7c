// SPDX-License-Identifier: MIT
// GPU-initiated posting end to end on the host platform: CPU ranks on two
// declared nodes (MORI_HOST_ID), the software ConnectX (which reads the
// WQEs these ranks write, byte by byte as the PRM lays them out) over the
// copy-engine NIC. MORI_RDMA_GDA=on, so every remote operation of the
// device API below is posted by the rank itself, never by the proxy.
// Checked at the receiver: puts, gets, atomics, signals, put-with-signal,
// a random-size, random-offset stress with put-then-signal order checked
// as it runs; faults injected by the software ConnectX: an error
// completion mid-stream (a record naming peer and syndrome, the other
// peers still served), a stalled NIC (a full queue times out); and a peer
// that dies mid-stream (the survivor's posting ends with an error naming it).
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mori/device.h"
#include "mori/device/gda.h"
#include "mori/transport_rdma.h"
#include "tests/rdma/rdma_test_support.h"
#include "tests/support/world.h"
#include "transport/rdma/ce_nic/ce_nic.h"
#include "transport/rdma/internal.h"
#include "transport/rdma/swcx/swcx.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

constexpr uint64_t kSecond = 1000ull * 1000 * 1000;

// Ranks [0, size/2) on node-a, the rest on node-b: rank r's partner
// (same local index, other node) is reached only over rdma.
int Partner(int rank, int size) { return (rank + size / 2) % size; }

// Under the software ConnectX: the copy-engine NIC, or (gda_swcx_verbs_test)
// libibverbs, which tools/rdma_vm_test.sh's guest runs on Soft-RoCE.
#ifdef MORI_GDA_TEST_OVER_VERBS
constexpr bool kOverVerbs = true;
#else
constexpr bool kOverVerbs = false;
#endif

bool HaveRdmaDevice() { return !kOverVerbs || mori_rdma_test::KernelHasRdmaDevice(); }
#define SKIP_WITHOUT_RDMA_DEVICE() \
  if (!HaveRdmaDevice()) GTEST_SKIP() << mori_rdma_test::kNoRdmaDevice

void JoinAsTwoNodesOverSwcx(int rank, int size) {
  mori_rdma_test::SetTwoNodeHostIds(rank, size);
  setenv("MORI_RDMA_GDA", "on", 1);
  setenv("MORI_SHMEM_MODE", "isolation", 1);  // each window's memory registered alone
  ASSERT_EQ(mori_swcx_install(kOverVerbs ? nullptr : mori_ce_nic_provider()), 0) << mori_last_error();
}

struct Win {
  void *mem = nullptr;
  mori_window_t *win = nullptr;
  mori_window_dev_t view;
  Win(mori_comm_t *comm, size_t bytes) {
    EXPECT_EQ(mori_mem_alloc(bytes, nullptr, &mem), 0) << mori_last_error();
    memset(mem, 0, bytes);
    EXPECT_EQ(mori_window_create(comm, mem, &win), 0) << mori_last_error();
    view = mori_window_device_view(win);
  }
  ~Win() {
    if (win) {
      EXPECT_EQ(mori_window_destroy(win), 0) << mori_last_error();
    }
    if (mem) mori_mem_free(mem);
  }
  uint8_t *at(uint64_t off) { return static_cast<uint8_t *>(mem) + off; }
  uint64_t word(uint64_t off) { return __atomic_load_n(reinterpret_cast<uint64_t *>(at(off)), __ATOMIC_ACQUIRE); }
};

// GPU posting was chosen; and the proxy is held (takes nothing from any
// ring), so an operation that went to the proxy instead would time out.
void ExpectGpuPosting(const World &w) {
  ASSERT_TRUE(w.ok());
  int enabled = 0;
  char why[256];
  ASSERT_EQ(mori_rdma_gda_status(w.comm, &enabled, why, sizeof(why)), 0) << mori_last_error();
  ASSERT_EQ(enabled, 1) << why;
  EXPECT_NE(std::string(why).find("the provider's mlx5dv_init_obj"), std::string::npos) << why;
  auto *s = static_cast<struct rdma_state *>(mori_comm_transport_state(w.comm, &mori_transport_rdma_ops));
  ASSERT_NE(s, nullptr);
  rdma_hold_proxy(s, true);
}

TEST(GdaSwcx, DeviceApiPutsGetsAtomicsAndSignals) {
  SKIP_WITHOUT_RDMA_DEVICE();
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    JoinAsTwoNodesOverSwcx(rank, size);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_NO_FATAL_FAILURE(ExpectGpuPosting(w));
    Win win(w.comm, 1 << 20);
    ASSERT_NE(win.view.gda, nullptr) << "the window's device view carries GPU posting's table";
    int other = Partner(rank, size);
    EXPECT_TRUE(mori_gda_reaches(win.view, other));
    EXPECT_FALSE(mori_gda_reaches(win.view, rank));
    // Source bytes at [0, 64K); the partner's land at [64K + ...).
    for (int i = 0; i < 65536; i++) *win.at(i) = (uint8_t)(rank * 31 + i * 7);
    ASSERT_EQ(mori_put_thread(win.view, other, 65536, win.at(0), 65536), MORI_DEVICE_OK);
    ASSERT_EQ(mori_put_block(win.view, other, 131072 + 3, win.at(5), 1000), MORI_DEVICE_OK);
    ASSERT_EQ(mori_signal_add(win.view, other, 200000, (uint64_t)rank + 1), MORI_DEVICE_OK);
    ASSERT_EQ(mori_signal_add(win.view, other, 200000, 100), MORI_DEVICE_OK);
    ASSERT_EQ(mori_quiet_window(win.view, 10 * kSecond), MORI_DEVICE_OK);
    // put-with-signal: the signal set lands after the data.
    ASSERT_EQ(mori_gda_put_signal(win.view, other, 300000, win.at(100), 4000, 200008, 0xabcdull, 10 * kSecond),
              MORI_DEVICE_OK);
    uint64_t seen = 0;
    ASSERT_EQ(mori_signal_wait_until(win.view, 200008, MORI_CMP_EQ, 0xabcdull, 10 * kSecond, other, 0, &seen), MORI_DEVICE_OK);
    for (int i = 0; i < 4000; i++) ASSERT_EQ(*win.at(300000 + i), (uint8_t)(other * 31 + (100 + i) * 7)) << "byte " << i;
    ASSERT_EQ(mori_quiet_window(win.view, 10 * kSecond), MORI_DEVICE_OK);
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    for (int i = 0; i < 65536; i += 37) ASSERT_EQ(*win.at(65536 + i), (uint8_t)(other * 31 + i * 7)) << "byte " << i;
    for (int i = 0; i < 1000; i++) ASSERT_EQ(*win.at(131072 + 3 + i), (uint8_t)(other * 31 + (5 + i) * 7));
    EXPECT_EQ(win.word(200000), (uint64_t)other + 1 + 100);
    // get: what this rank put into the partner, read back.
    memset(win.at(400000), 0, 65536);
    ASSERT_EQ(mori_get_warp(win.view, other, win.at(400000), 65536, 65536), MORI_DEVICE_OK);
    ASSERT_EQ(mori_quiet_window(win.view, 10 * kSecond), MORI_DEVICE_OK);
    EXPECT_EQ(memcmp(win.at(400000), win.at(0), 65536), 0);
    // A fetching atomic add returns once it completed (the copy-engine NIC
    // does not return old values; gda_post_test checks that they land).
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    uint64_t *old = reinterpret_cast<uint64_t *>(win.at(500000));
    ASSERT_EQ(mori_gda_atomic_add(win.view, other, 200016, 5, old, 10 * kSecond), MORI_DEVICE_OK);
    ASSERT_EQ(mori_gda_atomic_add(win.view, other, 200016, 6, old, 10 * kSecond), MORI_DEVICE_OK);
    // A batch of 32 puts with one doorbell.
    uint64_t dst[32], bytes[32];
    const void *src[32];
    for (int i = 0; i < 32; i++) {
      dst[i] = 600000 + 128 * (uint64_t)i;
      src[i] = win.at(64 * (uint64_t)i);
      bytes[i] = 100;
    }
    ASSERT_EQ(mori_gda_put_batch(win.view, other, 32, dst, src, bytes, 10 * kSecond), MORI_DEVICE_OK);
    ASSERT_EQ(mori_quiet_window(win.view, 10 * kSecond), MORI_DEVICE_OK);
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    EXPECT_EQ(win.word(200016), 11u);
    for (int i = 0; i < 32; i++)
      for (int j = 0; j < 100; j += 9) ASSERT_EQ(*win.at(600000 + 128 * i + j), (uint8_t)(other * 31 + (64 * i + j) * 7));
    // Refused: past the window (a record, as the proxy's refusals).
    EXPECT_EQ(mori_put_thread(win.view, other, (1 << 20) - 8, win.at(0), 64), MORI_DEVICE_ERANGE);
    EXPECT_EQ(mori_window_check(win.win), MORI_ERANGE);
    EXPECT_NE(std::string(mori_last_error()).find("refused a put"), std::string::npos) << mori_last_error();
    EXPECT_EQ(mori_window_check(win.win), 0) << mori_last_error();
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    unsetenv("MORI_NUM_QP_PER_PE");
  });
}

// Zero bytes: a put with signal of no data, a batch with an empty entry,
// and a refused lane of a warp's batch post WQEs with no data segment (a
// ConnectX reads a length of 0 as 2 GiB). The software ConnectX executes
// them as zero-byte writes: the signal and the other puts land, nothing
// fails, and the queue pair goes on serving.
TEST(GdaSwcx, ZeroBytePutsCarryNoDataAndComplete) {
  SKIP_WITHOUT_RDMA_DEVICE();
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    JoinAsTwoNodesOverSwcx(rank, size);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_NO_FATAL_FAILURE(ExpectGpuPosting(w));
    Win win(w.comm, 1 << 20);
    int other = Partner(rank, size);
    for (int i = 0; i < 4096; i++) *win.at(i) = (uint8_t)(rank * 13 + i);
    ASSERT_EQ(mori_gda_put_signal(win.view, other, 8192, win.at(0), 0, 200000, 77, 10 * kSecond), MORI_DEVICE_OK);
    uint64_t dst[2] = {16384, 16384 + 256}, bytes[2] = {0, 200};
    const void *src[2] = {win.at(0), win.at(100)};
    ASSERT_EQ(mori_gda_put_batch(win.view, other, 2, dst, src, bytes, 10 * kSecond), MORI_DEVICE_OK);
    // One lane (the host's warp) whose request leaves the window.
    EXPECT_EQ(mori_gda_put_warp(win.view, other, 1 << 20, win.at(0), 64, 10 * kSecond), MORI_DEVICE_EINVAL);
    ASSERT_EQ(mori_quiet_window(win.view, 10 * kSecond), MORI_DEVICE_OK);
    ASSERT_EQ(mori_put_thread(win.view, other, 32768, win.at(0), 64), MORI_DEVICE_OK);
    ASSERT_EQ(mori_quiet_window(win.view, 10 * kSecond), MORI_DEVICE_OK);
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    EXPECT_EQ(win.word(200000), 77u);
    EXPECT_EQ(*win.at(8192), 0) << "nothing written by the zero-byte put";
    EXPECT_EQ(*win.at(16384), 0);
    for (int i = 0; i < 200; i++) ASSERT_EQ(*win.at(16384 + 256 + i), (uint8_t)(other * 13 + 100 + i)) << "byte " << i;
    for (int i = 0; i < 64; i++) ASSERT_EQ(*win.at(32768 + i), (uint8_t)(other * 13 + i)) << "byte " << i;
    // The refused lane's record, and no other.
    EXPECT_EQ(mori_window_check(win.win), MORI_ERANGE);
    EXPECT_NE(std::string(mori_last_error()).find("refused a put"), std::string::npos) << mori_last_error();
    EXPECT_EQ(mori_window_check(win.win), 0) << mori_last_error();
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
  });
}

// The world barrier and remote_sync's signals across nodes go through GPU
// posting too (the synchronisation area's view has its own table): data
// put before the barrier is there after it, and signals count. Three QPs
// per peer: puts spread over them, each signal waits for the others.
TEST(GdaSwcx, WorldBarrierAndRemoteSignalsAcrossNodes) {
  SKIP_WITHOUT_RDMA_DEVICE();
  int size = TestRanks();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinAsTwoNodesOverSwcx(rank, size);
    setenv("MORI_NUM_QP_PER_PE", "3", 1);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    ASSERT_NO_FATAL_FAILURE(ExpectGpuPosting(w));
    Win win(w.comm, 1 << 16);
    mori_window_dev_t sync = mori_window_sync_view(win.win);
    ASSERT_NE(sync.gda, nullptr) << "the synchronisation area posts from the GPU too";
    int other = Partner(rank, size);
    for (int round = 1; round <= 20; round++) {
      for (int i = 0; i < 256; i++) *win.at(i) = (uint8_t)(rank * 7 + round + i);
      ASSERT_EQ(mori_put_thread(win.view, other, 4096, win.at(0), 256), MORI_DEVICE_OK);
      ASSERT_EQ(mori_world_barrier_block(win.view, sync, 1, 10 * kSecond), MORI_DEVICE_OK) << "round " << round;
      for (int i = 0; i < 256; i++)
        ASSERT_EQ(*win.at(4096 + i), (uint8_t)(other * 7 + round + i)) << "round " << round << " byte " << i;
      // Nobody writes the source or the landing area before everyone checked.
      ASSERT_EQ(mori_world_barrier_block(win.view, sync, 1, 10 * kSecond), MORI_DEVICE_OK);
      ASSERT_EQ(mori_remote_signal_put(win.view, sync, other, 2, 10 * kSecond), MORI_DEVICE_OK);
      ASSERT_EQ(mori_remote_signal_wait(win.view, sync, other, 2, 10 * kSecond), MORI_DEVICE_OK);
    }
    EXPECT_EQ(mori_window_check(win.win), 0) << mori_last_error();
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
  });
}

// The world barrier's steps share one deadline: rank 1 (rank 0's node)
// arrives 1 s after rank 0 starts and the other node stays away until rank
// 0 is done, so rank 0's 1.5 s barrier times out about 1.5 s after it
// starts (with a timeout per step: the LSA part's 1 s, then 1.5 s more).
// Judged by rank 0's own clock, with the peers' delays counted from its
// start (a signal it posts to each), so that a loaded machine, where a rank
// can start late or oversleep its deadline, does not decide the outcome.
// Rank 0's arrivals were sent, so the ranks stay in step: the next barrier
// passes.
TEST(GdaSwcx, WorldBarrierEndsWithinItsTimeoutAcrossItsSteps) {
  SKIP_WITHOUT_RDMA_DEVICE();
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 4) GTEST_SKIP() << "needs two ranks on each node";
    JoinAsTwoNodesOverSwcx(rank, size);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    Win win(w.comm, 1 << 16);
    mori_window_dev_t sync = mori_window_sync_view(win.win);
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    const uint64_t kStarted = 8192, kDone = 8200;  // rank 0's signals in each peer's window
    auto tell_peers = [&](uint64_t word) {
      for (int p = 1; p < size; p++) ASSERT_EQ(mori_signal_set(win.view, p, word, 1), MORI_DEVICE_OK);
      ASSERT_EQ(mori_quiet_window(win.view, 10 * kSecond), MORI_DEVICE_OK);
    };
    auto await_rank_zero = [&](uint64_t word) {
      ASSERT_EQ(mori_signal_wait_until(win.view, word, MORI_CMP_EQ, 1, 60 * kSecond, 0, 0, nullptr), MORI_DEVICE_OK);
    };
    if (rank == 0) {
      ASSERT_NO_FATAL_FAILURE(tell_peers(kStarted));
      auto start = std::chrono::steady_clock::now();
      EXPECT_EQ(mori_world_barrier_block(win.view, sync, 3, 1500000000ull), MORI_DEVICE_ETIMEDOUT);
      auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
      ASSERT_NO_FATAL_FAILURE(tell_peers(kDone));
      EXPECT_LT(took, 2100) << "a 1.5 s barrier took " << took << " ms (a timeout per step: 2.5 s or more)";
      EXPECT_EQ(mori_window_check(win.win), MORI_EDEVICE_TIMEOUT) << mori_last_error();
    } else {
      ASSERT_NO_FATAL_FAILURE(await_rank_zero(kStarted));
      if (rank == 1) usleep(1000000);
      if (rank >= size / 2) {
        ASSERT_NO_FATAL_FAILURE(await_rank_zero(kDone));
      }
      EXPECT_EQ(mori_world_barrier_block(win.view, sync, 3, 20 * kSecond), MORI_DEVICE_OK);
    }
    EXPECT_EQ(mori_world_barrier_block(win.view, sync, 3, 20 * kSecond), MORI_DEVICE_OK);
    EXPECT_EQ(mori_window_check(win.win), 0) << mori_last_error();
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
  });
}

// Random sizes and offsets, each put followed by a signal carrying its
// number; a checker thread of the receiving rank watches the signal and,
// whenever it moves, checks that the data of that put is all there.
TEST(GdaSwcx, RandomPutThenSignalStress) {
  SKIP_WITHOUT_RDMA_DEVICE();
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    JoinAsTwoNodesOverSwcx(rank, size);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_NO_FATAL_FAILURE(ExpectGpuPosting(w));
    // Up to 100 000 put + signal pairs per rank at 2 ranks (as many as the
    // issue's Soft-RoCE target), fewer at 4 and 8 ranks on a shared host;
    // sized by time as well: a rank sends for at most kSendFor, so a slow
    // guest (a loaded host ran it at under 1000 pairs a second) checks
    // fewer pairs instead of running into the ranks' time limit. The ranks
    // then tell each other how many they sent, and every one of those is
    // checked.
    const uint64_t kSlot = 512, kOps = size <= 2 ? 100000 : size <= 4 ? 25000 : 10000, kData = 65536,
                   kSignal = kData + kOps * kSlot, kMinOps = 1000;
    const auto kSendFor = std::chrono::seconds(50);
    Win win(w.comm, kSignal + 64);
    int other = Partner(rank, size);
    // The source: a pattern every rank can recompute for any sender.
    for (uint64_t i = 0; i < kData; i++) *win.at(i) = (uint8_t)((i * 2654435761u) >> 13);
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    auto op_of = [&](uint64_t k, uint64_t *off, uint64_t *len, uint64_t *src) {
      uint64_t h = (k + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)other;
      *len = 1 + (h >> 7) % (kSlot - 1);
      *off = (h >> 23) % (kSlot - *len + 1);
      *src = (h >> 37) % (kData - *len);
    };
    // Seeing signal k means every put up to op k - 1 has landed (each
    // signal is fenced behind every earlier put to this rank): the checker
    // checks op k - 1 at once, then the ops the signal passed since it
    // last looked, so every op is checked against the signal that
    // covered it while the stream runs.
    // A signal set is an 8-byte RDMA write. rxe (Soft-RoCE) lands it with
    // the kernel's memcpy, which may store byte by byte (rep movsb; in a
    // TCG guest always): while n is written over n - 1, a reader can see
    // n's low bytes under n - 1's high ones. Where the low j bytes carry
    // (n = H << 8j), that is (H - 1) << 8j, below the value before: a torn
    // read. It is never above n, so no op is claimed early; the checker
    // skips it and counts it. Any other step back is a signal that went
    // back (a write landing out of order), and fails.
    auto torn_read_of_a_later_value = [](uint64_t seen, uint64_t last) {
      for (int j = 1; j < 8; j++) {
        uint64_t below = 1ull << (8 * j);
        if (seen % below == 0 && seen + below > last) return true;
      }
      return false;
    };
    std::atomic<uint64_t> mismatches{0}, checked{0}, signals_seen{0}, torn_reads{0}, went_back{0};
    std::atomic<uint64_t> coming{kOps};  // what the partner sends: kOps until it says
    std::atomic<bool> give_up{false};
    std::string anomalies;  // the checker's first few, said with the failure
    std::thread checker([&] {
      uint64_t last = 0, k = 0;
      int told = 0;
      auto tell = [&](const std::string &what) {
        if (told++ < 6) anomalies += "\n  " + what;
      };
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
      auto check = [&](uint64_t op) {
        uint64_t off, len, src;
        op_of(op, &off, &len, &src);
        if (memcmp(win.at(kData + op * kSlot + off), win.at(src), len) != 0) {
          mismatches++;
          tell("op " + std::to_string(op) + " (" + std::to_string(len) + " bytes) not there at signal " + std::to_string(k) +
               " (signal before: " + std::to_string(last) + ")");
        }
        checked++;
      };
      while (last < coming && !give_up && std::chrono::steady_clock::now() < deadline) {
        k = win.word(kSignal);
        if (k == last) {
          std::this_thread::yield();
          continue;
        }
        if (k < last) {
          if (torn_read_of_a_later_value(k, last)) {
            torn_reads++;
          } else {
            went_back++;
            tell("the signal went back from " + std::to_string(last) + " to " + std::to_string(k));
          }
          continue;
        }
        signals_seen++;
        check(k - 1);
        for (uint64_t op = last; op + 1 < k; op++) check(op);
        last = k;
      }
    });
    // A failed assertion below returns: the checker is told to stop and
    // joined first (a joinable std::thread would abort the rank).
    struct JoinOnReturn {
      std::thread &t;
      std::atomic<bool> &stop;
      ~JoinOnReturn() {
        stop = true;
        if (t.joinable()) t.join();
      }
    } join_checker{checker, give_up};
    auto start = std::chrono::steady_clock::now();
    int rc = 0;
    uint64_t k = 0;
    for (; k < kOps && !rc && (k % 256 || k < kMinOps || std::chrono::steady_clock::now() - start < kSendFor); k++) {
      // The partner's op k, computed with our own rank as its partner.
      uint64_t h = (k + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)rank;
      uint64_t len = 1 + (h >> 7) % (kSlot - 1), off = (h >> 23) % (kSlot - len + 1), src = (h >> 37) % (kData - len);
      if (k % 2) {
        rc = mori_put_thread(win.view, other, kData + k * kSlot + off, win.at(src), len);
        if (!rc) rc = mori_signal_set(win.view, other, kSignal, k + 1);
      } else {
        // 30 s: a post waits for room in a full queue, and a loaded host
        // (the sanitizer pass beside other suites) may stall a rank long.
        rc = mori_gda_put_signal(win.view, other, kData + k * kSlot + off, win.at(src), len, kSignal, k + 1, 30 * kSecond);
      }
    }
    ASSERT_EQ(rc, MORI_DEVICE_OK) << "rank " << rank << ", op " << k - 1 << " of " << kOps << " to rank " << other
                                  << ", after " << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                                  << " s: " << mori_err_name(mori_window_check(win.win)) << ": " << mori_last_error();
    ASSERT_EQ(mori_quiet_window(win.view, 30 * kSecond), MORI_DEVICE_OK)
        << "rank " << rank << ": " << mori_err_name(mori_window_check(win.win)) << ": " << mori_last_error();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const uint64_t sent = k;
    std::vector<uint64_t> sent_by(size);
    ASSERT_EQ(mori_bootstrap_allgather(w.bootstrap, &sent, sent_by.data(), sizeof(sent)), 0) << mori_last_error();
    const uint64_t received = sent_by[other];  // Partner is its own inverse: `other` sends to this rank
    coming = received;
    checker.join();
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    EXPECT_GE(received, kMinOps);
    EXPECT_EQ(win.word(kSignal), received);
    // Every op's data, at the end.
    for (uint64_t k = 0; k < received; k++) {
      uint64_t off, len, src;
      op_of(k, &off, &len, &src);
      ASSERT_EQ(memcmp(win.at(kData + k * kSlot + off), win.at(src), len), 0) << "op " << k << " from rank " << other;
    }
    EXPECT_EQ(went_back.load(), 0u) << "the signal went back (rank " << rank << ")" << anomalies;
    EXPECT_EQ(mismatches.load(), 0u) << "a signal seen before its data (rank " << rank << ")" << anomalies;
    EXPECT_EQ(checked.load(), received) << "every op checked against the signal that covered it (rank " << rank << ")" << anomalies;
    if (rank == 0)
      printf("{\"test\": \"gda_swcx_stress\", \"ranks\": %d, \"ops_per_rank\": %llu, \"seconds\": %.3f, \"ops_per_s\": %.0f, "
             "\"signals_seen\": %llu, \"ops_checked_after_their_signal\": %llu, \"mismatches\": %llu, \"torn_reads\": %llu}\n",
             size, (unsigned long long)sent, secs, (double)sent / secs, (unsigned long long)signals_seen.load(),
             (unsigned long long)checked.load(), (unsigned long long)mismatches.load(), (unsigned long long)torn_reads.load());
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
  });
}

// An error completion mid-stream (the software ConnectX fails rank 0's 5th
// WQE with a remote access error): rank 0's quiet to that peer returns
// MORI_DEVICE_EIO, the window's record names the peer and the syndrome,
// later posts to it fail at once, and rank 0's other peer is still served.
TEST(GdaSwcx, ErrorCompletionNamesPeerAndSyndromeOthersServed) {
  SKIP_WITHOUT_RDMA_DEVICE();
  int size = TestRanks();
  if (size < 4) GTEST_SKIP() << "needs two peers on the other node";
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinAsTwoNodesOverSwcx(rank, size);
    if (rank == 0) setenv("MORI_RDMA_SWCX_FAULTS", "error@5", 1);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    Win win(w.comm, 1 << 16);
    int bad = size / 2, good = size / 2 + 1;  // both on node-b
    if (rank == 0) {
      for (int i = 0; i < 256; i++) *win.at(i) = (uint8_t)(i + 1);
      int failed_at = -1;
      for (int k = 0; k < 10; k++) {
        int rc = mori_put_thread(win.view, bad, 1024 + 64 * (uint64_t)k, win.at(0), 64);
        if (rc && failed_at < 0) failed_at = k;
        if (rc) {
          EXPECT_EQ(rc, MORI_DEVICE_EIO);
        }
        // Give the NIC time to fail the 5th: later puts then fail at once.
        if (k == 5) {
          EXPECT_EQ(mori_gda_quiet_peer(win.view, bad, 10 * kSecond), MORI_DEVICE_EIO);
        }
      }
      EXPECT_GT(failed_at, 4) << "puts fail only once the error completion arrived";
      EXPECT_EQ(mori_quiet_window(win.view, 10 * kSecond), MORI_DEVICE_EIO);
      EXPECT_EQ(mori_window_check(win.win), MORI_EIO);
      std::string err = mori_last_error();
      EXPECT_NE(err.find("posted to rank " + std::to_string(bad)), std::string::npos) << err;
      EXPECT_NE(err.find("syndrome 0x13"), std::string::npos) << err;  // remote access error
      // The other peer is still served.
      ASSERT_EQ(mori_put_thread(win.view, good, 2048, win.at(0), 256), MORI_DEVICE_OK);
      EXPECT_EQ(mori_gda_quiet_peer(win.view, good, 10 * kSecond), MORI_DEVICE_OK);
    }
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    if (rank == good) {
      for (int i = 0; i < 256; i++) ASSERT_EQ(*win.at(2048 + i), (uint8_t)(i + 1)) << "byte " << i;
    }
    if (rank == bad) {
      for (int k = 0; k < 4; k++) EXPECT_EQ(*win.at(1024 + 64 * k), 1) << "put " << k << ", before the failure, arrived";
    }
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    unsetenv("MORI_RDMA_SWCX_FAULTS");
  });
}

// A stalled NIC: rank 0's 16-deep send queue fills, the next post waits
// and times out with a record, quiet times out too; nothing hangs.
TEST(GdaSwcx, StalledNicFullQueueTimesOut) {
  SKIP_WITHOUT_RDMA_DEVICE();
  int size = TestRanks();
  if (size != 2) GTEST_SKIP() << "one pair is enough";
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinAsTwoNodesOverSwcx(rank, size);
    setenv("MORI_RDMA_GDA_DEPTH", "16", 1);
    if (rank == 0) setenv("MORI_RDMA_SWCX_FAULTS", "stall@1", 1);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    Win win(w.comm, 1 << 16);
    if (rank == 0) {
      const uint64_t timeout = 200ull * 1000 * 1000;
      int k = 0, rc = 0;
      for (; k < 40 && !rc; k++) rc = mori_gda_put(win.view, 1, 64 * (uint64_t)k, win.at(0), 64, timeout);
      EXPECT_EQ(rc, MORI_DEVICE_ETIMEDOUT);
      EXPECT_EQ(k, 17) << "16 WQEs fit the queue, the 17th waited";
      EXPECT_EQ(mori_window_check(win.win), MORI_EDEVICE_TIMEOUT);
      EXPECT_NE(std::string(mori_last_error()).find("waited for room in the send queue"), std::string::npos) << mori_last_error();
      EXPECT_EQ(mori_gda_quiet(win.view, timeout), MORI_DEVICE_ETIMEDOUT);
      EXPECT_EQ(mori_window_check(win.win), MORI_EDEVICE_TIMEOUT);
      EXPECT_NE(std::string(mori_last_error()).find("waited for completions"), std::string::npos) << mori_last_error();
    }
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    unsetenv("MORI_RDMA_SWCX_FAULTS");
    unsetenv("MORI_RDMA_GDA_DEPTH");
  });
}

// A peer that dies mid-stream: the ranks of node-b exit (without closing
// anything, as a killed process) after 2000 of their own put + signal
// pairs, with work in flight. Each survivor on node-a streams put + signal
// pairs to its partner, waiting every 128 pairs for the partner's own
// count to follow within 512 (its credit). The survivor's stream must end
// with an error naming the dead rank, within the timeouts, never hang:
// over Soft-RoCE either the NIC completes the survivor's work with an error
// (a record naming peer and syndrome: the dead process's memory regions go
// before its queue pairs, a remote access error) or the credit wait or a
// full queue times out first (a record naming the peer); over the
// copy-engine NIC, whose puts still land in a dead process's memory, the
// credit wait times out naming it.
// Quiet afterwards returns within its timeout too.
TEST(GdaSwcx, PeerDiesMidStreamSurvivorGetsAnErrorNamingIt) {
  SKIP_WITHOUT_RDMA_DEVICE();
  int size = TestRanks();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinAsTwoNodesOverSwcx(rank, size);
    // Neither is destroyed: a comm with a dead member cannot be torn down
    // collectively, and the dead rank closes nothing on purpose.
    World *w = new World(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w->ok());
    ASSERT_NO_FATAL_FAILURE(ExpectGpuPosting(*w));
    const uint64_t kSlot = 256, kSlots = 1024, kSignal = kSlot * kSlots, kDieAfter = 2000, kTimeout = 2 * kSecond;
    Win *win = new Win(w->comm, kSignal + 64);
    int other = Partner(rank, size);
    bool dies = rank >= size / 2;
    for (uint64_t i = 0; i < kSlot; i++) *win->at(i) = (uint8_t)(rank + i);
    ASSERT_EQ(mori_bootstrap_barrier(w->bootstrap), 0);
    int rc = 0;
    uint64_t k = 0;
    auto start = std::chrono::steady_clock::now();
    for (; k < (dies ? kDieAfter : 1000000) && !rc; k++) {
      rc = mori_gda_put_signal(win->view, other, kSlot * (1 + k % (kSlots - 1)), win->at(0), 1 + k % kSlot, kSignal, k + 1,
                               kTimeout);
      if (!rc && !dies && k % 128 == 127 && k >= 512) {
        uint64_t seen = 0;
        rc = mori_signal_wait_until(win->view, kSignal, MORI_CMP_GE, k + 1 - 512, kTimeout, other, 0, &seen);
      }
    }
    if (dies) {
      ASSERT_EQ(rc, MORI_DEVICE_OK) << "rank " << rank << " failed before it died, at pair " << k;
      fflush(stdout);
      fflush(stderr);
      _exit(0);  // no quiet, no teardown: work in flight, queue pairs left to the kernel
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(rc == MORI_DEVICE_EIO || rc == MORI_DEVICE_ETIMEDOUT)
        << "rank " << rank << " streaming to rank " << other << " (dead after " << kDieAfter << " pairs) ended at pair "
        << k << " with " << rc;
    EXPECT_LT(secs, 60.0) << "the survivor took " << secs << " s to notice";
    int check = mori_window_check(win->win);
    EXPECT_TRUE(check == MORI_EIO || check == MORI_EDEVICE_TIMEOUT) << check << ": " << mori_last_error();
    std::string err = mori_last_error();
    EXPECT_NE(err.find("rank " + std::to_string(other)), std::string::npos) << err;
    auto quiet_start = std::chrono::steady_clock::now();
    int quiet = mori_gda_quiet(win->view, kTimeout);
    double quiet_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - quiet_start).count();
    EXPECT_LT(quiet_secs, 10.0) << "quiet after the peer died returned " << quiet << " after " << quiet_secs << " s";
    EXPECT_TRUE(quiet == MORI_DEVICE_OK || quiet == MORI_DEVICE_EIO || quiet == MORI_DEVICE_ETIMEDOUT) << quiet;
    // A timed-out quiet leaves a record of its own; after an error
    // completion the peer is marked failed and its record was given once.
    if (quiet == MORI_DEVICE_ETIMEDOUT) {
      EXPECT_EQ(mori_window_check(win->win), MORI_EDEVICE_TIMEOUT) << "a timed-out quiet leaves a record";
      EXPECT_NE(std::string(mori_last_error()).find("rank " + std::to_string(other)), std::string::npos) << mori_last_error();
    }
    printf("rank %d: rank %d died; after %llu pairs and %.2f s: %s (device rc %d); quiet then %d in %.2f s\n", rank, other,
           (unsigned long long)k, secs, err.c_str(), rc, quiet, quiet_secs);
  });
}

}  // namespace
