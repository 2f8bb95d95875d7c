// SPDX-License-Identifier: MIT
// The posting layer (mori/device/gda.h) in one process, CPU threads
// standing in for kernels, against a NIC of the test's own: a thread that
// reads the send queues the way a ConnectX does (the doorbell record, then
// each WQE through mlx5dv.h's structs, never mori's), executes them on
// plain memory standing in for the peers' windows, and writes CQE64s with
// the owner bit of the pass. It checks what a NIC would: every WQE carries
// the index of its slot (a slot claimed twice or lost shows), keys, the CQ
// never overflows. Faults: an error completion at a chosen WQE (the QP
// then flushes the rest), a stalled NIC.
#include <endian.h>
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mori/device/gda.h"

namespace {

constexpr uint32_t kRkey = 0x77, kLkey = 0x55, kSinkLkey = 0x56;
constexpr uint64_t kWindow = 1 << 20;
constexpr uint64_t kSecond = 1000ull * 1000 * 1000;

struct QueuePair {
  std::vector<uint8_t> sq, cq;
  uint32_t dbrec[2] = {0, 0};
  uint32_t cq_dbrec = 0;
  uint64_t bf = 0;
  uint64_t sink = 0;
  // The NIC's side.
  uint64_t sq_ci = 0, cq_pi = 0;
  bool in_error = false;
};

class TestNic;

// A world of `ranks` ranks seen from rank 0: peers 1.. have QPs.
struct World {
  int ranks, num_qp;
  uint32_t wqe_cnt, cqe_cnt;
  std::vector<uint8_t *> windows;  // [0]: this rank's, else the peers'
  std::vector<QueuePair> qps;      // [peer * num_qp + i]
  std::vector<mori_gda_qp_t> dev_qps;
  std::vector<uint64_t> remote_base;
  std::vector<uint32_t> rkey, next_qp;
  std::vector<uint64_t> barrier;
  mori_device_control_t control;
  mori_gda_window_t table;
  mori_window_dev_t win;

  World(int ranks_, int num_qp_, uint32_t wqe_cnt_, uint32_t cqe_cnt_)
      : ranks(ranks_), num_qp(num_qp_), wqe_cnt(wqe_cnt_), cqe_cnt(cqe_cnt_), qps((size_t)ranks_ * num_qp_),
        dev_qps((size_t)ranks_ * num_qp_), remote_base(ranks_), rkey(ranks_), next_qp(ranks_),
        barrier(MORI_BARRIER_AREA_BYTES(1) / 8) {
    for (int r = 0; r < ranks; r++) {
      windows.push_back(static_cast<uint8_t *>(aligned_alloc(4096, kWindow)));
      memset(windows[r], 0, kWindow);
      remote_base[r] = (uint64_t)(uintptr_t)windows[r];
      rkey[r] = kRkey;
    }
    memset(&control, 0, sizeof(control));
    memset(dev_qps.data(), 0, sizeof(mori_gda_qp_t) * dev_qps.size());
    for (int p = 1; p < ranks; p++)
      for (int i = 0; i < num_qp; i++) {
        size_t at = (size_t)p * num_qp + i;
        QueuePair &q = qps[at];
        q.sq.assign((size_t)wqe_cnt * 64, 0);
        q.cq.assign((size_t)cqe_cnt * 64, 0);
        for (uint32_t c = 0; c < cqe_cnt; c++) q.cq[(size_t)c * 64 + 63] = (uint8_t)(MLX5_CQE_INVALID << 4);
        mori_gda_qp_t &d = dev_qps[at];
        d.sq_buf = q.sq.data();
        d.sq_dbrec = &q.dbrec[MLX5_SND_DBR];
        d.bf_reg = &q.bf;
        d.wqe_cnt = wqe_cnt;
        d.qpn = 0x100u * (uint32_t)p + (uint32_t)i;
        d.cq_buf = q.cq.data();
        d.cq_dbrec = &q.cq_dbrec;
        d.cqe_cnt = cqe_cnt;
        d.family = MORI_GDA_FAMILY_MLX5;
        d.sink_addr = (uint64_t)(uintptr_t)&q.sink;
        d.sink_lkey = kSinkLkey;
        d.peer = p;
      }
    memset(&table, 0, sizeof(table));
    table.qp = dev_qps.data();
    table.remote_base = remote_base.data();
    table.rkey = rkey.data();
    table.next_qp = next_qp.data();
    table.local_base = (uint64_t)(uintptr_t)windows[0];
    table.local_size = kWindow;
    table.lkey = kLkey;
    table.num_qp = num_qp;
    table.world_size = ranks;
    memset(&win, 0, sizeof(win));
    win.size = kWindow;
    win.control = &control;
    win.barrier_base = (uint64_t)(uintptr_t)barrier.data();
    win.barrier_stride = MORI_BARRIER_AREA_BYTES(1);
    win.world_rank = 0;
    win.world_size = ranks;
    win.lsa_rank = 0;
    win.lsa_size = 1;
    win.lsa_base = 0;
    win.gda = &table;
  }
  ~World() {
    for (uint8_t *w : windows) free(w);
  }
  uint8_t *local() { return windows[0]; }
  // Another window of the comm: its own mailbox (`control`) and claim word
  // (in its barrier area, `area`), the same QPs.
  mori_window_dev_t AnotherWindow(mori_device_control_t &ctl, std::vector<uint64_t> &area) {
    memset(&ctl, 0, sizeof(ctl));
    area.assign(barrier.size(), 0);
    mori_window_dev_t other = win;
    other.control = &ctl;
    other.barrier_base = (uint64_t)(uintptr_t)area.data();
    return other;
  }
  // The host reads and clears the mailbox (as mori_window_check does).
  mori_device_error_t TakeRecord() {
    mori_device_error_t e = control.error;
    memset(&control.error, 0, sizeof(control.error));
    control.records_read++;
    return e;
  }
};

class TestNic {
 public:
  explicit TestNic(World &w) : w_(w), thread_([this] { Run(); }) {}
  ~TestNic() {
    stop_ = true;
    thread_.join();
  }
  std::atomic<bool> stalled{false};
  // Only the QPs of peers below this one are served (a NIC slow to some peers).
  std::atomic<int> serve_below{1 << 30};
  // Fail (peer, WQE index) with `syndrome`: the QP goes to error.
  std::atomic<int> fail_peer{-1};
  std::atomic<uint64_t> fail_at{0};
  std::atomic<uint32_t> syndrome{0x13};
  std::atomic<uint64_t> executed{0}, completions{0};
  std::string problem;  // the first thing a ConnectX would have refused

