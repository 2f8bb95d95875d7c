// SPDX-License-Identifier: MIT
// MORI_SHMEM_INIT_WITH_MPI_COMM under Open MPI's mpirun at 2, 4 and 8 PEs.
// Built only where Open MPI is installed (elsewhere Bazel reports the
// targets SKIPPED); skips with the reason if it is gone at run time.
#include <dlfcn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "tests/support/harness.h"

using mori_test::TestRanks;

namespace {

// "" when mpirun and Open MPI's libmpi are here, else why not.
std::string WhyNoMpi() {
  if (access("/usr/bin/mpirun", X_OK) != 0) return "no /usr/bin/mpirun (Debian: apt-get install openmpi-bin libopenmpi-dev)";
  void *lib = dlopen("libmpi.so.40", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::string("Open MPI's libmpi.so.40 does not load: ") + dlerror();
  dlclose(lib);
  return "";
}

struct MpiOutcome {
  int status;
  std::string output;
};

MpiOutcome MpiRun(int ranks, const std::string &mode) {
  // Under ASan, Open MPI's own allocations (uninstrumented, its plug-ins
  // unloaded at exit) are still live when the PEs exit: leak checking of
  // shmem's code is the other suites' job, not this one's.
  std::string cmd = "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 timeout 180 /usr/bin/mpirun --allow-run-as-root --oversubscribe --bind-to none -np " +
                    std::to_string(ranks) +
                    " --mca btl self,vader --mca btl_vader_single_copy_mechanism none tests/shmem/mpi_pe " + mode + " 2>&1";
  MpiOutcome r{-1, ""};
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char line[1024];
  while (fgets(line, sizeof(line), p)) r.output += line;
  int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(ShmemMpi, InitOverMpiCommWorldGivesEveryCall) {
  std::string why = WhyNoMpi();
  if (!why.empty()) GTEST_SKIP() << "MPI init not tested: " << why;
  int n = TestRanks();
  MpiOutcome r = MpiRun(n, "ok");
  EXPECT_EQ(r.status, 0) << r.output;
  for (int pe = 0; pe < n; pe++)
    EXPECT_NE(r.output.find("PE " + std::to_string(pe) + " of " + std::to_string(n) + ": ok"), std::string::npos) << r.output;
}

TEST(ShmemMpi, AWrongNpesIsNamedOnEveryRank) {
  std::string why = WhyNoMpi();
  if (!why.empty()) GTEST_SKIP() << "MPI init not tested: " << why;
  int n = TestRanks();
  MpiOutcome r = MpiRun(n, "mismatch");
  EXPECT_EQ(r.status, 0) << r.output;
  for (int pe = 0; pe < n; pe++)
    EXPECT_NE(r.output.find("PE " + std::to_string(pe) + ": refused:"), std::string::npos) << r.output;
}

}  // namespace
