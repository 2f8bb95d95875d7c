// SPDX-License-Identifier: MIT
// A byte flipped on the way in a frame of an authenticated connection is an
// integrity failure ("a frame from rank R failed its MAC"), wherever it is:
// in the header (whose MAC is checked before any field of it is used), the
// header's MAC, the payload or the frame's MAC; never taken for a peer at
// another step or with another size. An unaltered frame that disagrees is
// still a disagreement.
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

extern "C" {
#include "core/bootstrap/internal/handshake.h"
#include "core/bootstrap/internal/net.h"
#include "core/bootstrap/internal/tcp.h"
}
#include "mori/error.h"

namespace {

// Rank 1's state whose connection to rank 0 is `fd`, both directions keyed.
tcp_state Leaf(int fd, tcp_peer *root) {
  tcp_state s;
  memset(&s, 0, sizeof(s));
  s.rank = 1;
  s.size = 2;
  s.timeout_ms = 2000;
  s.seq = 5;
  s.peers = root;
  memset(root, 0, sizeof(*root));
  root->fd = fd;
  root->keyed = true;
  memset(root->key_tx, 0x11, sizeof(root->key_tx));
  memset(root->key_rx, 0x22, sizeof(root->key_rx));
  snprintf(s.address, sizeof(s.address), "127.0.0.1:1");
  return s;
}

// Rank 0's end: its frame key is the leaf's receive key.
tcp_peer Root(int fd) {
  tcp_peer p;
  memset(&p, 0, sizeof(p));
  p.fd = fd;
  p.keyed = true;
  memset(p.key_tx, 0x22, sizeof(p.key_tx));
  memset(p.key_rx, 0x11, sizeof(p.key_rx));
  return p;
}

// Rank 0 answers step 5's barrier with `reply`, the byte at `flip` (if >= 0)
// of what goes on the wire flipped; returns the leaf's code and message.
// `digest` (optional): rank 0 sends through mori_tcp_send_frame_hashed with
// that SHA-256 of the payload, as it does for a result every rank gets.
std::pair<int, std::string> LeafSees(const mori_wire_header_t &reply, int flip, const void *payload = nullptr,
                                     size_t result_bytes = 0, const uint8_t *digest = nullptr) {
  int leaf_side[2], root_side[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, leaf_side), 0);
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, root_side), 0);
  // Rank 0 writes into root_side[0]; the test carries it to leaf_side[1].
  tcp_peer root = Root(root_side[0]);
  EXPECT_EQ(mori_tcp_send_frame_hashed(&root, &reply, payload, digest, mori_net_now_ms() + 1000), 0);
  uint8_t wire[256];
  ssize_t n = read(root_side[1], wire, sizeof(wire));
  EXPECT_GT(n, 0);
  if (flip >= 0) wire[flip] ^= 0x01;
  EXPECT_EQ(write(leaf_side[1], wire, (size_t)n), n);
  tcp_peer to_root;
  tcp_state s = Leaf(leaf_side[0], &to_root);
  uint8_t result[64];
  int rc = mori_tcp_leaf_round(&s, MORI_WIRE_BARRIER, 0, nullptr, 0, result, result_bytes);
  std::string msg = mori_last_error();
  for (int fd : {leaf_side[0], leaf_side[1], root_side[0], root_side[1]}) close(fd);
  return {rc, msg};
}

// The frame on the wire: header, header MAC, payload, frame MAC.
constexpr int kSealed = MORI_WIRE_SEALED_HEADER_BYTES;

bool SaysMacFailed(const std::string &msg, int rank) {
  return msg.find("a frame from rank " + std::to_string(rank) + " failed its MAC") != std::string::npos;
}

TEST(FrameIntegrity, EveryFlippedHeaderByteIsAnIntegrityFailure) {
  mori_wire_header_t reply = {};
  reply.op = MORI_WIRE_RESULT;
  reply.seq = 5;
  // Untouched: the round completes.
  auto ok = LeafSees(reply, -1);
  EXPECT_EQ(ok.first, 0) << ok.second;
  // Every byte of the header and of its MAC, then every byte of the frame's
  // MAC: the magic, the version, the op, the step, the size included.
  for (int flip = 0; flip < kSealed + MORI_WIRE_MAC_BYTES; flip++) {
    auto got = LeafSees(reply, flip);
    EXPECT_EQ(got.first, MORI_EPROTO) << "byte " << flip << ": " << got.second;
    EXPECT_TRUE(SaysMacFailed(got.second, 0)) << "byte " << flip << ": " << got.second;
  }
}

