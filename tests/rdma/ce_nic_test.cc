// The copy-engine executor's verbs, used directly between two processes:
// what a NIC refuses, it refuses (wrong remote key, a range past the region,
// a region without the right, a wrong local key, an unaligned atomic, a
// remote end on another machine), a failed request moves its queue pair to
// error and later ones are flushed, good requests move the bytes, and
// completions come out of order across queue pairs.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/support/world.h"
#include "transport/rdma/ce_nic.h"

using mori_test::World;

namespace {

constexpr int kCases = 8;  // one queue pair per case, each connected to the peer's of the same case
constexpr size_t kBytes = 64 << 10;

struct Endpoint {
  uint8_t gid[16];
  uint32_t qpn[kCases];
  uint32_t rkey_rw, rkey_ro;
  uint64_t addr_rw, addr_ro;
};

struct Nic {
  const mori_verbs *v = mori_ce_nic_verbs();
  ibv_context *ctx = nullptr;
  ibv_pd *pd = nullptr;
  ibv_cq *cq = nullptr;
  ibv_qp *qp[kCases] = {};
  ibv_mr *rw = nullptr, *ro = nullptr;
  void *mem_rw = nullptr, *mem_ro = nullptr;

  ~Nic() {
    for (ibv_qp *q : qp)
      if (q) (v->ibv_destroy_qp)(q);
    if (rw) (v->ibv_dereg_mr)(rw);
    if (ro) (v->ibv_dereg_mr)(ro);
    if (cq) (v->ibv_destroy_cq)(cq);
    if (pd) (v->ibv_dealloc_pd)(pd);
    if (ctx) (v->ibv_close_device)(ctx);
    mori_mem_free(mem_rw);
    mori_mem_free(mem_ro);
  }
};

int Connect(Nic &n, int c, const Endpoint &peer, bool other_machine = false) {
  ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  int rc = (n.v->ibv_modify_qp)(n.qp[c], &a, IBV_QP_STATE | IBV_QP_PORT);
  if (rc) return rc;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.dest_qp_num = peer.qpn[c];
  memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
  if (other_machine) a.ah_attr.grh.dgid.raw[5] ^= 0x5a;  // the machine bytes of the GID
  rc = (n.v->ibv_modify_qp)(n.qp[c], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN);
  if (rc) return rc;
  a.qp_state = IBV_QPS_RTS;
  return (n.v->ibv_modify_qp)(n.qp[c], &a, IBV_QP_STATE);
}

int Post(Nic &n, int c, ibv_wr_opcode op, void *local, uint32_t lkey, uint32_t len, uint64_t remote, uint32_t rkey,
         uint64_t wr_id) {
  ibv_sge sge = {(uint64_t)(uintptr_t)local, len, lkey};
  ibv_send_wr wr;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = remote;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = 1;
  } else {
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
  }
  ibv_send_wr *bad = nullptr;
  return ibv_post_send(n.qp[c], &wr, &bad);
}

