// Microbenchmark (not a test): device barrier latency and put bandwidth
// between GPUs, flat-window and pointer-table addressing. Run with
//   mori_launch -n 2 bench_p2p
// Prints one "RESULT {json}" line per measurement from rank 0.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tests/gpu/gpu_kernels.h"
#include "tests/support/world.h"

int main() {
  int rank = atoi(getenv("MORI_RANK") ? getenv("MORI_RANK") : "0");
  if (gpu_select_device(atoi(getenv("MORI_LOCAL_RANK") ? getenv("MORI_LOCAL_RANK") : "0")) < 0) {
    fprintf(stderr, "bench_p2p: no GPU: %s\n", gpu_last_error());
    return 1;
  }
  mori_test::World w;
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
  double us = gpu_bench_barrier(view, 10000);
  if (rank == 0) printf("RESULT {\"what\": \"lsa_barrier\", \"ranks\": %d, \"us\": %.3f}\n", size, us);
  void *src = gpu_alloc(max_bytes);
  int peer = (rank + 1) % size;
  for (int both = 0; both < 2; both++) {
    for (int via_table = 0; via_table < 2; via_table++) {
      for (uint64_t bytes = 64 << 10; bytes <= max_bytes; bytes *= 4) {
        int blocks = bytes >= (16 << 20) ? 132 * 2 : bytes >= (1 << 20) ? 64 : 16;
        mori_bootstrap_barrier(w.bootstrap);
        double t = -1;
        if (both || rank == 0) t = gpu_bench_put(view, peer, src, bytes, blocks, 512, via_table, 20);
        mori_bootstrap_barrier(w.bootstrap);
        if (rank == 0)
          printf("RESULT {\"what\": \"put_block\", \"directions\": \"%s\", \"addressing\": \"%s\", \"bytes\": %llu, "
                 "\"blocks\": %d, \"us\": %.2f, \"GBps_per_direction\": %.1f}\n",
                 both ? "all ranks" : "rank0->1", via_table ? "table" : "flat", (unsigned long long)bytes, blocks, t,
                 bytes / t / 1e3);
      }
    }
  }
  gpu_free(src);
  mori_window_destroy(win);
  mori_mem_free(p);
  return 0;
}
