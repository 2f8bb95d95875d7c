// SPDX-License-Identifier: MIT
// The software ConnectX against WQEs built the way rdma-core's users build
// them for a ConnectX (mlx5_queues.h: mlx5dv.h's own helpers and structs),
// CQE64s polled by their owner bit and read through struct mlx5_cqe64 /
// mlx5_err_cqe. The
// inner provider is the in-process loopback (loopback_verbs.h): data
// lands at once, fetch-and-add and compare-and-swap return the old value.
#include <endian.h>
#include <errno.h>
#include <infiniband/mlx5dv.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/rdma/swcx/loopback_verbs.h"
#include "tests/rdma/swcx/mlx5_queues.h"
#include "transport/rdma/swcx/internal.h"

namespace {

constexpr size_t kBytes = 1 << 16;

// The CQE's fields as mlx5dv.h lays them out, at the offsets the engine
// writes by hand.
static_assert(offsetof(mlx5_cqe64, byte_cnt) == 44, "byte_cnt");
static_assert(offsetof(mlx5_cqe64, sop_drop_qpn) == 56, "sop_drop_qpn");
static_assert(offsetof(mlx5_cqe64, wqe_counter) == 60, "wqe_counter");
static_assert(offsetof(mlx5_cqe64, op_own) == 63, "op_own");
static_assert(offsetof(mlx5_err_cqe, vendor_err_synd) == 54, "vendor_err_synd");
static_assert(offsetof(mlx5_err_cqe, syndrome) == 55, "syndrome");
static_assert(offsetof(mlx5_err_cqe, s_wqe_opcode_qpn) == 56, "s_wqe_opcode_qpn");

using mlx5_queues::Cqe;

// One opened device of the software ConnectX over the loopback, a CQ, two
// QPs connected to each other (qp[0] posts, qp[1] is its peer), a local
// and a remote region; sq / cqs drive qp[0]'s emulated queues.
struct Nic {
  const mori_rdma_provider_t *p = nullptr;
  const mori_verbs *v = nullptr;
  ibv_context *ctx = nullptr;
  ibv_pd *pd = nullptr;
  ibv_cq *cq = nullptr;
  ibv_qp *qp[2] = {};
  ibv_mr *local_mr = nullptr, *remote_mr = nullptr;
  std::vector<char> local = std::vector<char>(kBytes), remote = std::vector<char>(kBytes);
  mlx5_queues::SendQueue sq;
  mlx5_queues::CompletionQueue cqs;
  mlx5dv_qp &dq = sq.dq;
  mlx5dv_cq &dcq = cqs.dcq;
  uint16_t &pi = sq.pi;

  explicit Nic(int max_send_wr = 16, int cqe = 64, bool open = true) {
    p = mori_swcx_provider(loopback::Provider());
    v = p->verbs;
    if (!open) return;
    int n = 0;
    ibv_device **list = (v->ibv_get_device_list)(&n);
    ctx = (v->ibv_open_device)(list[0]);
    (v->ibv_free_device_list)(list);
    if (!ctx) return;
    pd = (v->ibv_alloc_pd)(ctx);
    cq = (v->ibv_create_cq)(ctx, cqe, nullptr, nullptr, 0);
    for (int i = 0; i < 2; i++) {
      ibv_qp_init_attr init;
      memset(&init, 0, sizeof(init));
      init.send_cq = init.recv_cq = cq;
      init.cap.max_send_wr = max_send_wr;
      init.cap.max_recv_wr = 1;
      init.cap.max_send_sge = 1;
      init.cap.max_recv_sge = 1;
      init.cap.max_inline_data = 64;
      init.qp_type = IBV_QPT_RC;
      qp[i] = (v->ibv_create_qp)(pd, &init);
      if (!qp[i]) return;
    }
    for (int i = 0; i < 2; i++) Connect(qp[i], qp[1 - i]->qp_num);
    int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    local_mr = (v->ibv_reg_mr)(pd, local.data(), kBytes, all);
    remote_mr = (v->ibv_reg_mr)(pd, remote.data(), kBytes, all);
    mlx5dv_obj obj;
    memset(&obj, 0, sizeof(obj));
    obj.qp.in = qp[0];
    obj.qp.out = &sq.dq;
    obj.cq.in = cq;
    obj.cq.out = &cqs.dcq;
    EXPECT_EQ(p->mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ), 0);
    sq.qpn = qp[0]->qp_num;
  }
  ~Nic() {
    for (ibv_qp *q : qp)
      if (q) (v->ibv_destroy_qp)(q);
    if (local_mr) (v->ibv_dereg_mr)(local_mr);
    if (remote_mr) (v->ibv_dereg_mr)(remote_mr);
    if (cq) (v->ibv_destroy_cq)(cq);
    if (pd) (v->ibv_dealloc_pd)(pd);
    if (ctx) (v->ibv_close_device)(ctx);
  }
  bool ok() const { return ctx && pd && cq && qp[0] && qp[1] && local_mr && remote_mr; }

