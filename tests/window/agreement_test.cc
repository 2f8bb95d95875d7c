// SPDX-License-Identifier: MIT
// Core's agreement step (core/internal/agreement.h) across separate
// processes: every rank succeeds together, or every rank fails with an
// error naming the failed rank(s) and carrying each one's own message.
#include <string>
#include <unistd.h>
#include <vector>

#include "core/base/error.h"
#include "core/internal/agreement.h"
#include "tests/support/profile_calls.h"
#include "tests/support/world.h"

using mori_test::ProfileCalls;
using mori_test::TestRanks;
using mori_test::World;

namespace {

bool Has(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

TEST(Agreement, AllSucceedInOneStepAndEveryRankGetsEveryPayload) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    uint64_t mine = 1000u + 7u * (uint64_t)rank;
    std::vector<uint64_t> all(size);
    mori_profile_reset();
    MORI_ASSERT_OK(mori_agree_gather(w.comm, 0, "payload step", &mine, all.data(), sizeof(mine)));
    EXPECT_EQ(ProfileCalls("collective_step"), 1u) << "the happy path is one step";
    for (int r = 0; r < size; r++) EXPECT_EQ(all[r], 1000u + 7u * (uint64_t)r) << "rank " << r;
    MORI_EXPECT_OK(mori_agree(w.comm, 0, "plain step"));
  });
}

// A rank in another collective step (the same size, another name) fails
// every rank, and a rank that found it names both steps: the other rank's
// by its name, not only by a hash of it (through the node channel, ranks
// that learn of the failure from another rank name that rank instead).
// Through the bootstrap a rank in another step of the same size was paired
// with it and every rank returned 0.
TEST(Agreement, ARankInAnotherStepIsNamedWithThatStepsName) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 2) return;
    World w;
    ASSERT_TRUE(w.ok());
    int other = size - 1;
    // Every rank past the comm's creation first: the mismatch fails the
    // comm's channel, and a rank still in an earlier step would fail there.
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    int rc = mori_agree(w.comm, 0, rank == other ? "the other step" : "this step");
    EXPECT_EQ(rc, MORI_EMISMATCH) << mori_last_error();
    std::string msg = mori_last_error();
    int32_t both = Has(msg, "this step") && Has(msg, "the other step"), found = 0;
    std::vector<int32_t> all(size);
    MORI_ASSERT_OK(mori_bootstrap_allgather(w.bootstrap, &both, all.data(), sizeof(both)));
    for (int32_t b : all) found += b;
    EXPECT_GE(found, 1) << "no rank named both steps; rank " << rank << ": " << msg;
  });
}

// A step with a grace waits that long beyond the comm's timeout for a late
// rank, through the node channel and through the bootstrap (the
// agreement_bootstrap_steps_test build); the plain step does not. Across
// hosts the grace was ignored: the bootstrap kept its own limit.
TEST(Agreement, AStepWithAGraceWaitsForALateRankBeyondTheTimeout) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    // A 3 s comm: its creation and "the next step" must succeed within it,
    // on a CI machine that stalls a rank for seconds (one took 2.7 s longer
    // than its peers); 400 ms was too tight a window for them.
    World w(3000);
    ASSERT_TRUE(w.ok());
    const int late = size - 1;
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank == late) usleep(4000 * 1000);
    MORI_EXPECT_OK(mori_agree_grace(w.comm, 0, "a step late ranks may come to", 10000));
    MORI_ASSERT_OK(mori_agree(w.comm, 0, "the next step"));  // and the comm goes on
    // Without the grace the same lateness is a timeout.
    if (rank == late) usleep(4000 * 1000);
    EXPECT_EQ(mori_agree(w.comm, 0, "a step without a grace"), MORI_ERANK_TIMEOUT) << mori_last_error();
  });
}

