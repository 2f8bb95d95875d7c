// SPDX-License-Identifier: MIT
// The software ConnectX for a program on libmori.so (what Python and the
// torch backend are): the program loads libmori_ce_nic.so and
// libmori_swcx.so, wraps the first's provider with the second's
// mori_swcx_provider, hands the result to libmori.so's
// mori_rdma_use_provider, and two processes declared on two nodes put into
// each other's windows over the rdma transport through it. This program
// links libmori.so alone (only its exported API), like such a program.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/rdma/loadable_put.h"

// A provider's first fields (transport/rdma/provider.h): its size and name.
struct ProviderHead {
  size_t size;
  const char *name;
};

namespace {

std::string g_ce_nic, g_swcx;  // the libraries' paths (argv[1], argv[2])

void *Open(const std::string &path, int rank) {
  void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) fprintf(stderr, "rank %d: dlopen %s: %s\n", rank, path.c_str(), dlerror());
  return lib;
}

int RunRank(int rank, int listen_fd, int port) {
  setenv("MORI_HOST_ID", rank ? "node-b" : "node-a", 1);
  void *ce = Open(g_ce_nic, rank), *swcx = Open(g_swcx, rank);
  if (!ce || !swcx) return 10;
  auto inner = (const void *(*)(void))dlsym(ce, "mori_ce_nic_provider");
  auto wrap = (const void *(*)(const void *))dlsym(swcx, "mori_swcx_provider");
  const void *provider = inner && wrap ? wrap(inner()) : nullptr;
  if (!provider) {
    fprintf(stderr, "rank %d: no provider: %s\n", rank, dlerror());
    return 11;
  }
  std::string name = ((const ProviderHead *)provider)->name;
  if (name != "software ConnectX over copy-engine NIC") {
    fprintf(stderr, "rank %d: the provider is \"%s\"\n", rank, name.c_str());
    return 11;
  }
  if (mori_rdma_use_provider(provider) != 0) {
    fprintf(stderr, "rank %d: mori_rdma_use_provider: %s\n", rank, mori_last_error());
    return 11;
  }
  return loadable_put::PutAcrossDeclaredNodes(rank, listen_fd, port);
}

TEST(SwcxLoadable, ProgramOnLibmoriLoadsTheSoftwareConnectXAndPutsAcrossDeclaredNodes) {
  loadable_put::RunTwoRanks(RunRank);
}

}  // namespace

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    fprintf(stderr, "usage: %s PATH/libmori_ce_nic.so PATH/libmori_swcx.so\n", argv[0]);
    return 2;
  }
  g_ce_nic = argv[1];
  g_swcx = argv[2];
  if (g_ce_nic.find('/') == std::string::npos) g_ce_nic = "./" + g_ce_nic;
  if (g_swcx.find('/') == std::string::npos) g_swcx = "./" + g_swcx;
  return RUN_ALL_TESTS();
}