  void Connect(ibv_qp *q, uint32_t dest) {
    ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    EXPECT_EQ((v->ibv_modify_qp)(q, &a, IBV_QP_STATE | IBV_QP_PORT), 0);
    a.qp_state = IBV_QPS_RTR;
    a.dest_qp_num = dest;
    EXPECT_EQ((v->ibv_modify_qp)(q, &a, IBV_QP_STATE | IBV_QP_DEST_QPN), 0);
    a.qp_state = IBV_QPS_RTS;
    EXPECT_EQ((v->ibv_modify_qp)(q, &a, IBV_QP_STATE), 0);
  }

  void *Seg(uint16_t at, uint32_t off) { return sq.Seg(at, off); }
  void Ctrl(uint16_t at, uint8_t opcode, uint8_t ds, uint8_t fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE, uint32_t qpn = 0) {
    sq.Ctrl(at, opcode, ds, fm_ce_se, qpn);
  }
  void Raddr(uint16_t at, uint64_t raddr, uint32_t rkey) { sq.Raddr(at, raddr, rkey); }
  void Data(uint16_t at, uint32_t off, uint32_t len, uint32_t lkey, const void *addr) { sq.Data(at, off, len, lkey, addr); }
  void Ring(uint16_t bbs, bool blueflame = false) { sq.Ring(bbs, blueflame); }
  uint64_t RemoteAddr(size_t off) { return (uint64_t)(uintptr_t)(remote.data() + off); }

  // RDMA write of `len` bytes from local+loff to remote+roff.
  uint16_t Write(size_t loff, size_t roff, uint32_t len, uint8_t fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE) {
    return sq.Write(local.data() + loff, local_mr->lkey, len, RemoteAddr(roff), remote_mr->rkey, fm_ce_se);
  }
  uint16_t Nop(uint8_t fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE) { return sq.Nop(fm_ce_se); }
  uint16_t InlineWrite(const std::string &data, size_t roff, uint8_t fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE) {
    return sq.InlineWrite(data, RemoteAddr(roff), remote_mr->rkey, fm_ce_se);
  }
  uint16_t Atomic(uint8_t opcode, size_t roff, uint64_t swap_add, uint64_t compare, size_t loff, uint32_t len = 8) {
    return sq.Atomic(opcode, RemoteAddr(roff), remote_mr->rkey, swap_add, compare, local.data() + loff, local_mr->lkey, len);
  }
  Cqe Next(int timeout_ms = 5000) { return cqs.Next(timeout_ms); }
  bool Quiet(int ms = 100) { return cqs.Quiet(ms); }
};

