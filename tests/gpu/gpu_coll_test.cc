// SPDX-License-Identifier: MIT
// The collectives on real GPUs, one process per GPU: thousands of calls
// back to back with no host synchronisation, a fresh input every iteration,
// every output checked on the device against a reference (all-to-all: every
// byte; all-reduce: bit for bit against fp32 accumulation in rank order),
// random delays on one rank, and the same loop captured in a graph and
// replayed. Tagged gpu + manual: run by tools/gpu.sh on a GPU machine.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mori/collectives.h"
#include "mori/mem.h"
#include "mori/window.h"
#include "tests/gpu/coll_kernels.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/support/world.h"

using mori_test::ExpectError;
using mori_test::World;

namespace {

int Ranks() {
  const char *s = getenv("MORI_TEST_RANKS");
  return s ? atoi(s) : 2;
}

int Iterations(int fallback) {
  const char *s = getenv("MORI_COLL_TEST_ITERS");
  return s ? atoi(s) : fallback;
}

struct Gpu {
  mori_coll_t *coll = nullptr;
  void *stream = nullptr;
  unsigned long long *bad = nullptr;
};

void OpenGpu(World &w, Gpu &g, size_t workspace, int check_calls = 0) {
  mori_coll_attr_t attr;
  mori_coll_attr_init(&attr);
  attr.workspace_bytes = workspace;
  attr.timeout_ms = 20000;
  attr.check_calls = check_calls;
  MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &g.coll));
  g.stream = coll_stream_new();
  g.bad = coll_counter_new();
  ASSERT_NE(g.stream, nullptr);
  ASSERT_NE(g.bad, nullptr);
}

void CloseGpu(Gpu &g) {
  coll_stream_sync(g.stream);
  coll_counter_free(g.bad);
  coll_stream_free(g.stream);
  MORI_EXPECT_OK(mori_coll_destroy(g.coll));
}

TEST(GpuCollectives, AllToAllBackToBackWithDelays) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error();
    World w;
    ASSERT_TRUE(w.ok());
    Gpu g;
    OpenGpu(w, g, 128 << 20);
    std::mt19937 rng(1234 + rank);
    for (uint64_t bytes : {(uint64_t)256 << 10, (uint64_t)4 << 20}) {
      void *in = gpu_alloc(bytes * size), *out = gpu_alloc(bytes * size);
      int iters = Iterations(10000);
      for (int it = 0; it < iters; it++) {
        ASSERT_EQ(coll_fill_a2a(in, bytes, rank, size, it, g.stream), 0);
        if (rank == 0 && rng() % 8 == 0) {
          ASSERT_EQ(coll_delay(rng() % 20000, g.stream), 0);
        }
        MORI_ASSERT_OK(mori_all_to_all(g.coll, in, out, bytes, g.stream));
        ASSERT_EQ(coll_check_a2a(out, bytes, rank, size, it, g.bad, g.stream), 0);
      }
      unsigned long long bad = coll_counter_read(g.bad, g.stream);
      MORI_EXPECT_OK(mori_coll_check(g.coll));
      printf("rank %d: all_to_all %llu KiB per rank x %d iterations: %llu mismatched words\n", rank,
             (unsigned long long)(bytes >> 10), iters, bad);
      EXPECT_EQ(bad, 0ull);
      gpu_free(in);
      gpu_free(out);
    }
    CloseGpu(g);
  });
}

