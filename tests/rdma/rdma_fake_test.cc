// The rdma transport against a fake verbs provider (tests/rdma/fake_verbs):
// late, failed and batched completions, a deregister while work is stalled,
// transfers longer than the port's largest message, unaligned proxied
// atomics, and a ring whose consumer stalls past MORI_PROXY_SLOTS. Two
// ranks on two simulated nodes, so each reaches the other over rdma only.
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "mori/device.h"
#include "mori/team.h"
#include "mori/transport_rdma.h"
#include "tests/rdma/fake_verbs.h"
#include "tests/support/world.h"
#include "transport/rdma/internal.h"

using mori_test::World;

namespace {

constexpr uint64_t kMs = 1000000ull;

// Runs `fn` on two ranks on two nodes, each with the fake provider and the
// rdma transport, quiet and deregister timeouts of `timeout_ms`.
template <typename Fn>
void OnTwoNodes(int timeout_ms, uint32_t max_msg, Fn fn) {
  EXPECT_RANKS_PASS(2, [=](int rank, int size) {
    setenv("MORI_HOST_ID", rank == 0 ? "node-a" : "node-b", 1);
    setenv("MORI_RDMA_TIMEOUT_MS", std::to_string(timeout_ms).c_str(), 1);
    // Each window registers memory of its own (a heap window's chunk stays
    // registered until the comm goes): window_destroy deregisters.
    setenv("MORI_SHMEM_MODE", "isolation", 1);
    fake_verbs::Install(max_msg);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    ASSERT_STREQ(mori_team_transport_name(w.comm, 1 - rank), "rdma");
    fn(rank, w);
  });
}

struct Window {
  void *mem = nullptr;
  mori_window_t *win = nullptr;
  mori_window_dev_t view{};
};

void Open(World &w, size_t bytes, Window *out) {
  MORI_ASSERT_OK(mori_mem_alloc(bytes, nullptr, &out->mem));
  MORI_ASSERT_OK(mori_window_create(w.comm, out->mem, &out->win));
  out->view = mori_window_device_view(out->win);
  ASSERT_NE(out->view.proxy, nullptr);
}

rdma_state *State(World &w) { return static_cast<rdma_state *>(mori_comm_transport_state(w.comm, &mori_transport_rdma_ops)); }

bool WaitHeld(size_t n) {
  for (int i = 0; i < 4000 && fake_verbs::Held() < n; i++) std::this_thread::sleep_for(std::chrono::microseconds(500));
  return fake_verbs::Held() == n;
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

TEST(RdmaFake, FailedCompletionInABatchDropsNoneOfTheOthers) {
  OnTwoNodes(1000, 1u << 30, [](int rank, World &w) {
    Window win;
    Open(w, 1 << 20, &win);
    if (rank == 0) {
      fake_verbs::Stall(true);
      // A host put, then two from the ring: all three complete in one batch,
      // the host put failed.
      MORI_ASSERT_OK(mori_rdma_put(win.win, 1, 0, 4096, 64));
      const char *src = (const char *)win.mem + 8192;
      ASSERT_EQ(mori_put_thread(win.view, 1, 0, src, 64), MORI_DEVICE_OK);
      ASSERT_EQ(mori_put_thread(win.view, 1, 64, src, 64), MORI_DEVICE_OK);
      ASSERT_TRUE(WaitHeld(3)) << fake_verbs::Held();
      ASSERT_EQ(fake_verbs::Release({IBV_WC_REM_ACCESS_ERR, IBV_WC_SUCCESS, IBV_WC_SUCCESS}), 3u);
      // The ring's requests completed although the batch began with a failure.
      EXPECT_EQ(mori_quiet_window(win.view, 800 * kMs), MORI_DEVICE_OK);
      EXPECT_EQ(win.view.proxy->done, 2u);
      EXPECT_EQ(mori_rdma_quiet(w.comm), MORI_EIO);
      std::string msg = mori_last_error();
      EXPECT_NE(msg.find("rank 1 failed: remote access error"), std::string::npos) << msg;
      // Every completion was counted: nothing is left to wait for.
      auto t0 = std::chrono::steady_clock::now();
      MORI_EXPECT_OK(mori_rdma_quiet(w.comm));
      EXPECT_LT(MsSince(t0), 500.0);
      // Three host puts, the middle one fails, the last is flushed.
      for (int i = 0; i < 3; i++) MORI_ASSERT_OK(mori_rdma_put(win.win, 1, 0, 4096, 64));
      ASSERT_EQ(fake_verbs::Release({IBV_WC_SUCCESS, IBV_WC_REM_ACCESS_ERR, IBV_WC_WR_FLUSH_ERR}), 3u);
      EXPECT_EQ(mori_rdma_quiet(w.comm), MORI_EIO);
      t0 = std::chrono::steady_clock::now();
      MORI_EXPECT_OK(mori_rdma_quiet(w.comm));
      EXPECT_LT(MsSince(t0), 500.0);
      fake_verbs::Stall(false);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win.win));
    MORI_EXPECT_OK(mori_mem_free(win.mem));
  });
}

// Rank 0 destroys its window while a host put and a proxied put are stalled.
void DeregisterWhileStalled(bool nic_flushes) {
  OnTwoNodes(300, 1u << 30, [nic_flushes](int rank, World &w) {
    Window win;
    Open(w, 1 << 20, &win);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank == 0) {
      rdma_state *s = State(w);
      fake_verbs::FlushOnError(nic_flushes);
      fake_verbs::Stall(true);
      MORI_ASSERT_OK(mori_rdma_put(win.win, 1, 0, 4096, 64));
      ASSERT_EQ(mori_put_thread(win.view, 1, 64, (const char *)win.mem + 8192, 64), MORI_DEVICE_OK);
      ASSERT_TRUE(WaitHeld(2));
      auto t0 = std::chrono::steady_clock::now();
      MORI_EXPECT_OK(mori_window_destroy(win.win));  // local: what went wrong is logged
      EXPECT_LT(MsSince(t0), 3000.0);
      // The work was given up on: the QP to rank 1 is in error...
      EXPECT_EQ(fake_verbs::QpState(s->qp[1]->qp_num), IBV_QPS_ERR);
      EXPECT_EQ(fake_verbs::Held(), nic_flushes ? 0u : 2u);
      // ...and the late completions find the segment alive (or retired).
      fake_verbs::Stall(false);
      fake_verbs::ReleaseAll();
      EXPECT_NE(mori_rdma_quiet(w.comm), MORI_ETIMEDOUT) << mori_last_error();
      MORI_EXPECT_OK(mori_rdma_quiet(w.comm));
    } else {
      MORI_EXPECT_OK(mori_window_destroy(win.win));
    }
    MORI_EXPECT_OK(mori_mem_free(win.mem));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // Rank 1 cannot be reached over rdma from rank 0 any more, and says so.
    Window next;
    Open(w, 1 << 20, &next);
    if (rank == 0) {
      EXPECT_EQ(mori_rdma_put(next.win, 1, 0, 4096, 64), MORI_EUNREACHABLE);
      EXPECT_NE(std::string(mori_last_error()).find("moved to error"), std::string::npos) << mori_last_error();
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(next.win));
    MORI_EXPECT_OK(mori_mem_free(next.mem));
  });
}