TEST(FrameIntegrity, EveryFlippedPayloadByteIsAnIntegrityFailure) {
  uint8_t payload[24];
  for (size_t i = 0; i < sizeof(payload); i++) payload[i] = (uint8_t)(i * 7);
  mori_wire_header_t reply = {};
  reply.op = MORI_WIRE_RESULT;
  reply.seq = 5;
  reply.bytes = sizeof(payload);
  auto ok = LeafSees(reply, -1, payload, sizeof(payload));
  EXPECT_EQ(ok.first, 0) << ok.second;
  for (int flip = kSealed; flip < kSealed + (int)sizeof(payload); flip++) {
    auto got = LeafSees(reply, flip, payload, sizeof(payload));
    EXPECT_EQ(got.first, MORI_EPROTO) << "byte " << flip << ": " << got.second;
    EXPECT_TRUE(SaysMacFailed(got.second, 0)) << "byte " << flip << ": " << got.second;
  }
}

// A result rank 0 hashes once and sends to every rank: its payload is under
// the frame's MAC all the same, and a digest that is not the payload's (a
// sender hashing the wrong bytes) is an integrity failure, not a result.
TEST(FrameIntegrity, APayloadHashedOnceForEveryRankIsUnderTheMacToo) {
  uint8_t payload[24];
  for (size_t i = 0; i < sizeof(payload); i++) payload[i] = (uint8_t)(i * 5 + 1);
  mori_wire_header_t reply = {};
  reply.op = MORI_WIRE_RESULT;
  reply.seq = 5;
  reply.bytes = sizeof(payload);
  uint8_t digest[MORI_SHA256_BYTES];
  mori_hs_payload_digest(payload, sizeof(payload), digest);
  auto ok = LeafSees(reply, -1, payload, sizeof(payload), digest);
  EXPECT_EQ(ok.first, 0) << ok.second;
  for (int flip = kSealed; flip < kSealed + (int)sizeof(payload); flip++) {
    auto got = LeafSees(reply, flip, payload, sizeof(payload), digest);
    EXPECT_EQ(got.first, MORI_EPROTO) << "byte " << flip << ": " << got.second;
    EXPECT_TRUE(SaysMacFailed(got.second, 0)) << "byte " << flip << ": " << got.second;
  }
  uint8_t other[sizeof(payload)];
  memcpy(other, payload, sizeof(other));
  other[3] ^= 0x80;
  uint8_t wrong[MORI_SHA256_BYTES];
  mori_hs_payload_digest(other, sizeof(other), wrong);
  auto stale = LeafSees(reply, -1, payload, sizeof(payload), wrong);
  EXPECT_EQ(stale.first, MORI_EPROTO) << stale.second;
  EXPECT_TRUE(SaysMacFailed(stale.second, 0)) << stale.second;
}

