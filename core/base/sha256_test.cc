// SPDX-License-Identifier: MIT
// SHA-256 against the FIPS 180-2 examples and HMAC-SHA256 against the seven
// test cases of RFC 4231; fed whole and in every split, so the block
// buffering is exercised too. Each runs twice: through the CPU's SHA
// extensions (where it has them) and through the portable rounds.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/base/hmac_sha256.h"
#include "core/base/sha256.h"

namespace {

std::string Hex(const uint8_t *p, size_t n) {
  std::string s;
  char buf[3];
  for (size_t i = 0; i < n; i++) {
    snprintf(buf, sizeof(buf), "%02x", p[i]);
    s += buf;
  }
  return s;
}

std::string Sha256Hex(const std::string &msg) {
  uint8_t d[MORI_SHA256_BYTES];
  mori_sha256(msg.data(), msg.size(), d);
  return Hex(d, sizeof(d));
}

// The parameter: whether the portable rounds are forced.
class Sha256Paths : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { mori_sha256_use_portable(GetParam()); }
  void TearDown() override { mori_sha256_use_portable(false); }
};

INSTANTIATE_TEST_SUITE_P(Compression, Sha256Paths, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return std::string(info.param ? "Portable" : "Native");
                         });

TEST(Sha256, NativeRoundsAreUsedWhereTheCpuHasThem) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  bool has_sha = __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3");
#else
  bool has_sha = false;
#endif
  EXPECT_EQ(mori_sha256_use_portable(false), !has_sha);
  EXPECT_TRUE(mori_sha256_use_portable(true));
  mori_sha256_use_portable(false);
}

TEST_P(Sha256Paths, Fips180Examples) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_P(Sha256Paths, AnySplitOfTheInputGivesTheSameDigest) {
  // 0..200 bytes: every padding case (55, 56, 63, 64 bytes) and two blocks.
  std::string msg;
  for (int i = 0; i < 200; i++) msg += char('a' + i % 26);
  for (size_t len = 0; len <= msg.size(); len++) {
    std::string want = Sha256Hex(msg.substr(0, len));
    for (size_t cut : {size_t(0), len / 3, len / 2, len}) {
      mori_sha256_t ctx;
      mori_sha256_init(&ctx);
      mori_sha256_update(&ctx, msg.data(), cut);
      mori_sha256_update(&ctx, msg.data() + cut, len - cut);
      uint8_t d[MORI_SHA256_BYTES];
      mori_sha256_final(&ctx, d);
      ASSERT_EQ(Hex(d, sizeof(d)), want) << "length " << len << " cut at " << cut;
    }
  }
}

struct Rfc4231Case {
  std::string key, data, mac;  // mac: hex, possibly truncated (case 5)
};

TEST_P(Sha256Paths, HmacRfc4231TestCases) {
  std::string key4;
  for (int i = 1; i <= 25; i++) key4 += char(i);
  const Rfc4231Case cases[] = {
      {std::string(20, '\x0b'), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"Jefe", "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {std::string(20, '\xaa'), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {key4, std::string(50, '\xcd'), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {std::string(20, '\x0c'), "Test With Truncation", "a3b6167473100ee06e0c796c2955552b"},
      {std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {std::string(131, '\xaa'),
       "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
       "hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  int n = 1;
  for (const auto &c : cases) {
    uint8_t mac[MORI_SHA256_BYTES];
    mori_hmac_sha256(c.key.data(), c.key.size(), c.data.data(), c.data.size(), mac);
    EXPECT_EQ(Hex(mac, sizeof(mac)).substr(0, c.mac.size()), c.mac) << "RFC 4231 test case " << n;
    // The same MAC fed in two pieces.
    mori_hmac_sha256_t ctx;
    mori_hmac_sha256_init(&ctx, c.key.data(), c.key.size());
    mori_hmac_sha256_update(&ctx, c.data.data(), 5);
    mori_hmac_sha256_update(&ctx, c.data.data() + 5, c.data.size() - 5);
    uint8_t again[MORI_SHA256_BYTES];
    mori_hmac_sha256_final(&ctx, again);
    EXPECT_EQ(Hex(again, sizeof(again)), Hex(mac, sizeof(mac))) << "RFC 4231 test case " << n;
    n++;
  }
}

TEST(HmacSha256, EqualSecretComparesEveryByte) {
  uint8_t a[32] = {0}, b[32] = {0};
  EXPECT_TRUE(mori_equal_secret(a, b, sizeof(a)));
  for (size_t i = 0; i < sizeof(a); i++) {
    b[i] = 1;
    EXPECT_FALSE(mori_equal_secret(a, b, sizeof(a))) << "difference at byte " << i;
    b[i] = 0;
  }
}

}  // namespace