TEST(Agreement, OneRankFailsAndEveryRankNamesItWithItsMessage) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    int bad = size - 1;
    std::string why = "the widget of rank " + std::to_string(bad) + " is 17 bytes short";
    int status = rank == bad ? mori_error_set(MORI_EINVAL, "%s", why.c_str()) : 0;
    uint32_t mine = 5, all[8] = {};
    mori_profile_reset();
    EXPECT_EQ(mori_agree_gather(w.comm, status, "making widgets", &mine, all, sizeof(mine)), MORI_EINVAL);
    std::string msg = mori_last_error();
    EXPECT_TRUE(Has(msg, "making widgets: rank(s) " + std::to_string(bad) + " failed; rank " + std::to_string(bad) + ": " + why))
        << msg;
    EXPECT_EQ(ProfileCalls("collective_step"), 2u) << "statuses, then the messages";
    // The comm is still in step: the next agreement succeeds everywhere.
    MORI_EXPECT_OK(mori_agree(w.comm, 0, "after"));
  });
}

TEST(Agreement, TwoRanksFailAndEachCarriesItsOwnMessageAndCode) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    int first = 0, second = size - 1;  // at 2 ranks: every rank fails
    int status = 0;
    if (rank == first) status = mori_error_set(MORI_EINVAL, "first cause (value 11)");
    if (rank == second) status = mori_error_set(MORI_ENOMEM, "second cause (value 22)");
    int rc = mori_agree(w.comm, status, "two failures");
    EXPECT_EQ(rc, status ? status : MORI_EINVAL) << "a failed rank keeps its code, the others take the first failed rank's";
    std::string msg = mori_last_error();
    std::string list = "rank(s) " + std::to_string(first) + ", " + std::to_string(second) + " failed";
    EXPECT_TRUE(Has(msg, "two failures: " + list)) << msg;
    EXPECT_TRUE(Has(msg, "; rank " + std::to_string(first) + ": first cause (value 11)")) << msg;
    EXPECT_TRUE(Has(msg, "; rank " + std::to_string(second) + ": second cause (value 22)")) << msg;
    MORI_EXPECT_OK(mori_agree(w.comm, 0, "after"));
  });
}

TEST(Agreement, AForeignCodeReadsAsEioAndALongMessageIsCutForPeersOnly) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    int bad = size / 2;
    std::string longer = "start " + std::string(600, 'x') + " end";
    int status = rank == bad ? mori_error_set(4242, "%s", longer.c_str()) : 0;
    int rc = mori_agree(w.comm, status, "odd code");
    std::string msg = mori_last_error();
    if (rank == bad) {
      EXPECT_EQ(rc, 4242);
      EXPECT_TRUE(Has(msg, longer)) << "its own message whole on the failed rank";
    } else {
      EXPECT_EQ(rc, MORI_EIO) << "a code that is not mori's is not passed on";
      EXPECT_TRUE(Has(msg, "rank " + std::to_string(bad) + ": start xxx")) << msg;
      EXPECT_FALSE(Has(msg, " end")) << "cut at " << MORI_AGREEMENT_TEXT << " bytes";
    }
  });
}

TEST(Agreement, VerdictOfNotesExchangedElsewhereNamesTheRanksTheCallerSays) {
  // The halves MPI start-up uses: notes gathered by someone else.
  mori_agreement_note_t notes[3];
  mori_error_set(MORI_EMISMATCH, "MPI rank 1 passed npes 4, its communicator has 3 ranks");
  mori_agreement_note_fill(&notes[1], MORI_EMISMATCH);
  mori_agreement_note_fill(&notes[0], 0);
  mori_agreement_note_fill(&notes[2], 0);
  EXPECT_EQ(mori_agreement_verdict(notes, sizeof(notes[0]), 3, 0, nullptr, "start", "MPI rank"), MORI_EMISMATCH);
  EXPECT_TRUE(Has(mori_last_error(), "start: MPI rank(s) 1 failed; MPI rank 1: MPI rank 1 passed npes 4")) << mori_last_error();
  notes[1].status = 0;
  EXPECT_EQ(mori_agreement_verdict(notes, sizeof(notes[0]), 3, 0, nullptr, "start", "MPI rank"), 0);
}

}  // namespace
