// SPDX-License-Identifier: MIT
// MoE dispatch/combine (mori/ep.h) on GPUs, one process per rank (ranks may
// share a GPU): thousands of calls back to back with a new routing each,
// every output checked against the host reference of tests/ep; the split
// halves; every dtype; and dispatch + combine captured in a graph and
// replayed with a new routing written into the device's index buffer
// before each replay. Also at world size 1. Tagged gpu + manual.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mori/ep.h"
#include "tests/ep/ep_reference.h"
#include "tests/gpu/coll_kernels.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/support/world.h"

using mori_test::World;
using namespace mori_ep_test;

namespace {

int Ranks() {
  const char *s = getenv("MORI_TEST_RANKS");
  return s ? atoi(s) : 2;
}

int Calls(int fallback) {
  const char *s = getenv("MORI_EP_TEST_CALLS");
  return s ? atoi(s) : fallback;
}

// Device copies of one rank's inputs, at the largest size a call takes.
struct DeviceInputs {
  void *rows, *scales, *cin;
  float *weights, *cweights;
  int32_t *indices;
  DeviceInputs(const Shape &s, int n) {
    size_t M = s.max_tokens, K = s.top_k, R = M * n;
    rows = gpu_alloc(M * s.hidden * 4 + 16);
    scales = gpu_alloc(M * s.scale_dim * s.scale_size + 16);
    weights = (float *)gpu_alloc(M * K * 4 + 16);
    indices = (int32_t *)gpu_alloc(M * K * 4 + 16);
    cin = gpu_alloc(R * s.hidden * 4 + 16);
    cweights = (float *)gpu_alloc(R * K * 4 + 16);
  }
  ~DeviceInputs() {
    for (void *p : {rows, scales, (void *)weights, (void *)indices, cin, (void *)cweights}) gpu_free(p);
  }
};

template <typename T>
std::vector<T> Out(const void *dev, size_t count) {
  std::vector<T> v(count + 1);
  if (count) {
    EXPECT_EQ(gpu_copy_out(v.data(), dev, count * sizeof(T)), 0) << gpu_last_error();
  }
  return v;
}

// One call checked as tests/ep/ep_test.cc checks it, through device copies.
bool CheckCall(mori_ep_t *ep, DeviceInputs &d, const Shape &s, int me, int n, int call, bool split, mori_ep_dtype_t cdt,
               void *stream) {
  std::vector<Inputs> all;
  for (int r = 0; r < n; r++) all.push_back(MakeInputs(s, r, n, call));
  const Inputs &mine = all[me];
  uint32_t K = s.top_k, M = s.max_tokens, rb = s.hidden * ElemBytes(s.dtype), sb = s.scale_dim * s.scale_size;
  if (mine.tokens) {
    EXPECT_EQ(gpu_copy_in(d.rows, mine.rows.data(), mine.rows.size()), 0);
    EXPECT_EQ(gpu_copy_in(d.weights, mine.weights.data(), mine.weights.size() * 4), 0);
    EXPECT_EQ(gpu_copy_in(d.indices, mine.indices.data(), mine.indices.size() * 4), 0);
    if (sb) {
      EXPECT_EQ(gpu_copy_in(d.scales, mine.scales.data(), mine.scales.size()), 0);
    }
  }
  const void *scales = sb ? d.scales : nullptr;
  if (split) {
    MORI_EXPECT_OK(mori_ep_dispatch_send(ep, d.rows, d.weights, scales, d.indices, mine.tokens, nullptr, stream));
    MORI_EXPECT_OK(mori_ep_dispatch_recv(ep, nullptr, stream));
  } else {
    MORI_EXPECT_OK(mori_ep_dispatch(ep, d.rows, d.weights, scales, d.indices, mine.tokens, nullptr, stream));
  }
  EXPECT_EQ(coll_stream_sync(stream), 0);
  mori_ep_buffers_t b;
  MORI_EXPECT_OK(mori_ep_buffers(ep, &b));
  int32_t rows = Out<int32_t>(b.recv_num_token, 1)[0];
  auto tok = Out<uint8_t>(b.dispatch_tokens, (size_t)rows * rb);
  auto w = Out<float>(b.dispatch_weights, (size_t)rows * K);
  auto idx = Out<int32_t>(b.dispatch_indices, (size_t)rows * K);
  auto pos = Out<int32_t>(b.src_token_pos, (size_t)rows);
  auto sc = Out<uint8_t>(b.dispatch_scales ? b.dispatch_scales : b.dispatch_tokens, (size_t)rows * sb);
  int32_t row = 0;
  for (int src = 0; src < n; src++)
    for (uint32_t t = 0; t < all[src].tokens; t++) {
      if (!Dests(s, all[src], t).count(me)) continue;
      const Inputs &in = all[src];
      bool ok = row < rows && !memcmp(&tok[(size_t)row * rb], &in.rows[(size_t)t * rb], rb) &&
                !memcmp(&idx[(size_t)row * K], &in.indices[(size_t)t * K], K * 4) &&
                !memcmp(&w[(size_t)row * K], &in.weights[(size_t)t * K], K * 4) && pos[row] == src * (int)M + (int)t &&
                (!sb || !memcmp(&sc[(size_t)row * sb], &in.scales[(size_t)t * sb], sb));
      EXPECT_TRUE(ok) << "call " << call << " rank " << me << ": dispatch row " << row << " (source " << src << " token " << t << ")";
      if (!ok) return false;
      row++;
    }
  EXPECT_EQ(rows, row) << "call " << call << " rank " << me;
  if (rows != row) return false;
  uint32_t crb = s.hidden * ElemBytes(cdt);
  std::vector<uint8_t> cin((size_t)rows * crb + 16);
  std::vector<float> cw((size_t)(rows + 1) * K);
  for (int32_t i = 0; i < rows; i++) {
    for (uint32_t h = 0; h < s.hidden; h++)
      StoreAs(&cin[(size_t)i * crb], h, cdt, ExpertValue(pos[i] / (int)M, (uint32_t)(pos[i] % (int)M), h, me, call));
    for (uint32_t j = 0; j < K; j++) cw[(size_t)i * K + j] = w[(size_t)i * K + j] + (float)me;
  }
  bool registered = call % 4 == 2;
  void *cdev = registered ? b.combine_input : d.cin;
  if (rows) {
    EXPECT_EQ(gpu_copy_in(cdev, cin.data(), (size_t)rows * crb), 0);
  }
  EXPECT_EQ(gpu_copy_in(d.cweights, cw.data(), cw.size() * 4), 0);
  const void *input = registered ? nullptr : cdev;
  if (split) {
    MORI_EXPECT_OK(mori_ep_combine_send(ep, input, cdt, d.cweights, nullptr, stream));
    MORI_EXPECT_OK(mori_ep_combine_recv(ep, nullptr, stream));
  } else {
    MORI_EXPECT_OK(mori_ep_combine(ep, input, cdt, d.cweights, nullptr, stream));
  }
  EXPECT_EQ(coll_stream_sync(stream), 0);
  auto out = Out<uint8_t>(b.combine_output, (size_t)mine.tokens * crb);
  auto ow = Out<float>(b.combine_weights, (size_t)mine.tokens * K);
  for (uint32_t t = 0; t < mine.tokens; t++) {
    std::set<int> dests = Dests(s, mine, t);
    for (uint32_t h = 0; h < s.hidden; h++) {
      float want = 0;
      for (int x : dests) want += ExpertValue(me, t, h, x, call);
      float got = LoadAs(&out[(size_t)t * crb], h, cdt);
      EXPECT_EQ(got, want) << "call " << call << " rank " << me << ": combine token " << t << " element " << h;
      if (got != want) return false;
    }
    for (uint32_t j = 0; j < K; j++) {
      float want = 0;
      for (int x : dests) want += mine.weights[(size_t)t * K + j] + (float)x;
      EXPECT_EQ(ow[(size_t)t * K + j], want) << "call " << call << " rank " << me << ": weight " << t << "," << j;
      if (ow[(size_t)t * K + j] != want) return false;
    }
  }
  return true;
}

void BackToBack(int rank, int size) {
  ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error();
  World w;
  ASSERT_TRUE(w.ok());
  void *stream = coll_stream_new();
  ASSERT_NE(stream, nullptr);
  for (mori_ep_dtype_t dt : {MORI_EP_BFLOAT16, MORI_EP_FP8_E4M3FN, MORI_EP_FLOAT32}) {
    Shape s;
    s.dtype = dt;
    s.hidden = dt == MORI_EP_BFLOAT16 ? 256 : 40;  // 40: the unvectorised paths
    s.max_tokens = 64;
    s.experts_per_rank = 4;
    s.top_k = 4;
    if (dt == MORI_EP_FP8_E4M3FN) s.scale_dim = 2, s.scale_size = 4;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    DeviceInputs d(s, size);
    int calls = Calls(dt == MORI_EP_BFLOAT16 ? 10000 : 500);
    for (int call = 0; call < calls; call++)
      ASSERT_TRUE(CheckCall(ep, d, s, rank, size, call, call % 3 == 1, call % 7 == 3 ? MORI_EP_FLOAT32 : MORI_EP_BFLOAT16,
                            stream))
          << "dtype " << dt;
    MORI_EXPECT_OK(mori_ep_check(ep));
    printf("rank %d of %d: dtype %d, %d calls back to back: 0 mismatches\n", rank, size, (int)dt, calls);
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  }
  coll_stream_free(stream);
}

TEST(GpuEp, BackToBackNewRoutingEveryCall) { EXPECT_RANKS_PASS(Ranks(), BackToBack); }
TEST(GpuEp, BackToBackWorldSizeOne) { EXPECT_RANKS_PASS(1, BackToBack); }

// Dispatch + combine (identity experts) captured once, replayed with a new
// routing copied into the index buffer before each replay: the combine
// output is the input times the distinct destination ranks of each token.
void GraphReplay(int rank, int size) {
  ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error();
  World w;
  ASSERT_TRUE(w.ok());
  void *stream = coll_stream_new();
  ASSERT_NE(stream, nullptr);
  Shape s;
  s.hidden = 512;
  s.max_tokens = 128;
  s.experts_per_rank = 4;
  s.top_k = 8 < 4 * size ? 8 : 4 * size;
  mori_ep_config_t c = Config(s, rank, size);
  mori_ep_t *ep = nullptr;
  MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
  mori_ep_buffers_t b;
  MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
  DeviceInputs d(s, size);
  uint32_t T = s.max_tokens, K = s.top_k, H = s.hidden;
  std::vector<uint16_t> x((size_t)T * H);
  for (size_t i = 0; i < x.size(); i++) x[i] = mori_coll_impl_float_to_bf16((float)((int)((i + rank * 5) % 23) - 11) / 8.0f);
  std::vector<float> wt((size_t)T * K, 0.5f);
  ASSERT_EQ(gpu_copy_in(d.rows, x.data(), x.size() * 2), 0);
  ASSERT_EQ(gpu_copy_in(d.weights, wt.data(), wt.size() * 4), 0);
  auto routing = [&](int replay) {
    Inputs in = MakeInputs(s, rank, size, replay);
    in.indices.resize((size_t)T * K);
    for (size_t i = (size_t)in.tokens * K; i < in.indices.size(); i++) in.indices[i] = (int32_t)(i % (s.experts_per_rank * size));
    in.tokens = T;
    return in;
  };
  Inputs first = routing(0);
  ASSERT_EQ(gpu_copy_in(d.indices, first.indices.data(), first.indices.size() * 4), 0);
  ASSERT_EQ(coll_capture_begin(stream), 0);
  MORI_ASSERT_OK(mori_ep_dispatch(ep, d.rows, d.weights, nullptr, d.indices, T, nullptr, stream));
  MORI_ASSERT_OK(mori_ep_combine(ep, b.dispatch_tokens, MORI_EP_BFLOAT16, b.dispatch_weights, nullptr, stream));
  void *graph = nullptr;
  ASSERT_EQ(coll_capture_end(stream, &graph), 0);
  int replays = Calls(1000);
  for (int r = 0; r < replays; r++) {
    Inputs in = routing(r);
    ASSERT_EQ(coll_stream_sync(stream), 0);
    ASSERT_EQ(gpu_copy_in(d.indices, in.indices.data(), in.indices.size() * 4), 0);
    ASSERT_EQ(coll_graph_replay(graph, stream), 0);
    ASSERT_EQ(coll_stream_sync(stream), 0);
    auto out = Out<uint16_t>(b.combine_output, (size_t)T * H);
    auto ow = Out<float>(b.combine_weights, (size_t)T * K);
    for (uint32_t t = 0; t < T; t++) {
      float copies = (float)Dests(s, in, t).size();
      for (uint32_t h = 0; h < H; h++)
        ASSERT_EQ(mori_coll_impl_bf16_to_float(out[(size_t)t * H + h]), mori_coll_impl_bf16_to_float(x[(size_t)t * H + h]) * copies)
            << "replay " << r << " rank " << rank << " token " << t << " element " << h;
      for (uint32_t j = 0; j < K; j++) ASSERT_EQ(ow[(size_t)t * K + j], 0.5f * copies) << "replay " << r;
    }
  }
  MORI_EXPECT_OK(mori_ep_check(ep));
  printf("rank %d of %d: %d graph replays with new routings: 0 mismatches\n", rank, size, replays);
  coll_graph_free(graph);
  MORI_EXPECT_OK(mori_ep_destroy(ep));
  coll_stream_free(stream);
}

TEST(GpuEp, GraphReplayWithNewRoutings) { EXPECT_RANKS_PASS(Ranks(), GraphReplay); }
TEST(GpuEp, GraphReplayWorldSizeOne) { EXPECT_RANKS_PASS(1, GraphReplay); }

// A combine given fewer rows than its dispatch delivered: the count is on
// the device, so the kernel refuses the call (mori_ep_combine_rows) before
// reading a row of the caller's buffer, allocated to exactly the rows
// given (compute-sanitizer's memcheck sees a read past it). The last rank
// gives one row too few, of its input, then of its weights; its check
// names both counts, the others' the refusal, and the ranks stay in step.
void FewerCombineRows(int rank, int size) {
  ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error();
  World w;
  ASSERT_TRUE(w.ok());
  void *stream = coll_stream_new();
  ASSERT_NE(stream, nullptr);
  Shape s;
  s.max_tokens = 32;
  s.experts_per_rank = 4;  // top-k 4 within one rank's experts at world size 1
  mori_ep_config_t c = Config(s, rank, size);
  mori_ep_t *ep = nullptr;
  MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
  mori_ep_buffers_t b;
  MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
  DeviceInputs d(s, size);
  const int bad = size - 1;
  const uint32_t T = s.max_tokens, K = s.top_k, rb = s.hidden * ElemBytes(s.dtype);
  std::vector<int32_t> indices = SpreadIndices(s, size, T);  // every rank gets rows
  ASSERT_EQ(gpu_copy_in(d.indices, indices.data(), indices.size() * 4), 0);
  for (int round = 0; round < 2; round++) {
    const bool short_weights = round == 1;
    MORI_ASSERT_OK(mori_ep_dispatch(ep, d.rows, d.weights, nullptr, d.indices, T, nullptr, stream));
    ASSERT_EQ(coll_stream_sync(stream), 0);
    const uint32_t delivered = (uint32_t)Out<int32_t>(b.recv_num_token, 1)[0];
    ASSERT_GT(delivered, 0u);
    const uint32_t given = rank == bad ? delivered - 1 : delivered;
    void *input = gpu_alloc((uint64_t)(given ? given : 1) * rb);
    float *weights = (float *)gpu_alloc((uint64_t)(given ? given : 1) * K * 4);
    ASSERT_NE(input, nullptr);
    ASSERT_NE(weights, nullptr);
    int rc = mori_ep_combine_rows(ep, short_weights ? b.dispatch_tokens : input, short_weights ? delivered : given,
                                  MORI_EP_BFLOAT16, short_weights ? weights : b.dispatch_weights,
                                  short_weights ? given : delivered, 0, nullptr, stream);
    MORI_EXPECT_OK(rc);
    ASSERT_EQ(coll_stream_sync(stream), 0);
    int checked = mori_ep_check(ep);
    EXPECT_EQ(checked, MORI_EINVAL);
    std::string said = mori_last_error();
    if (rank == bad)
      EXPECT_NE(said.find(std::string("combine ") + (short_weights ? "weights" : "input") + " holds " + std::to_string(given) +
                          " rows, fewer than the " + std::to_string(delivered)),
                std::string::npos)
          << said;
    else
      EXPECT_NE(said.find("rank " + std::to_string(bad) + " refused its part of a combine"), std::string::npos) << said;
    gpu_free(input);
    gpu_free(weights);
  }
  for (int call = 0; call < 8; call++) ASSERT_TRUE(CheckCall(ep, d, s, rank, size, call, call % 3 == 1, MORI_EP_BFLOAT16, stream));
  MORI_EXPECT_OK(mori_ep_check(ep));
  printf("rank %d of %d: combines given too few rows refused on the device, the ranks in step\n", rank, size);
  MORI_EXPECT_OK(mori_ep_destroy(ep));
  coll_stream_free(stream);
}

TEST(GpuEp, ACombineGivenFewerRowsThanDeliveredRunsAsRefused) { EXPECT_RANKS_PASS(Ranks(), FewerCombineRows); }
TEST(GpuEp, ACombineGivenFewerRowsThanDeliveredWorldSizeOne) { EXPECT_RANKS_PASS(1, FewerCombineRows); }

}  // namespace
