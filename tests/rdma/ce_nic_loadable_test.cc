// SPDX-License-Identifier: MIT
// The copy-engine NIC for a program on libmori.so (what Python and the torch
// backend are): libmori.so holds no copy-engine NIC, so the program loads
// libmori_ce_nic.so, hands its provider to libmori.so's
// mori_rdma_use_provider, and two processes declared on two nodes then put
// into each other's windows over the rdma transport. This program links
// libmori.so alone (only its exported API), like such a program.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/rdma/loadable_put.h"

namespace {

std::string g_library;  // the path of libmori_ce_nic.so (argv[1])

// One rank: returns 0 when its put arrived at the peer and the peer's here.
int RunRank(int rank, int listen_fd, int port) {
  setenv("MORI_HOST_ID", rank ? "node-b" : "node-a", 1);
  void *lib = dlopen(g_library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "rank %d: dlopen %s: %s\n", rank, g_library.c_str(), dlerror());
    return 10;
  }
  auto provider = (const void *(*)(void))dlsym(lib, "mori_ce_nic_provider");
  if (!provider || mori_rdma_use_provider(provider()) != 0) {
    fprintf(stderr, "rank %d: no provider: %s\n", rank, provider ? mori_last_error() : dlerror());
    return 11;
  }
  return loadable_put::PutAcrossDeclaredNodes(rank, listen_fd, port);
}

TEST(CeNicLoadable, ProgramOnLibmoriLoadsTheProviderAndPutsAcrossDeclaredNodes) { loadable_put::RunTwoRanks(RunRank); }

}  // namespace

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH/libmori_ce_nic.so\n", argv[0]);
    return 2;
  }
  g_library = argv[1];
  if (g_library.find('/') == std::string::npos) g_library = "./" + g_library;
  return RUN_ALL_TESTS();
}