// Rank 1's arrival at step 5's barrier reaches rank 0 with the byte at
// `flip` (if >= 0) flipped, and with seq `seq`; returns rank 0's verdict.
std::pair<int, std::string> RootSees(uint64_t seq, int flip) {
  int leaf_side[2], root_side[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, leaf_side), 0);
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, root_side), 0);
  tcp_peer leaf = Root(leaf_side[0]);  // rank 1 sends under 0x22 here
  mori_wire_header_t h = {};
  h.op = MORI_WIRE_BARRIER;
  h.rank = 1;
  h.seq = seq;
  EXPECT_EQ(mori_tcp_send_frame(&leaf, &h, nullptr, mori_net_now_ms() + 1000), 0);
  uint8_t wire[256];
  ssize_t n = read(leaf_side[1], wire, sizeof(wire));
  EXPECT_GT(n, 0);
  if (flip >= 0) wire[flip] ^= 0x01;
  EXPECT_EQ(write(root_side[1], wire, (size_t)n), n);
  tcp_peer peers[2];
  memset(peers, 0, sizeof(peers));
  peers[0].fd = -1;
  peers[1].fd = root_side[0];
  peers[1].keyed = true;
  memset(peers[1].key_rx, 0x22, sizeof(peers[1].key_rx));
  memset(peers[1].key_tx, 0x11, sizeof(peers[1].key_tx));
  tcp_state s;
  memset(&s, 0, sizeof(s));
  s.rank = 0;
  s.size = 2;
  s.timeout_ms = 2000;
  s.seq = 5;
  s.peers = peers;
  snprintf(s.address, sizeof(s.address), "127.0.0.1:1");
  int rc = mori_tcp_root_gather(&s, MORI_WIRE_BARRIER, 0, nullptr, 0, nullptr);
  std::string msg = mori_last_error();
  for (int fd : {leaf_side[0], leaf_side[1], root_side[0], root_side[1]}) close(fd);
  return {rc, msg};
}

TEST(FrameIntegrity, RankZeroTellsAnAlteredArrivalFromARankAtAnotherStep) {
  EXPECT_EQ(RootSees(5, -1).first, 0);
  for (int flip = 0; flip < kSealed + MORI_WIRE_MAC_BYTES; flip++) {
    auto altered = RootSees(5, flip);
    EXPECT_EQ(altered.first, MORI_EPROTO) << "byte " << flip << ": " << altered.second;
    EXPECT_TRUE(SaysMacFailed(altered.second, 1)) << "byte " << flip << ": " << altered.second;
  }
  auto behind = RootSees(4, -1);
  EXPECT_EQ(behind.first, MORI_EMISMATCH) << behind.second;
  EXPECT_EQ(behind.second.find("MAC"), std::string::npos) << behind.second;
}

