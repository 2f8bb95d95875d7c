// SPDX-License-Identifier: MIT
// MoE dispatch/combine (mori/ep.h) in CPU ranks, across separate processes.
// Every rank's inputs of a call are a function of (rank, call), so each rank
// builds the whole reference itself: its dispatch output bit for bit (rows
// ordered by source rank, then source token), and its combine output (each
// rank's "expert" writes a value of (source rank, token, element, rank), and
// the source sums one copy per distinct destination rank).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "collectives/ep_internal.h"
#include "collectives/internal.h"
#include "mori/collectives.h"
#include "mori/device/coll/impl/numeric__funcs.h"
#include "mori/device/ep/types.h"
#include "mori/ep.h"
#include "mori/transport_rdma.h"
#include "tests/ep/ep_reference.h"
#include "tests/support/world.h"
#include "transport/rdma/ce_nic/ce_nic.h"

using mori_test::ExpectError;
using mori_test::TestRanks;
using mori_test::World;

using namespace mori_ep_test;

namespace {

struct Options {
  bool weights = true, scales = false, split = false, registered = false;
  mori_ep_dtype_t combine = MORI_EP_BFLOAT16;
};

// What a combine's send reads, kept alive until the call has read it.
struct CombineInput {
  std::vector<uint8_t> external;
  std::vector<float> weights;
};

// This rank's expert output for the last dispatch (which delivered `row`
// rows): ExpertValue(..., values) per row, weights dispatch weight + rank.
// Returns the send half's code (o.split) or the whole combine's.
int SendCombine(mori_ep_t *ep, const Shape &s, int me, int values, const Options &o, uint32_t row, const mori_ep_buffers_t &b,
                CombineInput &keep) {
  uint32_t K = s.top_k, M = s.max_tokens;
  uint32_t cb = ElemBytes(o.combine), crb = s.hidden * cb;
  keep.external.assign((size_t)row * crb + 16, 0);
  uint8_t *cin = o.registered ? (uint8_t *)b.combine_input : keep.external.data();
  keep.weights.assign((size_t)(row + 1) * K, 0.0f);  // never empty: NULL would mean no weights
  for (uint32_t i = 0; i < row; i++) {
    int src = b.src_token_pos[i] / (int)M;
    uint32_t t = (uint32_t)(b.src_token_pos[i] % (int)M);
    for (uint32_t h = 0; h < s.hidden; h++) StoreAs(cin + (size_t)i * crb, h, o.combine, ExpertValue(src, t, h, me, values));
    for (uint32_t j = 0; j < K; j++) keep.weights[(size_t)i * K + j] = b.dispatch_weights[(size_t)i * K + j] + (float)me;
  }
  const void *input = o.registered ? nullptr : cin;
  const float *cweights = o.weights ? keep.weights.data() : nullptr;
  return o.split ? mori_ep_combine_send(ep, input, o.combine, cweights, nullptr, nullptr)
                 : mori_ep_combine(ep, input, o.combine, cweights, nullptr, nullptr);
}

// The combine output of `mine` against the reference: every distinct
// destination rank's ExpertValue(..., values) summed, and the weights.
// quiet: no test failure, only the answer.
bool VerifyCombine(const Shape &s, int me, int call, int values, const Options &o, const Inputs &mine, const mori_ep_buffers_t &b,
                   bool quiet = false) {
  uint32_t K = s.top_k, crb = s.hidden * ElemBytes(o.combine);
  for (uint32_t t = 0; t < mine.tokens; t++) {
    std::set<int> dests = Dests(s, mine, t);
    for (uint32_t h = 0; h < s.hidden; h++) {
      float want = 0;
      for (int d : dests) want += ExpertValue(me, t, h, d, values);
      float got = LoadAs((uint8_t *)b.combine_output + (size_t)t * crb, h, o.combine);
      if (!quiet) {
        EXPECT_EQ(got, want) << "call " << call << " rank " << me << ": combine token " << t << " element " << h;
      }
      if (got != want) return false;
    }
    for (uint32_t j = 0; j < K && o.weights; j++) {
      float want = 0;
      for (int d : dests) want += mine.weights[(size_t)t * K + j] + (float)d;
      if (!quiet) {
        EXPECT_EQ(b.combine_weights[(size_t)t * K + j], want) << "call " << call << " rank " << me << ": weight " << t << "," << j;
      }
      if (b.combine_weights[(size_t)t * K + j] != want) return false;
    }
  }
  return true;
}

// Combine of the last dispatch (which delivered `row` rows and used
// `mine` on this rank): each rank's expert writes ExpertValue(..., values).
bool CheckCombine(mori_ep_t *ep, const Shape &s, int me, int n, int call, int values, const Options &o, const Inputs &mine,
                  uint32_t row, const mori_ep_buffers_t &b) {
  CombineInput keep;
  MORI_EXPECT_OK(SendCombine(ep, s, me, values, o, row, b, keep));
  if (o.split) MORI_EXPECT_OK(mori_ep_combine_recv(ep, nullptr, nullptr));
  return VerifyCombine(s, me, call, values, o, mine, b);
}

// One call's dispatch and combine on rank `me`, checked against the
// reference; returns false (with a test failure) at the first mismatch.
bool CheckCall(mori_ep_t *ep, const Shape &s, int me, int n, int call, const Options &o) {
  std::vector<Inputs> all;
  for (int r = 0; r < n; r++) all.push_back(MakeInputs(s, r, n, call));
  const Inputs &mine = all[me];
  uint32_t K = s.top_k, M = s.max_tokens, rb = s.hidden * ElemBytes(s.dtype), sb = s.scale_dim * s.scale_size;
  const void *scales = o.scales && sb ? mine.scales.data() : nullptr;
  const float *weights = o.weights ? mine.weights.data() : nullptr;
  if (o.split) {
    MORI_EXPECT_OK(mori_ep_dispatch_send(ep, mine.rows.data(), weights, scales, mine.indices.data(), mine.tokens, nullptr, nullptr));
    MORI_EXPECT_OK(mori_ep_dispatch_recv(ep, nullptr, nullptr));
  } else {
    MORI_EXPECT_OK(mori_ep_dispatch(ep, mine.rows.data(), weights, scales, mine.indices.data(), mine.tokens, nullptr, nullptr));
  }
  mori_ep_buffers_t b;
  MORI_EXPECT_OK(mori_ep_buffers(ep, &b));
  // Dispatch: rows in (source, token) order, bit for bit.
  uint32_t row = 0;
  for (int src = 0; src < n; src++)
    for (uint32_t t = 0; t < all[src].tokens; t++) {
      if (!Dests(s, all[src], t).count(me)) continue;
      const Inputs &in = all[src];
      bool ok = !memcmp((uint8_t *)b.dispatch_tokens + (size_t)row * rb, in.rows.data() + (size_t)t * rb, rb) &&
                !memcmp(b.dispatch_indices + (size_t)row * K, in.indices.data() + (size_t)t * K, K * 4) &&
                b.src_token_pos[row] == src * (int)M + (int)t;
      for (uint32_t j = 0; j < K && ok; j++)
        ok = b.dispatch_weights[(size_t)row * K + j] == (o.weights ? in.weights[(size_t)t * K + j] : 0.0f);
      if (ok && scales)
        ok = !memcmp((uint8_t *)b.dispatch_scales + (size_t)row * sb, in.scales.data() + (size_t)t * sb, sb);
      EXPECT_TRUE(ok) << "call " << call << " rank " << me << ": dispatch row " << row << " (source " << src << " token " << t
                      << ") differs; src_token_pos " << b.src_token_pos[row];
      if (!ok) return false;
      row++;
    }
  EXPECT_EQ(*b.recv_num_token, (int32_t)row) << "call " << call << " rank " << me;
  if (*b.recv_num_token != (int32_t)row) return false;
  return CheckCombine(ep, s, me, n, call, call, o, mine, row, b);
}

// ASan runs the long loops a quarter as long (CI runs every test under it too).
#if defined(__SANITIZE_ADDRESS__)
constexpr int kSlowdown = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int kSlowdown = 4;
#else
constexpr int kSlowdown = 1;
#endif
#else
constexpr int kSlowdown = 1;
#endif

// The options of call `call` of a back-to-back loop: split halves, the
// registered combine input, an fp32 combine and no weights, each now and then.
Options CallOptions(int call) {
  Options o;
  o.split = call % 3 == 1;
  o.registered = call % 4 == 2;
  o.combine = call % 7 == 3 ? MORI_EP_FLOAT32 : MORI_EP_BFLOAT16;
  o.weights = call % 5 != 4;
  return o;
}

int EnvInt(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

// MORI_EP_LAUNCH_CONFIG_MODE=AUTO's table (collectives/ep_launch_table.c):
// the first row that matches wins; a measured row serves only its arch,
// world size and dtype, up to its tokens and hidden, and everything else
// falls to the defaults by tokens (a small call on fewer blocks).
TEST(EpLaunchTable, TheFirstRowThatMatchesWins) {
  struct Case {
    const char *arch;
    int world, dtype;
    uint32_t tokens, hidden, blocks, warps;
  } cases[] = {
      {"sm_90", 1, MORI_EP_BFLOAT16, 4096, 7168, 132, 16},  // the measured row
      {"sm_90", 1, MORI_EP_BFLOAT16, 64, 4096, 132, 16},    // within its bounds
      {"sm_90", 1, MORI_EP_BFLOAT16, 4097, 7168, 0, 16},    // more tokens
      {"sm_90", 1, MORI_EP_BFLOAT16, 4096, 7169, 0, 16},    // a wider token
      {"sm_100", 1, MORI_EP_BFLOAT16, 4096, 7168, 0, 16},   // another arch
      {"sm_90", 2, MORI_EP_BFLOAT16, 4096, 7168, 0, 16},    // another world size
      {"sm_90", 1, MORI_EP_FLOAT16, 4096, 7168, 0, 16},     // another dtype
      {"sm_90", 2, MORI_EP_BFLOAT16, 256, 7168, 32, 8},     // a small call
      {"gfx942", 8, MORI_EP_FP8_E4M3FNUZ, 256, 7168, 32, 8},
      {"gfx942", 8, MORI_EP_FP8_E4M3FNUZ, 257, 7168, 0, 16},
      {"host", 4, MORI_EP_FLOAT32, 1, 64, 32, 8},
  };
  for (const Case &c : cases) {
    mori_ep_shape_t got = {7, 7};
    ASSERT_EQ(mori_ep_table_shape(c.arch, c.world, c.dtype, c.tokens, c.hidden, &got), 1) << c.arch;
    std::string where = std::string(c.arch) + " world " + std::to_string(c.world) + " dtype " + std::to_string(c.dtype) +
                        " " + std::to_string(c.tokens) + " x " + std::to_string(c.hidden);
    EXPECT_EQ(got.blocks, c.blocks) << where;
    EXPECT_EQ(got.warps, c.warps) << where;
  }
}

// Many calls back to back with a new routing each, every call checked:
// 10 000 at every size (8 spinning processes on a CI machine's 2 cores take
// ~4.5 ms a call, 45 s in all), a quarter of that under ASan;
// MORI_EP_TEST_CALLS overrides the count.
TEST(Ep, BackToBackNewRoutingEveryCall) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    int calls = EnvInt("MORI_EP_TEST_CALLS", 10000 / kSlowdown);
    for (int call = 0; call < calls; call++) ASSERT_TRUE(CheckCall(ep, s, rank, size, call, CallOptions(call)));
    MORI_EXPECT_OK(mori_ep_check(ep));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// mori_finalize releases every window and allocation, the context's
// buffers too: its calls then refuse, saying so (they ran on freed
// memory), destroying it is still right, and a new context works.
TEST(Ep, AContextAfterMoriFinalizeRefusesItsCalls) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    ASSERT_TRUE(CheckCall(ep, s, rank, size, 0, CallOptions(0)));
    MORI_ASSERT_OK(mori_finalize());
    mori_ep_buffers_t b;
    EXPECT_EQ(mori_ep_buffers(ep, &b), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("mori_finalize released"), std::string::npos) << mori_last_error();
    EXPECT_EQ(mori_ep_reset(ep, nullptr), MORI_EINVAL);
    EXPECT_EQ(mori_ep_dispatch_refused(ep, 0, nullptr), MORI_EINVAL);
    EXPECT_EQ(mori_ep_check(ep), MORI_EINVAL);
    MORI_EXPECT_OK(mori_ep_destroy(ep));
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    ASSERT_TRUE(CheckCall(ep, s, rank, size, 1, CallOptions(1)));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// Every dispatch dtype (fp8 as bytes), with scales, combined in each type.
TEST(Ep, EveryDtypeWithScales) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    for (mori_ep_dtype_t dt : {MORI_EP_FLOAT32, MORI_EP_BFLOAT16, MORI_EP_FLOAT16, MORI_EP_FP8_E4M3FN, MORI_EP_FP8_E4M3FNUZ}) {
      // The launch table's lookup on one of them (the host platform runs
      // every shape as one CPU rank).
      setenv("MORI_EP_LAUNCH_CONFIG_MODE", dt == MORI_EP_FLOAT16 ? "auto" : "manual", 1);
      Shape s;
      s.dtype = dt;
      s.hidden = 40;  // not a multiple of 8 elements: the unvectorised paths
      s.top_k = 3;
      s.experts_per_rank = 3;
      s.scale_dim = 3;
      s.scale_size = 4;
      mori_ep_config_t c = Config(s, rank, size);
      mori_ep_t *ep = nullptr;
      MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
      for (int call = 0; call < 30; call++) {
        Options o;
        o.scales = call % 2 == 0;
        o.split = call % 3 == 0;
        o.combine = (mori_ep_dtype_t)(call % 3);
        ASSERT_TRUE(CheckCall(ep, s, rank, size, call, o)) << "dtype " << dt;
      }
      MORI_EXPECT_OK(mori_ep_check(ep));
      MORI_EXPECT_OK(mori_ep_destroy(ep));
    }
  });
}

