// SPDX-License-Identifier: MIT
// A rank that has no memory for a context while creating one (mori_coll_create,
// mori_ep_create) still takes the collective step its peers are in: every
// rank's create fails at once, the others' naming that rank, instead of
// waiting out the timeout; and the next create pairs with the next create on
// every rank. The failure is planted: the test is linked with
// -Wl,--wrap=calloc, and the wrapper fails the one calloc of exactly the
// context's size that the failing rank arms.
#include <errno.h>

#include <atomic>
#include <chrono>
#include <string>

#include "collectives/ep_internal.h"
#include "collectives/internal.h"
#include "mori/collectives.h"
#include "mori/ep.h"
#include "tests/collectives/coll_support.h"

extern "C" void *__real_calloc(size_t n, size_t size);

namespace {
// Armed: the next calloc(fail_n, fail_size) returns NULL, once.
std::atomic<size_t> fail_n{0}, fail_size{0};
}  // namespace

extern "C" void *__wrap_calloc(size_t n, size_t size) {
  size_t want = fail_size.load();
  if (want && size == want && n == fail_n.load() && fail_size.compare_exchange_strong(want, 0)) {
    errno = ENOMEM;
    return nullptr;
  }
  return __real_calloc(n, size);
}

namespace {

using mori_test::ExpectError;
using mori_test::TestRanks;
using mori_test::World;

// Well under the comm's timeout: a peer that waited for the failed rank
// would take all of it.
constexpr int kTimeoutMs = 30000;
constexpr auto kAtOnce = std::chrono::seconds(10);

void Arm(size_t n, size_t size) {
  fail_n = n;
  fail_size = size;
}

// What every rank's create must have said: the failing rank its own
// ENOMEM (`says`), the others that rank, all of them at once. Disarms.
void ExpectFailedAtOnce(int rc, int rank, int bad, const std::string &says, std::chrono::steady_clock::time_point start) {
  auto took = std::chrono::steady_clock::now() - start;
  if (rank == bad) {
    EXPECT_EQ(fail_size.load(), 0u) << "the planted failure was not reached";
    ExpectError(rc, MORI_ENOMEM, says);
  } else {
    EXPECT_NE(rc, 0);
    EXPECT_NE(std::string(mori_last_error()).find("rank(s) " + std::to_string(bad) + " failed"), std::string::npos)
        << mori_last_error();
  }
  EXPECT_LT(took, kAtOnce) << "rank " << rank << " waited for the rank without memory";
  fail_size = 0;  // not reached: no later allocation fails in its stead
}

TEST(CreateOom, ACollContextThatCannotBeAllocatedFailsEveryRankAtOnce) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w(kTimeoutMs);
    ASSERT_TRUE(w.ok());
    const int bad = size - 1;
    if (rank == bad) Arm(1, sizeof(struct mori_coll));
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.workspace_bytes = 1 << 20;
    mori_coll_t *coll = nullptr;
    auto start = std::chrono::steady_clock::now();
    int rc = mori_coll_create(w.comm, &attr, &coll);
    EXPECT_EQ(coll, nullptr);
    ExpectFailedAtOnce(rc, rank, bad, "coll_create: rank " + std::to_string(bad) + "'s context", start);
    // In step: the next create is the same call on every rank, and works.
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    ASSERT_NO_FATAL_FAILURE(mori_test::SumRound(coll, rank, size, 1000, 1));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

mori_ep_config_t SmallEp(int rank, int size) {
  mori_ep_config_t c;
  mori_ep_config_init(&c);
  c.data_type = MORI_EP_BFLOAT16;
  c.rank = rank;
  c.world_size = size;
  c.hidden_dim = 64;
  c.max_num_inp_token_per_rank = 8;
  c.num_experts_per_rank = 2;
  c.num_experts_per_token = 2;
  return c;
}

// The two allocations of mori_ep_create before its collective steps: the
// table of every rank's config, then the context.
TEST(CreateOom, AnEpCreateWithoutMemoryFailsEveryRankAtOnce) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w(kTimeoutMs);
    ASSERT_TRUE(w.ok());
    const int bad = size - 1;
    mori_ep_config_t c = SmallEp(rank, size);
    struct {
      const char *what;
      size_t n, size;
      std::string says;
    } cases[] = {
        {"the config table", (size_t)size, sizeof(mori_ep_proposal_t), "table of " + std::to_string(size) + " configs"},
        {"the context", 1, sizeof(struct mori_ep), "ep_create: rank " + std::to_string(bad) + "'s context"},
    };
    for (const auto &k : cases) {
      SCOPED_TRACE(k.what);
      if (rank == bad) Arm(k.n, k.size);
      mori_ep_t *ep = nullptr;
      auto start = std::chrono::steady_clock::now();
      int rc = mori_ep_create(w.comm, &c, &ep);
      EXPECT_EQ(ep, nullptr);
      ExpectFailedAtOnce(rc, rank, bad, k.says, start);
    }
    mori_ep_t *ep = nullptr;
    MORI_ASSERT_OK(mori_ep_create(w.comm, &c, &ep));  // in step, and it works
    MORI_EXPECT_OK(mori_ep_destroy(ep));
  });
}

}  // namespace
