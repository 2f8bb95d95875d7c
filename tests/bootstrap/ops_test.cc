// SPDX-License-Identifier: MIT
// The bootstrap's ops struct under the plug-ins' rules (mori/plugin.h): an
// implementation built against an older, smaller struct loads and gets the
// defaults for what it lacks; a missing mandatory op, an unknown ABI version,
// a struct too small to hold the mandatory ops and a nameless struct are
// refused with errors that name the bootstrap and what is wrong.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>

#include "core/bootstrap/internal/step_grace.h"
#include "mori/bootstrap.h"

namespace {

int barriers = 0, allgathers = 0, graces = 0, last_grace = 0;
int Allgather(void *, const void *, void *, size_t) { return ++allgathers, 0; }
int AllgatherGrace(void *, const void *, void *, size_t, int grace_ms) { return ++graces, last_grace = grace_ms, 0; }
int Barrier(void *) { return ++barriers, 0; }
int Bcast(void *, void *, size_t, int) { return 0; }

// What an implementation built before fini existed would pass: the struct
// ends after bcast.
struct OpsWithoutFini {
  uint32_t size;
  uint32_t abi_version;
  const char *name;
  int (*allgather)(void *, const void *, void *, size_t);
  int (*barrier)(void *);
  int (*bcast)(void *, void *, size_t, int);
};

mori_bootstrap_ops_t FullOps(const char *name) {
  mori_bootstrap_ops_t ops;
  memset(&ops, 0, sizeof(ops));
  ops.size = sizeof(ops);
  ops.abi_version = MORI_BOOTSTRAP_ABI_VERSION;
  ops.name = name;
  ops.allgather = Allgather;
  ops.barrier = Barrier;
  ops.bcast = Bcast;
  return ops;
}

bool LastErrorHas(const std::string &text) { return std::string(mori_last_error()).find(text) != std::string::npos; }

TEST(BootstrapOps, AnOlderSmallerStructLoadsAndItsMissingFiniDefaults) {
  // The bytes past the older struct are not the implementation's: they must
  // not be read as a fini (a poisoned neighbour would crash at destroy).
  struct {
    OpsWithoutFini ops;
    void *poison;
  } mem;
  memset(&mem, 0xab, sizeof(mem));
  mem.ops = {sizeof(OpsWithoutFini), 1, "older", Allgather, Barrier, Bcast};
  static_assert(sizeof(OpsWithoutFini) < sizeof(mori_bootstrap_ops_t), "the older struct is smaller");
  mori_bootstrap_t *b = nullptr;
  ASSERT_EQ(mori_bootstrap_create(reinterpret_cast<const mori_bootstrap_ops_t *>(&mem.ops), nullptr, 0, 2, &b), 0)
      << mori_last_error();
  barriers = 0;
  EXPECT_EQ(mori_bootstrap_barrier(b), 0);
  EXPECT_EQ(barriers, 1) << "the older struct's own op is called";
  EXPECT_EQ(mori_bootstrap_destroy(b), 0) << "fini defaults to nothing to release";
}

TEST(BootstrapOps, ANullFiniDefaults) {
  mori_bootstrap_ops_t ops = FullOps("no-fini");
  mori_bootstrap_t *b = nullptr;
  ASSERT_EQ(mori_bootstrap_create(&ops, nullptr, 0, 2, &b), 0) << mori_last_error();
  EXPECT_EQ(mori_bootstrap_destroy(b), 0);
}

TEST(BootstrapOps, AMissingMandatoryOpIsNamed) {
  const char *names[] = {"allgather", "barrier", "bcast"};
  for (int i = 0; i < 3; i++) {
    mori_bootstrap_ops_t ops = FullOps("gappy");
    if (i == 0) ops.allgather = nullptr;
    if (i == 1) ops.barrier = nullptr;
    if (i == 2) ops.bcast = nullptr;
    mori_bootstrap_t *b = nullptr;
    EXPECT_EQ(mori_bootstrap_create(&ops, nullptr, 0, 2, &b), MORI_EINVAL) << names[i];
    EXPECT_EQ(b, nullptr);
    EXPECT_TRUE(LastErrorHas(std::string("bootstrap 'gappy' lacks the mandatory op ") + names[i])) << mori_last_error();
  }
}

TEST(BootstrapOps, AStructEndingBeforeAMandatoryOpIsRefused) {
  mori_bootstrap_ops_t ops = FullOps("short");
  ops.size = offsetof(mori_bootstrap_ops_t, bcast);
  mori_bootstrap_t *b = nullptr;
  EXPECT_EQ(mori_bootstrap_create(&ops, nullptr, 0, 2, &b), MORI_EINVAL);
  EXPECT_TRUE(LastErrorHas("bootstrap 'short': ops struct of")) << mori_last_error();
  EXPECT_TRUE(LastErrorHas("smaller than the mandatory part")) << mori_last_error();
}

TEST(BootstrapOps, AnUnknownAbiVersionIsRefused) {
  for (uint32_t version : {0u, uint32_t(MORI_BOOTSTRAP_ABI_VERSION + 1)}) {
    mori_bootstrap_ops_t ops = FullOps("future");
    ops.abi_version = version;
    mori_bootstrap_t *b = nullptr;
    EXPECT_EQ(mori_bootstrap_create(&ops, nullptr, 0, 2, &b), MORI_EINVAL) << version;
    EXPECT_TRUE(LastErrorHas("bootstrap 'future': ABI version " + std::to_string(version))) << mori_last_error();
  }
}

TEST(BootstrapOps, ANewerLargerStructLoads) {
  // A struct from a newer mori with ops this core does not know: what it
  // knows is taken, the rest ignored.
  struct {
    mori_bootstrap_ops_t ops;
    void *newer_op;
  } newer;
  memset(&newer, 0, sizeof(newer));
  newer.ops = FullOps("newer");
  newer.ops.size = sizeof(newer);
  mori_bootstrap_t *b = nullptr;
  ASSERT_EQ(mori_bootstrap_create(&newer.ops, nullptr, 0, 2, &b), 0) << mori_last_error();
  EXPECT_EQ(mori_bootstrap_destroy(b), 0);
}

TEST(BootstrapOps, ANamelessStructIsRefused) {
  mori_bootstrap_ops_t ops = FullOps(nullptr);
  mori_bootstrap_t *b = nullptr;
  EXPECT_EQ(mori_bootstrap_create(&ops, nullptr, 0, 2, &b), MORI_EINVAL);
  EXPECT_TRUE(LastErrorHas("bootstrap ops without a name")) << mori_last_error();
}

// A step with a grace: an implementation with the op gets the grace; one
// built before the op existed (its struct ends at fini, the bytes after it
// poisoned) gets its plain allgather; a grace of 0 is the plain step.
TEST(BootstrapOps, AStepWithAGraceUsesTheOpOrFallsBackToAllgather) {
  char send[8] = {0}, recv[16];
  mori_bootstrap_ops_t ops = FullOps("graceful");
  ops.allgather_grace = AllgatherGrace;
  mori_bootstrap_t *b = nullptr;
  ASSERT_EQ(mori_bootstrap_create(&ops, nullptr, 0, 2, &b), 0) << mori_last_error();
  allgathers = graces = 0;
  EXPECT_EQ(mori_bootstrap_allgather_grace(b, send, recv, 8, 2500), 0);
  EXPECT_EQ(graces, 1);
  EXPECT_EQ(last_grace, 2500);
  EXPECT_EQ(mori_bootstrap_allgather_grace(b, send, recv, 8, 0), 0);
  EXPECT_EQ(allgathers, 1) << "a grace of 0 is the plain step";
  EXPECT_EQ(mori_bootstrap_destroy(b), 0);

  struct {
    mori_bootstrap_ops_t ops;
  } older;
  memset(&older, 0xab, sizeof(older));
  older.ops = FullOps("older");
  older.ops.size = offsetof(mori_bootstrap_ops_t, allgather_grace);
  memset(&older.ops.allgather_grace, 0xab, sizeof(older.ops.allgather_grace));  // not the implementation's
  ASSERT_EQ(mori_bootstrap_create(&older.ops, nullptr, 0, 2, &b), 0) << mori_last_error();
  allgathers = graces = 0;
  EXPECT_EQ(mori_bootstrap_allgather_grace(b, send, recv, 8, 2500), 0);
  EXPECT_EQ(allgathers, 1) << "an older struct's plain allgather";
  EXPECT_EQ(graces, 0);
  EXPECT_EQ(mori_bootstrap_destroy(b), 0);
}

}  // namespace
