// SPDX-License-Identifier: MIT
// The window and the device API on real GPUs (cuda platform; one process per
// GPU). Ranks are forked before any GPU call: a CUDA context does not
// survive fork. Tagged gpu + manual: run by tools/gpu.sh on the device.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <string>

#include "core/platform/platform.h"
#include "mori/team.h"
#include "mori/transport_sdma.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/support/proc_stats.h"
#include "tests/support/world.h"

using mori_test::CountFds;
using mori_test::CountMappings;
using mori_test::ResidentKiB;
using mori_test::World;

namespace {

int Ranks() {
  const char *s = getenv("MORI_TEST_RANKS");
  return s ? atoi(s) : 2;
}

void SelectGpu(int rank) { ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error(); }

TEST(GpuPlatform, ProbeAnswerPerDevice) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    unsigned mask = 0;
    int dev = -1, type = 0;
    MORI_ASSERT_OK(mori_platform_current_device(&dev));
    MORI_ASSERT_OK(mori_platform_probe_handle_types(dev, &mask));
    MORI_ASSERT_OK(mori_platform_preferred_handle_type(dev, &type));
    size_t g = 0;
    MORI_ASSERT_OK(mori_platform_granularity(dev, &g));
    printf("rank %d device %d: fabric %s, posix_fd %s -> %s; granularity %zu\n", rank, dev,
           mask & (1u << MORI_HANDLE_FABRIC) ? "yes" : "no", mask & (1u << MORI_HANDLE_POSIX_FD) ? "yes" : "no",
           mori_handle_type_name(type), g);
    EXPECT_TRUE(mask & (1u << MORI_HANDLE_POSIX_FD));
  });
}

TEST(GpuWindow, KernelReadsWhatThePeerProcessWrote) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    World w;
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    const uint64_t bytes = 8 << 20;
    MORI_ASSERT_OK(mori_mem_alloc(bytes, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    mori_window_dev_t view = mori_window_device_view(win);
    ASSERT_EQ(gpu_fill_local(view, bytes, 77), 0) << gpu_last_error();
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    for (int peer = 0; peer < size; peer++) EXPECT_EQ(gpu_check_peer(view, peer, bytes, 77), 0) << "peer " << peer;
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

TEST(GpuWindow, EveryRankWritesEveryPeerThroughBothModels) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    World w;
    ASSERT_TRUE(w.ok());
    const uint64_t chunk = 1 << 20;
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(chunk * size, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, (char *)p, &win));
    if (rank == 0) printf("handle type: %s\n", mori_handle_type_name(mori_comm_handle_type(w.comm)));
    EXPECT_EQ(mori_window_ptrs(win)[rank], p);
    mori_window_dev_t view = mori_window_device_view(win);
    EXPECT_EQ(view.lsa_size, size);
    for (int model = 0; model < 2; model++) {
      ASSERT_EQ(gpu_exchange(view, model, chunk, 100 + model, 8), 0) << gpu_last_error();
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      EXPECT_EQ(gpu_count_mismatches(view, chunk, 100 + model), 0) << (model ? "pointer table" : "flat window");
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    }
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

TEST(GpuWindow, VmmAllocationMadeElsewhereIsRegisteredAndShared) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    World w;
    ASSERT_TRUE(w.ok());
    // A VMM allocation made without mori_mem (as torch's allocator does).
    int dev = 0;
    size_t g = 0;
    MORI_ASSERT_OK(mori_platform_current_device(&dev));
    MORI_ASSERT_OK(mori_platform_granularity(dev, &g));
    const uint64_t chunk = 1 << 20, bytes = (chunk * size + g - 1) / g * g;
    mori_pmem_t mem;
    void *va = nullptr;
    MORI_ASSERT_OK(mori_platform_mem_create(dev, bytes, MORI_HANDLE_POSIX_FD, 0, &mem));
    MORI_ASSERT_OK(mori_platform_va_reserve(dev, bytes, g, &va));
    MORI_ASSERT_OK(mori_platform_mem_map(va, bytes, &mem));
    MORI_ASSERT_OK(mori_platform_set_access(va, bytes, dev));
    void *base = nullptr;
    MORI_ASSERT_OK(mori_mem_register((char *)va + 4096, nullptr, &base));
    EXPECT_EQ(base, va);
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, va, &win));
    mori_window_dev_t view = mori_window_device_view(win);
    ASSERT_EQ(gpu_exchange(view, 0, chunk, 55, 4), 0) << gpu_last_error();
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    EXPECT_EQ(gpu_count_mismatches(view, chunk, 55), 0);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(va));  // forgets the registration only
    MORI_EXPECT_OK(mori_platform_mem_unmap(dev, va, bytes));
    MORI_EXPECT_OK(mori_platform_va_release(dev, va, bytes));
    MORI_EXPECT_OK(mori_platform_mem_release(&mem));
  });
}