TEST(RdmaFake, DeregisterDuringAStalledTransferFlushesBeforeFreeing) { DeregisterWhileStalled(true); }
TEST(RdmaFake, DeregisterDuringAStalledTransferRetiresUntilTheLateCompletion) { DeregisterWhileStalled(false); }

constexpr uint32_t kMax = 1u << 31;
constexpr uint64_t kBytes = (4ull << 30) + 4096;  // truncated to 4096 when cast to 32 bits

TEST(RdmaFake, TransfersBeyondTheLargestMessageGoInPieces) {
  OnTwoNodes(5000, kMax, [](int rank, World &w) {
    Window win;
    Open(w, kBytes + 8192, &win);  // sparse: never touched
    if (rank == 0) {
      size_t before = fake_verbs::Posts().size();
      MORI_ASSERT_OK(mori_rdma_put(win.win, 1, 0, 8192, kBytes));
      MORI_ASSERT_OK(mori_rdma_quiet(w.comm));
      ASSERT_EQ(mori_get_thread(win.view, 1, win.mem, 8192, kBytes), MORI_DEVICE_OK);
      ASSERT_EQ(mori_quiet_window(win.view, 5000 * kMs), MORI_DEVICE_OK);
      EXPECT_EQ(win.view.proxy->done, 1u) << "one request, counted once";
      std::vector<fake_verbs::Posted> posts = fake_verbs::Posts();
      uint64_t put = 0, get = 0;
      for (size_t i = before; i < posts.size(); i++) {
        EXPECT_LE(posts[i].length, kMax);
        (posts[i].opcode == IBV_WR_RDMA_WRITE ? put : get) += posts[i].length;
      }
      EXPECT_EQ(put, kBytes);
      EXPECT_EQ(get, kBytes);
      EXPECT_EQ(posts.size() - before, 6u) << "2 GiB + 2 GiB + 4 KiB, twice";
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win.win));
    MORI_EXPECT_OK(mori_mem_free(win.mem));
  });
}