// Identity experts (AMD mori's definition): combining the dispatch output
// gives the input times the number of distinct destination ranks, and the
// weights summed the same way. reset() clears recv_num_token, and nothing
// a combine of the last dispatch needs.
TEST(Ep, IdentityExpertsAndReset) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    s.hidden = 128;
    s.max_tokens = 32;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    for (int call = 0; call < 20; call++) {
      Inputs in = MakeInputs(s, rank, size, call);
      for (size_t i = 0; i < in.rows.size() / 2; i++)  // sane bf16 values: small multiples of 1/8
        ((uint16_t *)in.rows.data())[i] = mori_coll_impl_float_to_bf16((float)((int)(i % 23) - 11) / 8.0f);
      MORI_ASSERT_OK(mori_ep_dispatch(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens, nullptr, nullptr));
      // A reset between a dispatch and its combine clears recv_num_token
      // only: the combine still sends back every row the dispatch delivered.
      if (call % 2) MORI_ASSERT_OK(mori_ep_reset(ep, nullptr));
      MORI_ASSERT_OK(mori_ep_combine(ep, b.dispatch_tokens, MORI_EP_BFLOAT16, b.dispatch_weights, nullptr, nullptr));
      for (uint32_t t = 0; t < in.tokens; t++) {
        float copies = (float)Dests(s, in, t).size();
        for (uint32_t h = 0; h < s.hidden; h++) {
          float x = mori_coll_impl_bf16_to_float(((uint16_t *)in.rows.data())[t * s.hidden + h]);
          ASSERT_EQ(mori_coll_impl_bf16_to_float(((uint16_t *)b.combine_output)[t * s.hidden + h]), x * copies)
              << "call " << call << " token " << t << " element " << h;
        }
        for (uint32_t j = 0; j < s.top_k; j++)
          ASSERT_EQ(b.combine_weights[t * s.top_k + j], in.weights[t * s.top_k + j] * copies);
      }
    }
    MORI_ASSERT_OK(mori_ep_reset(ep, nullptr));
    EXPECT_EQ(*b.recv_num_token, 0);
    MORI_EXPECT_OK(mori_ep_check(ep));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// An expert index out of range: that token is dropped, the call completes,