// Memory of the runtime's plain allocator (cudaMalloc, as torch's caching
// allocator uses), adopted without a copy through legacy IPC handles: each
// rank's range sits at a different offset of an allocation of a different
// size; kernels reach every peer through the pointer table (no flat span);
// two windows in one allocation share one open of it on each peer.
TEST(GpuWindow, CudaMallocRangesAreAdoptedThroughLegacyIpcHandles) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    World w;
    ASSERT_TRUE(w.ok());
    const uint64_t chunk = 256 << 10, bytes = chunk * size;
    const uint64_t block = 2 * bytes + ((uint64_t)rank + 1) * (1 << 20);  // a different size on every rank
    char *raw = (char *)gpu_alloc(block);
    ASSERT_NE(raw, nullptr) << gpu_last_error();
    char *a = raw + 4096 * ((uint64_t)rank + 1), *b = a + bytes + 512 * (uint64_t)rank;  // different places
    MORI_ASSERT_OK(mori_mem_register_range(a, bytes, nullptr));
    MORI_ASSERT_OK(mori_mem_register_range(b, bytes, nullptr));
    mori_window_t *wa = nullptr, *wb = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, a, &wa));
    MORI_ASSERT_OK(mori_window_create(w.comm, b, &wb));
    mori_window_dev_t va = mori_window_device_view(wa), vb = mori_window_device_view(wb);
    EXPECT_EQ(va.stride, 0u) << "legacy IPC memory has no flat span";
    EXPECT_EQ(mori_window_ptrs(wa)[rank], a);
    for (int round = 0; round < 3; round++) {
      ASSERT_EQ(gpu_exchange(va, 1, chunk, 300 + round, 4), 0) << gpu_last_error();
      ASSERT_EQ(gpu_exchange(vb, 1, chunk, 400 + round, 4), 0) << gpu_last_error();
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      EXPECT_EQ(gpu_count_mismatches(va, chunk, 300 + round), 0) << "window a, round " << round;
      EXPECT_EQ(gpu_count_mismatches(vb, chunk, 400 + round), 0) << "window b, round " << round;
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    }
    // Divergent teardown: b survives a on even ranks, a survives b on odd
    // ones; the shared open stays until both are gone.
    MORI_EXPECT_OK(mori_window_destroy(rank % 2 ? wb : wa));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(rank % 2 ? wa : wb));
    MORI_EXPECT_OK(mori_mem_free(a));
    MORI_EXPECT_OK(mori_mem_free(b));
    // A range past the end of its allocation, and mori's own memory again.
    EXPECT_EQ(mori_mem_register_range(raw + block - 4096, 8192, nullptr), MORI_ERANGE) << mori_last_error();
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    gpu_free(raw);
  });
}

