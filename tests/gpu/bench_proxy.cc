// SPDX-License-Identifier: MIT
// Microbenchmark (not a test): the proxy ring on a GPU. Kernels submit
// requests for a peer outside the LSA team; the host proxy takes them in
// ticket order and hands them to the rdma transport's provider: the
// copy-engine NIC (//transport/rdma/ce_nic), which this benchmark links and
// installs, or with MORI_BENCH_PROVIDER=verbs libibverbs and a real NIC.
//   mori_launch -n 2 bench_proxy
// Every rank is declared its own node (MORI_HOST_ID), so the peer is reached
// only through the ring. Rank 0 measures while rank 1 waits; each figure is
// the median and range over rounds. Prints one "RESULT {json}" per figure:
//   throughput  one block of `threads` threads, each submitting puts of
//               `bytes`, one quiet per launch: requests per second, GB/s
//   latency     one thread: put of `bytes` + signal set, then a quiet that
//               sees both complete: microseconds per put+signal
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mori/transport_rdma.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/support/world.h"
#include "transport/rdma/ce_nic/ce_nic.h"

namespace {

struct Stats {
  double median, min, max;
};

Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// "copy_engine" (the default) or "verbs": MORI_BENCH_PROVIDER, the
// benchmark's own choice (the library has no such variable).
const char *Executor() {
  const char *e = getenv("MORI_BENCH_PROVIDER");
  return e && !strcmp(e, "verbs") ? "verbs" : "copy_engine";
}

}  // namespace

int main() {
  int rank = atoi(getenv("MORI_RANK") ? getenv("MORI_RANK") : "0");
  int rounds = atoi(getenv("MORI_BENCH_ROUNDS") ? getenv("MORI_BENCH_ROUNDS") : "5");
  if (gpu_select_device(atoi(getenv("MORI_LOCAL_RANK") ? getenv("MORI_LOCAL_RANK") : "0")) < 0) {
    fprintf(stderr, "bench_proxy: no GPU: %s\n", gpu_last_error());
    return 1;
  }
  setenv("MORI_HOST_ID", ("node-" + std::to_string(rank)).c_str(), 1);
  if (!strcmp(Executor(), "copy_engine") && mori_ce_nic_install() != 0) {
    fprintf(stderr, "bench_proxy: %s\n", mori_last_error());
    return 1;
  }
  mori_test::World w(0, {&mori_transport_rdma_ops});
  if (!w.ok()) return 1;
  int size = mori_comm_size(w.comm), peer = rank ^ 1, gpus = gpu_device_count();
  if (peer >= size) {
    fprintf(stderr, "bench_proxy: needs an even number of ranks\n");
    return 1;
  }
  const int threads = 64, per_thread = 4;
  const uint64_t largest = 1 << 20, bytes_total = (uint64_t)threads * per_thread * largest + 4096;
  void *p = nullptr;
  mori_window_t *win = nullptr;
  if (mori_mem_alloc(bytes_total, nullptr, &p) || gpu_zero(p, bytes_total) || mori_window_create(w.comm, p, &win)) {
    fprintf(stderr, "bench_proxy: window: %s %s\n", mori_last_error(), gpu_last_error());
    return 1;
  }
  mori_window_dev_t view = mori_window_device_view(win);
  uint64_t signal = bytes_total - 8;
  int failures = 0;
  if (mori_bootstrap_barrier(w.bootstrap)) return 1;
  if (rank == 0) {
    for (uint64_t bytes : {8ull, 4096ull, 65536ull, 1ull << 20}) {
      std::vector<double> us;
      int iters = bytes >= (1u << 20) ? 3 : 10;
      for (int r = 0; r < rounds; r++) {
        int rc = 0;
        double t = gpu_bench_proxy_throughput(view, peer, bytes, threads, per_thread, iters, &rc);
        if (t < 0 || rc) {
          fprintf(stderr, "bench_proxy: throughput %llu B: rc %d %s\n", (unsigned long long)bytes, rc, gpu_last_error());
          failures++;
          break;
        }
        us.push_back(t);
      }
      if (us.empty()) continue;
      Stats s = Summarize(us);
      printf("RESULT {\"what\": \"proxy_throughput\", \"executor\": \"%s\", \"ranks\": %d, \"gpus\": %d, \"bytes\": %llu, "
             "\"requests_per_launch\": %d, \"us_per_request\": %.3f, \"us_min\": %.3f, \"us_max\": %.3f, "
             "\"requests_per_s\": %.0f, \"GBps\": %.3f}\n",
             Executor(), size, gpus, (unsigned long long)bytes, threads * per_thread, s.median, s.min, s.max, 1e6 / s.median,
             (double)bytes / s.median / 1e3);
    }
    for (uint64_t bytes : {8ull, 4096ull}) {
      std::vector<double> us;
      for (int r = 0; r < rounds; r++) {
        int rc = 0;
        double t = gpu_bench_proxy_latency(view, peer, bytes, signal, 50, 4, &rc);
        if (t < 0 || rc) {
          fprintf(stderr, "bench_proxy: latency %llu B: rc %d %s\n", (unsigned long long)bytes, rc, gpu_last_error());
          failures++;
          break;
        }
        us.push_back(t);
      }
      if (us.empty()) continue;
      Stats s = Summarize(us);
      printf("RESULT {\"what\": \"proxy_latency\", \"executor\": \"%s\", \"ranks\": %d, \"gpus\": %d, \"bytes\": %llu, "
             "\"us_per_put_signal\": %.3f, \"us_min\": %.3f, \"us_max\": %.3f}\n",
             Executor(), size, gpus, (unsigned long long)bytes, s.median, s.min, s.max);
    }
    fflush(stdout);
  }
  if (mori_bootstrap_barrier(w.bootstrap)) return 1;
  mori_window_destroy(win);
  mori_mem_free(p);
  return failures ? 1 : 0;
}