// and mori_ep_check on every rank names the rank, the token and the index.
// The next call is clean.
TEST(Ep, BadIndexIsReportedOnEveryRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    Inputs in = MakeInputs(s, rank, size, 0);
    in.tokens = 4;
    in.rows.resize(4 * s.hidden * 2);
    in.weights.assign(4 * s.top_k, 1.0f);
    in.indices.assign(4 * s.top_k, 0);
    if (rank == size - 1) in.indices[2 * s.top_k + 1] = 999;
    MORI_ASSERT_OK(mori_ep_dispatch(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens, nullptr, nullptr));
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    EXPECT_EQ(*b.recv_num_token, rank == 0 ? 4 * size - 1 : 0);  // every token to rank 0 but the bad one
    EXPECT_EQ(mori_ep_check(ep), MORI_EINVAL);
    std::string msg = mori_last_error(), want = "rank " + std::to_string(size - 1) + "'s token 2 has expert index 999 in top-k slot 1";
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
    MORI_EXPECT_OK(mori_ep_combine(ep, nullptr, MORI_EP_BFLOAT16, nullptr, nullptr, nullptr));
    MORI_EXPECT_OK(mori_ep_check(ep));  // reported once
    for (int call = 1; call < 6; call++) ASSERT_TRUE(CheckCall(ep, s, rank, size, call, Options()));
    MORI_EXPECT_OK(mori_ep_check(ep));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// Several blocks (threads on the host platform, MORI_EP_HOST_BLOCKS allowing
// them): each builds the lists of its chunk of the tokens after the earlier
// chunks' counts, and the last writes the header. Chunks of one token, empty chunks (fewer tokens than
// blocks, a rank with none), every routing of MakeInputs; then a dropped
// token in each of two chunks: the header reports both and names the first.
TEST(Ep, BlocksBuildTheListsOfTheirChunksInTokenOrder) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    setenv("MORI_EP_HOST_BLOCKS", "8", 1);
    World w;
    ASSERT_TRUE(w.ok());
    for (int blocks : {3, MORI_EP_HOST_MAX_BLOCKS}) {
      Shape s;
      mori_ep_config_t c = Config(s, rank, size);
      c.block_num = blocks;
      mori_ep_t *ep = nullptr;
      MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
      int calls = EnvInt("MORI_EP_TEST_CALLS", 1000 / kSlowdown);
      for (int call = 0; call < calls; call++)
        ASSERT_TRUE(CheckCall(ep, s, rank, size, call, CallOptions(call))) << blocks << " blocks";
      Inputs in = MakeInputs(s, rank, size, 0);
      in.tokens = s.max_tokens;
      in.rows.assign((size_t)in.tokens * s.hidden * 2, 0);
      in.weights.assign((size_t)in.tokens * s.top_k, 1.0f);
      in.indices.assign((size_t)in.tokens * s.top_k, 0);
      if (rank == 0) {
        in.indices[13 * s.top_k + 3] = -1;  // chunk 2 of 3 (6 tokens each), chunk 6 of 8
        in.indices[7 * s.top_k + 2] = 1 << 20;  // chunk 1 of 3, chunk 3 of 8
      }
      MORI_ASSERT_OK(mori_ep_dispatch(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens, nullptr, nullptr));
      mori_ep_buffers_t b;
      MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
      EXPECT_EQ(*b.recv_num_token, rank == 0 ? (int)s.max_tokens * size - 2 : 0) << blocks << " blocks";
      EXPECT_EQ(mori_ep_check(ep), MORI_EINVAL);
      std::string msg = mori_last_error(), want = "rank 0's token 7 has expert index 1048576 in top-k slot 2";
      EXPECT_NE(msg.find(want), std::string::npos) << blocks << " blocks: " << msg;
      EXPECT_NE(msg.find("2 token"), std::string::npos) << blocks << " blocks: " << msg;
      MORI_EXPECT_OK(mori_ep_combine(ep, nullptr, MORI_EP_BFLOAT16, nullptr, nullptr, nullptr));
      for (int call = 1; call < 4; call++) ASSERT_TRUE(CheckCall(ep, s, rank, size, call, Options()));
      MORI_EXPECT_OK(mori_ep_check(ep));
      MORI_EXPECT_OK(mori_ep_destroy(ep));
    }
  });
}

// World size 1 (one rank, whatever the suite's count): every row stays on
// the rank, so a fused call's blocks copy their own chunk's rows and
// combine's tokens without reading a flag. Every call checked, with one,
// three and eight blocks, fused and split calls, scales and fp8 on every
// other call, the registered input, and the vectorised and unvectorised
// widths.
TEST(Ep, WorldSizeOneWithSeveralBlocks) {
  EXPECT_RANKS_PASS(1, [](int rank, int size) {
    setenv("MORI_EP_HOST_BLOCKS", "8", 1);
    World w;
    ASSERT_TRUE(w.ok());
    for (int blocks : {1, 3, MORI_EP_HOST_MAX_BLOCKS})
      for (uint32_t hidden : {64u, 40u}) {
        Shape s;
        s.experts_per_rank = 8;
        s.hidden = hidden;
        s.scale_dim = 3;
        s.scale_size = 4;
        mori_ep_config_t c = Config(s, rank, size);
        c.block_num = blocks;
        mori_ep_t *ep = nullptr;
        MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
        int calls = EnvInt("MORI_EP_TEST_CALLS", 400 / kSlowdown);
        for (int call = 0; call < calls; call++) {
          Options o = CallOptions(call);
          o.scales = call % 2 == 0;
          ASSERT_TRUE(CheckCall(ep, s, rank, size, call, o)) << blocks << " blocks, hidden " << hidden;
        }
        MORI_EXPECT_OK(mori_ep_check(ep));
        MORI_EXPECT_OK(mori_ep_destroy(ep));
      }
  });
}

// A dispatch refused on one rank only (more tokens than the config's
// maximum): that rank's part still runs with no tokens, so every rank's call
// completes with the other ranks' rows and the ranks stay in step (before,
// the others paired this call with the refusing rank's next one); the
// other ranks' check names the refusing rank; later calls are right
// everywhere.
TEST(Ep, ARefusalOnOneRankKeepsTheRanksInStep) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    const int bad = size - 1, call = 3;
    std::vector<Inputs> all;
    for (int r = 0; r < size; r++) all.push_back(MakeInputs(s, r, size, call));
    const Inputs &in = all[rank];
    if (rank == bad) {
      std::vector<uint8_t> rows((s.max_tokens + 1) * s.hidden * 2);
      std::vector<int32_t> idx((s.max_tokens + 1) * s.top_k, 0);
      ExpectError(mori_ep_dispatch(ep, rows.data(), nullptr, nullptr, idx.data(), s.max_tokens + 1, nullptr, nullptr),
                    MORI_EINVAL, "more than max_num_inp_token_per_rank");
    } else {
      MORI_ASSERT_OK(mori_ep_dispatch(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens, nullptr,
                                      nullptr));
    }
    int32_t want = 0;
    for (int src = 0; src < size; src++)
      for (uint32_t t = 0; src != bad && t < all[src].tokens; t++) want += Dests(s, all[src], t).count(rank) ? 1 : 0;
    EXPECT_EQ(*b.recv_num_token, want) << "rows from every rank but the refusing one";
    if (rank == bad) {
      MORI_EXPECT_OK(mori_ep_check(ep));  // its own refusal: its call said so already
    } else {
      ExpectError(mori_ep_check(ep), MORI_EINVAL, "rank " + std::to_string(bad) + " refused its part of a dispatch");
    }
    MORI_EXPECT_OK(mori_ep_combine(ep, b.dispatch_tokens, MORI_EP_BFLOAT16, nullptr, nullptr, nullptr));
    for (int k = 0; k < 20; k++) ASSERT_TRUE(CheckCall(ep, s, rank, size, 10 + k, CallOptions(k)));
    MORI_EXPECT_OK(mori_ep_check(ep));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// A combine refused on one rank only (a dtype wider than its buffers hold):