// Into a symmetric output (a window): peers write straight into out while
// this rank's check kernel of the previous iteration may still read it,
// unless the call waits for this rank to start it. Rank 0 runs late at
// random, so a missing wait shows up as mismatches. Then the same loop
// captured in a graph and replayed.
TEST(GpuCollectives, AllToAllIntoAWindowBackToBackWithDelays) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error();
    World w;
    ASSERT_TRUE(w.ok());
    Gpu g;
    OpenGpu(w, g, 2 << 20);
    std::mt19937 rng(4321 + rank);
    const uint64_t max_bytes = 4 << 20;
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.device = mori_comm_device(w.comm);
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(max_bytes * size, &attr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    void *in = gpu_alloc(max_bytes * size);
    for (uint64_t bytes : {(uint64_t)64 << 10, (uint64_t)256 << 10, max_bytes}) {
      int iters = Iterations(10000);
      unsigned long long before = coll_counter_read(g.bad, g.stream);
      for (int it = 0; it < iters; it++) {
        ASSERT_EQ(coll_fill_a2a(in, bytes, rank, size, it, g.stream), 0);
        if (rank == 0 && rng() % 8 == 0) {
          ASSERT_EQ(coll_delay(rng() % 20000, g.stream), 0);
        }
        MORI_ASSERT_OK(mori_all_to_all_window(g.coll, in, win, 0, bytes, g.stream));
        ASSERT_EQ(coll_check_a2a(mem, bytes, rank, size, it, g.bad, g.stream), 0);
      }
      unsigned long long bad = coll_counter_read(g.bad, g.stream) - before;
      MORI_EXPECT_OK(mori_coll_check(g.coll));
      printf("rank %d: all_to_all_window %llu KiB per rank x %d iterations: %llu mismatched words\n", rank,
             (unsigned long long)(bytes >> 10), iters, bad);
      EXPECT_EQ(bad, 0ull);
    }
    const int per_graph = 20, replays = 50;
    const uint64_t bytes = 1 << 20;
    ASSERT_EQ(coll_capture_begin(g.stream), 0);
    for (int it = 0; it < per_graph; it++) {
      coll_fill_a2a(in, bytes, rank, size, it, g.stream);
      mori_all_to_all_window(g.coll, in, win, 0, bytes, g.stream);
      coll_check_a2a(mem, bytes, rank, size, it, g.bad, g.stream);
    }
    void *graph = nullptr;
    ASSERT_EQ(coll_capture_end(g.stream, &graph), 0);
    unsigned long long before = coll_counter_read(g.bad, g.stream);
    for (int r = 0; r < replays; r++) ASSERT_EQ(coll_graph_replay(graph, g.stream), 0);
    unsigned long long bad = coll_counter_read(g.bad, g.stream) - before;
    MORI_EXPECT_OK(mori_coll_check(g.coll));
    printf("rank %d: %d graph replays of %d all_to_all_window: %llu mismatches\n", rank, replays, per_graph, bad);
    EXPECT_EQ(bad, 0ull);
    coll_graph_free(graph);
    ASSERT_EQ(coll_stream_sync(g.stream), 0);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
    gpu_free(in);
    CloseGpu(g);
  });
}

TEST(GpuCollectives, AllReduceBothAlgorithmsBackToBackWithDelays) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error();
    World w;
    ASSERT_TRUE(w.ok());
    Gpu g;
    OpenGpu(w, g, 256 << 20);
    std::mt19937 rng(99 + rank);
    struct Case {
      uint64_t count;
      mori_dtype_t dtype;
      mori_redop_t op;
      int iters;
    } cases[] = {{8192, MORI_BFLOAT16, MORI_REDOP_SUM, Iterations(10000)},
                 {8 << 20, MORI_BFLOAT16, MORI_REDOP_SUM, Iterations(10000) / 5},
                 {1 << 20, MORI_FLOAT32, MORI_REDOP_AVG, Iterations(10000) / 10},
                 {1000, MORI_FLOAT16, MORI_REDOP_MAX, Iterations(10000) / 10}};
    for (const Case &c : cases) {
      uint64_t bytes = c.count * (c.dtype == MORI_FLOAT32 ? 4 : 2);
      void *in = gpu_alloc(bytes), *out = gpu_alloc(bytes);
      unsigned long long before = coll_counter_read(g.bad, g.stream);
      for (int it = 0; it < c.iters; it++) {
        ASSERT_EQ(coll_fill_values(in, c.count, c.dtype, rank, it, g.stream), 0);
        if (rank == 0 && rng() % 8 == 0) {
          ASSERT_EQ(coll_delay(rng() % 20000, g.stream), 0);
        }
        MORI_ASSERT_OK(mori_all_reduce(g.coll, in, out, c.count, c.dtype, c.op, g.stream));
        ASSERT_EQ(coll_check_reduce(out, c.count, c.dtype, c.op, size, it, g.bad, g.stream), 0);
      }
      unsigned long long bad = coll_counter_read(g.bad, g.stream) - before;
      MORI_EXPECT_OK(mori_coll_check(g.coll));
      printf("rank %d: all_reduce %llu elements of dtype %d op %d x %d iterations: %llu mismatched elements\n", rank,
             (unsigned long long)c.count, (int)c.dtype, (int)c.op, c.iters, bad);
      EXPECT_EQ(bad, 0ull);
      gpu_free(in);
      gpu_free(out);
    }
    // In place (in == out) with each algorithm forced, 768 KiB of float32
    // (one shot's default range at two members): one shot's reduce of a
    // slice could overwrite the input before this rank's own push of it
    // ran in another block, and a peer then added this rank's sum.
    for (const char *algo : {"oneshot", "rsag", "ll"}) {
      setenv("MORI_ALLREDUCE_ALGO", algo, 1);
      uint64_t count = 196608;
      void *buf = gpu_alloc(count * 4);
      unsigned long long before = coll_counter_read(g.bad, g.stream);
      int iters = Iterations(10000) / 10;
      for (int it = 0; it < iters; it++) {
        ASSERT_EQ(coll_fill_values(buf, count, MORI_FLOAT32, rank, it, g.stream), 0);
        MORI_ASSERT_OK(mori_all_reduce(g.coll, buf, buf, count, MORI_FLOAT32, MORI_REDOP_SUM, g.stream));
        ASSERT_EQ(coll_check_reduce(buf, count, MORI_FLOAT32, MORI_REDOP_SUM, size, it, g.bad, g.stream), 0);
      }
      unsigned long long bad = coll_counter_read(g.bad, g.stream) - before;
      MORI_EXPECT_OK(mori_coll_check(g.coll));
      printf("rank %d: all_reduce in place (%s) %llu float32 x %d iterations: %llu mismatched elements\n", rank, algo,
             (unsigned long long)count, iters, bad);
      EXPECT_EQ(bad, 0ull) << algo;
      gpu_free(buf);
    }
    unsetenv("MORI_ALLREDUCE_ALGO");
    CloseGpu(g);
  });
}

