// SPDX-License-Identifier: MIT
// Microbenchmark (not a test): what allocation and window creation cost with
// the symmetric heap, and proof that none of it waits for the device.
//   mori_launch -n 2 bench_heap                     (MORI_SHMEM_MODE as set)
// Prints one "RESULT {json}" line per measurement from rank 0:
//   heap_init          creating the heap (static: the whole heap; vmm: the
//                      first chunk), local
//   carve              mori_mem_alloc + mori_mem_free of heap memory, local
//   alloc_window       mori_mem_alloc + mori_window_create (the node-local
//                      exchange included), first call and steady state;
//                      destroy + free untimed. The window's device tables
//                      are copied at first device use: "with_view_us" adds
//                      the first mori_window_device_view, which copies them
//                      and waits for that copy (what a caller pays before
//                      its first kernel)
//   alloc_window_churn 20000 alloc + window + destroy + free cycles (rank 0's
//                      times): a long-running process's cost per window
//   growth             an allocation that maps a new vmm chunk, local
//   growth_window      an allocation that maps a new vmm chunk and its
//                      window (every peer maps the chunk): the slowest
//                      rank's time, and where rank 0's went (mori/profile.h)
//   no_device_stall    alloc + window + device view + destroy + free while a kernel spins
//                      on the default stream: whether the kernel was still
//                      running when the calls returned
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mori/heap.h"
#include "mori/profile.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/support/world.h"

namespace {

using Clock = std::chrono::steady_clock;

double Us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

const char *ModeName(int mode) { return mode == MORI_HEAP_STATIC ? "static" : mode == MORI_HEAP_VMM ? "vmm" : "isolation"; }

struct Stats {
  double median, min, max;
};

Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// {"mem_map": [calls, ms], ...}: where the time since the last reset went.
std::string Breakdown() {
  mori_profile_entry_t e[MORI_PROFILE_KINDS];
  int n = mori_profile_read(e, MORI_PROFILE_KINDS);
  std::string out = "{";
  for (int i = 0; i < n; i++) {
    char item[160];
    snprintf(item, sizeof(item), "%s\"%s\": [%llu, %.4f]", i ? ", " : "", e[i].name, (unsigned long long)e[i].calls,
             e[i].total_ns / 1e6);
    out += item;
  }
  return out + "}";
}

bool Fail(const char *what) {
  fprintf(stderr, "bench_heap: %s: %s\n", what, mori_last_error());
  return false;
}

// alloc + window_create, timed on every rank between two barriers; rank 0
// reports the slowest rank's time per repetition.
bool AllocWindow(mori_test::World &w, size_t bytes, int reps, int rank, int size, const char *mode) {
  std::vector<double> times, with_view;
  double first = 0;
  std::string where;
  for (int i = 0; i < reps; i++) {
    mori_bootstrap_barrier(w.bootstrap);
    mori_profile_reset();
    auto t0 = Clock::now();
    void *p = nullptr;
    mori_window_t *win = nullptr;
    if (mori_mem_alloc(bytes, nullptr, &p)) return Fail("alloc");
    if (mori_window_create(w.comm, p, &win)) return Fail("window_create");
    auto t1 = Clock::now();
    mori_window_dev_t view = mori_window_device_view(win);
    double us[2] = {Us(t0, t1), Us(t0, Clock::now())};
    if (!view.ptrs) return Fail("device view");
    if (i == reps - 1) where = Breakdown();
    std::vector<double> all(2 * size);
    mori_bootstrap_allgather(w.bootstrap, us, all.data(), sizeof(us));
    double slowest = 0, slowest_with_view = 0;
    for (int r = 0; r < size; r++) {
      slowest = std::max(slowest, all[2 * r]);
      slowest_with_view = std::max(slowest_with_view, all[2 * r + 1]);
    }
    if (i == 0) first = slowest;
    else {
      times.push_back(slowest);
      with_view.push_back(slowest_with_view);
    }
    mori_window_destroy(win);
    mori_mem_free(p);
  }
  Stats s = Summarize(times), v = Summarize(with_view);
  mori_heap_stats_t st;
  mori_heap_stats(-1, &st);
  if (rank == 0)
    printf("RESULT {\"what\": \"alloc_window\", \"mode\": \"%s\", \"ranks\": %d, \"bytes\": %zu, \"first_us\": %.1f, "
           "\"us\": %.1f, \"us_min\": %.1f, \"us_max\": %.1f, \"with_view_us\": %.1f, \"with_view_us_min\": %.1f, "
           "\"reps\": %d, \"reclaims\": %llu, \"chunks\": %d, \"last_rank0_ms_by_kind\": %s}\n",
           mode, size, bytes, first, s.median, s.min, s.max, v.median, v.min, reps - 1, (unsigned long long)st.reclaims,
           st.chunks, where.c_str());
  return true;
}

}  // namespace