// that rank's part still runs, sending nothing, its flag marked refused;
// the others' receive halves end at once (not at the timeout), sum
// nothing, and their check names the rank; every rank stays in step (the
// others' later combines timed out one epoch behind, the refusing rank's
// returned 0 with wrong sums). Fused, then the send half alone.
TEST(Ep, ACombineRefusedOnOneRankKeepsTheRanksInStep) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    c.max_token_type_size = 2;  // combine in fp32 does not fit
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    const int bad = size - 1;
    for (int split = 0; split < 2; split++) {
      SCOPED_TRACE(split ? "combine_send" : "combine");
      ASSERT_TRUE(CheckCall(ep, s, rank, size, 1 + split, CallOptions(0)));
      Inputs in = MakeInputs(s, rank, size, 5);
      MORI_ASSERT_OK(mori_ep_dispatch(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens, nullptr,
                                      nullptr));
      auto start = std::chrono::steady_clock::now();
      mori_ep_dtype_t dtype = rank == bad ? MORI_EP_FLOAT32 : MORI_EP_BFLOAT16;
      int rc = split ? mori_ep_combine_send(ep, b.dispatch_tokens, dtype, nullptr, nullptr, nullptr)
                     : mori_ep_combine(ep, b.dispatch_tokens, dtype, nullptr, nullptr, nullptr);
      if (split && rc == 0) rc = mori_ep_combine_recv(ep, nullptr, nullptr);
      if (split && rank == bad) MORI_EXPECT_OK(mori_ep_combine_recv(ep, nullptr, nullptr));  // ran already: nothing
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (rank == bad) {
        ExpectError(rc, MORI_EINVAL, "the buffers hold 2");
        MORI_EXPECT_OK(mori_ep_check(ep));  // its own refusal: its call said so
      } else {
        MORI_EXPECT_OK(rc);
        EXPECT_LT(seconds, 5.0) << "the refusal was waited out";
        ExpectError(mori_ep_check(ep), MORI_EINVAL, "rank " + std::to_string(bad) + " refused its part of a combine");
      }
      for (int k = 0; k < 6; k++) {  // in step (combines in bf16: the buffers hold no wider type)
        Options o = CallOptions(k);
        o.combine = MORI_EP_BFLOAT16;
        ASSERT_TRUE(CheckCall(ep, s, rank, size, 10 + k, o));
      }
      MORI_EXPECT_OK(mori_ep_check(ep));
    }
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// A combine whose input or weights hold fewer rows than the dispatch
// delivered: only the device knows that count (recv_num_token), so
// mori_ep_combine_rows hands the kernel the caller's counts. The short
// rank's part runs as refused before reading a row (its buffers are sized
// exactly, so a read past them is a heap overflow under ASan), its check
// gives both counts, the peers' calls end at once naming it, and the ranks
// stay in step. The peers pass their exact counts: not refused. Fused and
// split, input short and weights short.
TEST(Ep, ACombineGivenFewerRowsThanDeliveredRunsAsRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    const int bad = size - 1;
    const uint32_t T = s.max_tokens, K = s.top_k, rb = s.hidden * ElemBytes(s.dtype);
    for (int round = 0; round < 4; round++) {
      const bool split = round % 2 == 1, short_weights = round >= 2;
      SCOPED_TRACE(std::string(split ? "combine_send" : "combine") + (short_weights ? ", weights short" : ", input short"));
      std::vector<uint8_t> rows((size_t)T * rb, 0);
      std::vector<float> weights((size_t)T * K, 1.0f);
      std::vector<int32_t> indices = SpreadIndices(s, size, T);
      MORI_ASSERT_OK(mori_ep_dispatch(ep, rows.data(), weights.data(), nullptr, indices.data(), T, nullptr, nullptr));
      const uint32_t delivered = (uint32_t)b.recv_num_token[0];
      ASSERT_GT(delivered, 0u);
      const uint32_t given = rank == bad ? delivered - 1 : delivered;
      // Exactly `given` rows each (not empty: a vector's data may be NULL).
      std::vector<uint8_t> input((size_t)given * rb + (given ? 0 : 1));
      memcpy(input.data(), b.dispatch_tokens, (size_t)given * rb);
      std::vector<float> cw((size_t)given * K + (given ? 0 : 1), 0.5f);
      const void *in = short_weights ? nullptr : input.data();  // NULL: the registered input, every row
      uint64_t in_rows = short_weights ? 0 : given;             // (ignored for it)
      auto start = std::chrono::steady_clock::now();
      int rc = mori_ep_combine_rows(ep, in, in_rows, MORI_EP_BFLOAT16, cw.data(), short_weights ? given : delivered,
                                    split, nullptr, nullptr);
      MORI_EXPECT_OK(rc);
      if (split) MORI_EXPECT_OK(mori_ep_combine_recv(ep, nullptr, nullptr));
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (rank == bad) {
        ExpectError(mori_ep_check(ep), MORI_EINVAL,
                    std::string("rank ") + std::to_string(bad) + "'s combine " + (short_weights ? "weights" : "input") +
                        " holds " + std::to_string(given) + " rows, fewer than the " + std::to_string(delivered) +
                        " its last dispatch delivered");
        EXPECT_EQ(std::string(mori_last_error()).find("later report"), std::string::npos)
            << "its own receive half reported it again: " << mori_last_error();
      } else {
        EXPECT_LT(seconds, 5.0) << "the refusal was waited out";
        ExpectError(mori_ep_check(ep), MORI_EINVAL, "rank " + std::to_string(bad) + " refused its part of a combine");
      }
      for (int k = 0; k < 4; k++) ASSERT_TRUE(CheckCall(ep, s, rank, size, 20 + 4 * round + k, CallOptions(k)));
      MORI_EXPECT_OK(mori_ep_check(ep));
    }
    // Exact counts on every rank, the input and weights both given: summed
    // (each source's tokens come back as the sum of their copies).
    {
      std::vector<int32_t> indices = SpreadIndices(s, size, T);
      std::vector<uint8_t> rows((size_t)T * rb, 0);
      for (uint32_t t = 0; t < T; t++) {
        uint16_t one = 0x3f80;  // bf16 1.0 in element 0
        memcpy(&rows[(size_t)t * rb], &one, 2);
      }
      MORI_ASSERT_OK(mori_ep_dispatch(ep, rows.data(), nullptr, nullptr, indices.data(), T, nullptr, nullptr));
      const uint32_t delivered = (uint32_t)b.recv_num_token[0];
      std::vector<uint8_t> input((size_t)delivered * rb);
      memcpy(input.data(), b.dispatch_tokens, input.size());
      std::vector<float> cw((size_t)delivered * K, 0.25f);
      MORI_ASSERT_OK(mori_ep_combine_rows(ep, input.data(), delivered, MORI_EP_BFLOAT16, cw.data(), delivered, 0, nullptr,
                                          nullptr));
      MORI_ASSERT_OK(mori_ep_check(ep));
      const uint32_t copies = std::min<uint32_t>(K, (uint32_t)size);
      for (uint32_t t = 0; t < T; t++) {
        uint16_t got = 0;
        memcpy(&got, (const uint8_t *)b.combine_output + (size_t)t * rb, 2);
        uint32_t bits = (uint32_t)got << 16;
        float v;
        memcpy(&v, &bits, 4);
        EXPECT_EQ(v, (float)copies) << "token " << t;
        EXPECT_EQ(b.combine_weights[(size_t)t * K], 0.25f * (float)copies) << "token " << t;
      }
    }
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// A peer's refused combine is reported by whichever block sees it. In a
// fused combine a block whose tokens are all this rank's own waits for no
// flag; rank 0's block 0 here has only such a token (token 0, every top-k
// slot on rank 0), block 1 one routed to the refusing rank (token 1).
// Block 1 skips it, and used to leave no record (only block 0 reported):
// a combine that summed nothing for a token, and a check that said OK.
TEST(Ep, APeersRefusalIsReportedByTheBlockThatSawIt) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    setenv("MORI_EP_HOST_BLOCKS", "2", 1);
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    const int bad = size - 1;
    const uint32_t K = s.top_k, rb = s.hidden * ElemBytes(s.dtype);
    const uint32_t tokens = rank == 0 ? 2 : 0;
    std::vector<uint8_t> rows((size_t)2 * rb, 0);
    std::vector<int32_t> indices((size_t)2 * K);
    for (uint32_t k = 0; k < K; k++) {  // token 0 to rank 0's experts, token 1 to the refusing rank's
      indices[k] = (int32_t)(k % s.experts_per_rank);
      indices[K + k] = (int32_t)((uint32_t)bad * s.experts_per_rank + k % s.experts_per_rank);
    }
    const mori_ep_launch_t two_blocks = {2, 0, 0};
    MORI_ASSERT_OK(mori_ep_dispatch(ep, rows.data(), nullptr, nullptr, indices.data(), tokens, &two_blocks, nullptr));
    if (rank == bad) {
      ExpectError(mori_ep_combine_refused(ep, 0, nullptr), MORI_EINVAL, "refused this call");
      MORI_EXPECT_OK(mori_ep_check(ep));  // its own refusal: its call said so
    } else {
      MORI_EXPECT_OK(mori_ep_combine(ep, nullptr, MORI_EP_BFLOAT16, nullptr, &two_blocks, nullptr));
      int checked = mori_ep_check(ep);
      if (rank == 0 || checked)  // (a rank with no token waits for no flag: it may not look)
        ExpectError(checked, MORI_EINVAL, "rank " + std::to_string(bad) + " refused its part of a combine");
    }
    for (int k = 0; k < 4; k++) ASSERT_TRUE(CheckCall(ep, s, rank, size, 40 + k, CallOptions(k)));
    MORI_EXPECT_OK(mori_ep_check(ep));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// A combine before any dispatch has no rows to return: every rank's call
// says so (and its send half's receive half then does nothing), and the
// ranks stay in step for the dispatches and combines that follow.
TEST(Ep, ACombineBeforeAnyDispatchIsRefusedOnEveryRank) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    ExpectError(mori_ep_combine(ep, nullptr, MORI_EP_BFLOAT16, nullptr, nullptr, nullptr), MORI_EINVAL,
                "rank " + std::to_string(rank) + ": no dispatch to combine");
    ExpectError(mori_ep_combine_send(ep, nullptr, MORI_EP_BFLOAT16, nullptr, nullptr, nullptr), MORI_EINVAL,
                "no dispatch to combine");
    MORI_EXPECT_OK(mori_ep_combine_recv(ep, nullptr, nullptr));  // its refused send half ran it
    // Every rank refused, and each said so itself: no record is left.
    MORI_EXPECT_OK(mori_ep_check(ep));
    MORI_EXPECT_OK(mori_ep_reset(ep, nullptr));
    for (int call = 0; call < 6; call++) {
      Options o = CallOptions(call);
      ASSERT_TRUE(CheckCall(ep, s, rank, size, call, o));
      // reset clears the count, not the dispatch: a second combine of it
      // is still right
      uint32_t row = (uint32_t)*b.recv_num_token;
      MORI_EXPECT_OK(mori_ep_reset(ep, nullptr));
      EXPECT_EQ(*b.recv_num_token, 0);
      Inputs mine = MakeInputs(s, rank, size, call);
      // (its own input: a peer may still read the registered buffer for
      // the first combine; docs/ep.md)
      Options again = o;
      again.registered = false;
      ASSERT_TRUE(CheckCombine(ep, s, rank, size, call, call + 1000, again, mine, row, b));
    }
    MORI_EXPECT_OK(mori_ep_check(ep));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// A combine whose dtype differs on one rank: its rows would be read as the
// others' type (4.00391 for 4 in fp32, 2 for 4 in bf16, rc 0). Every
// rank's receive half sums nothing, and check names the ranks and types;
// the next combines are right.
TEST(Ep, ACombineInAnotherDtypeOnOneRankIsRefusedByTheOthers) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 2) return;
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    c.max_token_type_size = 4;
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    ASSERT_TRUE(CheckCall(ep, s, rank, size, 0, CallOptions(0)));
    Options o = CallOptions(1);
    o.split = false;
    o.combine = rank == size - 1 ? MORI_EP_FLOAT32 : MORI_EP_BFLOAT16;
    Inputs in = MakeInputs(s, rank, size, 2);
    MORI_ASSERT_OK(mori_ep_dispatch(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens, nullptr,
                                    nullptr));
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    std::vector<float> rows((size_t)s.max_tokens * size * s.hidden, 1.0f);
    MORI_EXPECT_OK(mori_ep_combine(ep, rows.data(), o.combine, nullptr, nullptr, nullptr));
    ExpectError(mori_ep_check(ep), MORI_EINVAL, rank == size - 1 ? "bfloat16 rows" : "float32 rows");  // the other side's
    for (int k = 0; k < 6; k++) ASSERT_TRUE(CheckCall(ep, s, rank, size, 10 + k, CallOptions(k)));
    MORI_EXPECT_OK(mori_ep_check(ep));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// A dispatch_send refused on one rank runs its receive half with it: that
