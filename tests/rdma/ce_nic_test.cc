// SPDX-License-Identifier: MIT
// The copy-engine NIC's verbs, used directly between two processes:
// what a NIC refuses, it refuses (wrong remote key, a range past the region,
// a region without the right, a wrong local key, an unaligned atomic, a
// remote end on another machine), a failed request moves its queue pair to
// error and later ones are flushed, good requests move the bytes,
// completions come out of order across queue pairs and each in its queue
// pair's own completion queue. A key its owner
// deregisters is dead for a peer that cached its region, even when the slot
// behind it is reused, and the peer's mapping of it goes.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "tests/support/proc_stats.h"
#include "tests/support/world.h"
#include "transport/rdma/ce_nic/internal.h"

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

// Opens the device, registers a read-write and a read-only region of
// kBytes, creates kCases queue pairs and exchanges endpoints; all[r] is rank r's.
void Open(Nic &n, World &w, int rank, Endpoint *all) {
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
  Endpoint me;
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
}

// Open, then every queue pair connected to the peer's of the same case.
void OpenAndConnect(Nic &n, World &w, int rank, Endpoint *all) {
  ASSERT_NO_FATAL_FAILURE(Open(n, w, rank, all));
  for (int c = 0; c < kCases; c++) ASSERT_EQ(Connect(n, c, all[rank ^ 1]), 0) << "case " << c;
  MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
}

const uint32_t kRemoteAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// The peer's regions this context holds mapped.
size_t CachedRegions(const Nic &n) {
  size_t count = 0;
  for (const ce_remote *r = ((const ce_context *)n.ctx)->remotes; r; r = r->next) count++;
  return count;
}

// Mappings of mori memory, ours or a peer's (a host-platform allocation:
// POSIX shared memory or a memfd, by handle type).
int MoriMappings() {
  return mori_test::CountMappingsOf("/dev/shm/mori.") + mori_test::CountMappingsOf("/memfd:mori (deleted)");
}

// The ranks leave with _exit, which skips LeakSanitizer's check at exit:
// run it once everything the rank made is gone.
void ExpectNoLeaks(int rank) {
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0) << "rank " << rank << " leaked";
#endif
}

// Runs body(rank, w, n, peer) at two ranks, each with its NIC open and
// every queue pair connected to the peer's; then checks the rank leaked
// nothing (everything the body made is gone by then).
template <typename Body>
void OnTwoConnectedNics(Body body) {
  EXPECT_RANKS_PASS(2, [&body](int rank, int size) {
    {
      World w;
      ASSERT_TRUE(w.ok());
      Nic n;
      Endpoint all[2];
      ASSERT_NO_FATAL_FAILURE(OpenAndConnect(n, w, rank, all));
      body(rank, w, n, all[rank ^ 1]);
    }
    ExpectNoLeaks(rank);
  });
}

