// SPDX-License-Identifier: MIT
// The build-info string follows what was built: mori's version as
// bazel/version.bzl defines it (read here from that file, not from the
// define the library got), the plug-in lists the comms are made with, and
// the ops' schemas. A list that changes changes the string.
#include "torch_backend/build_info.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "torch_backend/plugins.h"

namespace {

std::map<std::string, std::string> Parse(const std::string &info) {
  std::map<std::string, std::string> kv;
  std::istringstream in(info);
  std::string word;
  while (in >> word) {
    size_t eq = word.find('=');
    EXPECT_NE(eq, std::string::npos) << "not key=value: '" << word << "' in '" << info << "'";
    if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return kv;
}

std::string VersionFromBzl() {
  std::ifstream f("bazel/version.bzl");
  EXPECT_TRUE(f.good()) << "bazel/version.bzl is a data file of this test";
  std::stringstream text;
  text << f.rdbuf();
  std::string s = text.str(), version;
  for (const char *part : {"MAJOR", "MINOR", "PATCH"}) {
    std::smatch m;
    std::regex re(std::string("MORI_VERSION_") + part + "\\s*=\\s*(\\d+)");
    EXPECT_TRUE(std::regex_search(s, m, re)) << "MORI_VERSION_" << part << " in bazel/version.bzl";
    version += (version.empty() ? "" : ".") + m[1].str();
  }
  return version;
}

TEST(BuildInfo, NamesTheVersionPlatformAndEveryPluginTheCommsUse) {
  const char *const schemas[] = {"all_to_all(Tensor input) -> ()", "all_reduce(Tensor input, str op) -> ()"};
  std::string info = mori_torch::FormatBuildInfo("host", "2.11", mori_torch::kHandles, mori_torch::kNumHandles,
                                                 mori_torch::kTransports, mori_torch::kNumTransports, schemas, 2);
  auto kv = Parse(info);
  EXPECT_EQ(kv["mori"], VersionFromBzl()) << info;
  EXPECT_EQ(kv["platform"], "host") << info;
  EXPECT_EQ(kv["torch"], "2.11") << info;
  EXPECT_EQ(kv["ops"], "all_to_all,all_reduce") << info;
  // The lists group.cc hands to mori_comm_create, by their ops' own names.
  std::string handles, transports;
  for (size_t i = 0; i < mori_torch::kNumHandles; i++) handles += (i ? "," : "") + std::string(mori_torch::kHandles[i]->name);
  for (size_t i = 0; i < mori_torch::kNumTransports; i++)
    transports += (i ? "," : "") + std::string(mori_torch::kTransports[i]->name);
  EXPECT_EQ(kv["handles"], handles) << info;
  EXPECT_EQ(kv["transports"], transports) << info;
  // What the backend is built with today: cross-node groups need rdma.
  EXPECT_EQ(kv["handles"], "fabric,posix_fd,legacy_ipc") << info;
  EXPECT_EQ(kv["transports"], "p2p,rdma") << info;
  EXPECT_LE(mori_torch::kLocalTransports, mori_torch::kNumTransports);
  EXPECT_EQ(kv.size(), 6u) << info;
}

TEST(BuildInfo, FollowsTheListsItIsGiven) {
  const mori_transport_ops_t *const one[] = {mori_torch::kTransports[0]};
  std::string info = mori_torch::FormatBuildInfo("cuda", "2.10", mori_torch::kHandles, 1, one, 1, nullptr, 0);
  auto kv = Parse(info);
  EXPECT_EQ(kv["handles"], mori_torch::kHandles[0]->name) << info;
  EXPECT_EQ(kv["transports"], mori_torch::kTransports[0]->name) << info;
  EXPECT_EQ(kv["ops"], "") << info;
  EXPECT_EQ(kv["platform"], "cuda") << info;
}

}  // namespace