TEST(GpuCollectives, CapturedInAGraphAndReplayed) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error();
    World w;
    ASSERT_TRUE(w.ok());
    Gpu g;
    OpenGpu(w, g, 128 << 20);
    const uint64_t bytes = 1 << 20, count = 8192;
    void *in = gpu_alloc(bytes * size), *out = gpu_alloc(bytes * size);
    void *rin = gpu_alloc(count * 2), *rout = gpu_alloc(count * 2);
    // Warm-up outside the capture (nothing is created inside it).
    MORI_ASSERT_OK(mori_all_to_all(g.coll, in, out, bytes, g.stream));
    ASSERT_EQ(coll_stream_sync(g.stream), 0);
    const int per_graph = 20, replays = 50;
    ASSERT_EQ(coll_capture_begin(g.stream), 0);
    for (int it = 0; it < per_graph; it++) {
      coll_fill_a2a(in, bytes, rank, size, it, g.stream);
      mori_all_to_all(g.coll, in, out, bytes, g.stream);
      coll_check_a2a(out, bytes, rank, size, it, g.bad, g.stream);
      coll_fill_values(rin, count, MORI_BFLOAT16, rank, it, g.stream);
      mori_all_reduce(g.coll, rin, rout, count, MORI_BFLOAT16, MORI_REDOP_SUM, g.stream);
      coll_check_reduce(rout, count, MORI_BFLOAT16, MORI_REDOP_SUM, size, it, g.bad, g.stream);
    }
    void *graph = nullptr;
    ASSERT_EQ(coll_capture_end(g.stream, &graph), 0);
    for (int r = 0; r < replays; r++) ASSERT_EQ(coll_graph_replay(graph, g.stream), 0);
    unsigned long long bad = coll_counter_read(g.bad, g.stream);
    MORI_EXPECT_OK(mori_coll_check(g.coll));
    printf("rank %d: %d graph replays of %d all_to_all + all_reduce: %llu mismatches\n", rank, replays, per_graph, bad);
    EXPECT_EQ(bad, 0ull);
    coll_graph_free(graph);
    gpu_free(in);
    gpu_free(out);
    gpu_free(rin);
    gpu_free(rout);
    CloseGpu(g);
  });
}

