// SPDX-License-Identifier: MIT
// Microbenchmark (not a test): GPU-initiated posting's device-side cost on
// a GPU, beside the proxy ring's. Two ranks, each declared its own node
// (MORI_HOST_ID); the software ConnectX over the copy-engine NIC
// (//transport/rdma/swcx, //transport/rdma/ce_nic) reads the WQEs the
// kernel writes. Rank 0 measures while rank 1 waits:
//   mori_launch -n 2 bench_gda
// One "RESULT {json}" line per figure (median and range over rounds):
//   gda_put        one thread: claim + WQE + doorbell per put, ns
//   gda_put_warp   one warp, a batch of warp-size puts per doorbell: ns per put
//   proxy_submit   one thread: a put handed to the proxy ring, ns
//   gda_put_stages one thread, each step of a put timed apart (reserve, WQE,
//                  record, doorbell, after, rung), the library's doorbell
//                  ("release") beside the earlier fenced one ("fenced")
// each with the quiet that followed (completion of everything posted).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mori/transport_rdma.h"
#include "tests/gpu/gda_kernels.h"
#include "tests/support/world.h"
#include "transport/rdma/ce_nic/ce_nic.h"
#include "transport/rdma/swcx/swcx.h"

namespace {

struct Stats {
  double median, min, max;
};

Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

}  // namespace