int main() {
  int rank = atoi(getenv("MORI_RANK") ? getenv("MORI_RANK") : "0");
  if (gpu_select_device(atoi(getenv("MORI_LOCAL_RANK") ? getenv("MORI_LOCAL_RANK") : "0")) < 0) {
    fprintf(stderr, "bench_heap: no GPU: %s\n", gpu_last_error());
    return 1;
  }
  mori_test::World w;
  if (!w.ok()) return 1;
  int size = mori_comm_size(w.comm);
  mori_heap_stats_t st;
  mori_heap_stats(-1, &st);
  const char *mode = ModeName(st.mode);

  auto t0 = Clock::now();
  if (mori_heap_init(-1)) return Fail("heap_init"), 1;
  double init_us = Us(t0, Clock::now());
  mori_heap_stats(-1, &st);
  if (rank == 0)
    printf("RESULT {\"what\": \"heap_init\", \"mode\": \"%s\", \"mapped_bytes\": %zu, \"ms\": %.3f}\n", mode, st.mapped,
           init_us / 1e3);

  // Local carve + free (heap modes only: isolation maps every time).
  if (st.mode != MORI_HEAP_ISOLATION) {
    std::vector<double> times;
    for (int i = 0; i < 2000; i++) {
      void *p = nullptr;
      auto a = Clock::now();
      if (mori_mem_alloc(1 << 20, nullptr, &p)) return Fail("alloc"), 1;
      mori_mem_free(p);
      times.push_back(Us(a, Clock::now()));
    }
    Stats s = Summarize(times);
    mori_heap_stats(-1, &st);
    if (rank == 0)
      printf("RESULT {\"what\": \"carve\", \"mode\": \"%s\", \"bytes\": %d, \"us\": %.2f, \"us_min\": %.2f, \"us_max\": %.1f, "
             "\"reps\": 2000, \"reclaims\": %llu}\n",
             mode, 1 << 20, s.median, s.min, s.max, (unsigned long long)st.reclaims);
  }

  for (size_t bytes : {(size_t)1 << 20, (size_t)64 << 20, (size_t)1 << 30})
    if (!AllocWindow(w, bytes, bytes >= (1u << 30) ? 6 : 50, rank, size, mode)) return 1;

  // A long-running process: many windows made and dropped, so released
  // signal slots, carves and control blocks pile up between reclaims. The
  // cost per window must not grow with how many came before.
  if (st.mode != MORI_HEAP_ISOLATION) {
    const int cycles = 20000;
    std::vector<double> times;
    times.reserve(cycles);
    for (int i = 0; i < cycles; i++) {
      void *p = nullptr;
      mori_window_t *win = nullptr;
      auto a = Clock::now();
      if (mori_mem_alloc(1 << 20, nullptr, &p)) return Fail("alloc"), 1;
      if (mori_window_create(w.comm, p, &win)) return Fail("window_create"), 1;
      times.push_back(Us(a, Clock::now()));
      mori_window_destroy(win);
      mori_mem_free(p);
    }
    double last_tenth = 0;
    for (int i = cycles - cycles / 10; i < cycles; i++) last_tenth += times[i];
    last_tenth /= cycles / 10;
    Stats s = Summarize(times);
    std::sort(times.begin(), times.end());
    if (rank == 0)
      printf("RESULT {\"what\": \"alloc_window_churn\", \"mode\": \"%s\", \"ranks\": %d, \"bytes\": %d, \"cycles\": %d, "
             "\"us\": %.1f, \"us_p99\": %.1f, \"us_max\": %.1f, \"last_tenth_mean_us\": %.1f}\n",
             mode, size, 1 << 20, cycles, s.median, times[cycles * 99 / 100], s.max, last_tenth);
  }

  // One growth step: an allocation the mapped chunks cannot hold.
  if (st.mode == MORI_HEAP_VMM) {
    std::vector<void *> hold;
    mori_heap_stats(-1, &st);
    int before = st.chunks;
    double grow_us = 0;
    for (int i = 0; i < 64 && grow_us == 0; i++) {
      void *p = nullptr;
      auto a = Clock::now();
      if (mori_mem_alloc(st.chunk_size / 2, nullptr, &p)) return Fail("alloc"), 1;
      double us = Us(a, Clock::now());
      hold.push_back(p);
      mori_heap_stats_t now;
      mori_heap_stats(-1, &now);
      if (now.chunks > before) grow_us = us;
    }
    if (rank == 0)
      printf("RESULT {\"what\": \"growth\", \"mode\": \"%s\", \"chunk_bytes\": %zu, \"ms\": %.3f}\n", mode, st.chunk_size,
             grow_us / 1e3);
    for (void *p : hold) mori_mem_free(p);
  }

  // Growth seen by the peers too: the allocation that needs a new chunk
  // and its window, which maps that chunk on every rank of the comm.
  if (st.mode == MORI_HEAP_VMM) {
    std::vector<void *> hold;
    std::vector<mori_window_t *> wins;
    mori_heap_stats(-1, &st);
    int before = st.chunks;
    double us = 0;
    std::string where;
    for (int i = 0; i < 64 && us == 0; i++) {
      mori_bootstrap_barrier(w.bootstrap);
      mori_profile_reset();
      void *p = nullptr;
      mori_window_t *win = nullptr;
      auto a = Clock::now();
      if (mori_mem_alloc(st.chunk_size / 2, nullptr, &p)) return Fail("alloc"), 1;
      if (mori_window_create(w.comm, p, &win)) return Fail("window_create"), 1;
      double mine = Us(a, Clock::now());
      hold.push_back(p);
      wins.push_back(win);
      mori_heap_stats_t now;
      mori_heap_stats(-1, &now);
      int grew = now.chunks > before, any = 0;
      std::vector<int> every(size);
      mori_bootstrap_allgather(w.bootstrap, &grew, every.data(), sizeof(int));
      for (int g : every) any = any || g;
      std::vector<double> all(size);
      mori_bootstrap_allgather(w.bootstrap, &mine, all.data(), sizeof(double));
      if (any) {
        us = *std::max_element(all.begin(), all.end());
        where = Breakdown();
      }
    }
    if (rank == 0)
      printf("RESULT {\"what\": \"growth_window\", \"mode\": \"%s\", \"ranks\": %d, \"chunk_bytes\": %zu, \"ms\": %.3f, "
             "\"rank0_ms_by_kind\": %s}\n",
             mode, size, st.chunk_size, us / 1e3, where.c_str());
    for (mori_window_t *win : wins) mori_window_destroy(win);
    for (void *p : hold) mori_mem_free(p);
  }

  // No device stall: the calls return while a kernel still runs on the
  // default stream (a context synchronisation would have waited for it).
  {
    void *warm = nullptr;
    mori_window_t *ww = nullptr;
    mori_mem_alloc(1 << 20, nullptr, &warm);
    mori_window_create(w.comm, warm, &ww);  // arenas and chunk mappings exist
    mori_bootstrap_barrier(w.bootstrap);
    const uint64_t spin_ns = 300000000ull;
    gpu_spin_start(spin_ns);
    auto a = Clock::now();
    int reps = 20;
    for (int i = 0; i < reps; i++) {
      void *p = nullptr;
      mori_window_t *win = nullptr;
      if (mori_mem_alloc(4 << 20, nullptr, &p) || mori_window_create(w.comm, p, &win)) return Fail("alloc/window"), 1;
      if (!mori_window_device_view(win).ptrs) return Fail("device view"), 1; /* waits for the tables' copy alone */
      mori_window_destroy(win);
      mori_mem_free(p);
    }
    double us = Us(a, Clock::now());
    int running = gpu_spin_running();
    int all_running = running;
    std::vector<int> every(size);
    mori_bootstrap_allgather(w.bootstrap, &running, every.data(), sizeof(int));
    for (int r : every) all_running = all_running && r == 1;
    if (rank == 0)
      printf("RESULT {\"what\": \"no_device_stall\", \"mode\": \"%s\", \"ranks\": %d, \"cycles\": %d, \"us_per_cycle\": %.1f, "
             "\"spin_ms\": %.0f, \"kernel_still_running_on_every_rank\": %s}\n",
             mode, size, reps, us / reps, spin_ns / 1e6, all_running ? "true" : "false");
    gpu_synchronize();
    mori_window_destroy(ww);
    mori_mem_free(warm);
  }
  mori_bootstrap_barrier(w.bootstrap);
  return 0;
}