TEST(GpuSdma, CopyEnginePutsReachEveryPeer) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    World w(0, {&mori_transport_sdma_ops});
    ASSERT_TRUE(w.ok());
    const uint64_t chunk = 16 << 20;
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(chunk * size, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    mori_window_dev_t view = mori_window_device_view(win);
    // Stage this rank's pattern for every peer in a scratch window, then let
    // the copy engines move it: slot `rank` of every peer.
    void *stage = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(chunk * size, nullptr, &stage));
    mori_window_t *stage_win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, stage, &stage_win));
    mori_window_dev_t stage_view = mori_window_device_view(stage_win);
    // After this, stage slot w on rank r holds pattern(w -> r).
    ASSERT_EQ(gpu_exchange(stage_view, 0, chunk, 31, 8), 0) << gpu_last_error();
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // The copy engines move peer w's stage slot `rank` (pattern(rank -> w))
    // into peer w's window slot `rank`: both ends are peer memory.
    for (int peer = 0; peer < size; peer++) {
      const char *src = (const char *)mori_window_peer_ptr(stage_win, peer) + (size_t)rank * chunk;
      MORI_ASSERT_OK(mori_sdma_put(win, peer, (size_t)rank * chunk, src, chunk));
    }
    MORI_ASSERT_OK(mori_sdma_quiet(w.comm));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    EXPECT_EQ(gpu_count_mismatches(view, chunk, 31), 0) << "after copy-engine puts";
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(stage_win));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(stage));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