// A context that checks calls, on the GPU (every block of every kernel
// waits for every member's signature): matched calls back to back with
// delays, eager and replayed from a graph, are right; a call whose count
// differs on the last member ends every member's call at once with
// MORI_EMISMATCH naming both calls, moves nothing, and the next call is
// paired and right.
TEST(GpuCollectives, CheckedCallsNameAMismatchAndStayPaired) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error();
    World w;
    ASSERT_TRUE(w.ok());
    Gpu g;
    OpenGpu(w, g, 64 << 20, 1);
    std::mt19937 rng(777 + rank);
    const uint64_t bytes = 256 << 10, count = 1 << 20;
    void *in = gpu_alloc(bytes * size), *out = gpu_alloc(bytes * size);
    void *rin = gpu_alloc(count * 4), *rout = gpu_alloc(count * 4);
    int iters = Iterations(10000) / 5;
    for (int it = 0; it < iters; it++) {
      ASSERT_EQ(coll_fill_a2a(in, bytes, rank, size, it, g.stream), 0);
      if (rank == 0 && rng() % 8 == 0) {
        ASSERT_EQ(coll_delay(rng() % 20000, g.stream), 0);
      }
      MORI_ASSERT_OK(mori_all_to_all(g.coll, in, out, bytes, g.stream));
      ASSERT_EQ(coll_check_a2a(out, bytes, rank, size, it, g.bad, g.stream), 0);
      uint64_t n = it % 2 ? count : 4096;  // LL and reduce-scatter + all-gather
      ASSERT_EQ(coll_fill_values(rin, n, MORI_FLOAT32, rank, it, g.stream), 0);
      MORI_ASSERT_OK(mori_all_reduce(g.coll, rin, rout, n, MORI_FLOAT32, MORI_REDOP_SUM, g.stream));
      ASSERT_EQ(coll_check_reduce(rout, n, MORI_FLOAT32, MORI_REDOP_SUM, size, it, g.bad, g.stream), 0);
    }
    unsigned long long bad = coll_counter_read(g.bad, g.stream);
    MORI_EXPECT_OK(mori_coll_check(g.coll));
    printf("rank %d: %d checked all_to_all + all_reduce: %llu mismatches\n", rank, iters, bad);
    EXPECT_EQ(bad, 0ull);

    const int per_graph = 10, replays = 50;
    ASSERT_EQ(coll_capture_begin(g.stream), 0);
    for (int it = 0; it < per_graph; it++) {
      coll_fill_a2a(in, bytes, rank, size, it, g.stream);
      mori_all_to_all(g.coll, in, out, bytes, g.stream);
      coll_check_a2a(out, bytes, rank, size, it, g.bad, g.stream);
    }
    void *graph = nullptr;
    ASSERT_EQ(coll_capture_end(g.stream, &graph), 0);
    for (int r = 0; r < replays; r++) ASSERT_EQ(coll_graph_replay(graph, g.stream), 0);
    bad = coll_counter_read(g.bad, g.stream);
    MORI_EXPECT_OK(mori_coll_check(g.coll));
    printf("rank %d: %d graph replays of %d checked all_to_all: %llu mismatches\n", rank, replays, per_graph, bad);
    EXPECT_EQ(bad, 0ull);
    coll_graph_free(graph);

    // Calls with nothing to move take part in a checking context: matched,
    // they are fine.
    for (int k = 0; k < 10; k++) {
      MORI_ASSERT_OK(mori_all_reduce(g.coll, nullptr, nullptr, 0, MORI_FLOAT32, MORI_REDOP_SUM, g.stream));
      MORI_ASSERT_OK(mori_all_to_all(g.coll, nullptr, nullptr, 0, g.stream));
    }
    ASSERT_EQ(coll_stream_sync(g.stream), 0);
    MORI_EXPECT_OK(mori_coll_check(g.coll));

    // The last member's count differs: every member is told, and nothing
    // moves (needs two members; one has nobody to differ from).
    const bool odd = rank == size - 1;
    if (size < 2) {
      gpu_free(in);
      gpu_free(out);
      gpu_free(rin);
      gpu_free(rout);
      CloseGpu(g);
      return;
    }
    std::vector<float> before_call(1024), after_call(1024);
    ASSERT_EQ(coll_stream_sync(g.stream), 0);
    ASSERT_EQ(gpu_copy_out(before_call.data(), rout, 1024 * 4), 0) << gpu_last_error();
    auto start = std::chrono::steady_clock::now();
    MORI_ASSERT_OK(mori_all_reduce(g.coll, rin, rout, odd ? 512 : 1024, MORI_FLOAT32, MORI_REDOP_SUM, g.stream));
    ASSERT_EQ(coll_stream_sync(g.stream), 0);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ExpectError(mori_coll_check(g.coll), MORI_EMISMATCH,
                odd ? "rank 0 all_reduce of 1024 float32" : "all_reduce of 512 float32");
    printf("rank %d: a mismatched all_reduce ended after %.3f s (timeout 20 s): %s\n", rank, seconds, mori_last_error());
    EXPECT_LT(seconds, 5.0);
    ASSERT_EQ(gpu_copy_out(after_call.data(), rout, 1024 * 4), 0) << gpu_last_error();
    EXPECT_EQ(memcmp(before_call.data(), after_call.data(), 1024 * 4), 0) << "the mismatched call wrote its output";
    unsigned long long before = coll_counter_read(g.bad, g.stream);
    ASSERT_EQ(coll_fill_values(rin, 4096, MORI_FLOAT32, rank, 9, g.stream), 0);
    MORI_ASSERT_OK(mori_all_reduce(g.coll, rin, rout, 4096, MORI_FLOAT32, MORI_REDOP_SUM, g.stream));
    ASSERT_EQ(coll_check_reduce(rout, 4096, MORI_FLOAT32, MORI_REDOP_SUM, size, 9, g.bad, g.stream), 0);
    EXPECT_EQ(coll_counter_read(g.bad, g.stream) - before, 0ull) << "the call after the mismatch";
    MORI_EXPECT_OK(mori_coll_check(g.coll));
    gpu_free(in);
    gpu_free(out);
    gpu_free(rin);
    gpu_free(rout);
    CloseGpu(g);
  });
}