// rank's outputs are this call's (its next combine read the row count of
// the dispatch two calls before, past the end of the caller's input), and
// the dispatch_recv it calls next does nothing (it was refused as having
// no send half waiting).
TEST(Ep, ARefusedDispatchSendRunsItsReceiveHalf) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    const int bad = size - 1;
    for (int k = 0; k < 3; k++) ASSERT_TRUE(CheckCall(ep, s, rank, size, k, CallOptions(k)));
    std::vector<Inputs> all;
    for (int r = 0; r < size; r++) all.push_back(MakeInputs(s, r, size, 7));
    const Inputs &in = all[rank];
    if (rank == bad) {
      ExpectError(mori_ep_dispatch_send(ep, in.rows.data(), in.weights.data(), nullptr, nullptr, in.tokens, nullptr, nullptr),
                  MORI_EINVAL, "input and indices are required");
    } else {
      MORI_ASSERT_OK(mori_ep_dispatch_send(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens,
                                           nullptr, nullptr));
    }
    MORI_ASSERT_OK(mori_ep_dispatch_recv(ep, nullptr, nullptr));
    int32_t want = 0;
    for (int src = 0; src < size; src++)
      for (uint32_t t = 0; src != bad && t < all[src].tokens; t++) want += Dests(s, all[src], t).count(rank) ? 1 : 0;
    EXPECT_EQ(*b.recv_num_token, want) << "this call's rows, on the refusing rank too";
    (void)mori_ep_check(ep);
    // A combine of exactly the rows delivered reads no further.
    std::vector<uint16_t> rows((size_t)want * s.hidden, 0x3f80);
    MORI_ASSERT_OK(mori_ep_combine(ep, rows.data(), MORI_EP_BFLOAT16, nullptr, nullptr, nullptr));
    for (int k = 0; k < 6; k++) ASSERT_TRUE(CheckCall(ep, s, rank, size, 20 + k, CallOptions(k)));
    MORI_EXPECT_OK(mori_ep_check(ep));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// Configs whose sizes would wrap 32 bits in the device view are refused on
// every rank (a scale_dim of 2^30 x 4 bytes made a context without scales).
TEST(Ep, ConfigsWhoseSizesWouldWrapAreRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_t *ep = nullptr;
    mori_ep_config_t c = Config(s, rank, size);
    c.scale_dim = 1u << 30;
    c.scale_type_size = 4;
    ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL, "scale_type_size 4 overflows");
    c = Config(s, rank, size);
    c.hidden_dim = 1u << 30;
    ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL, "overflows a 32-bit row size");
    c = Config(s, rank, size);
    c.max_num_inp_token_per_rank = 0x7fffffffu;
    if (size > 1) ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL, "int32 token positions");
    EXPECT_EQ(ep, nullptr);
    // Every factor within its bound, their sum over the buffers past 2^64
    // bytes per rank: 2^30 receive rows (world_size x max tokens), 2^30 experts
    // each token goes to, scales of 2^32 - 4 bytes. The total wrapped to a
    // small allocation, and the rank crashed writing past it.
    c = Config(s, rank, size);
    c.max_num_inp_token_per_rank = (1u << 30) / (uint32_t)size;
    c.num_experts_per_rank = (1u << 30) / (uint32_t)size;
    c.num_experts_per_token = 1u << 30;
    c.scale_dim = (1u << 30) - 1;
    c.scale_type_size = 4;
    ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL, "more than 2^64 bytes");
    EXPECT_EQ(ep, nullptr);
    c = Config(s, rank, size);
    // "The default" said two ways (-1 from mori_ep_config_init, 0 from a
    // zeroed config) is one config: it failed as "differs".
    c.gpu_per_node = rank % 2 ? 0 : -1;
    c.num_qp_per_pe = rank % 2 ? -1 : 0;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));  // and a sound one still works
    ASSERT_TRUE(CheckCall(ep, s, rank, size, 0, CallOptions(0)));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// A create a binding refused on one rank only (its own checks found the
// config bad there): every rank's create fails at once, the others' naming
// that rank and its reason, and the next create pairs with the next create
// on every rank (the ranks stay in step).
TEST(Ep, ACreateRefusedOnOneRankFailsOnEveryRankAndKeepsThemInStep) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_t *ep = nullptr;
    mori_ep_config_t c = Config(s, rank, size);
    const int bad = size - 1;
    auto start = std::chrono::steady_clock::now();
    if (rank == bad) {
      ExpectError(mori_ep_create_refused(w.comm, "hidden_dim=0.5; expected a positive int"), MORI_EINVAL,
                  "rank " + std::to_string(bad) + " refused the config: hidden_dim=0.5");
    } else {
      ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL,
                  "rank " + std::to_string(bad) + " refused the config: hidden_dim=0.5");
      EXPECT_EQ(ep, nullptr);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "at once, not after a timeout";
    // The next create is the same call on every rank, and works.
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    ASSERT_TRUE(CheckCall(ep, s, rank, size, 0, CallOptions(0)));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
    ExpectError(mori_ep_create_refused(nullptr, "x"), MORI_EINVAL, "comm is required");
  });
}

