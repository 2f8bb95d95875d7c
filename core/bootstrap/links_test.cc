// SPDX-License-Identifier: MIT
// A rank's link listener (links.c, startup.c), played against directly: it
// admits only the ranks that link to it, under that link's key; strangers,
// silent connections and other ranks of the job are turned away and the
// real dialer still gets in; a dialer that never comes is named; frames on
// an admitted link carry MACs both ways; a rank dials and admits in one
// loop, all its links at once, and a listener that never answers is named
// while the other links come up.
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "core/bootstrap/internal/net.h"
#include "core/bootstrap/internal/tcp.h"
}
#include "mori/error.h"
#include "tests/support/sockets.h"

namespace {

// The state of rank `rank` of a job of `size` whose job key is filled with `key`.
tcp_state State(int rank, int size, uint8_t key, int timeout_ms) {
  tcp_state s;
  memset(&s, 0, sizeof(s));
  s.rank = rank;
  s.size = size;
  s.timeout_ms = timeout_ms;
  memset(s.key, key, sizeof(s.key));
  snprintf(s.address, sizeof(s.address), "127.0.0.1:1");
  return s;
}

sockaddr_storage Loopback(int port, socklen_t *len) {
  sockaddr_storage ss{};
  auto *sa = reinterpret_cast<sockaddr_in *>(&ss);
  sa->sin_family = AF_INET;
  sa->sin_port = htons(port);
  sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  *len = sizeof(*sa);
  return ss;
}

TEST(BootstrapLinks, ListenerAdmitsOnlyItsDialerUnderTheLinkKey) {
  // Rank 1 of 4 admits the link of rank 0 (1 - 2^0) only.
  tcp_state acceptor = State(1, 4, 0x11, 10000);
  int port = 0;
  int listen_fd = mori_test::ListenLoopback(64, &port);
  ASSERT_GE(listen_fd, 0);
  std::string address = "127.0.0.1:" + std::to_string(port);
  std::vector<int> slot_of = {0, -1, -1, -1};
  tcp_peer slots[1];
  memset(slots, 0, sizeof(slots));
  slots[0].fd = -1;
  int admitted = 1;
  std::thread listener([&] { admitted = mori_tcp_admit_links(&acceptor, listen_fd, slot_of.data(), slots, 1); });

  socklen_t len;
  sockaddr_storage sa = Loopback(port, &len);
  int64_t deadline = mori_net_now_ms() + 5000;
  // A silent connection holds up nobody.
  int silent = mori_test::ConnectRaw(address.c_str());
  // Another rank of the job, with the job's key, is not one of its dialers.
  tcp_state rank2 = State(2, 4, 0x11, 5000);
  tcp_peer p2;
  int rc = mori_tcp_join_link(&rank2, 1, &sa, len, address.c_str(), &p2, deadline);
  EXPECT_EQ(rc, MORI_EMISMATCH) << mori_last_error();
  EXPECT_NE(std::string(mori_last_error()).find("takes links from"), std::string::npos) << mori_last_error();
  if (p2.fd >= 0) close(p2.fd);
  // Rank 0 of another job (another key) refuses the listener's proof.
  tcp_state stranger = State(0, 4, 0x22, 5000);
  tcp_peer ps;
  rc = mori_tcp_join_link(&stranger, 1, &sa, len, address.c_str(), &ps, deadline);
  EXPECT_EQ(rc, MORI_EACCES) << mori_last_error();
  if (ps.fd >= 0) close(ps.fd);
  // The real dialer gets in.
  tcp_state rank0 = State(0, 4, 0x11, 5000);
  tcp_peer p0;
  rc = mori_tcp_join_link(&rank0, 1, &sa, len, address.c_str(), &p0, deadline);
  ASSERT_EQ(rc, 0) << mori_last_error();
  listener.join();
  ASSERT_EQ(admitted, 0) << mori_last_error();
  ASSERT_GE(slots[0].fd, 0);

  // Frames both ways, MAC'ed under the link's session keys.
  const char hello[] = "over the link";
  mori_wire_header_t h = {MORI_WIRE_DATA, 0, 0, 7, sizeof(hello)};
  ASSERT_EQ(mori_tcp_send_frame(&p0, &h, hello, deadline), 0);
  mori_wire_header_t got;
  char why[160], buf[sizeof(hello)];
  ASSERT_EQ(mori_tcp_recv_header(&slots[0], &got, deadline, why, sizeof(why)), 0) << why;
  EXPECT_EQ(got.op, (uint32_t)MORI_WIRE_DATA);
  ASSERT_EQ(mori_tcp_recv_payload(&slots[0], buf, sizeof(buf), deadline), 0);
  EXPECT_EQ(mori_tcp_recv_end(&slots[0], deadline), 0) << "the MAC checks";
  EXPECT_STREQ(buf, hello);
  h.rank = 1;
  ASSERT_EQ(mori_tcp_send_frame(&slots[0], &h, hello, deadline), 0);
  ASSERT_EQ(mori_tcp_recv_header(&p0, &got, deadline, why, sizeof(why)), 0) << why;
  ASSERT_EQ(mori_tcp_recv_payload(&p0, buf, sizeof(buf), deadline), 0);
  EXPECT_EQ(mori_tcp_recv_end(&p0, deadline), 0) << "the MAC checks";
  close(p0.fd);
  close(slots[0].fd);
  if (silent >= 0) close(silent);
  close(listen_fd);
}

TEST(BootstrapLinks, DialerThatNeverComesIsNamed) {
  tcp_state acceptor = State(5, 8, 0x11, 500);
  int port = 0;
  int listen_fd = mori_test::ListenLoopback(64, &port);
  ASSERT_GE(listen_fd, 0);
  std::vector<int> slot_of(8, -1);
  slot_of[4] = 0;  // 5 - 1
  slot_of[3] = 1;  // 5 - 2
  slot_of[1] = 2;  // 5 - 4
  tcp_peer slots[3];
  memset(slots, 0, sizeof(slots));
  for (auto &p : slots) p.fd = -1;
  int rc = mori_tcp_admit_links(&acceptor, listen_fd, slot_of.data(), slots, 3);
  EXPECT_EQ(rc, MORI_ERANK_TIMEOUT);
  EXPECT_NE(std::string(mori_last_error()).find("rank(s) 1, 3, 4 never opened their link to rank 5"),
            std::string::npos)
      << mori_last_error();
  close(listen_fd);
}

// Frames both ways over a link, each side's MACs checked by the other.
void ExpectLinkWorks(tcp_peer *a, tcp_peer *b, int64_t deadline) {
  const char text[] = "over the link";
  for (int dir = 0; dir < 2; dir++) {
    tcp_peer *tx = dir ? b : a, *rx = dir ? a : b;
    mori_wire_header_t h = {MORI_WIRE_DATA, 0, 0, 7, sizeof(text)};
    ASSERT_EQ(mori_tcp_send_frame(tx, &h, text, deadline), 0);
    mori_wire_header_t got;
    char why[160], buf[sizeof(text)];
    ASSERT_EQ(mori_tcp_recv_header(rx, &got, deadline, why, sizeof(why)), 0) << why;
    ASSERT_EQ(mori_tcp_recv_payload(rx, buf, sizeof(buf), deadline), 0);
    EXPECT_EQ(mori_tcp_recv_end(rx, deadline), 0) << "the MAC checks";
    EXPECT_STREQ(buf, text);
  }
}

TEST(BootstrapLinks, EachRankDialsAndAdmitsInOneLoop) {
  // A world of 2: each rank opens its link to the other and admits the
  // other's, in one poll loop each (no thread): neither may wait for the
  // other's handshake to finish its own.
  tcp_state st[2] = {State(0, 2, 0x33, 5000), State(1, 2, 0x33, 5000)};
  int port[2], listen_fd[2];
  for (int r = 0; r < 2; r++) {
    listen_fd[r] = mori_test::ListenLoopback(64, &port[r]);
    ASSERT_GE(listen_fd[r], 0);
  }
  tcp_peer out[2], in[2];
  tcp_dial dial[2];
  std::vector<int> slot_of[2] = {{-1, 0}, {0, -1}};
  int rc[2] = {1, 1};
  std::thread ranks[2];
  for (int r = 0; r < 2; r++) {
    in[r].fd = -1;
    socklen_t len;
    sockaddr_storage sa = Loopback(port[1 - r], &len);
    std::string address = "127.0.0.1:" + std::to_string(port[1 - r]);
    mori_tcp_dial_init(&dial[r], 1 - r, &sa, len, address.c_str(), &out[r]);
    ranks[r] = std::thread(
        [&, r] { rc[r] = mori_tcp_link_up(&st[r], listen_fd[r], slot_of[r].data(), &in[r], 1, &dial[r], 1, 0); });
  }
  for (auto &t : ranks) t.join();
  ASSERT_EQ(rc[0], 0);
  ASSERT_EQ(rc[1], 0);
  int64_t deadline = mori_net_now_ms() + 5000;
  // Rank 0's dialled link is rank 1's admitted one, and the other way round.
  ExpectLinkWorks(&out[0], &in[1], deadline);
  ExpectLinkWorks(&out[1], &in[0], deadline);
  for (int r = 0; r < 2; r++) {
    close(out[r].fd);
    close(in[r].fd);
    close(listen_fd[r]);
  }
}

TEST(BootstrapLinks, ListenerThatNeverAnswersIsNamedWhileTheOtherLinksComeUp) {
  // Rank 1 of 4 dials rank 2 (1 + 1) and rank 3 (1 + 2) at once. Rank 2's
  // port takes the connection but never answers; rank 3 admits rank 1.
  // Rank 1's 3 s: the link to rank 3 must come up within it on a loaded
  // machine, while the silent one is waited out.
  tcp_state rank1 = State(1, 4, 0x44, 3000), rank3 = State(3, 4, 0x44, 10000);
  int silent_port = 0, port3 = 0;
  int silent = mori_test::ListenLoopback(64, &silent_port);
  int listen3 = mori_test::ListenLoopback(64, &port3);
  ASSERT_GE(silent, 0);
  ASSERT_GE(listen3, 0);
  std::vector<int> slot_of3 = {-1, 0, -1, -1};  // rank 3 admits rank 1 (3 - 2) here
  tcp_peer admitted3;
  admitted3.fd = -1;
  int rc3 = 1;
  std::thread acceptor([&] { rc3 = mori_tcp_link_up(&rank3, listen3, slot_of3.data(), &admitted3, 1, nullptr, 0, 0); });
  tcp_peer out[2];
  tcp_dial dial[2];
  socklen_t len;
  sockaddr_storage sa2 = Loopback(silent_port, &len), sa3 = Loopback(port3, &len);
  std::string a2 = "127.0.0.1:" + std::to_string(silent_port), a3 = "127.0.0.1:" + std::to_string(port3);
  mori_tcp_dial_init(&dial[0], 2, &sa2, len, a2.c_str(), &out[0]);
  mori_tcp_dial_init(&dial[1], 3, &sa3, len, a3.c_str(), &out[1]);
  int64_t t0 = mori_net_now_ms();
  int rc = mori_tcp_link_up(&rank1, -1, nullptr, nullptr, 0, dial, 2, 0);
  int64_t took = mori_net_now_ms() - t0;
  EXPECT_EQ(rc, MORI_ERANK_TIMEOUT);
  EXPECT_NE(std::string(mori_last_error()).find("rank 2's link listener at " + a2 + " did not answer rank 1"),
            std::string::npos)
      << mori_last_error();
  EXPECT_GE(took, 2700) << "one deadline, the timeout";
  EXPECT_LT(took, 5500) << "one deadline for every link, not one after another";
  EXPECT_EQ(out[0].fd, -1) << "the unanswered attempt is closed";
  acceptor.join();
  ASSERT_EQ(rc3, 0) << mori_last_error();
  ASSERT_GE(out[1].fd, 0) << "the link to rank 3 came up meanwhile";
  ExpectLinkWorks(&out[1], &admitted3, mori_net_now_ms() + 5000);
  close(out[1].fd);
  close(admitted3.fd);
  close(listen3);
  close(silent);
}

}  // namespace