// Until the inner provider has been given `n` work requests (5 s at most).
bool WaitForPosts(size_t n) {
  for (int i = 0; i < 5000; i++) {
    if (loopback::Posts().size() >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

class Swcx : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("MORI_RDMA_SWCX_FAULTS");
    loopback::ReverseCompletions(false);
    loopback::HoldCompletions(false);
    loopback::ClearPosts();
  }
  void TearDown() override { unsetenv("MORI_RDMA_SWCX_FAULTS"); }
};

TEST_F(Swcx, InitObjDescribesTheQueuesAsForAConnectX) {
  Nic n(100, 50);
  ASSERT_TRUE(n.ok());
  EXPECT_STREQ(n.p->name, "software ConnectX over loopback");
  // 100 WQEs of up to 2 basic blocks (64 bytes inline): 256 blocks.
  EXPECT_EQ(n.dq.sq.wqe_cnt, 256u);
  EXPECT_EQ(n.dq.sq.stride, 64u);
  EXPECT_NE(n.dq.sq.buf, nullptr);
  EXPECT_NE(n.dq.dbrec, nullptr);
  EXPECT_NE(n.dq.bf.reg, nullptr);
  EXPECT_EQ(n.dq.bf.size, 256u);
  EXPECT_EQ(be32toh(n.dq.dbrec[MLX5_SND_DBR]), 0u);
  EXPECT_EQ(n.dcq.cqe_cnt, 64u);
  EXPECT_EQ(n.dcq.cqe_size, 64u);
  EXPECT_EQ(be32toh(n.dcq.dbrec[0]), 0u);
  // Every CQE reads as the hardware's in the first pass.
  for (uint32_t i = 0; i < n.dcq.cqe_cnt; i++) {
    auto *cqe = (mlx5_cqe64 *)((char *)n.dcq.buf + i * 64);
    EXPECT_EQ(mlx5dv_get_cqe_opcode(cqe), MLX5_CQE_INVALID) << i;
    EXPECT_EQ(mlx5dv_get_cqe_owner(cqe), 1) << i;
  }
  // Not one of its objects, or a kind it does not describe.
  mlx5dv_qp other;
  mlx5dv_obj obj;
  memset(&obj, 0, sizeof(obj));
  ibv_qp foreign;
  obj.qp.in = &foreign;
  obj.qp.out = &other;
  EXPECT_EQ(n.p->mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP), EINVAL);
  EXPECT_EQ(n.p->mlx5dv_init_obj(&obj, MLX5DV_OBJ_SRQ), EOPNOTSUPP);
}

TEST_F(Swcx, WriteLandsAndItsCqeSaysSo) {
  Nic n;
  ASSERT_TRUE(n.ok());
  for (size_t i = 0; i < 4096; i++) n.local[i] = (char)(i * 7 + 1);
  uint16_t at = n.pi;
  n.Ctrl(at, MLX5_OPCODE_RDMA_WRITE, 3);
  n.Raddr(at, n.RemoteAddr(100), n.remote_mr->rkey);
  n.Data(at, 32, 4096, n.local_mr->lkey, n.local.data());
  n.Ring(1, /*blueflame=*/true);
  Cqe c = n.Next();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.opcode(), MLX5_CQE_REQ);
  EXPECT_EQ(mlx5dv_get_cqe_owner(&c.cqe), 0);
  EXPECT_EQ(c.counter(), at);
  EXPECT_EQ(c.qpn(), n.qp[0]->qp_num);
  EXPECT_EQ(c.wqe_opcode(), MLX5_OPCODE_RDMA_WRITE);
  EXPECT_EQ(be32toh(c.cqe.byte_cnt), 4096u);
  EXPECT_EQ(memcmp(n.remote.data() + 100, n.local.data(), 4096), 0);
  EXPECT_TRUE(n.Quiet());
}

TEST_F(Swcx, InlineWriteSpanningTwoBasicBlocksLands) {
  Nic n;
  ASSERT_TRUE(n.ok());
  std::string data = "inline data that needs a second basic block.";  // 45 bytes: 32 + 52 > 64
  uint16_t at = n.InlineWrite(data, 8);
  EXPECT_EQ(n.pi, at + 2);
  Cqe c = n.Next();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.opcode(), MLX5_CQE_REQ);
  EXPECT_EQ(c.counter(), at);
  EXPECT_EQ(std::string(n.remote.data() + 8, data.size()), data);
  // Carried through a registered bounce buffer, not the inner's inline path.
  auto posts = loopback::Posts();
  ASSERT_EQ(posts.size(), 1u);
  EXPECT_EQ(posts[0].opcode, IBV_WR_RDMA_WRITE);
  EXPECT_EQ(posts[0].length, data.size());
}

