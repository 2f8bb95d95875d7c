// SPDX-License-Identifier: MIT
// Microbenchmark (not a test): MoE dispatch and combine GPU time against the
// device-to-device copy rate measured in the same run. Run with
//   mori_launch -n <ranks> bench_ep
// Defaults: the shape, 4096 tokens x 7168 bf16, top-8 of 32 experts
// (experts per rank = 32 / ranks). MORI_BENCH_EP_TOKENS, _HIDDEN, _TOPK,
// _EXPERTS, _ROUNDS (default 7), _ITERS (per round, default 20) change it.
// Each round times, apart: the copy (cudaMemcpyAsync D2D of the dispatch
// output's bytes), eager dispatch, eager combine, and dispatch + combine as
// one graph replay. Bytes of a kernel = what it reads + what it writes; the
// copy's rate counts its bytes twice the same way. Prints "RESULT {json}"
// per round and a summary (median, min, max) from rank 0.
// Each round also times a dispatch split into its send and receive kernels
// (dispatch_send_us, dispatch_recv_us), to show where its time goes.
// MORI_BENCH_EP_TUNE=1: sweeps blocks x warps per block for this shape and
// prints the best as a row of collectives/ep_launch_table.c.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "mori/ep.h"
#include "tests/gpu/coll_kernels.h"
#include "tests/gpu/ep_bench_kernels.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/support/world.h"

namespace {

uint32_t Env(const char *name, uint32_t fallback) {
  const char *v = getenv(name);
  return v && *v ? (uint32_t)atoi(v) : fallback;
}

struct Stats {
  double median, lo, hi;
};

Stats Summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// Milliseconds per call of `body` run `iters` times eagerly on the stream.
double Eager(void *stream, int iters, const std::function<void()> &body) {
  void *a = ep_bench_event_new(), *b = ep_bench_event_new();
  body();  // warm
  ep_bench_event_record(a, stream);
  for (int i = 0; i < iters; i++) body();
  ep_bench_event_record(b, stream);
  double ms = ep_bench_event_ms(a, b) / iters;
  ep_bench_event_free(a);
  ep_bench_event_free(b);
  return ms;
}

// Milliseconds per call of each half of `halves` (run in order, `iters`
// times), each half between its own pair of events: where a fused call's
// time goes between its send and its receive half.
std::vector<double> Halves(void *stream, int iters, const std::vector<std::function<void()>> &halves) {
  std::vector<void *> ev(halves.size() + 1);
  std::vector<double> ms(halves.size(), 0.0);
  for (auto &e : ev) e = ep_bench_event_new();
  for (auto &h : halves) h();  // warm
  for (int i = 0; i < iters; i++) {
    for (size_t k = 0; k < halves.size(); k++) {
      ep_bench_event_record(ev[k], stream);
      halves[k]();
    }
    ep_bench_event_record(ev[halves.size()], stream);
    for (size_t k = 0; k < halves.size(); k++) ms[k] += ep_bench_event_ms(ev[k], ev[k + 1]);
  }
  for (auto &e : ev) ep_bench_event_free(e);
  for (auto &m : ms) m /= iters;
  return ms;
}

}  // namespace

