// SPDX-License-Identifier: MIT
// Microbenchmark (not a test): the host-side bookkeeping of a heap window on
// the host platform, where no driver call costs anything: what mori itself
// spends on mori_mem_alloc + mori_window_create in steady state, and how
// many collective steps that takes. A profiler (perf) run over it shows
// where the time goes without a GPU.
//   mori_launch -n 2 bench_window_host [cycles]
// Prints one "RESULT {json}" line from rank 0: the slowest rank's time per
// cycle (median, p10, p90); destroy + free untimed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mori/heap.h"
#include "mori/profile.h"
#include "tests/support/profile_calls.h"
#include "tests/support/world.h"

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char **argv) {
  int cycles = argc > 1 ? atoi(argv[1]) : 20000;
  if (cycles < 10) cycles = 10;
  mori_test::World w;
  if (!w.ok()) return 1;
  int rank = mori_comm_rank(w.comm), size = mori_comm_size(w.comm);
  std::vector<double> times;
  times.reserve((size_t)cycles);
  uint64_t steps = 0;
  for (int i = 0; i < cycles; i++) {
    void *p = nullptr;
    mori_window_t *win = nullptr;
    mori_profile_reset();
    auto a = Clock::now();
    if (mori_mem_alloc(1 << 20, nullptr, &p) || mori_window_create(w.comm, p, &win)) {
      fprintf(stderr, "bench_window_host: rank %d, cycle %d: %s\n", rank, i, mori_last_error());
      return 1;
    }
    double us = std::chrono::duration<double, std::micro>(Clock::now() - a).count();
    steps = mori_test::ProfileCalls("collective_step");
    std::vector<double> all((size_t)size);
    mori_bootstrap_allgather(w.bootstrap, &us, all.data(), sizeof(us));
    times.push_back(*std::max_element(all.begin(), all.end()));
    mori_window_destroy(win);
    mori_mem_free(p);
  }
  times.erase(times.begin()); // the first window maps the chunk and the arena
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  if (rank == 0)
    printf("RESULT {\"what\": \"alloc_window_host\", \"ranks\": %d, \"cycles\": %zu, \"us\": %.2f, \"us_p10\": %.2f, "
           "\"us_p90\": %.2f, \"collective_steps\": %llu}\n",
           size, n, times[n / 2], times[n / 10], times[n * 9 / 10], (unsigned long long)steps);
  return 0;
}
