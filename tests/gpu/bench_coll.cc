// SPDX-License-Identifier: MIT
// Microbenchmark (not a test): the fused collectives' GPU time under graph
// replay across their tuning knobs (algorithm, slice size, block count,
// threads per block), and the launch floor, so that defaults are chosen by
// measurement. Run with
//   mori_launch -n <gpus> bench_coll
// MORI_BENCH_COLL_QUICK=1: the defaults only (and all-reduce's two large-
// message algorithms), one grid: seconds instead of minutes.
// MORI_BENCH_COLL_GRIDS=32,0: the grids swept (default 32,132,0).
// Prints one "RESULT {json}" line per measurement from rank 0.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mori/collectives.h"
#include "mori/mem.h"
#include "tests/gpu/coll_kernels.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/support/world.h"

namespace {

struct Knobs {
  const char *algo_var, *algo;
  uint64_t slice;  // 0: default
  int blocks;      // the context's grid (fixed when it is made; 0: every resident block)
  int threads;     // 0: default
  uint64_t ll_lines;
  int share = -1;  // MORI_COLL_BLOCK_SHARE: -1 default, 0 off, 1 on
};

void Set(const char *name, uint64_t value) {
  if (value) setenv(name, std::to_string(value).c_str(), 1);
  else unsetenv(name);
}

void Apply(const Knobs &k) {
  unsetenv("MORI_A2A_ALGO");
  unsetenv("MORI_ALLREDUCE_ALGO");
  if (k.algo_var) setenv(k.algo_var, k.algo, 1);
  Set("MORI_COLL_SLICE_BYTES", k.slice);
  Set("MORI_COLL_THREADS", (uint64_t)k.threads);
  Set("MORI_ALLREDUCE_LL_LINES", k.ll_lines);
  if (k.share >= 0) setenv("MORI_COLL_BLOCK_SHARE", k.share ? "1" : "0", 1);
  else unsetenv("MORI_COLL_BLOCK_SHARE");
}

// Microseconds per call: `calls` captured in a graph, replayed `replays` times.
template <typename Call>
double GraphTime(void *stream, Call call, int calls = 20, int replays = 10) {
  for (int i = 0; i < 3; i++) call();
  coll_stream_sync(stream);
  if (coll_capture_begin(stream) != 0) return -1;
  for (int i = 0; i < calls; i++) call();
  void *graph = nullptr;
  if (coll_capture_end(stream, &graph) != 0) return -1;
  coll_graph_replay(graph, stream);
  coll_stream_sync(stream);
  double us = coll_time_replays(graph, stream, replays) / (double)calls;
  coll_graph_free(graph);
  return us;
}

}  // namespace