TEST(RdmaFake, ProxiedAtomicOnAnUnalignedWordIsRefused) {
  OnTwoNodes(1000, 1u << 30, [](int rank, World &w) {
    Window win;
    Open(w, 1 << 20, &win);
    if (rank == 0) {
      size_t before = fake_verbs::Posts().size();
      EXPECT_EQ(mori_signal_add(win.view, 1, 4, 1), MORI_DEVICE_EINVAL);
      EXPECT_EQ(mori_signal_set(win.view, 1, 12, 1), MORI_DEVICE_EINVAL);
      // A request written into the ring directly meets the proxy's own check.
      ASSERT_GT(mori_proxy_submit(win.view, MORI_PROXY_ATOMIC_ADD, 1, 4, 0, 1, 1000 * kMs), 0);
      EXPECT_EQ(mori_quiet_window(win.view, 1000 * kMs), MORI_DEVICE_EUNREACHABLE);
      EXPECT_EQ(win.view.proxy->failed, 1u);
      EXPECT_EQ(fake_verbs::Posts().size(), before) << "nothing unaligned reached the NIC";
      EXPECT_EQ(mori_signal_add(win.view, 1, 8, 1), MORI_DEVICE_OK);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win.win));
    MORI_EXPECT_OK(mori_mem_free(win.mem));
  });
}

TEST(RdmaFake, SubmitThatTimesOutOnAStalledConsumerLeavesTheRingUsable) {
  OnTwoNodes(500, 1u << 30, [](int rank, World &w) {
    Window win;
    Open(w, 1 << 20, &win);
    if (rank == 0) {
      // The NIC stalls: the proxy posts what the send queues take, then the
      // ring fills up behind it.
      fake_verbs::Stall(true);
      const char *src = (const char *)win.mem + 8192;
      int accepted = 0;
      int64_t rc = 0;
      for (int i = 0; i < 4 * MORI_PROXY_SLOTS; i++) {
        rc = mori_proxy_submit(win.view, MORI_PROXY_PUT, 1, 0, (uint64_t)(src - (const char *)win.mem), 8, 2 * kMs);
        if (rc < 0) break;
        accepted++;
      }
      ASSERT_EQ(rc, MORI_DEVICE_ETIMEDOUT);
      EXPECT_GE(accepted, MORI_PROXY_SLOTS);
      EXPECT_EQ(mori_window_check(win.win), MORI_EDEVICE_TIMEOUT);
      // Nobody holds the transport's lock while waiting: a quiet times out
      // after its own timeout, not after the proxy's.
      auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(mori_rdma_quiet(w.comm), MORI_ETIMEDOUT);
      EXPECT_LT(MsSince(t0), 900.0);
      // The NIC recovers: everything submitted, and what comes after, is served.
      fake_verbs::Stall(false);
      fake_verbs::ReleaseAll();
      for (int i = 0; i < 10; i++)
        ASSERT_GT(mori_proxy_submit(win.view, MORI_PROXY_PUT, 1, 0, (uint64_t)(src - (const char *)win.mem), 8, 2000 * kMs), 0);
      EXPECT_EQ(mori_quiet_window(win.view, 5000 * kMs), MORI_DEVICE_OK);
      EXPECT_EQ(win.view.proxy->done, (uint64_t)accepted + 10);
      EXPECT_EQ(win.view.proxy->consumed, *win.view.proxy_tickets);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win.win));
    MORI_EXPECT_OK(mori_mem_free(win.mem));
  });
}

}  // namespace