// The edge paths the device code reports, on the GPU (the host platform's
// coll_misuse_test runs the same code in CPU ranks): a NaN wins MAX and MIN
// from any rank; a negative all-to-all-v split is refused by the kernel
// (EINVAL on its member, ERANGE on every member expecting its rows, none of
// them written); and a member that never calls ends the others' call within
// about its timeout as a whole (each wait counts from the call's start);
// a call one member refuses ends the others' at once, naming it, and the
// next call is paired.
TEST(GpuCollectives, EdgeCasesAreReportedByTheKernels) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error();
    World w;
    ASSERT_TRUE(w.ok());
    Gpu g;
    OpenGpu(w, g, 16 << 20);
    // NaN in MAX / MIN, held by the first or the last rank.
    const uint64_t count = 4096;
    void *in = gpu_alloc(count * 4), *out = gpu_alloc(count * 4);
    for (int holder : {0, size - 1})
      for (mori_redop_t op : {MORI_REDOP_MAX, MORI_REDOP_MIN}) {
        std::vector<float> host(count, (float)rank);
        if (rank == holder) host[3] = host[count - 1] = NAN;
        ASSERT_EQ(gpu_copy_in(in, host.data(), count * 4), 0) << gpu_last_error();
        MORI_ASSERT_OK(mori_all_reduce(g.coll, in, out, count, MORI_FLOAT32, op, g.stream));
        ASSERT_EQ(coll_stream_sync(g.stream), 0);
        ASSERT_EQ(gpu_copy_out(host.data(), out, count * 4), 0) << gpu_last_error();
        EXPECT_TRUE(std::isnan(host[3]) && std::isnan(host[count - 1]))
            << "op " << op << ", NaN on rank " << holder << ": " << host[3] << " " << host[count - 1];
        EXPECT_EQ(host[0], op == MORI_REDOP_MAX ? (float)(size - 1) : 0.0f) << "op " << op;
      }
    MORI_EXPECT_OK(mori_coll_check(g.coll));
    gpu_free(in);
    gpu_free(out);

    // A negative split on the last rank.
    const size_t rows = 4 * (size_t)size, row_bytes = 64;
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(rows * row_bytes, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    std::vector<uint8_t> fill(rows * row_bytes, 0xee);
    ASSERT_EQ(gpu_copy_in(mem, fill.data(), fill.size()), 0) << gpu_last_error();
    void *rows_in = gpu_alloc(rows * row_bytes);
    std::vector<uint8_t> mine(rows * row_bytes, (uint8_t)rank);
    ASSERT_EQ(gpu_copy_in(rows_in, mine.data(), mine.size()), 0) << gpu_last_error();
    std::vector<int64_t> splits(size, 1);
    if (rank == size - 1) splits[0] = -1;
    int64_t *splits_dev = (int64_t *)gpu_alloc(size * sizeof(int64_t));
    int64_t *got_dev = (int64_t *)gpu_alloc(2 * size * sizeof(int64_t));
    ASSERT_EQ(gpu_copy_in(splits_dev, splits.data(), size * sizeof(int64_t)), 0) << gpu_last_error();
    ASSERT_NE(mori_all_to_all_v_workspace(g.coll, 1), 0u);
    MORI_ASSERT_OK(mori_all_to_all_v(g.coll, rows_in, splits_dev, win, 0, rows, row_bytes, got_dev, g.stream));
    ASSERT_EQ(coll_stream_sync(g.stream), 0);
    int rc = mori_coll_check(g.coll);
    if (rank == size - 1) {
      ExpectError(rc, MORI_EINVAL, "-1 (negative)");
    } else {  // told, and nothing of the spoiled member's rows written
      EXPECT_EQ(rc, MORI_ERANGE) << mori_err_name(rc) << ": " << mori_last_error();
      ASSERT_EQ(gpu_copy_out(fill.data(), mem, fill.size()), 0) << gpu_last_error();
      for (size_t b = (size_t)(size - 1) * row_bytes; b < rows * row_bytes; b++)
        ASSERT_EQ(fill[b], 0xee) << "byte " << b;
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    gpu_free(splits_dev);
    gpu_free(got_dev);
    gpu_free(rows_in);
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
    CloseGpu(g);

    // A call the last member refuses (its in and out half overlap): its
    // part takes the epoch and moves nothing, the others' call ends at once
    // naming it, and the next call is paired and right.
    if (size < 2) return;
    {
      Gpu r;
      OpenGpu(w, r, 16 << 20);  // a 20 s timeout: a refusal must not wait it out
      void *buf = gpu_alloc(8192 * 4);
      const uint64_t n = 1024;
      for (const char *algo : {"ll", "rsag", "oneshot"}) {
        setenv("MORI_ALLREDUCE_ALGO", algo, 1);
        char *out = (char *)buf + (rank == size - 1 ? 16 : 4 * n * 4);
        auto start = std::chrono::steady_clock::now();
        int rc = mori_all_reduce(r.coll, buf, out, n, MORI_FLOAT32, MORI_REDOP_SUM, r.stream);
        ASSERT_EQ(coll_stream_sync(r.stream), 0);
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (rank == size - 1) {
          ExpectError(rc, MORI_EINVAL, "overlap");
          MORI_EXPECT_OK(mori_coll_check(r.coll));
        } else {
          MORI_EXPECT_OK(rc);
          ExpectError(mori_coll_check(r.coll), MORI_EINVAL, "rank " + std::to_string(size - 1) + " refused its part");
          printf("rank %d: %s all_reduce refused by rank %d ended after %.3f s (timeout 20 s)\n", rank, algo, size - 1,
                 seconds);
          EXPECT_LT(seconds, 5.0) << algo;
        }
        unsetenv("MORI_ALLREDUCE_ALGO");
        void *in = gpu_alloc(n * 4), *sum = gpu_alloc(n * 4);
        unsigned long long before = coll_counter_read(r.bad, r.stream);
        ASSERT_EQ(coll_fill_values(in, n, MORI_FLOAT32, rank, 7, r.stream), 0);
        MORI_ASSERT_OK(mori_all_reduce(r.coll, in, sum, n, MORI_FLOAT32, MORI_REDOP_SUM, r.stream));
        ASSERT_EQ(coll_check_reduce(sum, n, MORI_FLOAT32, MORI_REDOP_SUM, size, 7, r.bad, r.stream), 0);
        EXPECT_EQ(coll_counter_read(r.bad, r.stream) - before, 0ull) << algo << ": the call after the refusal";
        MORI_EXPECT_OK(mori_coll_check(r.coll));
        gpu_free(in);
        gpu_free(sum);
      }
      gpu_free(buf);
      CloseGpu(r);
    }

    // A member that never calls: a context with a 200 ms timeout.
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.workspace_bytes = 32 << 20;
    attr.timeout_ms = 200;
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    void *stream = coll_stream_new();
    void *big = gpu_alloc(1 << 20);  // 1 MiB: both algorithms fit the 32 MiB workspace
    if (rank != size - 1) {
      for (const char *algo : {"ll", "rsag"}) {
        setenv("MORI_ALLREDUCE_ALGO", algo, 1);
        auto start = std::chrono::steady_clock::now();
        MORI_ASSERT_OK(mori_all_reduce(coll, big, big, 1 << 18, MORI_FLOAT32, MORI_REDOP_SUM, stream));
        ASSERT_EQ(coll_stream_sync(stream), 0);
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ExpectError(mori_coll_check(coll), MORI_EDEVICE_TIMEOUT, "");
        printf("rank %d: %s all_reduce without the last member ended after %.3f s (timeout 0.2 s)\n", rank, algo,
               seconds);
        EXPECT_LT(seconds, 2.0) << algo << ": a 200 ms timeout took " << seconds << " s";
      }
      unsetenv("MORI_ALLREDUCE_ALGO");
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    gpu_free(big);
    coll_stream_free(stream);
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

}  // namespace