// Combine weights given on some ranks only: a rank without them adds zeros
// for its copies to the sums of the ranks that have them (not what its last
// combine left).
TEST(Ep, CombineWeightsGivenOnSomeRanksOnly) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    uint32_t K = s.top_k;
    for (int call = 0; call < 6; call++) {
      Inputs in = MakeInputs(s, rank, size, call);
      MORI_ASSERT_OK(mori_ep_dispatch(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens, nullptr, nullptr));
      uint32_t rows = (uint32_t)*b.recv_num_token;
      std::vector<float> cw((size_t)(rows + 1) * K);
      for (uint32_t i = 0; i < rows * K; i++) cw[i] = b.dispatch_weights[i] + 100.0f * (float)(call + 1);
      bool mine = (rank + call) % 2 == 0;  // which ranks give weights changes every call
      MORI_ASSERT_OK(mori_ep_combine(ep, b.dispatch_tokens, MORI_EP_BFLOAT16, mine ? cw.data() : nullptr, nullptr, nullptr));
      if (!mine) continue;
      for (uint32_t t = 0; t < in.tokens; t++)
        for (uint32_t j = 0; j < K; j++) {
          float want = 0;
          for (int d : Dests(s, in, t))
            if ((d + call) % 2 == 0) want += in.weights[(size_t)t * K + j] + 100.0f * (float)(call + 1);
          ASSERT_EQ(b.combine_weights[(size_t)t * K + j], want) << "call " << call << " token " << t << " slot " << j;
        }
    }
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// Bad configs fail on every rank with the reason; bad calls locally.
TEST(Ep, Refusals) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_t *ep = nullptr;
    mori_ep_config_t c = Config(s, rank, size);
    c.rank = (rank + 1) % size;
    ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL, "the config says rank " + std::to_string((rank + 1) % size));
    c = Config(s, rank, size);
    c.world_size = size + 1;
    ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL, "of world_size " + std::to_string(size + 1));
    c = Config(s, rank, size);
    c.hidden_dim = 0;
    ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL, "hidden_dim is 0");
    c = Config(s, rank, size);
    c.data_type = (mori_ep_dtype_t)9;
    ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL, "data_type 9");
    c = Config(s, rank, size);
    c.num_experts_per_token = s.experts_per_rank * size + 1;
    ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL, "top-k (num_experts_per_token) " +
                                                                    std::to_string(s.experts_per_rank * size + 1));
    c = Config(s, rank, size);
    if (rank == 1) c.hidden_dim = 65;  // one rank differs: every rank fails
    ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL, "config differs from rank");
    EXPECT_NE(std::string(mori_last_error()).find("in hidden_dim ("), std::string::npos) << mori_last_error();
    EXPECT_EQ(std::string(mori_last_error()).find("bytes of buffers"), std::string::npos) << mori_last_error();
    EXPECT_EQ(ep, nullptr);
    // A rank's own launch shape is its own.
    c = Config(s, rank, size);
    c.block_num = 1 + rank % 2;
    c.warp_num_per_block = 1 + rank;
    c.use_external_inp_buf = rank % 2;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    ASSERT_TRUE(CheckCall(ep, s, rank, size, 0, Options()));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
    ep = nullptr;
    c = Config(s, rank, size);
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    std::vector<uint8_t> rows((s.max_tokens + 1) * s.hidden * 2);
    std::vector<int32_t> idx((s.max_tokens + 1) * s.top_k, 0);
    ExpectError(mori_ep_dispatch(ep, rows.data(), nullptr, nullptr, idx.data(), s.max_tokens + 1, nullptr, nullptr), MORI_EINVAL,
                  "rank " + std::to_string(rank) + " dispatches " + std::to_string(s.max_tokens + 1) +
                      " tokens, more than max_num_inp_token_per_rank " + std::to_string(s.max_tokens));
    ExpectError(mori_ep_dispatch(ep, nullptr, nullptr, nullptr, idx.data(), 1, nullptr, nullptr), MORI_EINVAL,
                  "input and indices are required");
    ExpectError(mori_ep_combine(ep, nullptr, MORI_EP_FP8_E4M3FN, nullptr, nullptr, nullptr), MORI_EINVAL,
                  "combine dtype float8_e4m3fn (3) is not float32, bfloat16 or float16");
    // A fused call writes its outputs while it still reads its inputs: an
    // input inside them is refused (the halves, one after the other, take it).
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    ExpectError(mori_ep_dispatch(ep, b.dispatch_tokens, nullptr, nullptr, idx.data(), 2, nullptr, nullptr), MORI_EINVAL,
                  "the input (" + std::to_string(2 * s.hidden * 2) + " bytes at");
    ExpectError(mori_ep_dispatch(ep, rows.data(), nullptr, nullptr, b.src_token_pos, 2, nullptr, nullptr), MORI_EINVAL,
                  "the indices");
    EXPECT_NE(std::string(mori_last_error()).find("overlaps this context's dispatch outputs"), std::string::npos);
    ExpectError(mori_ep_combine(ep, nullptr, MORI_EP_BFLOAT16, b.combine_weights, nullptr, nullptr), MORI_EINVAL,
                  "the weights");
    EXPECT_NE(std::string(mori_last_error()).find("overlaps this context's combine outputs"), std::string::npos);
    // An input inside the registered combine input at another address (a
    // shifted slice of it), in either form of the call: the call copies it
    // into that buffer, over rows it has not read yet (this rank's own rows
    // came out wrong). The buffer itself is read in place.
    ExpectError(mori_ep_combine(ep, (char *)b.combine_input + s.hidden * 2, MORI_EP_BFLOAT16, nullptr, nullptr, nullptr),
                MORI_EINVAL, "overlaps this context's registered combine input");
    ExpectError(mori_ep_combine_send(ep, (char *)b.combine_input + 2, MORI_EP_BFLOAT16, nullptr, nullptr, nullptr),
                MORI_EINVAL, "without starting there");
    // The halves come in pairs, nothing between them: a receive half
    // without its send half, a call while a send half waits (a fused combine
    // there waited out the whole timeout; a lone dispatch_recv returned
    // stale rows).
    ExpectError(mori_ep_dispatch_recv(ep, nullptr, nullptr), MORI_EINVAL,
                  "ep_dispatch_recv: rank " + std::to_string(rank) + ": no ep_dispatch_send is waiting");
    ExpectError(mori_ep_combine_recv(ep, nullptr, nullptr), MORI_EINVAL, "no ep_combine_send is waiting");
    {
      Inputs in = MakeInputs(s, rank, size, 7);
      MORI_ASSERT_OK(mori_ep_dispatch_send(ep, in.rows.data(), nullptr, nullptr, in.indices.data(), in.tokens, nullptr, nullptr));
      ExpectError(mori_ep_combine(ep, nullptr, MORI_EP_BFLOAT16, nullptr, nullptr, nullptr), MORI_EINVAL,
                    "ep_dispatch_send is still waiting for its receive half");
      ExpectError(mori_ep_combine_recv(ep, nullptr, nullptr), MORI_EINVAL, "(ep_dispatch_send is)");
      ExpectError(mori_ep_reset(ep, nullptr), MORI_EINVAL, "ep_reset: rank " + std::to_string(rank) +
                                                              ": ep_dispatch_send is still waiting for its receive half");
      MORI_ASSERT_OK(mori_ep_dispatch_recv(ep, nullptr, nullptr));
      MORI_ASSERT_OK(mori_ep_combine_send(ep, nullptr, MORI_EP_BFLOAT16, nullptr, nullptr, nullptr));
      ExpectError(mori_ep_combine(ep, nullptr, MORI_EP_BFLOAT16, nullptr, nullptr, nullptr), MORI_EINVAL,
                    "ep_combine_send is still waiting");
      ExpectError(mori_ep_dispatch(ep, in.rows.data(), nullptr, nullptr, in.indices.data(), in.tokens, nullptr, nullptr),
                    MORI_EINVAL, "ep_combine_send is still waiting");
      MORI_ASSERT_OK(mori_ep_combine_recv(ep, nullptr, nullptr));
    }
    // The refused dispatches ran this rank's part with no tokens (so the
    // ranks stayed in step); a rank's check does not report its own
    // refusals again (every rank refused here).
    MORI_EXPECT_OK(mori_ep_check(ep));
    // The context still works.
    for (int call = 0; call < 3; call++) ASSERT_TRUE(CheckCall(ep, s, rank, size, call, Options()));
    MORI_EXPECT_OK(mori_ep_check(ep));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
    // A combine wider than the buffers hold.
    c = Config(s, rank, size);
    c.max_token_type_size = 2;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    ExpectError(mori_ep_combine(ep, nullptr, MORI_EP_FLOAT32, nullptr, nullptr, nullptr), MORI_EINVAL,
                  "takes 4 bytes, the buffers hold 2");
    MORI_EXPECT_OK(mori_ep_destroy(ep));
    // 1 byte holds no combine dtype (every combine would be refused).
    c = Config(s, rank, size);
    c.data_type = MORI_EP_FP8_E4M3FN;
    c.max_token_type_size = 1;
    ExpectError(mori_ep_create(w.comm, &c, &ep), MORI_EINVAL, "max_token_type_size 1 holds no combine dtype");
    // 0 means the size data_type needs: a rank that says it agrees.
    c = Config(s, rank, size);
    c.max_token_type_size = rank % 2 ? 2 : 0;  // bfloat16: 2 bytes either way
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

}  // namespace