 private:
  void Problem(const std::string &what) {
    if (problem.empty()) problem = what;
  }
  void Complete(QueuePair &q, const mori_gda_qp_t &d, uint16_t index, bool error, uint8_t synd) {
    uint32_t consumed = be32toh(__atomic_load_n(&q.cq_dbrec, __ATOMIC_ACQUIRE)) & 0xffffff;
    if (((uint32_t)q.cq_pi - consumed) & 0x800000u || ((uint32_t)q.cq_pi - consumed) >= w_.cqe_cnt) {
      Problem("CQ overflow on qpn " + std::to_string(d.qpn));
      return;
    }
    uint8_t *slot = q.cq.data() + (size_t)(q.cq_pi % w_.cqe_cnt) * 64;
    uint8_t owner = (uint8_t)((q.cq_pi / w_.cqe_cnt) & 1);
    uint8_t tmp[64];
    memset(tmp, 0, sizeof(tmp));
    if (error) {
      auto *e = reinterpret_cast<struct mlx5_err_cqe *>(tmp);
      e->syndrome = synd;
      e->vendor_err_synd = 0x42;
      e->s_wqe_opcode_qpn = htobe32(d.qpn);
      e->wqe_counter = htobe16(index);
    } else {
      auto *c = reinterpret_cast<struct mlx5_cqe64 *>(tmp);
      c->sop_drop_qpn = htobe32(d.qpn);
      c->wqe_counter = htobe16(index);
    }
    memcpy(slot, tmp, 63);
    __atomic_store_n(slot + 63, (uint8_t)(((error ? MLX5_CQE_REQ_ERR : MLX5_CQE_REQ) << 4) | owner), __ATOMIC_RELEASE);
    q.cq_pi++;
    completions++;
  }
  void Execute(QueuePair &q, const mori_gda_qp_t &d, int peer) {
    uint8_t *wqe = q.sq.data() + (size_t)(q.sq_ci % w_.wqe_cnt) * 64;
    auto *ctrl = reinterpret_cast<struct mlx5_wqe_ctrl_seg *>(wqe);
    uint32_t op_idx = be32toh(ctrl->opmod_idx_opcode), qpn_ds = be32toh(ctrl->qpn_ds);
    uint16_t index = (uint16_t)(op_idx >> 8);
    uint8_t opcode = (uint8_t)op_idx, ds = (uint8_t)(qpn_ds & 0x3f);
    if (index != (uint16_t)q.sq_ci) Problem("WQE in slot " + std::to_string(q.sq_ci) + " says index " + std::to_string(index));
    if ((qpn_ds >> 8) != d.qpn) Problem("WQE names qpn " + std::to_string(qpn_ds >> 8));
    bool signaled = (ctrl->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) != 0;
    if (!q.in_error && peer == fail_peer.load() && q.sq_ci == fail_at.load()) {
      q.in_error = true;
      Complete(q, d, index, true, (uint8_t)syndrome.load());
      q.sq_ci++;
      return;
    }
    if (q.in_error) {  // flushed, each with its error completion
      Complete(q, d, index, true, 0x05);
      q.sq_ci++;
      return;
    }
    auto *r = reinterpret_cast<struct mlx5_wqe_raddr_seg *>(wqe + sizeof(*ctrl));
    uint8_t *raddr = reinterpret_cast<uint8_t *>((uintptr_t)be64toh(r->raddr));
    if (be32toh(r->rkey) != kRkey) Problem("rkey " + std::to_string(be32toh(r->rkey)));
    uint8_t *seg = wqe + 32;
    if (opcode == MLX5_OPCODE_RDMA_WRITE) {
      uint32_t bc = be32toh(*reinterpret_cast<uint32_t *>(seg));
      if (bc & MLX5_INLINE_SEG) {
        uint32_t len = bc & ~MLX5_INLINE_SEG;
        if (ds != 2 + (4 + len + 15) / 16) Problem("inline ds " + std::to_string(ds));
        memcpy(raddr, seg + 4, len);
      } else if (ds == 2) {
        // A zero-byte write: no data segment.
      } else {
        auto *dseg = reinterpret_cast<struct mlx5_wqe_data_seg *>(seg);
        if (ds != 3) Problem("write ds " + std::to_string(ds));
        if (be32toh(dseg->lkey) != kLkey) Problem("lkey");
        if (dseg->byte_count == 0) Problem("a data segment of byte_count 0 (2^31 bytes to a ConnectX)");
        else memcpy(raddr, (void *)(uintptr_t)be64toh(dseg->addr), be32toh(dseg->byte_count));
      }
    } else if (opcode == MLX5_OPCODE_RDMA_READ) {
      auto *dseg = reinterpret_cast<struct mlx5_wqe_data_seg *>(seg);
      if (ds != 3) Problem("read ds");
      if (dseg->byte_count == 0) Problem("a read's byte_count of 0 (2^31 bytes to a ConnectX)");
      memcpy((void *)(uintptr_t)be64toh(dseg->addr), raddr, be32toh(dseg->byte_count));
    } else if (opcode == MLX5_OPCODE_ATOMIC_FA) {
      auto *a = reinterpret_cast<struct mlx5_wqe_atomic_seg *>(seg);
      auto *dseg = reinterpret_cast<struct mlx5_wqe_data_seg *>(seg + 16);
      if (ds != 4) Problem("atomic ds");
      if (!(ctrl->fm_ce_se & MLX5_WQE_CTRL_FENCE)) Problem("an atomic not fenced");
      if (be32toh(dseg->lkey) != kLkey && be32toh(dseg->lkey) != kSinkLkey) Problem("atomic lkey");
      uint64_t old;
      memcpy(&old, raddr, 8);
      uint64_t sum = old + be64toh(a->swap_add);
      memcpy(raddr, &sum, 8);
      memcpy((void *)(uintptr_t)be64toh(dseg->addr), &old, 8);
    } else {
      Problem("opcode " + std::to_string(opcode));
    }
    executed++;
    if (signaled) Complete(q, d, index, false, 0);
    q.sq_ci++;
  }
  void Run() {
    while (!stop_) {
      bool worked = false;
      if (!stalled) {
        for (int p = 1; p < w_.ranks && p < serve_below; p++)
          for (int i = 0; i < w_.num_qp; i++) {
            size_t at = (size_t)p * w_.num_qp + i;
            QueuePair &q = w_.qps[at];
            uint16_t produced = (uint16_t)be32toh(__atomic_load_n(&q.dbrec[MLX5_SND_DBR], __ATOMIC_ACQUIRE));
            while ((uint16_t)q.sq_ci != produced && !stalled) {
              Execute(q, w_.dev_qps[at], p);
              worked = true;
            }
          }
      }
      if (!worked) std::this_thread::yield();
    }
  }
  World &w_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(GdaPost, PutGetAtomicsAndSignal) {
  World w(2, 1, 16, 16);
  TestNic nic(w);
  uint8_t *src = w.local();
  for (int i = 0; i < 1000; i++) src[i] = (uint8_t)(i * 7 + 1);
  ASSERT_EQ(mori_gda_put(w.win, 1, 4096, src, 1000, kSecond), MORI_DEVICE_OK);
  ASSERT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(memcmp(w.windows[1] + 4096, src, 1000), 0);
  // get: the peer's bytes into ours.
  for (int i = 0; i < 300; i++) w.windows[1][8192 + i] = (uint8_t)(255 - i);
  ASSERT_EQ(mori_gda_get(w.win, 1, w.local() + 20000, 8192, 300, kSecond), MORI_DEVICE_OK);
  ASSERT_EQ(mori_gda_quiet_peer(w.win, 1, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(memcmp(w.local() + 20000, w.windows[1] + 8192, 300), 0);
  // Atomics: non-fetching, then fetching (the old value returned).
  uint64_t *word = reinterpret_cast<uint64_t *>(w.windows[1] + 64);
  *word = 40;
  ASSERT_EQ(mori_gda_atomic_add(w.win, 1, 64, 2, nullptr, kSecond), MORI_DEVICE_OK);
  uint64_t *result = reinterpret_cast<uint64_t *>(w.local() + 512);
  ASSERT_EQ(mori_gda_atomic_add(w.win, 1, 64, 100, result, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(*result, 42u);
  ASSERT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(*word, 142u);
  // signal set and put-with-signal (inline, fenced behind the data).
  ASSERT_EQ(mori_gda_signal_set(w.win, 1, 128, 0xfeedull, kSecond), MORI_DEVICE_OK);
  ASSERT_EQ(mori_gda_put_signal(w.win, 1, 30000, src, 1000, 136, 7, kSecond), MORI_DEVICE_OK);
  ASSERT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(*reinterpret_cast<uint64_t *>(w.windows[1] + 128), 0xfeedull);
  EXPECT_EQ(*reinterpret_cast<uint64_t *>(w.windows[1] + 136), 7u);
  EXPECT_EQ(memcmp(w.windows[1] + 30000, src, 1000), 0);
  EXPECT_EQ(nic.problem, "");
  EXPECT_EQ(w.control.error.code, 0u) << "no record for work that went well";
}

TEST(GdaPost, RefusedRequestsSayWhy) {
  World w(2, 1, 8, 8);
  TestNic nic(w);
  // Past the window: refused with the proxy's record.
  EXPECT_EQ(mori_gda_put(w.win, 1, kWindow - 8, w.local(), 16, kSecond), MORI_DEVICE_ERANGE);
  mori_device_error_t e = w.TakeRecord();
  EXPECT_EQ((int)e.code, MORI_DEVICE_ERANGE);
  EXPECT_EQ(e.peer, 1);
  EXPECT_EQ(e.channel, MORI_PROXY_REFUSED_CHANNEL + MORI_PROXY_PUT);
  EXPECT_EQ(e.expected, kWindow - 8);
  EXPECT_EQ(e.seen, 16u);
  // A source outside the registered memory, an unaligned word, no QPs.
  uint8_t outside[16];
  EXPECT_EQ(mori_gda_put(w.win, 1, 0, outside, 16, kSecond), MORI_DEVICE_EINVAL);
  EXPECT_EQ(mori_gda_signal_set(w.win, 1, 4, 1, kSecond), MORI_DEVICE_EINVAL);
  EXPECT_EQ(mori_gda_put(w.win, 0, 0, w.local(), 16, kSecond), MORI_DEVICE_EUNREACHABLE);
  EXPECT_EQ(mori_gda_put(w.win, 5, 0, w.local(), 16, kSecond), MORI_DEVICE_EUNREACHABLE);
  EXPECT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(nic.executed.load(), 0u);
}

// Many claimants at once on shallow queues: every claim wraps the ring many
// times; each thread's bytes must arrive exactly once, and the NIC must see
// every slot's index in order (a slot doubled or lost shows there).
TEST(GdaPost, ConcurrentClaimsAcrossWrapAround) {
  for (int num_qp : {1, 3}) {
    World w(3, num_qp, 8, 8);
    TestNic nic(w);
    const int threads = 6, per_thread = 1500;
    uint8_t *src = w.local();
    for (int i = 0; i < 4096; i++) src[i] = (uint8_t)(i ^ 0x5a);
    std::vector<std::thread> ts;
    std::atomic<int> failures{0};
    for (int t = 0; t < threads; t++)
      ts.emplace_back([&, t] {
        for (int k = 0; k < per_thread; k++) {
          int peer = 1 + (k + t) % 2;
          uint64_t slot = (uint64_t)t * per_thread + (uint64_t)k;
          int rc;
          if (k % 10 == 9) {  // a batch of 4 with one doorbell
            uint64_t dst[4];
            const void *s[4];
            uint64_t bytes[4];
            for (int j = 0; j < 4; j++) {
              dst[j] = 65536 + (slot * 4 + (uint64_t)j) * 16;
              s[j] = src + (slot * 4 + (uint64_t)j) % 4000;
              bytes[j] = 16;
            }
            rc = mori_gda_put_batch(w.win, peer, 4, dst, s, bytes, 10 * kSecond);
          } else {
            rc = mori_gda_put(w.win, peer, 65536 + slot * 64, src + slot % 4000, 8, 10 * kSecond);
          }
          if (rc) failures++;
        }
      });
    for (auto &t : ts) t.join();
    ASSERT_EQ(failures.load(), 0);
    ASSERT_EQ(mori_gda_quiet(w.win, 10 * kSecond), MORI_DEVICE_OK);
    EXPECT_EQ(nic.problem, "") << num_qp << " QP(s) per peer";
    for (int t = 0; t < threads; t++)
      for (int k = 0; k < per_thread; k++) {
        int peer = 1 + (k + t) % 2;
        uint64_t slot = (uint64_t)t * per_thread + (uint64_t)k;
        if (k % 10 == 9) {
          for (int j = 0; j < 4; j++)
            ASSERT_EQ(memcmp(w.windows[peer] + 65536 + (slot * 4 + (uint64_t)j) * 16, src + (slot * 4 + (uint64_t)j) % 4000, 16), 0);
        } else {
          ASSERT_EQ(memcmp(w.windows[peer] + 65536 + slot * 64, src + slot % 4000, 8), 0)
              << "thread " << t << " put " << k << " to rank " << peer;
        }
      }
    uint64_t wqes = 0;
    for (int p = 1; p < 3; p++)
      for (int i = 0; i < num_qp; i++) {
        const mori_gda_qp_t &d = w.dev_qps[(size_t)p * num_qp + i];
        EXPECT_EQ(d.reserved, d.rung);
        EXPECT_EQ(d.reserved, d.completed);
        EXPECT_EQ(d.cq_claimed, d.cq_consumed);
        wqes += d.reserved;
      }
    const uint64_t batches = (uint64_t)threads * (per_thread / 10);
    EXPECT_EQ(wqes, (uint64_t)threads * per_thread - batches + 4 * batches);
    EXPECT_EQ(nic.executed.load(), wqes);
    // Selective signalling: a batch of 4 asked for one completion.
    EXPECT_EQ(nic.completions.load(), (uint64_t)threads * per_thread);
  }
}

// A poller that claimed a CQE must not free send-queue room before the
// CQ's consumer index has released that CQE: claimants would post more
// signaled WQEs than the CQ has free entries (a ConnectX's CQ overflows).
// Here the poller of CQE 0 is held before its consumer-index write (as a
// preempted thread is); the poller of CQE 1 waits behind it, and until
// it writes the consumer index the QP's completed count must not move.
TEST(GdaPost, SendQueueRoomWaitsForTheConsumerIndex) {
  World w(2, 1, 8, 8);
  TestNic nic(w);
  mori_gda_qp_t &qp = w.dev_qps[1];
  ASSERT_EQ(mori_gda_put(w.win, 1, 4096, w.local(), 8, kSecond), MORI_DEVICE_OK);
  ASSERT_EQ(mori_gda_put(w.win, 1, 4160, w.local() + 8, 8, kSecond), MORI_DEVICE_OK);
  for (int i = 0; i < 10000 && nic.completions.load() < 2; i++) std::this_thread::sleep_for(std::chrono::microseconds(100));
  ASSERT_EQ(nic.completions.load(), 2u);
  __atomic_store_n(&qp.cq_claimed, 1, __ATOMIC_RELEASE);  // CQE 0: claimed, its consumer index not yet written
  std::atomic<int> got{-100};
  std::thread poller([&] { got = mori_gda_poll_one(w.win, &qp, 0, 10 * kSecond); });
  for (int i = 0; i < 10000 && __atomic_load_n(&qp.cq_claimed, __ATOMIC_ACQUIRE) < 2; i++)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  EXPECT_EQ(__atomic_load_n(&qp.cq_claimed, __ATOMIC_ACQUIRE), 2u) << "the poller took CQE 1";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(__atomic_load_n(&qp.completed, __ATOMIC_ACQUIRE), 0u)
      << "send-queue room freed while the CQ's consumer index (" << be32toh(w.qps[1].cq_dbrec) << ") still holds its CQE";
  // An abort does not end the poller's turn: given up, CQE 1 would never
  // be consumed and the QP's completions would stop for good.
  w.control.abort_flag = 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(got.load(), -100) << "the poller left its turn";
  // CQE 0's poller goes on: its consumer index, then CQE 1's poller finishes.
  w.qps[1].cq_dbrec = htobe32(1);
  __atomic_store_n(&qp.cq_consumed, 1, __ATOMIC_RELEASE);
  poller.join();
  w.control.abort_flag = 0;
  EXPECT_EQ(got.load(), 1);
  EXPECT_EQ(be32toh(w.qps[1].cq_dbrec), 2u);
  EXPECT_EQ(qp.completed, 2u) << "CQE 1 (WQE 1) completes WQEs 0 and 1";
  EXPECT_EQ(nic.problem, "");
}

// Put-then-signal from several threads: when the receiver sees a signal,
// the data it orders must already be there (checked as the NIC executes).
TEST(GdaPost, PutSignalOrdering) {
  World w(2, 2, 16, 16);
  TestNic nic(w);
  uint8_t *src = w.local();
  for (int i = 0; i < 4096; i++) src[i] = (uint8_t)(i * 13);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread receiver([&] {
    while (!done)
      for (int t = 0; t < 4; t++) {
        uint64_t seen = __atomic_load_n(reinterpret_cast<uint64_t *>(w.windows[1] + 8 * t), __ATOMIC_ACQUIRE);
        if (seen && memcmp(w.windows[1] + 4096 + ((uint64_t)t * 2000 + seen) * 64, src + seen % 3000, 64) != 0) bad++;
      }
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++)
    ts.emplace_back([&, t] {
      for (uint64_t k = 1; k <= 2000; k++)
        ASSERT_EQ(mori_gda_put_signal(w.win, 1, 4096 + ((uint64_t)t * 2000 + k) * 64, src + k % 3000, 64, 8 * (uint64_t)t, k,
                                      10 * kSecond),
                  MORI_DEVICE_OK);
    });
  for (auto &t : ts) t.join();
  ASSERT_EQ(mori_gda_quiet(w.win, 10 * kSecond), MORI_DEVICE_OK);
  done = true;
  receiver.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(nic.problem, "");
}

// An error completion mid-stream: a record naming the peer and the
// syndrome, the peer's later calls fail at once, other peers still served.
TEST(GdaPost, ErrorCompletionNamesPeerAndSyndrome) {
  World w(3, 1, 8, 8);
  TestNic nic(w);
  nic.fail_peer = 1;
  nic.fail_at = 5;
  nic.syndrome = 0x13;  // remote access error
  int first_error = -1;
  for (int k = 0; k < 20; k++) {
    int rc = mori_gda_put(w.win, 1, (uint64_t)k * 8, w.local(), 8, kSecond);
    if (rc) {
      EXPECT_EQ(rc, MORI_DEVICE_EIO);
      if (first_error < 0) first_error = k;
    }
  }
  EXPECT_EQ(mori_gda_quiet_peer(w.win, 1, kSecond), MORI_DEVICE_EIO);
  EXPECT_GE(first_error, 5) << "puts fail only after the error completion";
  mori_device_error_t e = w.TakeRecord();
  EXPECT_EQ((int)e.code, MORI_DEVICE_EIO);
  EXPECT_EQ(e.peer, 1);
  EXPECT_EQ(e.channel, MORI_GDA_CQE_ERROR_CHANNEL + 0);
  EXPECT_EQ(e.expected, 0x13u) << "the syndrome";
  EXPECT_EQ(e.seen, 0x42u) << "the vendor syndrome";
  EXPECT_EQ(e.waited_ns, 5u) << "the failed WQE";
  EXPECT_EQ(mori_gda_put(w.win, 1, 0, w.local(), 8, kSecond), MORI_DEVICE_EIO);
  // A later call on the failed QP names the first error again (not a
  // flushed request's: those leave no record of their own).
  e = w.TakeRecord();
  EXPECT_EQ(e.channel, MORI_GDA_CQE_ERROR_CHANNEL + 0);
  EXPECT_EQ(e.expected, 0x13u);
  EXPECT_EQ(e.waited_ns, 5u);
  // Rank 2 is still served.
  for (int i = 0; i < 64; i++) w.local()[i] = (uint8_t)(i + 9);
  for (int k = 0; k < 40; k++) ASSERT_EQ(mori_gda_put(w.win, 2, (uint64_t)k * 64, w.local(), 64, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(mori_gda_quiet_peer(w.win, 2, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(memcmp(w.windows[2] + 39 * 64, w.local(), 64), 0);
  EXPECT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_EIO) << "quiet over all peers reports the failed one";
  e = w.TakeRecord();
  EXPECT_EQ(e.peer, 1);
  EXPECT_EQ(e.expected, 0x13u) << "the first error's syndrome, not a flushed request's";
}

// The QPs are the comm's, every window's: an error completion that another
// window's quiet happened to poll still gives the window whose put failed
// (and every later one) a record naming the peer and the syndrome. Before,
// the record went only to the polling window's mailbox: the window that
// posted the put got MORI_DEVICE_EIO and nothing to say why.
TEST(GdaPost, EveryWindowThatMeetsAFailedQueuePairGetsItsRecord) {
  World w(2, 1, 8, 8);
  TestNic nic(w);
  nic.fail_peer = 1;
  nic.fail_at = 0;
  nic.syndrome = 0x13;
  std::vector<uint64_t> other_barrier, later_barrier;
  mori_device_control_t other_control, later_control;
  mori_window_dev_t other = w.AnotherWindow(other_control, other_barrier);
  ASSERT_EQ(mori_gda_put(w.win, 1, 0, w.local(), 8, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(mori_gda_quiet(other, kSecond), MORI_DEVICE_EIO) << "the other window polled the error completion";
  EXPECT_EQ(other_control.error.channel, MORI_GDA_CQE_ERROR_CHANNEL + 0);
  EXPECT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_EIO);
  mori_device_error_t e = w.TakeRecord();
  EXPECT_EQ((int)e.code, MORI_DEVICE_EIO) << "the window whose put failed has no record";
  EXPECT_EQ(e.peer, 1);
  EXPECT_EQ(e.channel, MORI_GDA_CQE_ERROR_CHANNEL + 0);
  EXPECT_EQ(e.expected, 0x13u) << "the syndrome";
  EXPECT_EQ(e.seen, 0x42u) << "the vendor syndrome";
  EXPECT_EQ(e.waited_ns, 0u) << "the failed WQE";
  mori_window_dev_t later = w.AnotherWindow(later_control, later_barrier);  // made after the failure
  EXPECT_EQ(mori_gda_put(later, 1, 0, w.local(), 8, kSecond), MORI_DEVICE_EIO);
  EXPECT_EQ(later_control.error.peer, 1);
  EXPECT_EQ(later_control.error.expected, 0x13u);
  EXPECT_EQ(mori_gda_signal_set(later, 1, 64, 1, kSecond), MORI_DEVICE_EIO);
}

// A quiet's waits on every peer's QPs end within its timeout together: the
// NIC completes one peer's put every 200 ms, each within a 500 ms timeout,
// and quiet(500 ms) must fail at about 500 ms, not succeed after 800 (each
// QP's wait had a timeout of its own).
TEST(GdaPost, AQuietEndsWithinItsTimeoutAcrossPeers) {
  World w(5, 1, 16, 16);
  TestNic nic(w);
  nic.serve_below = 1;
  for (int p = 1; p < 5; p++) ASSERT_EQ(mori_gda_put(w.win, p, 4096, w.local(), 64, kSecond), MORI_DEVICE_OK);
  const uint64_t timeout = 500ull * 1000 * 1000;
  std::thread nic_comes_back([&] {
    for (int p = 2; p <= 5; p++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      nic.serve_below = p;
    }
  });
  auto t0 = std::chrono::steady_clock::now();
  int rc = mori_gda_quiet(w.win, timeout);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  nic_comes_back.join();
  EXPECT_EQ(rc, MORI_DEVICE_ETIMEDOUT) << "after " << ms << " ms";
  EXPECT_LT(ms, 790.0) << "quiet ran past its timeout";
  mori_device_error_t e = w.TakeRecord();
  EXPECT_EQ(e.channel, MORI_GDA_QUIET_CHANNEL + 0);
  EXPECT_GE(e.peer, 3) << "peers 1 and 2 came within the timeout";
  EXPECT_GE(e.waited_ns, timeout) << "waited counts from the quiet's start";
  EXPECT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(nic.problem, "");
}

// A stalled NIC: a full queue waits, then times out with a record; quiet
// times out too; an abort ends a wait at once.
TEST(GdaPost, StalledNicFullQueueTimesOut) {
  World w(2, 1, 4, 4);
  TestNic nic(w);
  nic.stalled = true;
  const uint64_t timeout = 50ull * 1000 * 1000;
  for (int k = 0; k < 4; k++) ASSERT_EQ(mori_gda_put(w.win, 1, (uint64_t)k * 8, w.local(), 8, timeout), MORI_DEVICE_OK);
  EXPECT_EQ(mori_gda_put(w.win, 1, 64, w.local(), 8, timeout), MORI_DEVICE_ETIMEDOUT);
  mori_device_error_t e = w.TakeRecord();
  EXPECT_EQ((int)e.code, MORI_DEVICE_ETIMEDOUT);
  EXPECT_EQ(e.peer, 1);
  EXPECT_EQ(e.channel, MORI_GDA_FULL_CHANNEL + 0);
  EXPECT_GE(e.waited_ns, timeout);
  EXPECT_EQ(mori_gda_quiet(w.win, timeout), MORI_DEVICE_ETIMEDOUT);
  e = w.TakeRecord();
  EXPECT_EQ(e.channel, MORI_GDA_QUIET_CHANNEL + 0);
  EXPECT_EQ(e.expected, 4u) << "waited for 4 WQEs";
  w.control.abort_flag = 1;
  EXPECT_EQ(mori_gda_put(w.win, 1, 64, w.local(), 8, 0), MORI_DEVICE_EABORTED);
  w.TakeRecord();
  w.control.abort_flag = 0;
  // The NIC comes back: everything completes, and the queue takes more.
  nic.stalled = false;
  EXPECT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(mori_gda_put(w.win, 1, 64, w.local(), 8, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(nic.problem, "");
}

// A claimant waits for the claims before it to ring (its turn). An abort
// does not end that wait: it ends by itself, and a turn given up would
// leave the QP's counters where no later claim could pass (the QPs are the
// comm's, every window's).
TEST(GdaPost, AnAbortDoesNotEndATurn) {
  World w(2, 1, 8, 8);
  TestNic nic(w);
  mori_gda_qp_t &qp = w.dev_qps[1];
  uint64_t rung = 0, wait_start = 0;
  ASSERT_EQ(mori_gda_reserve(w.win, &qp, 0, 1, kSecond, &rung, &wait_start), 0) << "the test holds WQE 0";
  memset(w.local(), 0x61, 16);
  std::atomic<int> rc{-100};
  std::thread later([&] { rc = mori_gda_put(w.win, 1, 4096, w.local(), 8, 10 * kSecond); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  w.control.abort_flag = 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(rc.load(), -100) << "an abort ended a wait that only the claims before it end";
  // The held claim is written and rung: the later put's turn comes.
  const mori_gda_qp_t d = mori_gda_qp_desc(&qp);
  uint64_t db = mori_gda_write_rdma(&d, 0, 0, MORI_GDA_SIGNALED, mori_gda_remote_addr(w.win, 1, 8192), kRkey,
                                    (uint64_t)(uintptr_t)w.local(), kLkey, 8);
  ASSERT_EQ(mori_gda_ring(w.win, &qp, &d, 0, 0, 1, db, rung, kSecond), MORI_DEVICE_OK);
  later.join();
  EXPECT_EQ(rc.load(), MORI_DEVICE_OK);
  w.control.abort_flag = 0;
  ASSERT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(memcmp(w.windows[1] + 4096, w.local(), 8), 0);
  EXPECT_EQ(memcmp(w.windows[1] + 8192, w.local(), 8), 0);
  EXPECT_EQ(w.control.error.code, 0u) << "no record: nothing failed";
  EXPECT_EQ(nic.problem, "");
}

// A claim that is never rung (its claimant never came back): the next
// claimant's turn times out with a record, and the QP is marked abandoned,
// so every later put and quiet on it fails at once instead of waiting out
// a timeout of its own; other peers are still served.
TEST(GdaPost, ATurnThatTimesOutAbandonsTheQueuePair) {
  World w(3, 1, 8, 8);
  TestNic nic(w);
  mori_gda_qp_t &qp = w.dev_qps[1];
  uint64_t rung = 0, wait_start = 0;
  ASSERT_EQ(mori_gda_reserve(w.win, &qp, 0, 1, kSecond, &rung, &wait_start), 0) << "a claim nobody rings";
  const uint64_t timeout = 50ull * 1000 * 1000;
  EXPECT_EQ(mori_gda_put(w.win, 1, 64, w.local(), 8, timeout), MORI_DEVICE_ETIMEDOUT);
  mori_device_error_t e = w.TakeRecord();
  EXPECT_EQ((int)e.code, MORI_DEVICE_ETIMEDOUT);
  EXPECT_EQ(e.peer, 1);
  EXPECT_EQ(e.channel, MORI_GDA_TURN_CHANNEL + 0) << "a ring turn";
  EXPECT_EQ(e.expected, 1u) << "its turn: after WQE 0";
  EXPECT_EQ(e.seen, 0u);
  EXPECT_GE(e.waited_ns, MORI_GDA_TURN_TIMEOUT_NS) << "a turn waits at least that long, whatever the caller's timeout";
  EXPECT_NE(qp.failed & MORI_GDA_QP_ABANDONED, 0u);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(mori_gda_put(w.win, 1, 128, w.local(), 8, 10 * kSecond), MORI_DEVICE_EIO);
  EXPECT_EQ(mori_gda_quiet_peer(w.win, 1, 10 * kSecond), MORI_DEVICE_EIO);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "at once, not after a timeout";
  ASSERT_EQ(mori_gda_put(w.win, 2, 64, w.local(), 8, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(mori_gda_quiet_peer(w.win, 2, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(nic.problem, "");
}

// Abandoned with work already rung: quiet still waits for that work (the
// NIC may be reading its memory) and only then says EIO; an error
// completion after the mark still leaves its record.
TEST(GdaPost, AnAbandonedQueuePairStillWaitsForWorkAlreadyRung) {
  World w(2, 1, 8, 8);
  TestNic nic(w);
  mori_gda_qp_t &qp = w.dev_qps[1];
  nic.stalled = true;
  nic.fail_peer = 1;
  nic.fail_at = 0;
  ASSERT_EQ(mori_gda_put(w.win, 1, 0, w.local(), 8, kSecond), MORI_DEVICE_OK) << "WQE 0, rung";
  uint64_t rung = 0, wait_start = 0;
  ASSERT_EQ(mori_gda_reserve(w.win, &qp, 0, 1, kSecond, &rung, &wait_start), 1) << "WQE 1, never rung";
  EXPECT_EQ(mori_gda_put(w.win, 1, 64, w.local(), 8, 50ull * 1000 * 1000), MORI_DEVICE_ETIMEDOUT);
  w.TakeRecord();
  ASSERT_NE(qp.failed & MORI_GDA_QP_ABANDONED, 0u);
  std::atomic<int> rc{-100};
  std::thread quiet([&] { rc = mori_gda_quiet_peer(w.win, 1, 10 * kSecond); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(rc.load(), -100) << "quiet returned while WQE 0 was still with the NIC";
  nic.stalled = false;  // WQE 0 completes, with an error
  quiet.join();
  EXPECT_EQ(rc.load(), MORI_DEVICE_EIO);
  EXPECT_GE(qp.completed, 1u);
  mori_device_error_t e = w.TakeRecord();
  EXPECT_EQ((int)e.code, MORI_DEVICE_EIO) << "the error completion's record";
  EXPECT_EQ(e.expected, 0x13u);
  EXPECT_EQ(qp.failed & 0x1ffu, 0x113u);
}

// Two QPs to a peer: a put fails on one (an error completion); the signal
// that follows goes on the other after draining the first, and must not be
// posted (the peer would see the signal without the data). Before, the
// drain waited for the completion and went on.
TEST(GdaPost, AnOrderedOpAfterAFailedRequestOnAnotherQueuePairIsNotPosted) {
  World w(2, 2, 8, 8);
  TestNic nic(w);
  nic.fail_peer = 1;
  nic.fail_at = 0;
  w.next_qp[1] = 0;  // the put takes QP 0, the signal QP 1
  ASSERT_EQ(mori_gda_put(w.win, 1, 0, w.local(), 64, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(mori_gda_signal_set(w.win, 1, 4096, 7, kSecond), MORI_DEVICE_EIO);
  EXPECT_EQ(w.dev_qps[1 * 2 + 1].reserved, 0u) << "nothing was claimed on the other QP";
  uint64_t signal = 0;
  memcpy(&signal, w.windows[1] + 4096, 8);
  EXPECT_EQ(signal, 0u);
  uint64_t before = 0;
  EXPECT_EQ(mori_gda_atomic_add(w.win, 1, 4096, 1, nullptr, kSecond), MORI_DEVICE_EIO);
  EXPECT_EQ(mori_gda_put_signal(w.win, 1, 64, w.local(), 8, 4096, 1, kSecond), MORI_DEVICE_EIO);
  memcpy(&before, w.windows[1] + 4096, 8);
  EXPECT_EQ(before, 0u);
  w.TakeRecord();
}

// Local buffers must lie in the window, not merely in the registered
// segment (windows carved from one heap chunk share its registration): a
// get into the bytes past the window would land in a neighbour.
TEST(GdaPost, LocalBuffersOutsideTheWindowAreRefused) {
  World w(2, 1, 8, 8);
  TestNic nic(w);
  w.win.segment_offset = 4096;  // this window: [4096, 8192) of the segment
  w.win.size = 4096;
  uint8_t *mine = w.local() + 4096;
  EXPECT_EQ(mori_gda_get(w.win, 1, mine + 4096 - 8, 0, 64, kSecond), MORI_DEVICE_EINVAL) << "runs into the neighbour";
  EXPECT_EQ(mori_gda_put(w.win, 1, 0, w.local(), 64, kSecond), MORI_DEVICE_EINVAL) << "below the window";
  uint64_t *result = reinterpret_cast<uint64_t *>(w.local() + 8192);
  EXPECT_EQ(mori_gda_atomic_add(w.win, 1, 0, 1, result, kSecond), MORI_DEVICE_EINVAL) << "a result past the window";
  const void *srcs[1] = {w.local()};
  uint64_t dst[1] = {0}, bytes[1] = {64};
  EXPECT_EQ(mori_gda_put_batch(w.win, 1, 1, dst, srcs, bytes, kSecond), MORI_DEVICE_EINVAL);
  ASSERT_EQ(mori_gda_get(w.win, 1, mine, 0, 64, kSecond), MORI_DEVICE_OK) << "inside it";
  EXPECT_EQ(mori_gda_quiet_peer(w.win, 1, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(nic.problem, "");
}

// A warp of one lane on the host: the warp call is a batch of one.
TEST(GdaPost, WarpCallOnTheHost) {
  World w(2, 1, 8, 8);
  TestNic nic(w);
  memset(w.local(), 0xab, 32);
  EXPECT_EQ(mori_gda_put_warp(w.win, 1, 256, w.local(), 32, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(memcmp(w.windows[1] + 256, w.local(), 32), 0);
  // A lane with a bad request fills its slot with a zero-byte write.
  EXPECT_EQ(mori_gda_put_warp(w.win, 1, kWindow, w.local(), 32, kSecond), MORI_DEVICE_EINVAL);
  EXPECT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(nic.problem, "");
}

// Zero bytes in a put with signal or in a batch: the WQE carries no data
// segment (a byte_count of 0 would be 2^31 bytes to a ConnectX); the
// signal still lands, the batch's other puts too.
TEST(GdaPost, ZeroBytePutsPostNoDataSegment) {
  World w(2, 1, 8, 8);
  TestNic nic(w);
  memset(w.local(), 0x3c, 64);
  ASSERT_EQ(mori_gda_put_signal(w.win, 1, 4096, w.local(), 0, 128, 5, kSecond), MORI_DEVICE_OK);
  uint64_t dst[2] = {8192, 8256};
  const void *src[2] = {w.local(), w.local()};
  uint64_t bytes[2] = {0, 64};
  ASSERT_EQ(mori_gda_put_batch(w.win, 1, 2, dst, src, bytes, kSecond), MORI_DEVICE_OK);
  ASSERT_EQ(mori_gda_quiet(w.win, kSecond), MORI_DEVICE_OK);
  EXPECT_EQ(*reinterpret_cast<uint64_t *>(w.windows[1] + 128), 5u);
  EXPECT_EQ(memcmp(w.windows[1] + 8256, w.local(), 64), 0);
  EXPECT_EQ(w.windows[1][8192], 0) << "nothing written by the zero-byte put";
  EXPECT_EQ(nic.problem, "");
}

}  // namespace