int main() {
  int rank = atoi(getenv("MORI_RANK") ? getenv("MORI_RANK") : "0");
  int rounds = atoi(getenv("MORI_BENCH_ROUNDS") ? getenv("MORI_BENCH_ROUNDS") : "5");
  if (gda_select_device(atoi(getenv("MORI_LOCAL_RANK") ? getenv("MORI_LOCAL_RANK") : "0")) < 0) return 1;
  setenv("MORI_HOST_ID", ("node-" + std::to_string(rank)).c_str(), 1);
  setenv("MORI_RDMA_GDA", "on", 1);
  // Deep enough that no launch below waits for room (the cost of posting,
  // not of the NIC's progress).
  setenv("MORI_RDMA_GDA_DEPTH", "4096", 1);
  if (mori_swcx_install(mori_ce_nic_provider()) != 0) {
    fprintf(stderr, "bench_gda: %s\n", mori_last_error());
    return 1;
  }
  mori_test::World w(0, {&mori_transport_rdma_ops});
  if (!w.ok()) return 1;
  int enabled = 0;
  char why[256];
  mori_rdma_gda_status(w.comm, &enabled, why, sizeof(why));
  if (!enabled) {
    fprintf(stderr, "bench_gda: GPU posting was not chosen: %s\n", why);
    return 1;
  }
  int size = mori_comm_size(w.comm), peer = rank ^ 1;
  if (peer >= size) {
    fprintf(stderr, "bench_gda: needs an even number of ranks\n");
    return 1;
  }
  const uint64_t bytes_total = 1 << 20;
  void *p = nullptr;
  mori_window_t *win = nullptr;
  if (mori_mem_alloc(bytes_total, nullptr, &p) || mori_window_create(w.comm, p, &win)) {
    fprintf(stderr, "bench_gda: window: %s\n", mori_last_error());
    return 1;
  }
  mori_window_dev_t view = mori_window_device_view(win);
  int failures = 0;
  if (mori_bootstrap_barrier(w.bootstrap)) return 1;
  if (rank == 0) {
    struct Case {
      const char *name;
      int (*run)(mori_window_dev_t, int, uint64_t, int, gda_bench_result_t *);
      int iters;
    } cases[] = {{"gda_put", gda_bench_put, 1000}, {"gda_put_warp", gda_bench_put_warp, 100},
                 {"gda_put_warp_pieces", gda_bench_put_warp_pieces, 100},
                 {"gda_put_warp_runs", gda_bench_put_warp_runs, 100}, {"proxy_submit", gda_bench_proxy_submit, 500}};
    for (const Case &c : cases)
      for (uint64_t bytes : {8ull, 4096ull}) {
        std::vector<double> post, quiet;
        for (int r = 0; r < rounds + 1; r++) {
          gda_bench_result_t out;
          if (c.run(view, peer, bytes, c.iters, &out) != 0 || out.device_rc != 0) {
            fprintf(stderr, "bench_gda: %s %llu bytes: device rc %d\n", c.name, (unsigned long long)bytes, out.device_rc);
            failures++;
            break;
          }
          if (r == 0) continue;  // warm-up
          post.push_back(out.post_ns);
          quiet.push_back(out.quiet_ns);
        }
        if (post.empty()) continue;
        Stats s = Summarize(post), q = Summarize(quiet);
        printf("RESULT {\"bench\": \"gda\", \"case\": \"%s\", \"bytes\": %llu, \"iters\": %d, \"post_ns\": %.1f, "
               "\"post_ns_min\": %.1f, \"post_ns_max\": %.1f, \"quiet_us\": %.2f, \"provider\": \"swcx over copy_engine\"}\n",
               c.name, (unsigned long long)bytes, c.iters, s.median, s.min, s.max, q.median / 1000.0);
        fflush(stdout);
      }
    // Where one put's time goes: each step timed apart, in the library's
    // form and its two earlier ones (enum gda_stage_mode), interleaved.
    static const char *const kStage[GDA_STAGE_COUNT] = {"reserve", "wqe", "dbrec", "doorbell", "after", "rung"};
    static const char *const kMode[GDA_MODE_COUNT] = {"library", "system_scope", "fenced"};
    std::vector<double> steps[GDA_MODE_COUNT][GDA_STAGE_COUNT], post[GDA_MODE_COUNT];
    for (int r = 0; r < rounds + 1 && !failures; r++)
      for (int mode = 0; mode < GDA_MODE_COUNT; mode++) {
        gda_bench_result_t out;
        if (gda_bench_stages(view, peer, 8, 200, mode, &out) != 0 || out.device_rc != 0) {
          fprintf(stderr, "bench_gda: stages (%s): device rc %d\n", kMode[mode], out.device_rc);
          failures++;
          break;
        }
        if (r == 0) continue;  // warm-up
        post[mode].push_back(out.post_ns);
        for (int k = 0; k < GDA_STAGE_COUNT; k++) steps[mode][k].push_back(out.stage_ns[k]);
      }
    for (int mode = 0; mode < GDA_MODE_COUNT && !post[mode].empty(); mode++) {
      Stats s = Summarize(post[mode]);
      printf("RESULT {\"bench\": \"gda\", \"case\": \"gda_put_stages\", \"ring\": \"%s\", \"bytes\": 8, \"iters\": 200, "
             "\"post_ns\": %.1f, \"post_ns_min\": %.1f, \"post_ns_max\": %.1f",
             kMode[mode], s.median, s.min, s.max);
      for (int k = 0; k < GDA_STAGE_COUNT; k++) printf(", \"%s_ns\": %.1f", kStage[k], Summarize(steps[mode][k]).median);
      printf(", \"provider\": \"swcx over copy_engine\"}\n");
      fflush(stdout);
    }
    // What the orderings cost by where the queue lives, and the claim's
    // forms: the floor each layout leaves a put (no NIC in the way).
    static const char *const kOrdering[GDA_ORDERING_COUNT] = {"host_queue_sys_sys", "dev_queue_sys_sys", "dev_queue_gpu_sys",
                                                              "dev_queue_gpu_gpu", "dev_queue_gpu_plain"};
    static const char *const kClaim[GDA_CLAIM_FORM_COUNT] = {"check_then_load", "loads_together", "fetch_add"};
    std::vector<double> ord[GDA_ORDERING_COUNT][5], claim[GDA_CLAIM_FORM_COUNT];
    for (int r = 0; r < rounds + 1 && !failures; r++) {
      for (int o = 0; o < GDA_ORDERING_COUNT; o++) {
        gda_bench_result_t out;
        if (gda_bench_ordering(o, 1000, &out) != 0) {
          fprintf(stderr, "bench_gda: ordering %s failed\n", kOrdering[o]);
          failures++;
          break;
        }
        if (r == 0) continue;
        ord[o][0].push_back(out.post_ns);
        for (int k = 0; k < 4; k++) ord[o][k + 1].push_back(out.stage_ns[k]);
      }
      for (int f = 0; f < GDA_CLAIM_FORM_COUNT; f++) {
        gda_bench_result_t out;
        if (gda_bench_claim(f, 1000, &out) != 0 || out.device_rc != 0) {
          fprintf(stderr, "bench_gda: claim %s failed\n", kClaim[f]);
          failures++;
          break;
        }
        if (r > 0) claim[f].push_back(out.post_ns);
      }
    }
    for (int o = 0; o < GDA_ORDERING_COUNT && !ord[o][0].empty(); o++) {
      Stats s = Summarize(ord[o][0]);
      printf("RESULT {\"bench\": \"gda\", \"case\": \"ordering\", \"layout\": \"%s\", \"iters\": 1000, \"round_ns\": %.1f, "
             "\"round_ns_min\": %.1f, \"round_ns_max\": %.1f, \"wqe_ns\": %.1f, \"dbrec_ns\": %.1f, \"doorbell_ns\": %.1f, "
             "\"rung_ns\": %.1f}\n",
             kOrdering[o], s.median, s.min, s.max, Summarize(ord[o][1]).median, Summarize(ord[o][2]).median,
             Summarize(ord[o][3]).median, Summarize(ord[o][4]).median);
    }
    for (int f = 0; f < GDA_CLAIM_FORM_COUNT && !claim[f].empty(); f++) {
      Stats s = Summarize(claim[f]);
      printf("RESULT {\"bench\": \"gda\", \"case\": \"claim\", \"form\": \"%s\", \"iters\": 1000, \"claim_ns\": %.1f, "
             "\"claim_ns_min\": %.1f, \"claim_ns_max\": %.1f}\n",
             kClaim[f], s.median, s.min, s.max);
    }
    fflush(stdout);
  }
  if (mori_bootstrap_barrier(w.bootstrap)) return 1;
  mori_window_destroy(win);
  mori_mem_free(p);
  return failures ? 1 : 0;
}