namespace {

// A rank that skips a call: the peers' waits end after the timeout (the
// comm's bootstrap timeout when the context is made: 5 s here, the comm's
// own steps keeping the same) with an error naming what was waited for,
// instead of hanging. The skipping rank reaches destroy first and its step
// waits for the others beyond the comm's timeout, so destroy succeeds on
// every rank (it failed on that rank when the step kept the comm's limit).
TEST(Ep, AMissingPeerTimesOutInsteadOfHanging) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    // 5 s: the first call must succeed within it, on a machine that can
    // stall a rank for seconds.
    World w(5000);
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    ASSERT_TRUE(CheckCall(ep, s, rank, size, 0, Options()));
    if (rank != size - 1) {  // the last rank skips the next dispatch
      Inputs in = MakeInputs(s, rank, size, 1);
      int rc = mori_ep_dispatch(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens, nullptr, nullptr);
      EXPECT_EQ(rc, MORI_EDEVICE_TIMEOUT) << mori_last_error();
      EXPECT_NE(std::string(mori_last_error()).find(std::to_string(size - 1)), std::string::npos) << mori_last_error();
    }
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

}  // namespace

namespace {

// One call's dispatch and combine whatever they return: *wrong_unreported
// when both returned MORI_OK, mori_ep_check said nothing either, and the
// combine's output differs from the reference (the one outcome a caller
// cannot tell from success). Returns the first nonzero of the three.
int UncheckedCall(mori_ep_t *ep, const Shape &s, int me, int n, int call, bool *wrong_unreported, std::string *error) {
  Inputs mine = MakeInputs(s, me, n, call);
  Options o;
  int d = mori_ep_dispatch(ep, mine.rows.data(), mine.weights.data(), nullptr, mine.indices.data(), mine.tokens, nullptr, nullptr);
  if (d) *error = mori_last_error();
  mori_ep_buffers_t b;
  MORI_EXPECT_OK(mori_ep_buffers(ep, &b));
  CombineInput keep;
  int cr = SendCombine(ep, s, me, call, o, d ? 0 : (uint32_t)*b.recv_num_token, b, keep);
  if (cr && error->empty()) *error = mori_last_error();
  int chk = mori_ep_check(ep);
  if (chk && error->empty()) *error = mori_last_error();
  *wrong_unreported = !d && !cr && !chk && !VerifyCombine(s, me, call, call, o, mine, b, true);
  return d ? d : cr ? cr : chk;
}

// A peer later than the timeout: the ranks whose dispatch timed out stop
// their context (its later calls are refused, their parts run as refused),
// so the late peer, whose own calls pair with those parts, is told through
// mori_ep_check instead of summing what its peers never sent (it did,
// with MORI_OK: the timed-out ranks' combine sent rows of an old call).
// Destroy then succeeds on every rank without a longer timeout (its step
// outwaits a peer still in a failed call's wait).
TEST(Ep, AFailedCallStopsTheContextAndNoLaterCallReturnsWrongDataUnreported) {
  int size = TestRanks();
  if (size < 2) GTEST_SKIP();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    World w(20000);
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    // A 5 s EP timeout (the first call must succeed within it, on a machine
    // that can stall a rank for seconds), and a peer 7.5 s late.
    MORI_ASSERT_OK(mori_bootstrap_set_timeout_ms(w.bootstrap, 5000));
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    ASSERT_TRUE(CheckCall(ep, s, rank, size, 0, Options()));
    bool late = rank == size - 1;
    if (late) usleep(7500 * 1000);
    int reported = 0;
    for (int call = 1; call <= 4; call++) {
      bool wrong = false;
      std::string error;
      int rc = UncheckedCall(ep, s, rank, size, call, &wrong, &error);
      EXPECT_FALSE(wrong) << "rank " << rank << " call " << call << ": wrong data with MORI_OK and nothing reported";
      reported += rc != 0;
      if (!late && call == 1) {
        EXPECT_EQ(rc, MORI_EDEVICE_TIMEOUT) << error;
      }
      if (!late && call > 1) {
        EXPECT_EQ(rc, MORI_ECANCELED) << error;
        EXPECT_NE(error.find("an earlier call of this context failed"), std::string::npos) << error;
      }
    }
    EXPECT_GT(reported, 0) << "rank " << rank << " was told nothing";
    // Every call since the failure ran as refused on the stopped ranks.
    if (!late) {
      EXPECT_EQ(mori_ep_reset(ep, nullptr), 0);
      EXPECT_EQ(mori_ep_dispatch(ep, nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr), MORI_ECANCELED);
    } else {
      EXPECT_EQ(mori_ep_dispatch(ep, nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr), 0) << mori_last_error();
      EXPECT_EQ(mori_ep_check(ep), MORI_EINVAL);
      EXPECT_NE(std::string(mori_last_error()).find("refused its part of a dispatch"), std::string::npos) << mori_last_error();
    }
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// Reports that come while one is kept are counted in its message, and a
// kernel's wait record read by the same check goes with it.
TEST(Ep, ReportsThatComeWhileOneIsKeptAreCounted) {
  int size = TestRanks();
  if (size < 2) GTEST_SKIP();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    for (int call = 0; call < 3; call++) {  // three calls, each with a bad index on the last rank
      Inputs in = MakeInputs(s, rank, size, 0);
      in.tokens = 4;
      in.rows.resize(4 * s.hidden * 2);
      in.weights.assign(4 * s.top_k, 1.0f);
      in.indices.assign(4 * s.top_k, 0);
      if (rank == size - 1) in.indices[2 * s.top_k + 1] = 999;
      MORI_ASSERT_OK(mori_ep_dispatch(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens, nullptr, nullptr));
      MORI_ASSERT_OK(mori_ep_combine(ep, nullptr, MORI_EP_BFLOAT16, nullptr, nullptr, nullptr));
    }
    EXPECT_EQ(mori_ep_check(ep), MORI_EINVAL);
    std::string msg = mori_last_error();
    EXPECT_NE(msg.find("has expert index 999"), std::string::npos) << msg;
    EXPECT_NE(msg.find("and 2 later report(s) of this rank, not kept"), std::string::npos) << msg;
    MORI_EXPECT_OK(mori_ep_check(ep));  // the count went with the report
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

}  // namespace

namespace {

// Two simulated nodes (MORI_HOST_ID) joined by the rdma transport over the
// copy-engine NIC: the ranks of the other node are reached through the
// window's proxy (InterNode). 2 x 1, 2 x 2 and 2 x 4 ranks.
TEST(Ep, TwoSimulatedNodesThroughTheProxy) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    setenv("MORI_HOST_ID", rank < size / 2 ? "node-a" : "node-b", 1);
    setenv("MORI_EP_HOST_BLOCKS", "3", 1);
    ASSERT_EQ(mori_ce_nic_install(), 0) << mori_last_error();
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    int base = 0, lsa = 0;
    mori_comm_lsa(w.comm, &base, &lsa, nullptr);
    ASSERT_EQ(lsa, size / 2);  // the other node's ranks are not load/store reachable
    for (mori_ep_dtype_t dt : {MORI_EP_BFLOAT16, MORI_EP_FP8_E4M3FN}) {
      Shape s;
      s.dtype = dt;
      if (dt == MORI_EP_FP8_E4M3FN) s.hidden = 40, s.scale_dim = 2, s.scale_size = 4;
      mori_ep_config_t c = Config(s, rank, size);
      c.kernel_type = MORI_EP_INTER_NODE;
      if (dt == MORI_EP_FP8_E4M3FN) c.block_num = 3;  // the remote fetches with several blocks
      mori_ep_t *ep = nullptr;
      MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
      int calls = EnvInt("MORI_EP_TEST_CALLS", size >= 8 ? 200 : 500);
      for (int call = 0; call < calls; call++) {
        Options o = CallOptions(call);
        o.scales = dt == MORI_EP_FP8_E4M3FN;
        ASSERT_TRUE(CheckCall(ep, s, rank, size, call, o)) << "dtype " << dt;
      }
      MORI_EXPECT_OK(mori_ep_check(ep));
      MORI_EXPECT_OK(mori_ep_destroy(ep));
    }
  });
}

}  // namespace