TEST(GpuDeviceApi, PutSignalWaitAndTheTimeoutRecord) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    World w;
    ASSERT_TRUE(w.ok());
    const uint64_t bytes = 256 << 10, signals = bytes * size;
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = 4 * size * 4;
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(signals + 8 * size + 64, &attr, &p));
    ASSERT_EQ(gpu_zero((char *)p + signals, 8 * size + 64), 0) << gpu_last_error();  // signals start at 0
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    mori_window_dev_t view = mori_window_device_view(win);
    int peer = (rank + 1) % size;
    for (uint64_t round = 1; round <= 6; round++) {  // block, warp and thread scope twice
      int rc = -1;
      ASSERT_EQ(gpu_put_signal_round(view, peer, bytes, signals, round, 5000000000ull, &rc), 0) << gpu_last_error();
      EXPECT_EQ(rc, 0) << "round " << round;
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    }
    // Both device barriers complete (and time out nowhere).
    EXPECT_GT(gpu_bench_barrier(view, 200, 0), 0) << gpu_last_error();
    EXPECT_GT(gpu_bench_barrier(view, 200, 1), 0) << gpu_last_error();
    EXPECT_EQ(mori_window_check(win), 0) << mori_last_error();
    // A wait nobody answers: the kernel returns, the host gets the record.
    int rc = 0;
    ASSERT_EQ(gpu_wait_nobody(view, signals + 8 * size, 20000000ull, &rc), 0) << gpu_last_error();
    EXPECT_EQ(rc, MORI_EDEVICE_TIMEOUT);
    EXPECT_EQ(mori_window_check(win), MORI_EDEVICE_TIMEOUT);
    printf("rank %d: %s\n", rank, mori_last_error());
    // A barrier the last rank skips: the others' records name it (a
    // thread per peer; the one that gives up names every rank missing).
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank != size - 1) {
      ASSERT_EQ(gpu_barrier_once(view, 5, 20000000ull, 64, &rc), 0) << gpu_last_error();
      EXPECT_EQ(rc, MORI_EDEVICE_TIMEOUT);
      EXPECT_EQ(mori_window_check(win), MORI_EDEVICE_TIMEOUT);
      std::string want = "1 peer had not arrived: rank " + std::to_string(size - 1);
      EXPECT_NE(std::string(mori_last_error()).find(want), std::string::npos) << mori_last_error();
      printf("rank %d: %s\n", rank, mori_last_error());
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // The context survived: more work runs.
    ASSERT_EQ(gpu_fill_local(view, bytes, 5), 0) << gpu_last_error();
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

// MORI_TRAP_ON_DEVICE_ERROR=1: the same unanswered wait records the error
// and then traps: the kernel fails (the context is lost, as with torch's
// own backend), and the record is still readable on the host. One rank
// each in a process of its own (the context does not survive).
TEST(GpuDeviceApi, OptInTrapStopsTheKernelAfterRecordingTheTimeout) {
  EXPECT_RANKS_PASS(1, [](int rank, int size) {
    SelectGpu(rank);
    setenv("MORI_TRAP_ON_DEVICE_ERROR", "1", 1);
    World w;
    ASSERT_TRUE(w.ok());
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    ASSERT_EQ(gpu_zero(p, 4096), 0) << gpu_last_error();
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    int rc = 0;
    EXPECT_NE(gpu_wait_nobody(mori_window_device_view(win), 64, 20000000ull, &rc), 0) << "the kernel did not trap";
    printf("after the trap: %s\n", gpu_last_error());
    EXPECT_EQ(mori_window_check(win), MORI_EDEVICE_TIMEOUT);
    EXPECT_NE(std::string(mori_last_error()).find("timed out"), std::string::npos) << mori_last_error();
    fflush(stdout);
    _exit(::testing::Test::HasFailure() ? 1 : 0);  // the context is gone: no teardown through it
  });
}

TEST(GpuWindow, DivergentFreesThenTeardown) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    World w;
    ASSERT_TRUE(w.ok());
    constexpr int kWindows = 5;
    std::vector<void *> mem(kWindows);
    std::vector<mori_window_t *> win(kWindows);
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = 9216;
    for (int i = 0; i < kWindows; i++) {
      MORI_ASSERT_OK(mori_mem_alloc((size_t)(i + 1) << 20, &attr, &mem[i]));
      MORI_ASSERT_OK(mori_window_create(w.comm, mem[i], &win[i]));
    }
    std::vector<int> order(kWindows);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(rank + 3));
    for (int i : order) MORI_ASSERT_OK(mori_mem_free(mem[i]));
    mori_window_dev_t view = mori_window_device_view(win[kWindows - 1]);
    ASSERT_EQ(gpu_exchange(view, 1, (1 << 20) * kWindows / size / 4 * 4, 3, 4), 0) << gpu_last_error();
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    std::shuffle(order.begin(), order.end(), std::mt19937(rank * 11 + 1));
    for (int i : order) MORI_ASSERT_OK(mori_window_destroy(win[i]));
    EXPECT_EQ(mori_mem_count(), 0);
  });
}

// A heap window's device tables are copied by the first getter that hands
// out a device address of them, which waits for that copy. A kernel on a
// stream that nothing orders after mori's copy must still read them
// complete, whichever getter came first, with table carves reused across
// cycles (stale values there).
TEST(GpuWindow, FreshHeapWindowTablesAreCompleteAtFirstDeviceUse) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    World w;
    ASSERT_TRUE(w.ok());
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = 4096;
    std::vector<void *> got(size);
    std::vector<std::pair<void *, mori_window_t *>> live;
    std::mt19937 rng(rank + 17);
    for (int cycle = 0; cycle < 300; cycle++) {
      void *p = nullptr;
      mori_window_t *win = nullptr;
      MORI_ASSERT_OK(mori_mem_alloc((size_t)(1 + cycle % 7) << 16, &attr, &p));
      MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
      void *const *ptrs_dev = nullptr;
      switch (cycle % 3) {
        case 0: ptrs_dev = mori_window_ptrs_dev(win); break;
        case 1: ptrs_dev = (void *const *)mori_window_device_view(win).ptrs; break;
        default: {
          void *const *pads_dev = mori_window_signal_pads_dev(win);
          ASSERT_EQ(gpu_read_table(pads_dev, size, got.data()), 0) << gpu_last_error();
          for (int r = 0; r < size; r++) ASSERT_EQ(got[r], mori_window_signal_pads(win)[r]) << "cycle " << cycle << " pad " << r;
          ptrs_dev = mori_window_ptrs_dev(win);
        }
      }
      ASSERT_EQ(gpu_read_table(ptrs_dev, size, got.data()), 0) << gpu_last_error();
      for (int r = 0; r < size; r++) ASSERT_EQ(got[r], mori_window_ptrs(win)[r]) << "cycle " << cycle << " rank " << r;
      live.emplace_back(p, win);
      // Rank-specific lifetimes: windows die in a different order per rank.
      while (live.size() > 4 || (!live.empty() && rng() % 3 == 0)) {
        size_t i = rng() % live.size();
        MORI_ASSERT_OK(mori_window_destroy(live[i].second));
        MORI_ASSERT_OK(mori_mem_free(live[i].first));
        live.erase(live.begin() + (long)i);
      }
    }
    for (auto &[p, win] : live) {
      MORI_ASSERT_OK(mori_window_destroy(win));
      MORI_ASSERT_OK(mori_mem_free(p));
    }
    EXPECT_EQ(mori_mem_count(), 0);
  });
}