TEST_F(Swcx, AWriteGathersSeveralDataSegmentsAndWriteWithImmediateCarriesIt) {
  Nic n;
  ASSERT_TRUE(n.ok());
  for (int i = 0; i < 96; i++) n.local[i] = (char)(i + 1);
  uint16_t at = n.pi;
  n.Ctrl(at, MLX5_OPCODE_RDMA_WRITE, 4);  // control, remote address, two data segments
  n.Raddr(at, n.RemoteAddr(2000), n.remote_mr->rkey);
  n.Data(at, 32, 16, n.local_mr->lkey, n.local.data() + 80);
  n.Data(at, 48, 32, n.local_mr->lkey, n.local.data());
  n.Ring(1);
  Cqe c = n.Next();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.opcode(), MLX5_CQE_REQ);
  EXPECT_EQ(be32toh(c.cqe.byte_cnt), 48u);
  EXPECT_EQ(memcmp(n.remote.data() + 2000, n.local.data() + 80, 16), 0);
  EXPECT_EQ(memcmp(n.remote.data() + 2016, n.local.data(), 32), 0);
  at = n.pi;
  mlx5dv_set_ctrl_seg((mlx5_wqe_ctrl_seg *)n.Seg(at, 0), at, MLX5_OPCODE_RDMA_WRITE_IMM, 0, n.qp[0]->qp_num,
                      MLX5_WQE_CTRL_CQ_UPDATE, 3, 0, htobe32(0x1234));
  n.Raddr(at, n.RemoteAddr(3000), n.remote_mr->rkey);
  n.Data(at, 32, 8, n.local_mr->lkey, n.local.data());
  n.Ring(1);
  c = n.Next();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.opcode(), MLX5_CQE_REQ);
  EXPECT_EQ(c.wqe_opcode(), MLX5_OPCODE_RDMA_WRITE_IMM);
  EXPECT_EQ(memcmp(n.remote.data() + 3000, n.local.data(), 8), 0);
  auto posts = loopback::Posts();
  ASSERT_EQ(posts.size(), 2u);
  EXPECT_EQ(posts[0].num_sge, 2);
  EXPECT_EQ(posts[1].opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
  EXPECT_EQ(posts[1].imm_data, htobe32(0x1234));
}

TEST_F(Swcx, ReadLands) {
  Nic n;
  ASSERT_TRUE(n.ok());
  for (size_t i = 0; i < 512; i++) n.remote[1024 + i] = (char)(i ^ 0x5a);
  uint16_t at = n.pi;
  n.Ctrl(at, MLX5_OPCODE_RDMA_READ, 3);
  n.Raddr(at, n.RemoteAddr(1024), n.remote_mr->rkey);
  n.Data(at, 32, 512, n.local_mr->lkey, n.local.data() + 64);
  n.Ring(1);
  Cqe c = n.Next();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.opcode(), MLX5_CQE_REQ);
  EXPECT_EQ(c.wqe_opcode(), MLX5_OPCODE_RDMA_READ);
  EXPECT_EQ(be32toh(c.cqe.byte_cnt), 512u);
  EXPECT_EQ(memcmp(n.local.data() + 64, n.remote.data() + 1024, 512), 0);
}

TEST_F(Swcx, FetchAddAndCompareSwapReturnTheOldValue) {
  Nic n;
  ASSERT_TRUE(n.ok());
  uint64_t start = 40, got = 0;
  memcpy(n.remote.data() + 64, &start, 8);
  n.Atomic(MLX5_OPCODE_ATOMIC_FA, 64, 2, 0, 0);
  Cqe c = n.Next();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.opcode(), MLX5_CQE_REQ);
  EXPECT_EQ(c.wqe_opcode(), MLX5_OPCODE_ATOMIC_FA);
  memcpy(&got, n.local.data(), 8);
  EXPECT_EQ(got, 40u);
  memcpy(&got, n.remote.data() + 64, 8);
  EXPECT_EQ(got, 42u);
  // compare-and-swap: a match swaps, a mismatch leaves it; both return the old value.
  n.Atomic(MLX5_OPCODE_ATOMIC_CS, 64, 7, 42, 8);
  n.Atomic(MLX5_OPCODE_ATOMIC_CS, 64, 9, 42, 16);
  ASSERT_TRUE(n.Next().got);
  ASSERT_TRUE(n.Next().got);
  memcpy(&got, n.local.data() + 8, 8);
  EXPECT_EQ(got, 42u);
  memcpy(&got, n.local.data() + 16, 8);
  EXPECT_EQ(got, 7u);
  memcpy(&got, n.remote.data() + 64, 8);
  EXPECT_EQ(got, 7u);
}