// Waits for `count` completions; returns them in the order polled.
std::vector<ibv_wc> Reap(Nic &n, size_t count) {
  std::vector<ibv_wc> got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.size() < count && std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc[64];
    int k = ibv_poll_cq(n.cq, 64, wc);
    if (k < 0) break;
    got.insert(got.end(), wc, wc + k);
    if (k == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return got;
}

ibv_wc_status StatusOf(Nic &n) {
  auto wc = Reap(n, 1);
  return wc.empty() ? IBV_WC_GENERAL_ERR : wc[0].status;
}

TEST(CeNic, RefusesWhatANicRefusesAndMovesWhatItShould) {
  EXPECT_RANKS_PASS(2, [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Nic n;
    int count = 0;
    ibv_device **list = (n.v->ibv_get_device_list)(&count);
    ASSERT_EQ(count, 1);
    ASSERT_NE(n.ctx = (n.v->ibv_open_device)(list[0]), nullptr);
    ASSERT_NE(n.pd = (n.v->ibv_alloc_pd)(n.ctx), nullptr);
    ASSERT_NE(n.cq = (n.v->ibv_create_cq)(n.ctx, 1024, nullptr, nullptr, 0), nullptr);
    MORI_ASSERT_OK(mori_mem_alloc(kBytes, nullptr, &n.mem_rw));
    MORI_ASSERT_OK(mori_mem_alloc(kBytes, nullptr, &n.mem_ro));
    memset(n.mem_rw, 0, kBytes);
    for (size_t i = 0; i < kBytes; i++) ((char *)n.mem_ro)[i] = (char)(rank * 31 + i);
    n.rw = (n.v->ibv_reg_mr)(n.pd, n.mem_rw, kBytes,
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    n.ro = (n.v->ibv_reg_mr)(n.pd, n.mem_ro, kBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_TRUE(n.rw && n.ro);
    Endpoint me, all[2];
    memset(&me, 0, sizeof(me));
    ASSERT_EQ((n.v->ibv_query_gid)(n.ctx, 1, 0, (ibv_gid *)me.gid), 0);
    for (int c = 0; c < kCases; c++) {
      ibv_qp_init_attr init;
      memset(&init, 0, sizeof(init));
      init.send_cq = init.recv_cq = n.cq;
      init.qp_type = IBV_QPT_RC;
      ASSERT_NE(n.qp[c] = (n.v->ibv_create_qp)(n.pd, &init), nullptr);
      me.qpn[c] = n.qp[c]->qp_num;
    }
    me.rkey_rw = n.rw->rkey, me.rkey_ro = n.ro->rkey;
    me.addr_rw = (uint64_t)(uintptr_t)n.mem_rw, me.addr_ro = (uint64_t)(uintptr_t)n.mem_ro;
    MORI_ASSERT_OK(mori_bootstrap_allgather(w.bootstrap, &me, all, sizeof(me)));
    const Endpoint &peer = all[rank ^ 1];
    // A remote end on another machine: the copy engines cannot reach it.
    EXPECT_EQ(Connect(n, 7, peer, true), EHOSTUNREACH);
    for (int c = 0; c < 7; c++) ASSERT_EQ(Connect(n, c, peer), 0) << "case " << c;
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    char *src = (char *)n.mem_rw + kBytes / 2;
    for (size_t i = 0; i < 4096; i++) src[i] = (char)(rank * 7 + i);
    // 0: a good write, then a good read of the peer's read-only region.
    ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 4096, peer.addr_rw, peer.rkey_rw, 1), 0);
    EXPECT_EQ(StatusOf(n), IBV_WC_SUCCESS);
    ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_READ, src + 4096, n.rw->lkey, 4096, peer.addr_ro, peer.rkey_ro, 2), 0);
    EXPECT_EQ(StatusOf(n), IBV_WC_SUCCESS);
    for (size_t i = 0; i < 4096; i++) ASSERT_EQ(src[4096 + i], (char)((rank ^ 1) * 31 + i)) << i;
    // 1: a wrong remote key, then whatever follows on that queue pair is flushed.
    ASSERT_EQ(Post(n, 1, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw, peer.rkey_rw ^ 0x100, 3), 0);
    EXPECT_EQ(StatusOf(n), IBV_WC_REM_ACCESS_ERR);
    ASSERT_EQ(Post(n, 1, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw, peer.rkey_rw, 4), 0);
    EXPECT_EQ(StatusOf(n), IBV_WC_WR_FLUSH_ERR);
    // 2: past the end of the region.
    ASSERT_EQ(Post(n, 2, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw + kBytes - 8, peer.rkey_rw, 5), 0);
    EXPECT_EQ(StatusOf(n), IBV_WC_REM_ACCESS_ERR);
    // 3: a write into a region registered without remote write.
    ASSERT_EQ(Post(n, 3, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_ro, peer.rkey_ro, 6), 0);
    EXPECT_EQ(StatusOf(n), IBV_WC_REM_ACCESS_ERR);
    // 4: a wrong local key.
    ASSERT_EQ(Post(n, 4, IBV_WR_RDMA_WRITE, src, n.rw->lkey ^ 0x100, 64, peer.addr_rw, peer.rkey_rw, 7), 0);
    EXPECT_EQ(StatusOf(n), IBV_WC_LOC_PROT_ERR);
    // 5: an atomic on an unaligned word.
    ASSERT_EQ(Post(n, 5, IBV_WR_ATOMIC_FETCH_AND_ADD, src, n.rw->lkey, 8, peer.addr_rw + 4, peer.rkey_rw, 8), 0);
    EXPECT_EQ(StatusOf(n), IBV_WC_REM_INV_REQ_ERR);
    // 0 and 6 (different engines): 64 writes each, completions polled after all finished.
    for (int i = 0; i < 64; i++) {
      ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw + 8192 + 64 * i, peer.rkey_rw, 100 + i), 0);
      ASSERT_EQ(Post(n, 6, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw + 16384 + 64 * i, peer.rkey_rw, 200 + i), 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto wc = Reap(n, 128);
    ASSERT_EQ(wc.size(), 128u);
    std::vector<uint64_t> ids;
    for (const ibv_wc &c : wc) {
      EXPECT_EQ(c.status, IBV_WC_SUCCESS);
      ids.push_back(c.wr_id);
    }
    EXPECT_FALSE(std::is_sorted(ids.begin(), ids.end())) << "completions came out in posting order";
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // What the peer wrote with the good requests, and nothing from the refused ones.
    const char *got = (const char *)n.mem_rw;
    for (size_t i = 0; i < 4096; i++) ASSERT_EQ(got[i], (char)((rank ^ 1) * 7 + i)) << i;
    for (int i = 0; i < 64; i++) ASSERT_EQ(got[8192 + 64 * i], (char)((rank ^ 1) * 7)) << i;
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

}  // namespace
