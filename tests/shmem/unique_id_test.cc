// SPDX-License-Identifier: MIT
// The unique ID's serialisation and the choice of the bootstrap interface.
#include <stdlib.h>
#include <string.h>

#include <string>

#include "shmem/internal/unique_id.h"
#include "tests/support/harness.h"

namespace {

TEST(UniqueId, ComposeAndParseAreInversesForIpv4AndIpv6) {
  for (const char *address : {"10.1.2.3:29500", "[fd00::1:2]:40001"}) {
    mori_shmem_uid_info_t info, back;
    memset(&info, 0, sizeof(info));
    snprintf(info.address, sizeof(info.address), "%s", address);
    snprintf(info.ifname, sizeof(info.ifname), "eth7");
    info.token = 0x0123456789abcdefull;
    mori_shmem_uniqueid_t id;
    MORI_ASSERT_OK(mori_shmem_uid_compose(&info, &id));
    MORI_ASSERT_OK(mori_shmem_uid_parse(&id, &back));
    EXPECT_STREQ(back.address, address);
    EXPECT_STREQ(back.ifname, "eth7");
    EXPECT_EQ(back.token, info.token);
  }
  mori_shmem_uid_info_t bad;
  memset(&bad, 0, sizeof(bad));
  snprintf(bad.address, sizeof(bad.address), "host.example:1");
  bad.token = 1;
  mori_shmem_uniqueid_t id;
  EXPECT_EQ(mori_shmem_uid_compose(&bad, &id), MORI_EINVAL) << "names are resolved by rank 0, never carried";
  bad.token = 0;
  snprintf(bad.address, sizeof(bad.address), "10.0.0.1:5");
  EXPECT_EQ(mori_shmem_uid_compose(&bad, &id), MORI_EINVAL) << "a zero token is no token";
}

TEST(UniqueId, SocketIfnameNamesTheInterfaceAndTheIdCarriesIt) {
  setenv("MORI_SOCKET_IFNAME", "lo", 1);
  mori_shmem_uniqueid_t id;
  MORI_ASSERT_OK(shmem_get_unique_id(&id));
  mori_shmem_uid_info_t info;
  MORI_ASSERT_OK(mori_shmem_uid_parse(&id, &info));
  EXPECT_STREQ(info.ifname, "lo");
  EXPECT_EQ(std::string(info.address).rfind("127.0.0.1:", 0), 0u) << info.address;
  EXPECT_NE(info.token, 0u);
  // Two IDs never share a token or a port.
  mori_shmem_uniqueid_t other;
  mori_shmem_uid_info_t other_info;
  MORI_ASSERT_OK(shmem_get_unique_id(&other));
  MORI_ASSERT_OK(mori_shmem_uid_parse(&other, &other_info));
  EXPECT_NE(other_info.token, info.token);
  EXPECT_STRNE(other_info.address, info.address);
  // Excluding loopback never picks it.
  setenv("MORI_SOCKET_IFNAME", "^lo", 1);
  if (shmem_get_unique_id(&other) == 0) {
    MORI_ASSERT_OK(mori_shmem_uid_parse(&other, &other_info));
    EXPECT_STRNE(other_info.ifname, "lo");
  } else {
    EXPECT_NE(std::string(mori_last_error()).find("MORI_SOCKET_IFNAME=\"^lo\""), std::string::npos) << mori_last_error();
  }
  unsetenv("MORI_SOCKET_IFNAME");
}

}  // namespace