TEST_F(Swcx, MultiBlockWqesAcrossTheRingsEndAndManyRoundsOfTheRing) {
  Nic n(8);  // 8 WQEs of up to 2 blocks: a 16-block ring
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(n.dq.sq.wqe_cnt, 16u);
  // Three times around the ring and more, with 2-block inline writes
  // that straddle its end every time round.
  int rounds = 0;
  for (int i = 0; i < 40; i++) {
    std::string data(40, (char)('a' + i % 26));
    data[0] = (char)i;
    if (i % 3 == 0) {
      uint16_t at = n.Nop();
      Cqe c = n.Next();
      ASSERT_TRUE(c.got) << i;
      EXPECT_EQ(c.counter(), at);
      EXPECT_EQ(c.wqe_opcode(), MLX5_OPCODE_NOP);
    }
    bool straddles = ((n.pi + 1) & 15) == 0;
    uint16_t at = n.InlineWrite(data, 256 * (i % 8));
    rounds += straddles;
    Cqe c = n.Next();
    ASSERT_TRUE(c.got) << i;
    ASSERT_EQ(c.opcode(), MLX5_CQE_REQ) << i;
    EXPECT_EQ(c.counter(), at) << i;
    EXPECT_EQ(std::string(n.remote.data() + 256 * (i % 8), 40), data) << i;
  }
  EXPECT_GT(n.pi, 2 * 16 * 2);
  EXPECT_GT(rounds, 1) << "no WQE straddled the ring's end";
}

TEST_F(Swcx, AnUnsignaledBatchGivesOneCqeForItsSignaledLast) {
  Nic n(16);
  ASSERT_TRUE(n.ok());
  for (size_t i = 0; i < kBytes; i++) n.local[i] = (char)(i * 3);
  uint16_t last = 0;
  for (int i = 0; i < 10; i++) {
    uint16_t at = n.pi;
    n.Ctrl(at, MLX5_OPCODE_RDMA_WRITE, 3, i == 9 ? MLX5_WQE_CTRL_CQ_UPDATE : 0);
    n.Raddr(at, n.RemoteAddr(i * 512), n.remote_mr->rkey);
    n.Data(at, 32, 512, n.local_mr->lkey, n.local.data() + i * 512);
    n.pi++;
    last = at;
  }
  n.pi = (uint16_t)(n.pi - 10);
  n.Ring(10);  // one doorbell for the batch
  Cqe c = n.Next();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.counter(), last);
  EXPECT_EQ(memcmp(n.remote.data(), n.local.data(), 10 * 512), 0);
  EXPECT_TRUE(n.Quiet());
}

