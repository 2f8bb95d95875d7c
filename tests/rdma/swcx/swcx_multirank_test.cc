// SPDX-License-Identifier: MIT
// The software ConnectX under the rdma transport, between processes laid
// out as two nodes (MORI_HOST_ID), over the copy-engine NIC
// (swcx_ce_provider.cc installs it) or libibverbs on Soft-RoCE
// (swcx_verbs_provider.cc): the transport creates, connects and tears down
// its QPs through the software ConnectX, and each rank drives the emulated
// queues of its QPs to the other node's ranks as GPU-initiated posting
// does: writes, inline writes, reads and fetch-and-adds into the peers'
// windows, unsignaled batches closed by one signaled WQE, many rounds of
// the ring, all completing into the transport's CQ beside the proxy
// path's completions; a refused WQE gives an error CQE and the comm still
// serves that peer through the proxy path.
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "mori/transport_rdma.h"
#include "tests/rdma/swcx/mlx5_queues.h"
#include "tests/rdma/rdma_test_support.h"
#include "tests/support/world.h"
#include "transport/rdma/internal.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

constexpr size_t kChunk = 16 << 10;

void JoinTwoNodes(int rank, int size) { mori_rdma_test::SetTwoNodeHostIds(rank, size); }
bool OtherNode(int a, int b, int size) { return (a < size / 2) != (b < size / 2); }

// Over libibverbs (swcx_verbs_provider.cc) the suite needs a device
// (Soft-RoCE in tools/rdma_vm_test.sh's guest); the copy-engine NIC is one.
extern "C" bool mori_test_ce_nic_installed(void) __attribute__((weak));
bool HaveRdmaDevice() {
  return (mori_test_ce_nic_installed && mori_test_ce_nic_installed()) || mori_rdma_test::KernelHasRdmaDevice();
}

// The window: [size chunks received][staging chunk][counter][size tags of 16 bytes][fetched].
struct Layout {
  size_t staging, counter, tags, fetched, total;
  explicit Layout(int size)
      : staging(kChunk * size), counter(staging + kChunk), tags(counter + 8), fetched(tags + 16 * size),
        total(fetched + 8) {}
};

struct Peer {
  int rank;
  mlx5_queues::SendQueue sq;
  uint64_t remote;  // the peer's segment base
  uint32_t rkey;
};