// The same promise made sharp: mori's upload stream is held by a kernel of
// the test's, so the tables' copy cannot land until it ends. Creating the
// window must not wait for it (no device stall); the first getter must
// (its return means the copy has landed), and the tables read right.
// mori_window_check stays clean.
TEST(GpuWindow, GettersWaitForTheTablesCopyAndCreationDoesNot) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    World w;
    ASSERT_TRUE(w.ok());
    void *upload = mori_platform_upload_stream(mori_comm_device(w.comm));
    ASSERT_NE(upload, nullptr) << mori_last_error();
    // Warm: the heap chunk and the signal arena exist (adding an arena
    // zeroes it, which does wait for the upload stream).
    void *warm = nullptr;
    mori_window_t *warm_win = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(1 << 20, nullptr, &warm));
    MORI_ASSERT_OK(mori_window_create(w.comm, warm, &warm_win));
    (void)mori_window_device_view(warm_win);
    for (int round = 0; round < 3; round++) {
      // The ranks start together, and the spin outlasts any rank's late
      // arrival at the window's exchange by far.
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      ASSERT_EQ(gpu_spin_on(upload, 1000ull * 1000 * 1000), 0) << gpu_last_error();
      void *p = nullptr;
      mori_window_t *win = nullptr;
      MORI_ASSERT_OK(mori_mem_alloc(1 << 20, nullptr, &p));
      MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
      EXPECT_EQ(gpu_stream_busy(upload), 1) << "round " << round << ": window creation waited for mori's upload stream";
      void *const *ptrs_dev = round == 1 ? (void *const *)mori_window_device_view(win).ptrs : mori_window_ptrs_dev(win);
      EXPECT_EQ(gpu_stream_busy(upload), 0) << "round " << round << ": a getter returned before the tables' copy landed";
      std::vector<void *> got(size);
      ASSERT_EQ(gpu_read_table(ptrs_dev, size, got.data()), 0) << gpu_last_error();
      for (int r = 0; r < size; r++) EXPECT_EQ(got[r], mori_window_ptrs(win)[r]) << "round " << round << " rank " << r;
      MORI_EXPECT_OK(mori_window_check(win));
      MORI_ASSERT_OK(mori_window_destroy(win));
      MORI_ASSERT_OK(mori_mem_free(p));
    }
    MORI_ASSERT_OK(mori_window_destroy(warm_win));
    MORI_ASSERT_OK(mori_mem_free(warm));
  });
}

