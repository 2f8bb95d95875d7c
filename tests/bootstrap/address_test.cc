// SPDX-License-Identifier: MIT
// Rank 0's address as the TCP bootstrap reads it: every malformed form is
// refused with MORI_EINVAL naming the address, before any connection is
// tried, and never read or written outside the parser's buffers.
#include <string>

#include "mori/bootstrap.h"
#include "tests/support/harness.h"

namespace {

int CreateLeaf(const std::string &address) {
  mori_bootstrap_tcp_attr_t attr;
  mori_bootstrap_tcp_attr_init(&attr);
  attr.rank = 1;
  attr.size = 2;
  attr.address = address.c_str();
  attr.timeout_ms = 200;
  mori_bootstrap_t *b = nullptr;
  int rc = mori_bootstrap_tcp_create(&attr, &b);
  EXPECT_EQ(b, nullptr);
  return rc;
}

TEST(BootstrapAddress, MalformedAddressesAreRefused) {
  const std::string cases[] = {
      "[:1234",           // an opening bracket with nothing after it
      "[",                // no port at all
      "[]:1234",          // empty IPv6 literal
      "[::1:1234",        // bracket never closed
      "]:1234",           // closing bracket alone
      "::1:1234",         // IPv6 without brackets: the port is ambiguous
      ":1234",            // no host
      "127.0.0.1:",       // no port
      "127.0.0.1",        // no colon
      "127.0.0.1:0",      // port 0 cannot be reached
      "127.0.0.1:65536",  // beyond 16 bits
      "127.0.0.1:-1",
      "127.0.0.1:12ab",
      "127.0.0.1: 80",
      "[::1]x:1234",      // bytes between the bracket and the colon
      std::string(300, 'h') + ":1234",  // host longer than any DNS name
      "",
  };
  for (const std::string &address : cases) {
    int rc = CreateLeaf(address);
    EXPECT_EQ(rc, MORI_EINVAL) << "'" << address << "' -> " << mori_err_name(rc) << ": " << mori_last_error();
    if (!address.empty() && address.size() < 64) {
      EXPECT_NE(std::string(mori_last_error()).find("'" + address + "'"), std::string::npos)
          << "the message should quote the address: " << mori_last_error();
    }
  }
}

TEST(BootstrapAddress, WellFormedAddressesAreTried) {
  // Nobody listens there: the rank tries until its timeout, which proves the
  // address itself was accepted.
  for (const std::string address : {"127.0.0.1:9", "[::1]:9", "localhost:9", "127.0.0.1:00009"}) {
    int rc = CreateLeaf(address);
    EXPECT_EQ(rc, MORI_ERANK_TIMEOUT) << "'" << address << "' -> " << mori_err_name(rc) << ": " << mori_last_error();
  }
}

}  // namespace