TEST(Swcx, KernelsWayOfPostingReachesTheOtherNodeThroughTheRdmaTransport) {
  int size = TestRanks();
  if (size < 2) GTEST_SKIP();
  if (!HaveRdmaDevice()) GTEST_SKIP() << mori_rdma_test::kNoRdmaDevice;
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinTwoNodes(rank, size);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    Layout l(size);
    void *mem = nullptr;
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(l.total, nullptr, &mem));
    memset(mem, 0, l.total);
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    auto *s = (rdma_state *)mori_comm_transport_state(w.comm, &mori_transport_rdma_ops);
    auto *seg = (rdma_segment *)mori_window_transport_state(win, &mori_transport_rdma_ops);
    ASSERT_NE(s, nullptr);
    ASSERT_NE(seg, nullptr);
    ASSERT_TRUE(s->usable) << s->unusable;
    ASSERT_EQ(std::string(s->provider->name).rfind("software ConnectX over ", 0), 0u) << s->provider->name;
    ASSERT_NE(s->provider->mlx5dv_init_obj, nullptr);
    size_t base = 0;
    mori_window_segment(win, &base);
    char *local = seg->base + base;  // == mem
    ASSERT_EQ((void *)local, mem);
    uint32_t lkey = seg->mr->lkey;

    // The transport's CQ, and a send queue per peer on the other node.
    mlx5_queues::CompletionQueue cq;
    mlx5dv_obj obj;
    memset(&obj, 0, sizeof(obj));
    obj.cq.in = s->cq;
    obj.cq.out = &cq.dcq;
    ASSERT_EQ(s->provider->mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ), 0);
    std::vector<Peer> peers;
    for (int p = 0; p < size; p++) {
      if (!OtherNode(rank, p, size)) continue;
      Peer peer;
      peer.rank = p;
      memset(&obj, 0, sizeof(obj));
      obj.qp.in = s->qp[(size_t)p * s->num_qp];
      obj.qp.out = &peer.sq.dq;
      ASSERT_EQ(s->provider->mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP), 0);
      peer.sq.qpn = obj.qp.in->qp_num;
      peer.remote = seg->addr[p] + base;
      peer.rkey = seg->rkey[p];
      peers.push_back(peer);
    }
    ASSERT_EQ((int)peers.size(), size / 2);

    // 1. Per peer: this rank's chunk into its slot (unsignaled), a tag
    // inline, and a fenced, signaled fetch-and-add: one CQE per peer, in
    // the transport's CQ.
    for (size_t i = 0; i < kChunk; i++) local[l.staging + i] = (char)(rank * 11 + i);
    for (Peer &p : peers) {
      p.sq.Write(local + l.staging, lkey, kChunk, p.remote + rank * kChunk, p.rkey, 0);
      std::string tag = "tag from " + std::to_string(rank);
      p.sq.InlineWrite(tag, p.remote + l.tags + 16 * rank, p.rkey, 0);
      p.sq.Atomic(MLX5_OPCODE_ATOMIC_FA, p.remote + l.counter, p.rkey, rank + 1, 0, local + l.fetched, lkey, 8,
                  MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE);
    }
    std::vector<bool> seen(size, false);
    for (size_t i = 0; i < peers.size(); i++) {
      mlx5_queues::Cqe c = cq.Next();
      ASSERT_TRUE(c.got) << "CQE " << i;
      ASSERT_EQ(c.opcode(), MLX5_CQE_REQ) << "syndrome 0x" << std::hex << (int)c.syndrome();
      EXPECT_EQ(c.wqe_opcode(), MLX5_OPCODE_ATOMIC_FA);
      bool known = false;
      for (Peer &p : peers)
        if (p.sq.qpn == c.qpn()) {
          known = true;
          EXPECT_FALSE(seen[p.rank]);
          seen[p.rank] = true;
          EXPECT_EQ(c.counter(), 2) << "the write (block 0), the inline write (block 1), then the atomic";
        }
      EXPECT_TRUE(known) << "CQE of QP 0x" << std::hex << c.qpn();
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    uint64_t expected = 0;
    for (int p = 0; p < size; p++) {
      if (!OtherNode(rank, p, size)) continue;
      expected += p + 1;
      for (size_t i = 0; i < kChunk; i += 61) ASSERT_EQ(local[p * kChunk + i], (char)(p * 11 + i)) << "from " << p;
      EXPECT_EQ(std::string(local + l.tags + 16 * p), "tag from " + std::to_string(p));
    }
    EXPECT_EQ(*(volatile uint64_t *)(local + l.counter), expected);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));

    // 2. Read back what this rank wrote into each peer.
    for (Peer &p : peers) {
      memset(local + l.staging, 0, kChunk);
      uint16_t at = p.sq.Read(local + l.staging, lkey, kChunk, p.remote + rank * kChunk, p.rkey);
      mlx5_queues::Cqe c = cq.Next();
      ASSERT_TRUE(c.got);
      ASSERT_EQ(c.opcode(), MLX5_CQE_REQ);
      EXPECT_EQ(c.counter(), at);
      EXPECT_EQ(be32toh(c.cqe.byte_cnt), kChunk);
      for (size_t i = 0; i < kChunk; i += 61) ASSERT_EQ(local[l.staging + i], (char)(rank * 11 + i)) << "from " << p.rank;
    }

    // 3. More than twice round each ring: batches of unsignaled writes,
    // the last of each signaled, one doorbell per batch.
    for (Peer &p : peers) {
      uint32_t total = 2 * p.sq.dq.sq.wqe_cnt + 100, done = 0;
      while (done < total) {
        uint32_t batch = total - done < 64 ? total - done : 64;
        uint16_t first = p.sq.pi, last = 0;
        for (uint32_t i = 0; i < batch; i++) {
          uint32_t k = done + i;
          last = p.sq.Write(local + l.staging + (k % 512) * 8, lkey, 8, p.remote + rank * kChunk + (k % 512) * 8, p.rkey,
                            i + 1 == batch ? MLX5_WQE_CTRL_CQ_UPDATE : 0, /*ring=*/false);
        }
        p.sq.pi = first;
        p.sq.Ring((uint16_t)batch);
        mlx5_queues::Cqe c = cq.Next();
        ASSERT_TRUE(c.got) << done;
        ASSERT_EQ(c.opcode(), MLX5_CQE_REQ) << done;
        ASSERT_EQ(c.counter(), last);
        done += batch;
      }
    }
    EXPECT_TRUE(cq.Quiet(50));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));

    // 4. A WQE naming another QP is refused with an error CQE; the next
    // flushes; the proxy path still reaches that peer.
    Peer &p = peers[0];
    uint16_t at = p.sq.pi;
    p.sq.Ctrl(at, MLX5_OPCODE_NOP, 1, MLX5_WQE_CTRL_CQ_UPDATE, p.sq.qpn ^ 1);
    p.sq.Ring(1);
    mlx5_queues::Cqe c = cq.Next();
    ASSERT_TRUE(c.got);
    EXPECT_EQ(c.opcode(), MLX5_CQE_REQ_ERR);
    EXPECT_EQ(c.syndrome(), MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
    EXPECT_EQ(c.counter(), at);
    uint16_t flushed = p.sq.Nop();
    c = cq.Next();
    ASSERT_TRUE(c.got);
    EXPECT_EQ(c.syndrome(), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
    EXPECT_EQ(c.counter(), flushed);
    MORI_EXPECT_OK(mori_rdma_put(win, p.rank, rank * kChunk, l.staging, 64));
    MORI_EXPECT_OK(mori_rdma_quiet(w.comm));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
  });
}

}  // namespace