// torch takes a window's device view inside torch.cuda.graph, and allocates
// from its pool there: a getter called for the first time while this thread
// captures in global mode, and a window made during the capture, both end
// in a graph whose replay reads the right tables.
TEST(GpuWindow, FirstDeviceUseAndCreationInsideAGraphCapture) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    World w;
    ASSERT_TRUE(w.ok());
    void *before = nullptr, *during = nullptr;
    mori_window_t *before_win = nullptr, *during_win = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(1 << 20, nullptr, &before));
    MORI_ASSERT_OK(mori_window_create(w.comm, before, &before_win));
    void **dev_out = static_cast<void **>(gpu_alloc(2 * sizeof(void *) * (size_t)size));
    ASSERT_NE(dev_out, nullptr) << gpu_last_error();
    void *stream = gpu_capture_begin();
    ASSERT_NE(stream, nullptr) << gpu_last_error();
    int rc = gpu_read_table_async(mori_window_ptrs_dev(before_win), size, dev_out, stream);
    EXPECT_EQ(rc, 0) << gpu_last_error();
    int alloc_rc = mori_mem_alloc(1 << 20, nullptr, &during);
    EXPECT_EQ(alloc_rc, 0) << mori_last_error();
    int create_rc = alloc_rc ? alloc_rc : mori_window_create(w.comm, during, &during_win);
    EXPECT_EQ(create_rc, 0) << mori_last_error();
    if (!create_rc) {
      EXPECT_EQ(gpu_read_table_async(mori_window_ptrs_dev(during_win), size, dev_out + size, stream), 0);
    }
    ASSERT_EQ(gpu_capture_end_replay(stream), 0) << gpu_last_error();
    ASSERT_EQ(create_rc, 0);
    std::vector<void *> got(2 * (size_t)size);
    ASSERT_EQ(gpu_copy_out(got.data(), dev_out, sizeof(void *) * got.size()), 0) << gpu_last_error();
    for (int r = 0; r < size; r++) {
      EXPECT_EQ(got[r], mori_window_ptrs(before_win)[r]) << "made before the capture, rank " << r;
      EXPECT_EQ(got[size + r], mori_window_ptrs(during_win)[r]) << "made during the capture, rank " << r;
    }
    gpu_free(dev_out);
    MORI_EXPECT_OK(mori_window_destroy(during_win));
    MORI_EXPECT_OK(mori_mem_free(during));
    MORI_EXPECT_OK(mori_window_destroy(before_win));
    MORI_EXPECT_OK(mori_mem_free(before));
  });
}

TEST(GpuWindow, TwoHundredCyclesStayFlat) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    SelectGpu(rank);
    World w;
    ASSERT_TRUE(w.ok());
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = 9216;
    int fds = 0, maps = 0;
    long rss = 0;
    for (int cycle = 0; cycle < 200; cycle++) {
      void *p = nullptr;
      mori_window_t *win = nullptr;
      MORI_ASSERT_OK(mori_mem_alloc(4 << 20, &attr, &p));
      MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
      if (cycle % 50 == 0) {
        mori_window_dev_t view = mori_window_device_view(win);
        ASSERT_EQ(gpu_exchange(view, cycle % 100 == 0, (4 << 20) / size, cycle, 4), 0) << gpu_last_error();
        MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
        ASSERT_EQ(gpu_count_mismatches(view, (4 << 20) / size, cycle), 0) << "cycle " << cycle;
        MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      }
      MORI_ASSERT_OK(mori_window_destroy(win));
      MORI_ASSERT_OK(mori_mem_free(p));
      if (cycle == 19) {
        fds = CountFds();
        maps = CountMappings();
        rss = ResidentKiB();
      }
    }
    EXPECT_EQ(CountFds(), fds);
    EXPECT_EQ(CountMappings(), maps);
    EXPECT_LE(ResidentKiB(), rss + 4096);
    printf("rank %d after 200 cycles: fds %d (at 20: %d), mappings %d (%d), resident %ld KiB (%ld)\n", rank, CountFds(), fds,
           CountMappings(), maps, ResidentKiB(), rss);
  });
}

}  // namespace
