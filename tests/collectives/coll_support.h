// SPDX-License-Identifier: MIT
// What the collectives' CPU-rank suites share: a context of the world with
// the attributes a test cares about, and a sum all-reduce whose result is
// checked (the call that shows the ranks' calls are still paired).
#ifndef MORI_TESTS_COLLECTIVES_COLL_SUPPORT_H
#define MORI_TESTS_COLLECTIVES_COLL_SUPPORT_H

#include <vector>

#include "mori/collectives.h"
#include "tests/support/world.h"

namespace mori_test {

inline mori_coll_t *MakeColl(World &w, uint64_t timeout_ms = 0, size_t workspace = 16 << 20, int check_calls = 0) {
  mori_coll_attr_t attr;
  mori_coll_attr_init(&attr);
  attr.workspace_bytes = workspace;
  attr.timeout_ms = timeout_ms;
  attr.check_calls = check_calls;
  mori_coll_t *coll = nullptr;
  EXPECT_EQ(mori_coll_create(w.comm, &attr, &coll), 0) << mori_last_error();
  return coll;
}

// Sum all-reduce of `count` floats, value rank + call on every element;
// every 97th element checked.
inline void SumRound(mori_coll_t *coll, int rank, int size, size_t count, int call) {
  std::vector<float> in(count, (float)(rank + call)), out(count, -1.0f);
  MORI_ASSERT_OK(mori_all_reduce(coll, in.data(), out.data(), count, MORI_FLOAT32, MORI_REDOP_SUM, nullptr));
  float want = (float)(size * (size - 1) / 2 + size * call);
  for (size_t i = 0; i < count; i += 97) ASSERT_EQ(out[i], want) << "call " << call << " element " << i;
}

}  // namespace mori_test

#endif
