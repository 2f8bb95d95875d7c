// SPDX-License-Identifier: MIT
// The table of environment variables and its strict parsers: sizes, times,
// numbers, switches and choices that do not parse or are out of range are
// errors naming the variable and the value; an unknown MORI_* name is
// reported with the known name it resembles.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <list>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/base/env.h"
#include "core/base/size_text.h"

namespace {

std::string Error() { return mori_last_error(); }

// Sets `name` for the scope.
struct Env {
  std::string name;
  Env(const char *n, const char *v) : name(n) { setenv(n, v, 1); }
  ~Env() { unsetenv(name.c_str()); }
};

TEST(EnvTable, EveryEntryIsWellFormedAndNamedOnce) {
  size_t n = 0;
  const mori_env_var_t *t = mori_env_table(&n);
  ASSERT_GT(n, 50u);
  std::set<std::string> seen;
  for (size_t i = 0; i < n; i++) {
    SCOPED_TRACE(t[i].name);
    EXPECT_EQ(std::string(t[i].name).rfind("MORI_", 0), 0u);
    EXPECT_TRUE(seen.insert(t[i].name).second) << "named twice";
    EXPECT_NE(t[i].reader, nullptr);
    EXPECT_NE(t[i].default_text, nullptr);
    EXPECT_NE(t[i].meaning, nullptr);
    if (t[i].type == MORI_ENV_ENUM) {
      EXPECT_NE(t[i].choices, nullptr);
    }
    if (t[i].type == MORI_ENV_INT || t[i].type == MORI_ENV_SIZE || t[i].type == MORI_ENV_MS) {
      EXPECT_LE(t[i].min, t[i].max);
    }
    if (t[i].alias_of) {
      EXPECT_NE(mori_env_find(t[i].alias_of), nullptr) << t[i].alias_of;
    }
  }
  EXPECT_EQ(mori_env_find("MORI_NO_SUCH_VARIABLE"), nullptr);  // env-check: ignore (unknown on purpose)
}

TEST(EnvSize, SizesParseInPowersOf1024) {
  size_t v = 7;
  EXPECT_EQ(mori_env_size("MORI_SHMEM_HEAP_SIZE", &v), 0) << "unset: untouched";
  EXPECT_EQ(v, 7u);
  {
    Env e("MORI_SHMEM_HEAP_SIZE", "16T");
    ASSERT_EQ(mori_env_size("MORI_SHMEM_HEAP_SIZE", &v), 0) << Error();
    EXPECT_EQ(v, (size_t)16 << 40);
  }
  const std::pair<const char *, size_t> ok[] = {{"6G", (size_t)6 << 30}, {"512MiB", (size_t)512 << 20}, {"64KB", 64 << 10},
                                                {"1048576", 1 << 20}, {" 4K ", 4096}};
  for (const auto &c : ok) {
    Env e("MORI_SHMEM_HEAP_SIZE", c.first);
    ASSERT_EQ(mori_env_size("MORI_SHMEM_HEAP_SIZE", &v), 0) << c.first << ": " << Error();
    EXPECT_EQ(v, c.second) << c.first;
  }
}

TEST(EnvSize, OutOfRangeAndUnparsableSizesNameVariableAndValue) {
  const std::pair<const char *, int> bad[] = {
      {"99999999999999999999999", MORI_ERANGE},  // past 64 bits: was silently a 1 GiB limit
      {"100000T", MORI_ERANGE},                   // past the table's 64 TiB
      {"20000000P", MORI_ERANGE},                 // the shift overflows
      {"0", MORI_ERANGE},                         // under the table's 4 KiB
      {"abc", MORI_EINVAL},
      {"6Q", MORI_EINVAL},
      {"-1G", MORI_EINVAL},
      {"1.5G", MORI_EINVAL},
      {"0x1000", MORI_EINVAL},
      {"6G extra", MORI_EINVAL},
      {"64Mb", MORI_EINVAL},  // megabits: was read as 64 MiB
      {"64kb", MORI_EINVAL},
  };
  for (const auto &c : bad) {
    Env e("MORI_SHMEM_HEAP_SIZE", c.first);
    size_t v = 7;
    EXPECT_EQ(mori_env_size("MORI_SHMEM_HEAP_SIZE", &v), c.second) << c.first;
    EXPECT_EQ(v, 7u) << "untouched on error";
    EXPECT_NE(Error().find(std::string("MORI_SHMEM_HEAP_SIZE=\"") + c.first + "\""), std::string::npos) << Error();
  }
}

TEST(EnvMs, TimesParseStrictly) {
  int v = 5;
  {
    Env e("MORI_BOOTSTRAP_TIMEOUT_MS", "1500");
    ASSERT_EQ(mori_env_ms("MORI_BOOTSTRAP_TIMEOUT_MS", &v), 0) << Error();
    EXPECT_EQ(v, 1500);
  }
  {
    Env e("MORI_BOOTSTRAP_TIMEOUT_MS", "3s");
    ASSERT_EQ(mori_env_ms("MORI_BOOTSTRAP_TIMEOUT_MS", &v), 0) << Error();
    EXPECT_EQ(v, 3000);
  }
  const std::pair<const char *, int> bad[] = {{"abc", MORI_EINVAL},          // was silently 60 s
                                              {"2147483647", MORI_ERANGE},   // past a day: overflowed a product
                                              {"0", MORI_ERANGE},
                                              {"-5", MORI_EINVAL},
                                              {"10m", MORI_EINVAL},
                                              {"99999999999999999999999", MORI_ERANGE}};
  for (const auto &c : bad) {
    Env e("MORI_BOOTSTRAP_TIMEOUT_MS", c.first);
    v = 5;
    EXPECT_EQ(mori_env_ms("MORI_BOOTSTRAP_TIMEOUT_MS", &v), c.second) << c.first;
    EXPECT_EQ(v, 5);
    EXPECT_NE(Error().find(std::string("MORI_BOOTSTRAP_TIMEOUT_MS=\"") + c.first + "\""), std::string::npos) << Error();
    EXPECT_EQ(mori_env_ms_or("MORI_BOOTSTRAP_TIMEOUT_MS", 60000), 60000) << "no error path: the default, said once";
  }
}

TEST(EnvInt, NumbersSwitchesAndChoicesParseStrictly) {
  long long n = -1;
  {
    Env e("MORI_NUM_QP_PER_PE", "4");
    ASSERT_EQ(mori_env_int("MORI_NUM_QP_PER_PE", &n), 0) << Error();
    EXPECT_EQ(n, 4);
  }
  for (const char *bad : {"0", "65", "four", "4x", ""}) {
    Env e("MORI_NUM_QP_PER_PE", bad);
    n = -1;
    int rc = mori_env_int("MORI_NUM_QP_PER_PE", &n);
    if (!*bad) {
      EXPECT_EQ(rc, 0) << "empty is unset";
      continue;
    }
    EXPECT_NE(rc, 0) << bad;
    EXPECT_NE(Error().find("MORI_NUM_QP_PER_PE"), std::string::npos) << Error();
    EXPECT_EQ(mori_env_int_or("MORI_NUM_QP_PER_PE", 1), 1);
  }
  bool b = false;
  for (const char *yes : {"1", "true", "YES", "on"}) {
    Env e("MORI_DISABLE_P2P", yes);
    b = false;
    ASSERT_EQ(mori_env_bool("MORI_DISABLE_P2P", &b), 0) << yes;
    EXPECT_TRUE(b) << yes;
  }
  for (const char *no : {"0", "false", "No", "off"}) {
    Env e("MORI_DISABLE_P2P", no);
    b = true;
    ASSERT_EQ(mori_env_bool("MORI_DISABLE_P2P", &b), 0) << no;
    EXPECT_FALSE(b) << no;
  }
  {
    Env e("MORI_DISABLE_P2P", "2");
    EXPECT_EQ(mori_env_bool("MORI_DISABLE_P2P", &b), MORI_EINVAL);
    EXPECT_NE(Error().find("MORI_DISABLE_P2P=\"2\""), std::string::npos) << Error();
  }
  int choice = -1;
  {
    Env e("MORI_SHMEM_MODE", "Isolation");
    ASSERT_EQ(mori_env_enum("MORI_SHMEM_MODE", &choice), 0);
    EXPECT_EQ(choice, 2);
  }
  {
    Env e("MORI_SHMEM_MODE", "dynamic");
    EXPECT_EQ(mori_env_enum("MORI_SHMEM_MODE", &choice), MORI_EINVAL);
    EXPECT_NE(Error().find("MORI_SHMEM_MODE=\"dynamic\" is not one of static|vmm|isolation"), std::string::npos) << Error();
  }
}

TEST(EnvTable, ANameMissingFromTheTableOrReadAsAnotherTypeIsAnError) {
  size_t v = 0;
  EXPECT_EQ(mori_env_size("MORI_NOT_IN_THE_TABLE", &v), MORI_EINVAL);  // env-check: ignore (unknown on purpose)
  EXPECT_NE(Error().find("MORI_NOT_IN_THE_TABLE is not in mori's table"), std::string::npos) << Error();  // env-check: ignore (unknown on purpose)
  EXPECT_EQ(mori_env_size("MORI_DISABLE_P2P", &v), MORI_EINVAL);
}

struct Listed {
  std::vector<mori_env_setting_t> all;
  std::list<std::string> names;  // the listing's names live for the call only
};

void Collect(void *ctx, const mori_env_setting_t *s) {
  Listed *l = static_cast<Listed *>(ctx);
  mori_env_setting_t copy = *s;
  l->names.push_back(s->name);
  copy.name = l->names.back().c_str();
  l->all.push_back(copy);
}

const mori_env_setting_t *Find(const Listed &l, const std::string &name) {
  for (const auto &s : l.all)
    if (name == s.name) return &s;
  return nullptr;
}

TEST(EnvList, EverySetVariableWithItsParsedValueAndUnknownNamesWithAGuess) {
  Env a("MORI_SHMEM_HEAP_SIZE", "16G"), b("MORI_BOOTSTRAP_TIMEOUT_MS", "2s"), c("MORI_SHMEM_HEAP_SZIE", "1G"),  // env-check: ignore (unknown on purpose)
      d("MORI_BOOTSTRAP_SECRET", "hunter2"), e("MORI_DISABLE_P2P", "maybe"), f("MORI_COMPLETELY_DIFFERENT_THING", "1");  // env-check: ignore (unknown on purpose)
  Listed l;
  int problems = mori_env_list(Collect, &l);
  EXPECT_EQ(problems, 3);
  const mori_env_setting_t *s = Find(l, "MORI_SHMEM_HEAP_SIZE");
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s->parsed, "16 GiB");
  s = Find(l, "MORI_BOOTSTRAP_TIMEOUT_MS");
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s->parsed, "2000 ms");
  s = Find(l, "MORI_SHMEM_HEAP_SZIE");  // env-check: ignore (unknown on purpose)
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->var, nullptr);
  EXPECT_NE(std::string(s->problem).find("did you mean MORI_SHMEM_HEAP_SIZE?"), std::string::npos) << s->problem;
  s = Find(l, "MORI_COMPLETELY_DIFFERENT_THING");  // env-check: ignore (unknown on purpose)
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(std::string(s->problem).find("did you mean"), std::string::npos) << "no likely name: no guess: " << s->problem;
  s = Find(l, "MORI_BOOTSTRAP_SECRET");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(std::string(s->value).find("hunter2"), std::string::npos);
  EXPECT_EQ(std::string(s->parsed).find("hunter2"), std::string::npos);
  s = Find(l, "MORI_DISABLE_P2P");
  ASSERT_NE(s, nullptr);
  EXPECT_NE(std::string(s->problem).find("MORI_DISABLE_P2P=\"maybe\""), std::string::npos) << s->problem;
}

