// SPDX-License-Identifier: MIT
// Microbenchmark (not a test): device barrier latency and put bandwidth
// between GPUs, flat-window and pointer-table addressing. Run with
//   mori_launch -n 2 bench_p2p
// Prints one "RESULT {json}" line per measurement from rank 0.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "mori/transport_sdma.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/support/world.h"

int main() {
  int rank = atoi(getenv("MORI_RANK") ? getenv("MORI_RANK") : "0");
  if (gpu_select_device(atoi(getenv("MORI_LOCAL_RANK") ? getenv("MORI_LOCAL_RANK") : "0")) < 0) {
    fprintf(stderr, "bench_p2p: no GPU: %s\n", gpu_last_error());
    return 1;
  }
  mori_test::World w(0, {&mori_transport_sdma_ops});
  if (!w.ok()) return 1;
  int size = mori_comm_size(w.comm);
  const uint64_t max_bytes = 256ull << 20;
  mori_mem_attr_t attr;
  mori_mem_attr_init(&attr);
  attr.signal_pad_size = 4 * size * 4;
  void *p = nullptr;
  mori_window_t *win = nullptr;
  if (mori_mem_alloc(max_bytes, &attr, &p) || mori_window_create(w.comm, p, &win)) {
    fprintf(stderr, "bench_p2p: %s\n", mori_last_error());
    return 1;
  }
  mori_window_dev_t view = mori_window_device_view(win);
  mori_bootstrap_barrier(w.bootstrap);
  for (int pad = 0; pad < 2; pad++) {
    double us = gpu_bench_barrier(view, 10000, pad);
    if (rank == 0)
      printf("RESULT {\"what\": \"lsa_barrier\", \"protocol\": \"%s\", \"ranks\": %d, \"us\": %.3f}\n",
             pad ? "torch pad CAS" : "epoch", size, us);
  }
  void *src = gpu_alloc(max_bytes);
  int peer = (rank + 1) % size;
  for (int both = 0; both < 3; both++) {  // 0: rank 0 only, 1: all ranks, 2: rank 0, 8 puts per launch
    for (int via_table = 0; via_table < 2; via_table++) {
      for (uint64_t bytes = 64 << 10; bytes <= max_bytes; bytes *= 4) {
        // The best of a few grid shapes (a block per 16-64 KiB).
        double t = -1;
        int blocks = 0, threads = 0;
        for (int th : {256, 512, 1024}) {
          if (th != 512 && bytes < (16u << 20)) continue;  // the thread sweep only where bandwidth is the question
          for (int b : {16, 64, 132, 264, 528, 1056}) {
            if ((uint64_t)b * 8192 > bytes && b != 16) continue;
            mori_bootstrap_barrier(w.bootstrap);
            double tb = -1;
            if (both == 1 || rank == 0) tb = gpu_bench_put(view, peer, src, bytes, b, th, via_table, 20, both == 2 ? 8 : 1);
            mori_bootstrap_barrier(w.bootstrap);
            if (t < 0 || (tb > 0 && tb < t)) {
              t = tb;
              blocks = b;
              threads = th;
            }
          }
        }
        if (rank == 0)
          printf("RESULT {\"what\": \"put_block\", \"directions\": \"%s\", \"addressing\": \"%s\", \"bytes\": %llu, "
                 "\"blocks\": %d, \"threads\": %d, \"us\": %.2f, \"GBps_per_direction\": %.1f}\n",
                 both == 1 ? "all ranks" : both == 2 ? "rank0->1, 8 puts per launch" : "rank0->1", via_table ? "table" : "flat", (unsigned long long)bytes, blocks, threads, t,
                 bytes / t / 1e3);
      }
    }
  }
  // Copy engines: one put of the whole window to the next rank, host-timed
  // around put + quiet (the anchor: 389 GB/s one direction, 1 GiB).
  for (int both = 0; both < 2; both++) {
    for (uint64_t bytes = 16ull << 20; bytes <= max_bytes; bytes *= 4) {
      double best = 1e30;
      for (int rep = 0; rep < 5; rep++) {
        mori_bootstrap_barrier(w.bootstrap);
        auto t0 = std::chrono::steady_clock::now();
        if (both || rank == 0) {
          mori_sdma_put(win, peer, 0, src, bytes);
          mori_sdma_quiet(w.comm);
        }
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        mori_bootstrap_barrier(w.bootstrap);
        if (us < best) best = us;
      }
      if (rank == 0)
        printf("RESULT {\"what\": \"sdma_put\", \"directions\": \"%s\", \"bytes\": %llu, \"us\": %.1f, "
               "\"GBps_per_direction\": %.1f}\n",
               both ? "all ranks" : "rank0->1", (unsigned long long)bytes, best, bytes / best / 1e3);
    }
  }
  gpu_free(src);
  mori_window_destroy(win);
  mori_mem_free(p);
  return 0;
}