// A fenced WQE waits in the ring until every earlier one has completed,
// then goes to the inner QP unfenced (the wait is the fence: Soft-RoCE's
// own fence once left a fenced atomic without any completion).
TEST_F(Swcx, FenceModeWaitsForEarlierWorkAndReachesTheInnerQpUnfenced) {
  Nic n;
  ASSERT_TRUE(n.ok());
  loopback::HoldCompletions(true);
  n.Write(0, 0, 8);
  n.Write(0, 8, 8, MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE);
  n.Write(0, 16, 8, MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
  ASSERT_TRUE(WaitForPosts(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // room for a wrong second post
  EXPECT_EQ(loopback::Posts().size(), 1u) << "the fenced WQE went out while the first was outstanding";
  loopback::HoldCompletions(false);
  for (int i = 0; i < 3; i++) ASSERT_TRUE(n.Next().got) << i;
  auto posts = loopback::Posts();
  ASSERT_EQ(posts.size(), 3u);
  for (int i = 0; i < 3; i++) EXPECT_FALSE(posts[i].send_flags & IBV_SEND_FENCE) << i;
}

TEST_F(Swcx, CqesComeInWqeOrderWhateverOrderTheInnerCompletes) {
  Nic n(32);
  ASSERT_TRUE(n.ok());
  loopback::HoldCompletions(true);
  std::vector<uint16_t> at;
  for (int i = 0; i < 12; i++) at.push_back(n.Write(0, i * 8, 8));
  ASSERT_TRUE(WaitForPosts(12));  // every completion waits in the inner CQ: one reversed batch
  loopback::ReverseCompletions(true);
  loopback::HoldCompletions(false);
  for (int i = 0; i < 12; i++) {
    Cqe c = n.Next();
    ASSERT_TRUE(c.got) << i;
    EXPECT_EQ(c.counter(), at[i]) << i;
  }
}

TEST_F(Swcx, AFullCqWaitsForTheConsumerAndOverwritesNothing) {
  Nic n(32, 4);  // an 8-entry CQ
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(n.dcq.cqe_cnt, 8u);
  for (int i = 0; i < 12; i++) n.Write(0, i * 8, 8);
  ASSERT_TRUE(WaitForPosts(12));
  auto *last = (mlx5_cqe64 *)((char *)n.dcq.buf + 7 * 64);
  for (int i = 0; i < 5000 && mlx5dv_get_cqe_opcode(last) == MLX5_CQE_INVALID; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // room for a wrong ninth CQE to land
  // Eight CQEs written, the first pass's owner bit; nothing over slot 0.
  for (uint32_t i = 0; i < 8; i++) {
    auto *cqe = (mlx5_cqe64 *)((char *)n.dcq.buf + i * 64);
    EXPECT_EQ(mlx5dv_get_cqe_opcode(cqe), MLX5_CQE_REQ) << i;
    EXPECT_EQ(mlx5dv_get_cqe_owner(cqe), 0) << i;
    EXPECT_EQ(be16toh(cqe->wqe_counter), i) << i;
  }
  for (int i = 0; i < 12; i++) {
    Cqe c = n.Next();
    ASSERT_TRUE(c.got) << i;
    EXPECT_EQ(c.counter(), i);
    EXPECT_EQ(mlx5dv_get_cqe_owner(&c.cqe), i >= 8 ? 1 : 0);
  }
}

// A WQE the software ConnectX refuses: an error CQE with this syndrome at
// its index, and the WQE after it flushed.
void ExpectRefused(Nic &n, uint16_t at, uint8_t syndrome, const char *what) {
  SCOPED_TRACE(what);
  Cqe c = n.Next();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.opcode(), MLX5_CQE_REQ_ERR);
  EXPECT_EQ(c.syndrome(), syndrome);
  EXPECT_EQ(c.vendor(), SWCX_VENDOR_REFUSED);
  EXPECT_EQ(c.counter(), at);
  EXPECT_EQ(be32toh(((mlx5_err_cqe *)&c.cqe)->s_wqe_opcode_qpn) & 0xffffff, n.qp[0]->qp_num);
  n.local[0] = 'x';
  n.remote[4000] = 0;
  uint16_t next = n.Write(0, 4000, 1);
  Cqe f = n.Next();
  ASSERT_TRUE(f.got);
  EXPECT_EQ(f.opcode(), MLX5_CQE_REQ_ERR);
  EXPECT_EQ(f.syndrome(), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
  EXPECT_EQ(f.counter(), next);
  EXPECT_EQ(n.remote[4000], 0) << "a flushed WQE executed";
}

// A fresh NIC given one WQE of this opcode and ds alone: refused with a
// local QP operation error.
void ExpectLoneWqeRefused(uint8_t opcode, uint8_t ds, const char *what) {
  Nic n;
  ASSERT_TRUE(n.ok());
  uint16_t at = n.pi;
  n.Ctrl(at, opcode, ds);
  n.Ring(1);
  ExpectRefused(n, at, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, what);
}

TEST_F(Swcx, RefusesWhatAConnectXWouldRefuse) {
  ExpectLoneWqeRefused(MLX5_OPCODE_RDMA_WRITE, 1, "a write with ds 1");  // no room for the remote address
  ExpectLoneWqeRefused(MLX5_OPCODE_RDMA_WRITE, 0, "ds 0");
  ExpectLoneWqeRefused(0x3e, 1, "an unknown opcode");
  ExpectLoneWqeRefused(MLX5_OPCODE_SEND, 2, "a send (not executed)");
  {
    Nic n;
    ASSERT_TRUE(n.ok());
    n.Nop();
    ASSERT_TRUE(n.Next().got);
    uint16_t at = n.pi;
    mlx5dv_set_ctrl_seg((mlx5_wqe_ctrl_seg *)n.Seg(at, 0), (uint16_t)(at + 5), MLX5_OPCODE_NOP, 0, n.qp[0]->qp_num,
                        MLX5_WQE_CTRL_CQ_UPDATE, 1, 0, 0);
    n.Ring(1);
    ExpectRefused(n, at, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, "a wqe_index that is not the producer's");
  }
  {
    Nic n;
    ASSERT_TRUE(n.ok());
    uint16_t at = n.pi;
    n.Ctrl(at, MLX5_OPCODE_NOP, 1, MLX5_WQE_CTRL_CQ_UPDATE, n.qp[1]->qp_num);
    n.Ring(1);
    ExpectRefused(n, at, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, "another QP's number");
  }
  {
    Nic n;
    ASSERT_TRUE(n.ok());
    uint16_t at = n.pi;
    n.Ctrl(at, MLX5_OPCODE_RDMA_WRITE, 5);  // 80 bytes: two blocks, the doorbell covers one
    n.Raddr(at, n.RemoteAddr(0), n.remote_mr->rkey);
    n.Ring(1);
    ExpectRefused(n, at, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, "a WQE the doorbell does not cover");
  }
  {
    Nic n;
    ASSERT_TRUE(n.ok());
    uint16_t at = n.Atomic(MLX5_OPCODE_ATOMIC_FA, 0, 1, 0, 0, /*len=*/4);
    ExpectRefused(n, at, MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, "an atomic landing 4 bytes");
  }
  {
    Nic n;
    ASSERT_TRUE(n.ok());
    uint16_t at = n.pi;
    n.Ctrl(at, MLX5_OPCODE_RDMA_WRITE, 3);
    n.Raddr(at, n.RemoteAddr(0), n.remote_mr->rkey);
    *(__be32 *)n.Seg(at, 32) = htobe32(40 | MLX5_INLINE_SEG);  // 40 bytes in a 16-byte segment
    n.Ring(1);
    ExpectRefused(n, at, MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, "inline data past ds");
  }
  {
    Nic n;
    ASSERT_TRUE(n.ok());
    uint16_t at = n.InlineWrite(std::string(100, 'z'), 0);  // the QP's max_inline_data is 64
    ExpectRefused(n, at, MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, "inline data past max_inline_data");
  }
}

TEST_F(Swcx, AnInnerErrorBecomesAnErrorCqeWithItsSyndrome) {
  Nic n;
  ASSERT_TRUE(n.ok());
  uint16_t at = n.pi;
  n.Ctrl(at, MLX5_OPCODE_RDMA_WRITE, 3, 0);  // unsignaled: an error still gives a CQE
  n.Raddr(at, n.RemoteAddr(0), n.remote_mr->rkey + 77);
  n.Data(at, 32, 8, n.local_mr->lkey, n.local.data());
  n.Ring(1);
  Cqe c = n.Next();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.opcode(), MLX5_CQE_REQ_ERR);
  EXPECT_EQ(c.syndrome(), MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
  EXPECT_EQ(c.vendor(), 0x42);
  EXPECT_EQ(c.counter(), at);
  uint16_t next = n.Write(0, 0, 8);
  Cqe f = n.Next();
  ASSERT_TRUE(f.got);
  EXPECT_EQ(f.syndrome(), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
  EXPECT_EQ(f.counter(), next);
}

TEST_F(Swcx, TheProxyPathsVerbsRunBesideTheEmulatedQueues) {
  Nic n;
  ASSERT_TRUE(n.ok());
  n.local[0] = 'v';
  ibv_sge sge = {(uint64_t)(uintptr_t)n.local.data(), 1, n.local_mr->lkey};
  ibv_send_wr wr, *bad = nullptr;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = 0xabcdef0123456789ull;  // any id, its top bit too
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = n.RemoteAddr(500);
  wr.wr.rdma.rkey = n.remote_mr->rkey;
  uint16_t at = n.Write(0, 600, 1);
  ASSERT_EQ(ibv_post_send(n.qp[0], &wr, &bad), 0);
  ibv_wc wc;
  int got = 0;
  for (int i = 0; i < 1000 && got == 0; i++) {
    got = ibv_poll_cq(n.cq, 1, &wc);
    if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(got, 1);
  EXPECT_EQ(wc.wr_id, 0xabcdef0123456789ull);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.qp_num, n.qp[0]->qp_num);
  EXPECT_EQ(n.remote[500], 'v');
  Cqe c = n.Next();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.counter(), at);
  EXPECT_EQ(ibv_poll_cq(n.cq, 1, &wc), 0) << "a device completion reached the verbs poll";
}

// ---- faults ----

TEST_F(Swcx, FaultErrorFailsTheNthWqeWithARemoteAccessError) {
  setenv("MORI_RDMA_SWCX_FAULTS", "error@3", 1);
  Nic n;
  ASSERT_TRUE(n.ok());
  n.local[0] = 'e';
  n.Write(0, 0, 1);
  n.Write(0, 1, 1);
  uint16_t third = n.Write(0, 2, 1);
  uint16_t fourth = n.Write(0, 3, 1);
  ASSERT_TRUE(n.Next().got);
  ASSERT_TRUE(n.Next().got);
  Cqe c = n.Next();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.opcode(), MLX5_CQE_REQ_ERR);
  EXPECT_EQ(c.syndrome(), MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
  EXPECT_EQ(c.vendor(), SWCX_VENDOR_FAULT);
  EXPECT_EQ(c.counter(), third);
  Cqe f = n.Next();
  ASSERT_TRUE(f.got);
  EXPECT_EQ(f.syndrome(), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
  EXPECT_EQ(f.counter(), fourth);
  EXPECT_EQ(n.remote[1], 'e');
  EXPECT_EQ(n.remote[2], 0);
  EXPECT_EQ(n.remote[3], 0);
}

TEST_F(Swcx, FaultLateHoldsTheNthCompletionAndEveryLaterOneOfItsQp) {
  setenv("MORI_RDMA_SWCX_FAULTS", "late@2:300", 1);
  Nic n;
  ASSERT_TRUE(n.ok());
  n.local[0] = 'l';
  n.Write(0, 0, 1);
  ASSERT_TRUE(n.Next().got);
  auto t0 = std::chrono::steady_clock::now();
  uint16_t second = n.Write(0, 1, 1);
  uint16_t third = n.Write(0, 2, 1);
  Cqe c = n.Next();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(c.got);
  EXPECT_EQ(c.counter(), second);
  EXPECT_GE(ms, 290.0);
  EXPECT_EQ(n.remote[1], 'l') << "the data lands on time; only the completion is late";
  Cqe d = n.Next();
  ASSERT_TRUE(d.got);
  EXPECT_EQ(d.counter(), third);
}

TEST_F(Swcx, FaultStallExecutesNothingFromTheNthOnUntilTheQpIsMovedToError) {
  setenv("MORI_RDMA_SWCX_FAULTS", "stall@2", 1);
  Nic n;
  ASSERT_TRUE(n.ok());
  n.local[0] = 's';
  n.Write(0, 0, 1);
  ASSERT_TRUE(n.Next().got);
  uint16_t second = n.Write(0, 1, 1);
  EXPECT_TRUE(n.Quiet(200));
  EXPECT_EQ(n.remote[1], 0);
  ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ((n.v->ibv_modify_qp)(n.qp[0], &a, IBV_QP_STATE), 0);
  Cqe f = n.Next();
  ASSERT_TRUE(f.got);
  EXPECT_EQ(f.opcode(), MLX5_CQE_REQ_ERR);
  EXPECT_EQ(f.syndrome(), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
  EXPECT_EQ(f.counter(), second);
  EXPECT_EQ(n.remote[1], 0);
}

TEST_F(Swcx, AMalformedFaultListFailsTheDeviceOpen) {
  setenv("MORI_RDMA_SWCX_FAULTS", "error@0", 1);
  Nic n(16, 64, /*open=*/false);
  int count = 0;
  ibv_device **list = (n.v->ibv_get_device_list)(&count);
  errno = 0;
  EXPECT_EQ((n.v->ibv_open_device)(list[0]), nullptr);
  EXPECT_EQ(errno, EINVAL);
  (n.v->ibv_free_device_list)(list);
}

}  // namespace