namespace {

// Two combines of one dispatch, back to back: the second must not
// overwrite rows a slower rank still reads for the first.
TEST(Ep, TwoCombinesOfOneDispatch) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    for (int call = 0; call < 300; call++) {
      Options o;
      o.split = call % 3 == 1;
      ASSERT_TRUE(CheckCall(ep, s, rank, size, call, o));
      Inputs mine = MakeInputs(s, rank, size, call);
      ASSERT_TRUE(CheckCombine(ep, s, rank, size, call, call + 1000, o, mine, (uint32_t)*b.recv_num_token, b));
    }
    MORI_EXPECT_OK(mori_ep_check(ep));
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// A second combine of one dispatch whose wait for the last rank's reading
// of the first times out: it copies nothing and raises no flag, so the
// late rank, reading the first combine afterwards, gets the first
// combine's rows, not a mix with the second's.
TEST(Ep, ACombineThatTimesOutWaitingForALateReaderLeavesItsRowsAlone) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w(20000);
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    mori_ep_t *ep = nullptr;
    // A 5 s EP timeout: the calls before the one that times out must
    // succeed within it on a machine that can stall a rank for seconds.
    MORI_ASSERT_OK(mori_bootstrap_set_timeout_ms(w.bootstrap, 5000));
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));
    MORI_ASSERT_OK(mori_bootstrap_set_timeout_ms(w.bootstrap, 20000));  // the steps below outwait the EP timeout
    mori_ep_buffers_t b;
    MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
    Options o;
    o.split = true;
    ASSERT_TRUE(CheckCall(ep, s, rank, size, 0, o));
    Inputs mine = MakeInputs(s, rank, size, 1);
    MORI_ASSERT_OK(mori_ep_dispatch(ep, mine.rows.data(), mine.weights.data(), nullptr, mine.indices.data(), mine.tokens, nullptr,
                                    nullptr));
    uint32_t rows = (uint32_t)*b.recv_num_token;
    CombineInput first, second;
    MORI_ASSERT_OK(SendCombine(ep, s, rank, 100, o, rows, b, first));
    bool late = rank == size - 1;
    if (!late) {
      MORI_ASSERT_OK(mori_ep_combine_recv(ep, nullptr, nullptr));
      EXPECT_TRUE(VerifyCombine(s, rank, 1, 100, o, mine, b));
      // The late rank has not read this combine yet: the next one's send
      // waits for it, times out, and must leave the rows as they are.
      EXPECT_EQ(SendCombine(ep, s, rank, 200, o, rows, b, second), MORI_EDEVICE_TIMEOUT) << mori_last_error();
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));  // the others' second sends have given up
    if (late) {
      MORI_ASSERT_OK(mori_ep_combine_recv(ep, nullptr, nullptr));
      EXPECT_TRUE(VerifyCombine(s, rank, 1, 100, o, mine, b)) << "the late rank reads the first combine whole";
    }
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

// A context destroyed after a call timed out may still have kernels of
// that call, or later ones, queued on a late rank; they write their epochs
// into the flags of memory that a new context now occupies. A new context
// counts its calls from a base above every epoch of an earlier one, so
// such a write passes for none of its calls. (Without bases the late
// rank's old dispatch flag of call 8 passed for the new context's call 1,
// which then read the late rank's rows as they happened to be.)
TEST(Ep, AnEarlierContextsLateFlagsPassForNoCallOfANewOne) {
  int size = TestRanks();
  if (size < 2) GTEST_SKIP();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    World w(20000);
    ASSERT_TRUE(w.ok());
    Shape s;
    mori_ep_config_t c = Config(s, rank, size);
    const int late = size - 1;
    // A new context, on a 5 s EP timeout (the calls that succeed must
    // within it, on a machine that can stall a rank for seconds); the
    // bootstrap steps between calls outwait that timeout.
    auto make = [&](mori_ep_t **ep) {
      MORI_ASSERT_OK(mori_bootstrap_set_timeout_ms(w.bootstrap, 5000));
      MORI_ASSERT_OK(mori_ep_create(w.comm, &c, ep));
      MORI_ASSERT_OK(mori_bootstrap_set_timeout_ms(w.bootstrap, 20000));
    };
    // The late rank's kernel of an earlier context's call: `word` into
    // its flag at `offset` in every other rank's memory.
    auto stale = [&](mori_ep_t *ep, uint64_t offset, uint64_t word) {
      void *const *ptrs = mori_window_ptrs(ep->win);
      for (int r = 0; rank == late && r < size; r++)
        if (r != late) ((uint64_t *)((char *)ptrs[r] + offset))[late] = word;
    };
    auto state = [](mori_ep_t *ep) { return (const mori_ep_state_t *)((const char *)ep->memory + ep->view.off_state); };
    mori_ep_t *old = nullptr, *ep = nullptr;
    ASSERT_NO_FATAL_FAILURE(make(&old));
    ASSERT_TRUE(CheckCall(old, s, rank, size, 0, Options()));
    const uint64_t old_base = old->epoch_base;
    MORI_EXPECT_OK(mori_ep_destroy(old));
    // One floor for every kind of context (both carve the same heap): a
    // collective context made now starts above the old MoE context, and
    // the next MoE context above it.
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, nullptr, &coll));
    const uint64_t coll_base = coll->epoch_base;
    EXPECT_GE(coll_base, old_base + (1ull << 39));
    MORI_EXPECT_OK(mori_coll_destroy(coll));

    // A dispatch flag of the old context's call 8.
    ASSERT_NO_FATAL_FAILURE(make(&ep));
    EXPECT_GE(ep->epoch_base, coll_base + (1ull << 39)) << "a new context starts far above the last one";
    EXPECT_EQ(state(ep)->dispatch_epoch, ep->epoch_base) << "host platform: the state is host memory";
    stale(ep, ep->view.off_dflag, old_base + 8);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    Inputs in = MakeInputs(s, rank, size, 1);
    if (rank != late) {
      int rc = mori_ep_dispatch(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens, nullptr, nullptr);
      EXPECT_EQ(rc, MORI_EDEVICE_TIMEOUT) << "the late rank's old flag passed for the new call: " << mori_last_error();
      EXPECT_NE(std::string(mori_last_error()).find("for rank " + std::to_string(late)), std::string::npos) << mori_last_error();
      EXPECT_NE(std::string(mori_last_error()).find("(expected 1, saw 8)"), std::string::npos)
          << "the call is numbered from the context's first: " << mori_last_error();
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    const uint64_t second_base = ep->epoch_base;
    MORI_EXPECT_OK(mori_ep_destroy(ep));

    // A combine flag of the second context's call 8 (it carries the
    // sender's dtype above the epoch): the dispatch runs, the combine's
    // receive half waits for the late rank.
    ASSERT_NO_FATAL_FAILURE(make(&ep));
    const uint64_t bf16 = (uint64_t)(MORI_EP_BFLOAT16 + 1) << MORI_EP_FLAG_DTYPE_SHIFT;
    stale(ep, ep->view.off_cflag, bf16 | (second_base + 8));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_ASSERT_OK(mori_ep_dispatch(ep, in.rows.data(), in.weights.data(), nullptr, in.indices.data(), in.tokens, nullptr, nullptr));
    if (rank != late) {
      mori_ep_buffers_t b;
      MORI_ASSERT_OK(mori_ep_buffers(ep, &b));
      CombineInput keep;
      // In halves: a fused combine whose tokens all have their copies on
      // this rank reads no flag at all.
      Options o;
      o.split = true;
      MORI_ASSERT_OK(SendCombine(ep, s, rank, 1, o, (uint32_t)*b.recv_num_token, b, keep));
      int rc = mori_ep_combine_recv(ep, nullptr, nullptr);
      EXPECT_EQ(rc, MORI_EDEVICE_TIMEOUT) << "the late rank's old flag passed for the new call: " << mori_last_error();
      // The record says what epoch the flag held, without the dtype bits.
      EXPECT_NE(std::string(mori_last_error()).find("(expected 1, saw " + std::to_string(second_base + 8) + ")"),
                std::string::npos)
          << mori_last_error();
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_ep_destroy(ep));

    // A fourth context works from its own base: whole calls and halves,
    // each checked against the reference.
    ASSERT_NO_FATAL_FAILURE(make(&ep));
    EXPECT_GE(ep->epoch_base >> 40, 4u);
    for (int call = 0; call < 6; call++) ASSERT_TRUE(CheckCall(ep, s, rank, size, call, CallOptions(call))) << call;
    EXPECT_EQ(state(ep)->dispatch_epoch, ep->epoch_base + 6);
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

}  // namespace