// The check a comm runs: the first bad value fails it; unknown names are a
// warning, said once per process, naming the likely intended variable.
TEST(EnvCheck, BadValuesFailUnknownNamesWarnOnce) {
  ASSERT_EQ(mori_env_check(), 0) << Error();
  {
    Env e("MORI_BOOTSTRAP_TIMEOUT_MS", "abc");
    EXPECT_EQ(mori_env_check(), MORI_EINVAL);
    EXPECT_NE(Error().find("MORI_BOOTSTRAP_TIMEOUT_MS=\"abc\""), std::string::npos) << Error();
  }
  {
    Env e("MORI_SHMEM_HEAP_SIZE", "99999999999999999999999");
    EXPECT_EQ(mori_env_check(), MORI_ERANGE);
    EXPECT_NE(Error().find("MORI_SHMEM_HEAP_SIZE=\"99999999999999999999999\" is out of range"), std::string::npos) << Error();
  }
  Env typo("MORI_SHMEM_HEAP_SZIE", "1G");  // env-check: ignore (unknown on purpose)
  testing::internal::CaptureStderr();
  EXPECT_EQ(mori_env_check(), 0) << "an unknown name is a warning, not an error";
  EXPECT_EQ(mori_env_check(), 0);
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("MORI_SHMEM_HEAP_SZIE (did you mean MORI_SHMEM_HEAP_SIZE?)"), std::string::npos) << log;  // env-check: ignore (unknown on purpose)
  EXPECT_EQ(log.find("SZIE"), log.rfind("SZIE")) << "said once: " << log;
}

TEST(SizeText, SizesReadAsPeopleWriteThem) {
  char buf[MORI_SIZE_TEXT_MAX];
  EXPECT_STREQ(mori_size_text(0, buf), "0 B");
  EXPECT_STREQ(mori_size_text(100, buf), "100 B");
  EXPECT_STREQ(mori_size_text(4096, buf), "4 KiB");
  EXPECT_STREQ(mori_size_text((size_t)512 << 30, buf), "512 GiB");
  EXPECT_STREQ(mori_size_text((size_t)3 << 19, buf), "1.5 MiB");
  EXPECT_STREQ(mori_size_text(((size_t)1 << 30) - 1, buf), "1023.9 MiB") << "never rounded up to the next unit";
  EXPECT_STREQ(mori_size_text((size_t)16 << 40, buf), "16 TiB");
  EXPECT_STREQ(mori_size_text(SIZE_MAX, buf), "15.9 EiB");
}

}  // namespace
