// SPDX-License-Identifier: MIT
// The version is written once, in bazel/version.bzl: the generated header's
// macros, mori_version() of the static core and of libmori.so all say it.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "mori/version.h"

namespace {

const char *g_libmori = nullptr;  // argv[1]: the path of //:libmori.so

// NAME = value in version.bzl, or -1 when the file does not define it.
int BzlNumber(const std::string &text, const std::string &name) {
  std::smatch m;
  std::regex re("(^|\\n)" + name + "\\s*=\\s*([0-9]+)");
  return std::regex_search(text, m, re) ? std::stoi(m[2]) : -1;
}

std::string ReadBzl() {
  std::ifstream in("bazel/version.bzl");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Version, HeaderMatchesVersionBzl) {
  std::string bzl = ReadBzl();
  ASSERT_FALSE(bzl.empty()) << "cannot read bazel/version.bzl from the runfiles";
  EXPECT_EQ(BzlNumber(bzl, "MORI_VERSION_MAJOR"), MORI_VERSION_MAJOR);  // env-check: ignore (macros, not variables)
  EXPECT_EQ(BzlNumber(bzl, "MORI_VERSION_MINOR"), MORI_VERSION_MINOR);  // env-check: ignore (macros, not variables)
  EXPECT_EQ(BzlNumber(bzl, "MORI_VERSION_PATCH"), MORI_VERSION_PATCH);  // env-check: ignore (macros, not variables)
  std::string joined = std::to_string(MORI_VERSION_MAJOR) + "." + std::to_string(MORI_VERSION_MINOR) + "." +  // env-check: ignore (macros, not variables)
                       std::to_string(MORI_VERSION_PATCH);  // env-check: ignore (macros, not variables)
  EXPECT_EQ(joined, MORI_VERSION_STRING);
  EXPECT_EQ(MORI_VERSION_NUMBER, MORI_VERSION_MAJOR * 10000 + MORI_VERSION_MINOR * 100 + MORI_VERSION_PATCH);  // env-check: ignore (macros, not variables)
}

TEST(Version, FunctionMatchesHeader) { EXPECT_STREQ(mori_version(), MORI_VERSION_STRING); }

TEST(Version, SharedLibraryExportsIt) {
  ASSERT_NE(g_libmori, nullptr) << "usage: version_test <libmori.so>";
  void *lib = dlopen(g_libmori, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto fn = reinterpret_cast<const char *(*)(void)>(dlsym(lib, "mori_version"));
  ASSERT_NE(fn, nullptr) << "libmori.so does not export mori_version: " << dlerror();
  EXPECT_STREQ(fn(), MORI_VERSION_STRING);
  dlclose(lib);
}

}  // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) g_libmori = argv[1];
  return RUN_ALL_TESTS();
}
