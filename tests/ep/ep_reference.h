// SPDX-License-Identifier: MIT
// The reference of the EP tests (host platform and GPU): every rank's
// inputs of a call are a function of (rank, call), so each rank rebuilds
// what every source sent it and what its combine must return.
#ifndef MORI_TESTS_EP_EP_REFERENCE_H
#define MORI_TESTS_EP_EP_REFERENCE_H

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "mori/device/coll/impl/numeric__funcs.h"
#include "mori/ep.h"

namespace mori_ep_test {

struct Shape {
  mori_ep_dtype_t dtype = MORI_EP_BFLOAT16;
  uint32_t hidden = 64, max_tokens = 16, experts_per_rank = 2, top_k = 4, scale_dim = 0, scale_size = 0;
};

inline uint32_t ElemBytes(mori_ep_dtype_t t) { return t == MORI_EP_FLOAT32 ? 4 : t <= MORI_EP_FLOAT16 ? 2 : 1; }

inline mori_ep_config_t Config(const Shape &s, int rank, int n) {
  mori_ep_config_t c;
  mori_ep_config_init(&c);
  c.data_type = s.dtype;
  c.rank = rank;
  c.world_size = n;
  c.hidden_dim = s.hidden;
  c.scale_dim = s.scale_dim;
  c.scale_type_size = s.scale_size;
  c.max_token_type_size = 4;  // combine in fp32 too
  c.max_num_inp_token_per_rank = s.max_tokens;
  c.num_experts_per_rank = s.experts_per_rank;
  c.num_experts_per_token = s.top_k;
  return c;
}

// One rank's inputs of one call.
struct Inputs {
  uint32_t tokens = 0;
  std::vector<uint8_t> rows, scales;
  std::vector<float> weights;
  std::vector<int32_t> indices;
};

// Routings by call: uniform; all on one expert; every top-k on one rank
// (duplicate destinations); one rank gets nothing; no tokens on some ranks.
inline Inputs MakeInputs(const Shape &s, int rank, int n, int call) {
  std::mt19937 rng((uint32_t)(call * 7919 + rank * 104729 + 17));
  Inputs in;
  int mode = call % 5;
  in.tokens = rng() % (s.max_tokens + 1);
  if (mode == 4 && rank % 2 == 1) in.tokens = 0;
  uint32_t E = (uint32_t)n * s.experts_per_rank, T = in.tokens, K = s.top_k;
  uint32_t rb = s.hidden * ElemBytes(s.dtype), sb = s.scale_dim * s.scale_size;
  in.rows.resize((size_t)T * rb);
  for (auto &b : in.rows) b = (uint8_t)rng();
  in.scales.resize((size_t)T * sb);
  for (auto &b : in.scales) b = (uint8_t)rng();
  in.weights.resize((size_t)T * K);
  for (auto &w : in.weights) w = (float)(rng() % 1000) / 64.0f;
  in.indices.resize((size_t)T * K);
  int empty = call % n;
  for (uint32_t t = 0; t < T; t++) {
    std::vector<int32_t> pool;
    for (uint32_t e = 0; e < E; e++) pool.push_back((int32_t)e);
    std::shuffle(pool.begin(), pool.end(), rng);
    for (uint32_t j = 0; j < K; j++) {
      int32_t e = pool[j % pool.size()];
      if (mode == 1) e = (int32_t)(call % E);
      if (mode == 2) e = (int32_t)((t % n) * s.experts_per_rank + rng() % s.experts_per_rank);
      if (mode == 3 && (uint32_t)e / s.experts_per_rank == (uint32_t)empty)
        e = (int32_t)(((uint32_t)e + s.experts_per_rank) % E);
      in.indices[(size_t)t * K + j] = e;
    }
  }
  return in;
}

// The distinct destination ranks of token t, ascending.
inline std::set<int> Dests(const Shape &s, const Inputs &in, uint32_t t) {
  std::set<int> d;
  for (uint32_t j = 0; j < s.top_k; j++) d.insert(in.indices[(size_t)t * s.top_k + j] / (int)s.experts_per_rank);
  return d;
}

// What rank d's expert writes for element h of (source s, token t).
inline float ExpertValue(int s, uint32_t t, uint32_t h, int d, int call) {
  return (float)((int)((s * 7 + t * 3 + h + d * 5 + call) % 17) - 8) * 0.25f;
}

inline void StoreAs(uint8_t *row, uint32_t h, mori_ep_dtype_t dt, float v) { mori_coll_impl_store_elem(row, h, (uint32_t)dt, v); }
inline float LoadAs(const uint8_t *row, uint32_t h, mori_ep_dtype_t dt) { return mori_coll_impl_load_elem(row, h, (uint32_t)dt); }

// The top-k indices of `tokens` tokens, token t sent to ranks t, t + 1, ...
// (mod n), each rank's first expert: every rank receives rows from every
// rank once there are n tokens.
inline std::vector<int32_t> SpreadIndices(const Shape &s, int n, uint32_t tokens) {
  std::vector<int32_t> indices((size_t)tokens * s.top_k);
  for (uint32_t t = 0; t < tokens; t++)
    for (uint32_t k = 0; k < s.top_k; k++)
      indices[(size_t)t * s.top_k + k] = (int32_t)(((t + k) % (uint32_t)n) * s.experts_per_rank);
  return indices;
}

}  // namespace mori_ep_test

#endif