int main() {
  int rank = atoi(getenv("MORI_RANK") ? getenv("MORI_RANK") : "0");
  if (gpu_select_device(atoi(getenv("MORI_LOCAL_RANK") ? getenv("MORI_LOCAL_RANK") : "0")) < 0) {
    fprintf(stderr, "bench_ep: no GPU: %s\n", gpu_last_error());
    return 1;
  }
  mori_test::World w;
  if (!w.ok()) return 1;
  int n = mori_comm_size(w.comm);
  uint32_t T = Env("MORI_BENCH_EP_TOKENS", 4096), H = Env("MORI_BENCH_EP_HIDDEN", 7168), K = Env("MORI_BENCH_EP_TOPK", 8);
  uint32_t E = Env("MORI_BENCH_EP_EXPERTS", 32), rounds = Env("MORI_BENCH_EP_ROUNDS", 7), iters = Env("MORI_BENCH_EP_ITERS", 20);
  uint32_t per_rank = E / (uint32_t)n ? E / (uint32_t)n : 1;
  mori_ep_config_t c;
  mori_ep_config_init(&c);
  c.rank = rank;
  c.world_size = n;
  c.hidden_dim = H;
  c.max_num_inp_token_per_rank = T;
  c.num_experts_per_rank = per_rank;
  c.num_experts_per_token = K;
  c.max_token_type_size = 2;
  mori_ep_t *ep = nullptr;
  if (mori_ep_create(w.comm, &c, &ep)) {
    fprintf(stderr, "bench_ep: %s\n", mori_last_error());
    return 1;
  }
  mori_ep_buffers_t b;
  mori_ep_buffers(ep, &b);
  void *stream = coll_stream_new();
  // Inputs: bf16 values, uniform routing over distinct experts.
  std::mt19937 rng(1 + rank);
  std::vector<uint16_t> x((size_t)T * H);
  for (auto &v : x) v = (uint16_t)(0x3c00 + rng() % 256);
  std::vector<int32_t> idx((size_t)T * K);
  std::vector<float> wt((size_t)T * K, 1.0f / K);
  for (uint32_t t = 0; t < T; t++) {
    std::vector<int32_t> pool(per_rank * n);
    for (size_t i = 0; i < pool.size(); i++) pool[i] = (int32_t)i;
    std::shuffle(pool.begin(), pool.end(), rng);
    for (uint32_t j = 0; j < K; j++) idx[(size_t)t * K + j] = pool[j % pool.size()];
  }
  void *din = gpu_alloc(x.size() * 2), *dw = gpu_alloc(wt.size() * 4), *di = gpu_alloc(idx.size() * 4);
  gpu_copy_in(din, x.data(), x.size() * 2);
  gpu_copy_in(dw, wt.data(), wt.size() * 4);
  gpu_copy_in(di, idx.data(), idx.size() * 4);
  auto dispatch = [&](const mori_ep_launch_t *l) {
    mori_ep_dispatch(ep, din, (const float *)dw, nullptr, (const int32_t *)di, T, l, stream);
  };
  auto dispatch_send = [&] { mori_ep_dispatch_send(ep, din, (const float *)dw, nullptr, (const int32_t *)di, T, nullptr, stream); };
  auto dispatch_recv = [&] { mori_ep_dispatch_recv(ep, nullptr, stream); };
  auto combine = [&](const mori_ep_launch_t *l) {
    mori_ep_combine(ep, b.dispatch_tokens, MORI_EP_BFLOAT16, b.dispatch_weights, l, stream);
  };
  dispatch(nullptr);
  combine(nullptr);
  coll_stream_sync(stream);
  int32_t rows = 0;
  gpu_copy_out(&rows, b.recv_num_token, 4);
  if (mori_ep_check(ep)) {
    fprintf(stderr, "bench_ep: rank %d: %s\n", rank, mori_last_error());
    return 1;
  }
  // Bytes each kernel reads and writes (rows staged for peers included).
  uint64_t tb = (uint64_t)H * 2, sent = 0;
  for (uint32_t t = 0; t < T; t++) {
    bool away = false, mine = false;
    for (uint32_t j = 0; j < K; j++) (idx[(size_t)t * K + j] / (int)per_rank == rank ? mine : away) = true;
    sent += away;
  }
  uint64_t dispatch_bytes = 2 * sent * tb + 2 * (uint64_t)rows * tb;
  uint64_t combine_bytes = 2 * (uint64_t)rows * tb + (uint64_t)rows * tb + (uint64_t)T * tb;  // copies for peers, then sums
  if (n == 1) combine_bytes = (uint64_t)rows * tb + (uint64_t)T * tb;                         // read from the input in place
  uint64_t copy_bytes = (uint64_t)rows * tb;
  void *copy_dst = gpu_alloc(copy_bytes ? copy_bytes : 16);
  if (Env("MORI_BENCH_EP_TUNE", 0)) {
    double best = 1e30;
    uint32_t best_blocks = 0, best_warps = 0;
    for (uint32_t blocks : {16u, 32u, 64u, 96u, 132u, 264u, 0u})
      for (uint32_t warps : {4u, 8u, 16u, 32u}) {
        mori_ep_launch_t l = {(int32_t)blocks, 0, (int32_t)warps};
        mori_bootstrap_barrier(w.bootstrap);
        double ms = Eager(stream, (int)iters, [&] {
          dispatch(&l);
          combine(&l);
        });
        if (rank == 0)
          printf("RESULT {\"what\": \"tune\", \"ranks\": %d, \"tokens\": %u, \"hidden\": %u, \"blocks\": %u, \"warps\": %u, "
                 "\"us\": %.2f}\n", n, T, H, blocks, warps, ms * 1e3);
        if (ms < best) best = ms, best_blocks = blocks, best_warps = warps;
      }
    char arch[64] = "?";
    ep_bench_arch(arch, (int)sizeof(arch));
    if (rank == 0)
      printf("TABLE_ROW {\"%s\", %d, %d, %u, %u, %u, %u},  /* %.1f us dispatch + combine */\n", arch, n, (int)MORI_EP_BFLOAT16,
             T, H, best_blocks, best_warps, best * 1e3);
  }
  std::vector<double> copy_gbps, disp_us, comb_us, graph_us, disp_ratio, comb_ratio, graph_ratio;
  void *graph = nullptr;
  coll_capture_begin(stream);
  dispatch(nullptr);
  combine(nullptr);
  if (coll_capture_end(stream, &graph)) {
    fprintf(stderr, "bench_ep: graph capture failed\n");
    return 1;
  }
  for (uint32_t r = 0; r < rounds; r++) {
    mori_bootstrap_barrier(w.bootstrap);
    double copy_ms = Eager(stream, (int)iters, [&] { ep_bench_copy(copy_dst, b.dispatch_tokens, copy_bytes, stream); });
    mori_bootstrap_barrier(w.bootstrap);
    double d_ms = Eager(stream, (int)iters, [&] { dispatch(nullptr); });
    mori_bootstrap_barrier(w.bootstrap);
    double c_ms = Eager(stream, (int)iters, [&] {
      combine(nullptr);
      dispatch(nullptr);  // combine needs a dispatch before it; timed apart below
    }) - d_ms;
    mori_bootstrap_barrier(w.bootstrap);
    std::vector<double> half_ms = Halves(stream, (int)iters, {dispatch_send, dispatch_recv});
    mori_bootstrap_barrier(w.bootstrap);
    coll_stream_sync(stream);
    double g_us = coll_time_replays(graph, stream, (int)iters);
    double copy_rate = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;  // read + write, GB/s
    double d_rate = dispatch_bytes / (d_ms * 1e-3) / 1e9, c_rate = combine_bytes / (c_ms * 1e-3) / 1e9;
    double g_rate = (dispatch_bytes + combine_bytes) / (g_us * 1e-6) / 1e9;
    copy_gbps.push_back(copy_rate);
    disp_us.push_back(d_ms * 1e3);
    comb_us.push_back(c_ms * 1e3);
    graph_us.push_back(g_us);
    disp_ratio.push_back(d_rate / copy_rate);
    comb_ratio.push_back(c_rate / copy_rate);
    graph_ratio.push_back(g_rate / copy_rate);
    if (rank == 0)
      printf("RESULT {\"what\": \"round\", \"round\": %u, \"ranks\": %d, \"tokens\": %u, \"hidden\": %u, \"topk\": %u, "
             "\"experts\": %u, \"rows\": %d, \"copy_gbps\": %.1f, \"dispatch_eager_us\": %.2f, \"dispatch_gbps\": %.1f, "
             "\"combine_eager_us\": %.2f, \"combine_gbps\": %.1f, \"graph_dispatch_combine_us\": %.2f, \"graph_gbps\": %.1f, "
             "\"dispatch_send_us\": %.2f, \"dispatch_recv_us\": %.2f}\n",
             r, n, T, H, K, E, rows, copy_rate, d_ms * 1e3, d_rate, c_ms * 1e3, c_rate, g_us, g_rate, half_ms[0] * 1e3,
             half_ms[1] * 1e3);
    fflush(stdout);
  }
  if (rank == 0) {
    Stats cg = Summarise(copy_gbps), du = Summarise(disp_us), cu = Summarise(comb_us), gu = Summarise(graph_us);
    Stats dr = Summarise(disp_ratio), cr = Summarise(comb_ratio), gr = Summarise(graph_ratio);
    printf("RESULT {\"what\": \"summary\", \"ranks\": %d, \"rounds\": %u, \"copy_gbps\": [%.1f, %.1f, %.1f], "
           "\"dispatch_eager_us\": [%.2f, %.2f, %.2f], \"combine_eager_us\": [%.2f, %.2f, %.2f], "
           "\"graph_dispatch_combine_us\": [%.2f, %.2f, %.2f], \"dispatch_vs_copy\": [%.3f, %.3f, %.3f], "
           "\"combine_vs_copy\": [%.3f, %.3f, %.3f], \"graph_vs_copy\": [%.3f, %.3f, %.3f]}\n",
           n, rounds, cg.median, cg.lo, cg.hi, du.median, du.lo, du.hi, cu.median, cu.lo, cu.hi, gu.median, gu.lo, gu.hi,
           dr.median, dr.lo, dr.hi, cr.median, cr.lo, cr.hi, gr.median, gr.lo, gr.hi);
  }
  coll_graph_free(graph);
  coll_stream_sync(stream);
  int rc = mori_ep_check(ep);
  if (rc) fprintf(stderr, "bench_ep: rank %d: %s\n", rank, mori_last_error());
  mori_ep_destroy(ep);
  return rc ? 1 : 0;
}