// Rank 1 of 2 in an allgather of 8 bytes at step 5: rank 0's DATA frame
// arrives on its link with the byte at `flip` (if >= 0) flipped, or as
// `data` says; returns rank 1's code and message.
std::pair<int, std::string> LinkSees(const mori_wire_header_t &data, int flip) {
  int in_side[2], wire_side[2], out_side[2], root_side[2];
  for (int *sv : {in_side, wire_side, out_side, root_side}) EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  tcp_peer sender;
  memset(&sender, 0, sizeof(sender));
  sender.fd = wire_side[0];
  sender.keyed = true;
  memset(sender.key_tx, 0x33, sizeof(sender.key_tx));
  uint8_t block[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(mori_tcp_send_frame(&sender, &data, block, mori_net_now_ms() + 1000), 0);
  uint8_t wire[256];
  ssize_t n = read(wire_side[1], wire, sizeof(wire));
  EXPECT_GT(n, 0);
  if (flip >= 0) wire[flip] ^= 0x01;
  EXPECT_EQ(write(in_side[1], wire, (size_t)n), n);
  tcp_peer root, link_out, link_in;
  tcp_state s = Leaf(root_side[0], &root);
  s.rounds = 1;
  memset(&link_out, 0, sizeof(link_out));
  memset(&link_in, 0, sizeof(link_in));
  link_out.fd = in_side[0];  // round 0 receives from rank 1 + 1 = rank 0 on the link rank 1 opened
  link_out.keyed = true;
  memset(link_out.key_rx, 0x33, sizeof(link_out.key_rx));
  link_in.fd = out_side[0];  // and sends to rank 1 - 1 = rank 0 on the one rank 0 opened
  link_in.keyed = true;
  memset(link_in.key_tx, 0x44, sizeof(link_in.key_tx));
  s.link_out = &link_out;
  s.link_in = &link_in;
  uint8_t mine[8] = {9, 9, 9, 9, 9, 9, 9, 9}, all[16];
  int rc = mori_tcp_exchange_allgather(&s, mine, all, sizeof(mine));
  std::string msg = rc ? mori_last_error() : "";
  if (!rc) {
    EXPECT_EQ(memcmp(all, block, sizeof(block)), 0);
  }
  for (int *sv : {in_side, wire_side, out_side, root_side}) {
    close(sv[0]);
    close(sv[1]);
  }
  return {rc, msg};
}

TEST(FrameIntegrity, EveryFlippedByteOfALinksFrameIsAnIntegrityFailure) {
  mori_wire_header_t data = {};
  data.op = MORI_WIRE_DATA;
  data.rank = 0;
  data.arg = 0;
  data.seq = 5;
  data.bytes = 8;
  auto ok = LinkSees(data, -1);
  EXPECT_EQ(ok.first, 0) << ok.second;
  for (int flip = 0; flip < kSealed + 8 + MORI_WIRE_MAC_BYTES; flip++) {
    auto got = LinkSees(data, flip);
    EXPECT_EQ(got.first, MORI_EPROTO) << "byte " << flip << ": " << got.second;
    EXPECT_TRUE(SaysMacFailed(got.second, 0)) << "byte " << flip << ": " << got.second;
  }
  // Rank 0 really at another step: its own header, a disagreement.
  data.seq = 4;
  auto behind = LinkSees(data, -1);
  EXPECT_EQ(behind.first, MORI_EPROTO) << behind.second;
  EXPECT_EQ(behind.second.find("MAC"), std::string::npos) << behind.second;
  EXPECT_NE(behind.second.find("was due"), std::string::npos) << behind.second;
}

TEST(FrameIntegrity, AnUnalteredFrameOfAnotherStepIsStillADisagreement) {
  mori_wire_header_t reply = {};
  reply.op = MORI_WIRE_RESULT;
  reply.seq = 4;  // rank 0 really is at another step
  auto got = LeafSees(reply, -1);
  EXPECT_EQ(got.first, MORI_EPROTO) << got.second;
  EXPECT_EQ(got.second.find("MAC"), std::string::npos) << got.second;
  EXPECT_NE(got.second.find("unexpected reply"), std::string::npos) << got.second;
}

// A frame that went out only in part (its send gave up when the other end
// stopped reading) leaves the link good only for closing: an ABORT sent
// after it would be read as the rest of that frame, fail its MAC, and blame
// this end for an altered frame instead of being heard. It is not sent;
// a link whose frames all went out whole still takes one.
TEST(FrameIntegrity, NoFrameFollowsOneThatWentOutInPart) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  int small = 4096;
  ASSERT_EQ(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
  tcp_peer p = Root(sv[0]);
  std::string big(1 << 20, 'x');
  mori_wire_header_t data = {};
  data.op = MORI_WIRE_DATA;
  data.seq = 5;
  data.bytes = big.size();
  // Nobody reads sv[1]: the send gives up part-way.
  EXPECT_NE(mori_tcp_send_frame(&p, &data, big.data(), mori_net_now_ms() + 50), 0);
  EXPECT_TRUE(p.tx_cut);
  uint8_t drained[1 << 16];
  size_t before = 0;
  for (ssize_t n; (n = recv(sv[1], drained, sizeof(drained), MSG_DONTWAIT)) > 0;) before += (size_t)n;
  EXPECT_GT(before, 0u);
  EXPECT_LT(before, big.size());
  mori_wire_header_t abort_frame = {};
  abort_frame.op = MORI_WIRE_ABORT;
  abort_frame.seq = 5;
  abort_frame.bytes = 4;
  EXPECT_EQ(mori_tcp_send_frame(&p, &abort_frame, "bye", mori_net_now_ms() + 200), MORI_EPROTO);
  EXPECT_EQ(recv(sv[1], drained, sizeof(drained), MSG_DONTWAIT), -1) << "nothing more went out";
  close(sv[0]);
  close(sv[1]);
  // A whole frame leaves the link usable.
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  tcp_peer q = Root(sv[0]);
  data.bytes = 8;
  EXPECT_EQ(mori_tcp_send_frame(&q, &data, "12345678", mori_net_now_ms() + 200), 0);
  EXPECT_FALSE(q.tx_cut);
  EXPECT_EQ(mori_tcp_send_frame(&q, &abort_frame, "bye", mori_net_now_ms() + 200), 0);
  close(sv[0]);
  close(sv[1]);
}

}  // namespace