int main() {
  int rank = atoi(getenv("MORI_RANK") ? getenv("MORI_RANK") : "0");
  if (gpu_select_device(atoi(getenv("MORI_LOCAL_RANK") ? getenv("MORI_LOCAL_RANK") : "0")) < 0) {
    fprintf(stderr, "bench_coll: no GPU: %s\n", gpu_last_error());
    return 1;
  }
  mori_test::World w;
  if (!w.ok()) return 1;
  void *stream = coll_stream_new();
  const uint64_t max_bytes = 64ull << 20;
  int n = 0, check = 0, checking = 0;
  void *in = gpu_alloc(max_bytes), *out = gpu_alloc(max_bytes);
  // A symmetric output for the direct all-to-all.
  mori_mem_attr_t mattr;
  mori_mem_attr_init(&mattr);
  mattr.device = mori_comm_device(w.comm);
  void *sym = nullptr;
  mori_window_t *sym_win = nullptr;
  if (mori_mem_alloc(max_bytes, &mattr, &sym) || mori_window_create(w.comm, sym, &sym_win)) {
    fprintf(stderr, "bench_coll: symmetric output: %s\n", mori_last_error());
    return 1;
  }
  auto report = [&](const char *what, uint64_t bytes, const Knobs &k, double us) {
    if (rank == 0)
      printf("RESULT {\"what\": \"%s\", \"ranks\": %d, \"bytes\": %llu, \"algo\": \"%s\", \"slice\": %llu, \"grid\": %d, "
             "\"threads\": %d, \"ll_lines\": %llu, \"share\": %d, \"check_calls\": %d, \"us\": %.3f}\n",
             what, n, (unsigned long long)bytes, k.algo ? k.algo : "auto", (unsigned long long)k.slice, k.blocks,
             k.threads, (unsigned long long)k.ll_lines, k.share, checking, us);
    fflush(stdout);
  };
  {
    Knobs none = {nullptr, nullptr, 0, 0, 0, 0};
    mori_bootstrap_barrier(w.bootstrap);
    report("floor", 0, none, GraphTime(stream, [&] { coll_delay(0, stream); }));
  }
  const bool quick = getenv("MORI_BENCH_COLL_QUICK") && atoi(getenv("MORI_BENCH_COLL_QUICK"));
  // One context per grid: the grid is fixed when a context is made.
  // MORI_BENCH_COLL_GRIDS: the grids to sweep (0: every resident block).
  std::vector<int> grids = {32, 132, 0};
  if (const char *g = getenv("MORI_BENCH_COLL_GRIDS")) {
    grids.clear();
    std::string list = g;
    for (size_t at = 0; at <= list.size();) {
      size_t comma = list.find(',', at);
      if (comma == std::string::npos) comma = list.size();
      if (comma > at) grids.push_back(atoi(list.substr(at, comma - at).c_str()));
      at = comma + 1;
    }
  }
  // MORI_BENCH_COLL_CHECK=1: every context twice, unchecked then checked
  // (mori_coll_attr_t.check_calls), so the check's cost is measured beside
  // the call it is added to, in the same run.
  std::vector<int> checks = {0};
  if (getenv("MORI_BENCH_COLL_CHECK") && atoi(getenv("MORI_BENCH_COLL_CHECK"))) checks = {0, 1};
  for (size_t pass = 0; pass < grids.size() * checks.size(); pass++) {
    int grid = grids[pass / checks.size()];
    checking = checks[pass % checks.size()];
    if (quick && grid) continue;
    if (grid) setenv("MORI_COLL_MAX_BLOCKS", std::to_string(grid).c_str(), 1);
    else unsetenv("MORI_COLL_MAX_BLOCKS");
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.workspace_bytes = 512ull << 20;  // a 64 MiB all-reduce: 4 x its 128 MiB of staging (raw and LL parts, two halves)
    attr.check_calls = checking;
    mori_coll_t *coll = nullptr;
    if (mori_coll_create(w.comm, &attr, &coll)) {
      fprintf(stderr, "bench_coll: %s\n", mori_last_error());
      return 1;
    }
    n = mori_coll_team(coll).size;
    coll_fill_a2a(in, max_bytes / n, rank, n, 1, stream);
    std::vector<Knobs> a2a_knobs = {{nullptr, nullptr, 0, grid, 0, 0}};
    if (!quick) {
      for (uint64_t slice : {1u << 10, 2u << 10, 4u << 10, 8u << 10, 16u << 10})
        for (int threads : {256, 512}) a2a_knobs.push_back({"MORI_A2A_ALGO", "ll", slice, grid, threads, 0});
      for (uint64_t slice : {16u << 10, 32u << 10, 64u << 10, 128u << 10, 256u << 10})
        for (int threads : {128, 256, 512}) a2a_knobs.push_back({"MORI_A2A_ALGO", "slices", slice, grid, threads, 0});
      a2a_knobs.push_back({"MORI_A2A_ALGO", "slices", 0, grid, 0, 0, 1});
    }
    for (uint64_t bytes : {64ull << 10, 256ull << 10, 1ull << 20, 4ull << 20, 16ull << 20}) {
      for (const Knobs &k : a2a_knobs) {
        if (k.algo && std::string(k.algo) == "ll" && bytes > (1u << 20)) continue;
        Apply(k);
        mori_bootstrap_barrier(w.bootstrap);
        int rc = 0;
        double us = GraphTime(stream, [&] { rc |= mori_all_to_all(coll, in, out, bytes, stream); });
        if (rc) fprintf(stderr, "rank %d: all_to_all: %s\n", rank, mori_last_error());
        report("coll_a2a", bytes, k, rc ? -1 : us);
      }
    }
    // Direct into the symmetric output (the algorithm is implied by the call).
    std::vector<Knobs> direct_knobs = {{nullptr, nullptr, 0, grid, 0, 0}};
    if (!quick) {
      for (uint64_t slice : {16u << 10, 64u << 10, 128u << 10, 256u << 10, 512u << 10, 2048u << 10})
        for (int threads : {128, 256, 512}) direct_knobs.push_back({nullptr, nullptr, slice, grid, threads, 0});
      direct_knobs.push_back({nullptr, nullptr, 0, grid, 0, 0, 1});
    }
    for (uint64_t bytes : {64ull << 10, 256ull << 10, 1ull << 20, 4ull << 20, 16ull << 20}) {
      if (bytes * n > max_bytes) continue;
      for (const Knobs &k : direct_knobs) {
        Apply(k);
        mori_bootstrap_barrier(w.bootstrap);
        int rc = 0;
        double us = GraphTime(stream, [&] { rc |= mori_all_to_all_window(coll, in, sym_win, 0, bytes, stream); });
        if (rc) fprintf(stderr, "rank %d: all_to_all_window: %s\n", rank, mori_last_error());
        report("coll_a2a_window", bytes, k, rc ? -1 : us);
      }
    }
    std::vector<Knobs> ar_knobs = {{nullptr, nullptr, 0, grid, 0, 0}};
    for (uint64_t lines : {16u, 32u, 64u, 128u, 256u}) ar_knobs.push_back({"MORI_ALLREDUCE_ALGO", "ll", 0, grid, 0, lines});
    for (const char *algo : {"oneshot", "rsag"}) {
      for (uint64_t slice : {16u << 10, 32u << 10, 64u << 10, 128u << 10, 256u << 10})
        for (int threads : {256, 512}) ar_knobs.push_back({"MORI_ALLREDUCE_ALGO", algo, slice, grid, threads, 0});
      ar_knobs.push_back({"MORI_ALLREDUCE_ALGO", algo, 0, grid, 0, 0, 1});
    }
    if (quick)
      ar_knobs = {{nullptr, nullptr, 0, grid, 0, 0}, {"MORI_ALLREDUCE_ALGO", "oneshot", 0, grid, 0, 0},
                  {"MORI_ALLREDUCE_ALGO", "rsag", 0, grid, 0, 0}};
    for (uint64_t bytes : {16ull << 10, 256ull << 10, 1ull << 20, 4ull << 20, 16ull << 20}) {
      for (const Knobs &k : ar_knobs) {
        if (k.algo && std::string(k.algo) == "ll" && bytes > (1u << 20)) continue;
        Apply(k);
        mori_bootstrap_barrier(w.bootstrap);
        int rc = 0;
        double us = GraphTime(stream, [&] {
          rc |= mori_all_reduce(coll, in, out, bytes / 2, MORI_BFLOAT16, MORI_REDOP_SUM, stream);
        });
        if (rc) fprintf(stderr, "rank %d: all_reduce: %s\n", rank, mori_last_error());
        report("coll_all_reduce", bytes, k, rc ? -1 : us);
      }
    }
    coll_stream_sync(stream);
    if (mori_coll_check(coll)) {
      fprintf(stderr, "rank %d: a kernel reported: %s\n", rank, mori_last_error());
      check = 1;
    }
    mori_coll_destroy(coll);
  }
  coll_stream_sync(stream);
  mori_bootstrap_barrier(w.bootstrap);
  mori_window_destroy(sym_win);
  mori_mem_free(sym);
  gpu_free(in);
  gpu_free(out);
  coll_stream_free(stream);
  return check ? 1 : 0;
}