TEST(CeNic, RefusesWhatANicRefusesAndMovesWhatItShould) {
  EXPECT_RANKS_PASS(2, [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Nic n;
    Endpoint all[2];
    ASSERT_NO_FATAL_FAILURE(Open(n, w, rank, all));
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

// Polls `cq` until `count` completions came or `ms` passed.
std::vector<ibv_wc> PollFor(Nic &n, ibv_cq *cq, size_t count, int ms) {
  std::vector<ibv_wc> got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (got.size() < count && std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc[16];
    int k = ibv_poll_cq(cq, 16, wc);
    if (k < 0) break;
    got.insert(got.end(), wc, wc + k);
    if (k == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return got;
}

// A completion is handed out by its queue pair's own CQ only, whichever CQ
// of the context is polled first (the software ConnectX polls every CQ of a
// context from its engine: one handed to the wrong CQ was lost).
TEST(CeNic, ACompletionComesOnlyFromItsQueuePairsCq) {
  OnTwoConnectedNics([](int rank, World &w, Nic &n, const Endpoint &peer) {
    ibv_cq *other = (n.v->ibv_create_cq)(n.ctx, 64, nullptr, nullptr, 0);
    ASSERT_NE(other, nullptr);
    ibv_qp_init_attr init;
    memset(&init, 0, sizeof(init));
    init.send_cq = init.recv_cq = other;
    init.qp_type = IBV_QPT_RC;
    ibv_qp *extra = (n.v->ibv_create_qp)(n.pd, &init);
    ASSERT_NE(extra, nullptr);
    std::swap(n.qp[kCases - 1], extra);  // case kCases - 1 is now the QP on `other`
    ASSERT_EQ(Connect(n, kCases - 1, peer), 0);
    char *src = (char *)n.mem_rw + kBytes / 2;
    // On the other CQ's QP: nothing from the comm's CQ, then the completion from its own.
    ASSERT_EQ(Post(n, kCases - 1, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw, peer.rkey_rw, 11), 0);
    auto wrong = PollFor(n, n.cq, 1, 200);
    EXPECT_TRUE(wrong.empty()) << "rank " << rank << ": QP 0x" << std::hex << n.qp[kCases - 1]->qp_num
                               << "'s completion came from the CQ of its other QPs";
    auto right = PollFor(n, other, 1, 10000);
    ASSERT_EQ(right.size(), wrong.empty() ? 1u : 0u) << "rank " << rank;
    if (!right.empty()) {
      EXPECT_EQ(right[0].wr_id, 11u);
      EXPECT_EQ(right[0].status, IBV_WC_SUCCESS);
      EXPECT_EQ(right[0].qp_num, n.qp[kCases - 1]->qp_num);
    }
    // And the other way round.
    ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw + 64, peer.rkey_rw, 12), 0);
    wrong = PollFor(n, other, 1, 200);
    EXPECT_TRUE(wrong.empty()) << "rank " << rank << ": QP 0x" << std::hex << n.qp[0]->qp_num
                               << "'s completion came from another QP's CQ";
    right = PollFor(n, n.cq, 1, 10000);
    ASSERT_EQ(right.size(), wrong.empty() ? 1u : 0u) << "rank " << rank;
    if (!right.empty()) {
      EXPECT_EQ(right[0].wr_id, 12u);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // The QPs go before the CQ they complete into.
    (n.v->ibv_destroy_qp)(n.qp[kCases - 1]);
    n.qp[kCases - 1] = nullptr;
    (n.v->ibv_destroy_qp)(extra);
    (n.v->ibv_destroy_cq)(other);
  });
}

// A peer used a key, the owner deregistered it: the next request on it is
// refused (and its queue pair flushes what follows), whether it writes or
// reads, and the peer's mapping of the region is gone. The same memory
// registered again has a new key that works.
TEST(CeNic, ADeregisteredKeyIsRefusedAndItsRegionUnmapped) {
  OnTwoConnectedNics([](int rank, World &w, Nic &n, const Endpoint &peer) {
    const bool requester = rank == 1;  // rank 0 owns what rank 1 writes and reads
    char *src = (char *)n.mem_rw + kBytes / 2;
    for (size_t i = 0; i < 64; i++) src[i] = (char)(0x40 + i);
    const int mapped_before = MoriMappings();
    if (requester) {
      ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw, peer.rkey_rw, 1), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_SUCCESS);
      ASSERT_EQ(Post(n, 1, IBV_WR_RDMA_READ, src + 64, n.rw->lkey, 64, peer.addr_rw, peer.rkey_rw, 2), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_SUCCESS);
      EXPECT_EQ(CachedRegions(n), 1u);
      EXPECT_GT(MoriMappings(), mapped_before);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    uint32_t fresh = 0;
    if (!requester) {
      const uint32_t old = n.rw->rkey;
      ASSERT_EQ((n.v->ibv_dereg_mr)(n.rw), 0);
      n.rw = (n.v->ibv_reg_mr)(n.pd, n.mem_rw, kBytes, kRemoteAccess);
      ASSERT_NE(n.rw, nullptr);
      fresh = n.rw->rkey;
      EXPECT_NE(fresh, old);
    }
    MORI_ASSERT_OK(mori_bootstrap_bcast(w.bootstrap, &fresh, sizeof(fresh), 0));
    if (requester) {
      // The cached region's key is dead: a remote access error, and the queue pair flushes.
      ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw + 64, peer.rkey_rw, 3), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_REM_ACCESS_ERR);
      EXPECT_EQ(CachedRegions(n), 0u);
      EXPECT_EQ(MoriMappings(), mapped_before);
      ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw + 64, fresh, 4), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_WR_FLUSH_ERR);
      // A read on the dead key, on a queue pair that has not failed yet.
      ASSERT_EQ(Post(n, 1, IBV_WR_RDMA_READ, src + 128, n.rw->lkey, 64, peer.addr_rw, peer.rkey_rw, 5), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_REM_ACCESS_ERR);
      ASSERT_EQ(Post(n, 1, IBV_WR_RDMA_READ, src + 128, n.rw->lkey, 64, peer.addr_rw, fresh, 6), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_WR_FLUSH_ERR);
      // The new key of the same memory works.
      ASSERT_EQ(Post(n, 2, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw + 256, fresh, 7), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_SUCCESS);
      EXPECT_EQ(CachedRegions(n), 1u);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (!requester) {
      const char *got = (const char *)n.mem_rw;
      for (size_t i = 0; i < 64; i++) {
        ASSERT_EQ(got[i], (char)(0x40 + i)) << i;   // the write before the deregistration
        ASSERT_EQ(got[64 + i], 0) << i;             // nothing from the refused one
        ASSERT_EQ(got[256 + i], (char)(0x40 + i)) << i;  // the new key's
      }
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

// The owner registers until its key table is full: reg_mr fails with ENOMEM
// naming the limit, and keeps nothing (no fd, no region). A slot freed and
// taken again gets a key of a new generation: the old key, which the peer
// had cached, stays dead; the new one works.
TEST(CeNic, AReusedSlotNeverRevivesAnOldKey) {
  OnTwoConnectedNics([](int rank, World &w, Nic &n, const Endpoint &peer) {
    const bool requester = rank == 1;
    char *src = (char *)n.mem_rw + kBytes / 2;
    for (size_t i = 0; i < 64; i++) src[i] = (char)(0x60 + i);
    if (requester) {
      ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw, peer.rkey_rw, 1), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_SUCCESS);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    uint32_t fresh = 0;
    if (!requester) {
      const uint32_t old = n.rw->rkey, slot = old % CE_KEY_SLOTS;
      ASSERT_EQ((n.v->ibv_dereg_mr)(n.rw), 0);
      n.rw = nullptr;
      // Fill every free slot (the old key's among them) with local-only registrations.
      std::vector<char> scratch(64);
      std::vector<ibv_mr *> fill;
      for (;;) {
        ibv_mr *mr = (n.v->ibv_reg_mr)(n.pd, scratch.data(), scratch.size(), IBV_ACCESS_LOCAL_WRITE);
        if (!mr) break;
        fill.push_back(mr);
        ASSERT_LE(fill.size(), (size_t)CE_KEY_SLOTS);
      }
      EXPECT_EQ(errno, ENOMEM);
      EXPECT_EQ(fill.size(), (size_t)CE_KEY_SLOTS - 1);  // the read-only region holds the last slot
      EXPECT_NE(std::string(mori_last_error()).find("4096"), std::string::npos) << mori_last_error();
      // Shareable memory when the table is full: refused, its exported fd not kept.
      const int fds = mori_test::CountFds();
      EXPECT_EQ((n.v->ibv_reg_mr)(n.pd, n.mem_rw, kBytes, kRemoteAccess), nullptr);
      EXPECT_EQ(errno, ENOMEM);
      EXPECT_EQ(mori_test::CountFds(), fds);
      // Free the old key's slot: the same memory registered again lands there, a generation later.
      auto in_slot =
          std::find_if(fill.begin(), fill.end(), [&](ibv_mr *mr) { return mr->rkey % CE_KEY_SLOTS == slot; });
      ASSERT_NE(in_slot, fill.end());
      EXPECT_NE((*in_slot)->rkey, old);
      ASSERT_EQ((n.v->ibv_dereg_mr)(*in_slot), 0);
      fill.erase(in_slot);
      n.rw = (n.v->ibv_reg_mr)(n.pd, n.mem_rw, kBytes, kRemoteAccess);
      ASSERT_NE(n.rw, nullptr) << mori_last_error();
      EXPECT_EQ(n.rw->rkey % CE_KEY_SLOTS, slot);
      EXPECT_NE(n.rw->rkey, old);
      fresh = n.rw->rkey;
      for (ibv_mr *mr : fill) EXPECT_EQ((n.v->ibv_dereg_mr)(mr), 0);
    }
    MORI_ASSERT_OK(mori_bootstrap_bcast(w.bootstrap, &fresh, sizeof(fresh), 0));
    if (requester) {
      ASSERT_EQ(fresh % CE_KEY_SLOTS, peer.rkey_rw % CE_KEY_SLOTS);
      ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw + 64, peer.rkey_rw, 2), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_REM_ACCESS_ERR);
      EXPECT_EQ(CachedRegions(n), 0u);
      ASSERT_EQ(Post(n, 1, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw + 128, fresh, 3), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_SUCCESS);
      // A key never issued, in the same slot: refused (the table has it dead, and so would the owner).
      ASSERT_EQ(Post(n, 2, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw, fresh + CE_KEY_SLOTS, 4), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_REM_ACCESS_ERR);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (!requester) {
      const char *got = (const char *)n.mem_rw;
      for (size_t i = 0; i < 64; i++) {
        ASSERT_EQ(got[i], (char)(0x60 + i)) << i;
        ASSERT_EQ(got[64 + i], 0) << i;
        ASSERT_EQ(got[128 + i], (char)(0x60 + i)) << i;
      }
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

// Copies checked before the owner deregisters may still be running when a
// later request finds the key dead and drops the mapping: the mapping goes
// only once they are done (they land, and nothing faults). Whether any are
// still running at that moment depends on the engine's speed: where all
// are done first, the test checks the plain path.
constexpr int kWrites = 1024;  // of kBytes each: enough to keep an engine busy while the owner deregisters

TEST(CeNic, ADroppedRegionOutlivesTheCopiesInFlightOnIt) {
  OnTwoConnectedNics([](int rank, World &w, Nic &n, const Endpoint &peer) {
    const bool requester = rank == 1;
    if (requester) {
      memset(n.mem_rw, 0x5a, kBytes);
      for (int i = 0; i < kWrites; i++)
        ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_WRITE, n.mem_rw, n.rw->lkey, kBytes, peer.addr_rw, peer.rkey_rw, i), 0);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (!requester) {
      ASSERT_EQ((n.v->ibv_dereg_mr)(n.rw), 0);
      n.rw = nullptr;
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (requester) {
      ASSERT_EQ(Post(n, 1, IBV_WR_RDMA_WRITE, n.mem_rw, n.rw->lkey, 64, peer.addr_rw, peer.rkey_rw, kWrites), 0);
      auto wc = Reap(n, kWrites + 1);
      ASSERT_EQ(wc.size(), (size_t)kWrites + 1);
      for (const ibv_wc &c : wc)
        EXPECT_EQ(c.status, c.wr_id == (uint64_t)kWrites ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS) << c.wr_id;
      EXPECT_EQ(CachedRegions(n), 0u);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (!requester) {
      for (size_t i = 0; i < kBytes; i += 4096) ASSERT_EQ(((const char *)n.mem_rw)[i], 0x5a) << i;
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

// The requester writes 64 bytes of src into the owner's read-write region,
// so that its context caches the region; both ranks meet after.
void CacheThePeersRegion(World &w, Nic &n, const Endpoint &peer, bool requester, char *src) {
  if (requester) {
    ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw, peer.rkey_rw, 1), 0);
    EXPECT_EQ(StatusOf(n), IBV_WC_SUCCESS);
    EXPECT_EQ(CachedRegions(n), 1u);
  }
  MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
}

// The owner deregisters a region the peer had cached and the peer never
// posts on that key again (a freed segment): the peer's next miss sweeps
// the dead region out and unmaps it, so the owner's freed memory is not
// held until the peer closes.
TEST(CeNic, ARegionWhoseKeyDiedIsSweptWithoutARequestOnIt) {
  OnTwoConnectedNics([](int rank, World &w, Nic &n, const Endpoint &peer) {
    const bool requester = rank == 1;
    char *src = (char *)n.mem_rw + kBytes / 2;
    ASSERT_NO_FATAL_FAILURE(CacheThePeersRegion(w, n, peer, requester, src));
    if (!requester) {  // the owner frees its read-write region
      ASSERT_EQ((n.v->ibv_dereg_mr)(n.rw), 0);
      n.rw = nullptr;
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (requester) {
      const int before = MoriMappings();
      // A read of the other region: a miss, which sweeps.
      ASSERT_EQ(Post(n, 1, IBV_WR_RDMA_READ, src, n.rw->lkey, 64, peer.addr_ro, peer.rkey_ro, 2), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_SUCCESS);
      EXPECT_EQ(CachedRegions(n), 1u) << "the dead region is still cached beside the new one";
      EXPECT_EQ(((const ce_context *)n.ctx)->dead, nullptr) << "the dead region was not unmapped";
      // One mapping less for the dead region, one more for the new one.
      EXPECT_EQ(MoriMappings(), before);
      for (int i = 0; i < 64; i++) ASSERT_EQ(src[i], (char)((rank ^ 1) * 31 + i)) << i;
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

// The owner closes its device with its regions still registered (a rank
// that leaves): the keys the peer cached die with the context, as a closed
// NIC context's do, and the peer's next request is refused.
TEST(CeNic, AClosedContextsKeysDieWithIt) {
  OnTwoConnectedNics([](int rank, World &w, Nic &n, const Endpoint &peer) {
    const bool requester = rank == 1;
    char *src = (char *)n.mem_rw + kBytes / 2;
    ASSERT_NO_FATAL_FAILURE(CacheThePeersRegion(w, n, peer, requester, src));
    if (!requester) {  // closes with both regions registered (no dereg_mr)
      for (ibv_qp *&q : n.qp) {
        (n.v->ibv_destroy_qp)(q);
        q = nullptr;
      }
      n.rw = n.ro = nullptr;
      (n.v->ibv_destroy_cq)(n.cq);
      n.cq = nullptr;
      (n.v->ibv_dealloc_pd)(n.pd);
      n.pd = nullptr;
      ASSERT_EQ((n.v->ibv_close_device)(n.ctx), 0);
      n.ctx = nullptr;
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (requester) {
      ASSERT_EQ(Post(n, 0, IBV_WR_RDMA_WRITE, src, n.rw->lkey, 64, peer.addr_rw, peer.rkey_rw, 2), 0);
      EXPECT_EQ(StatusOf(n), IBV_WC_REM_ACCESS_ERR) << "a closed context's key still works";
      EXPECT_EQ(CachedRegions(n), 0u);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

}  // namespace
