// SPDX-License-Identifier: MIT
// The rdma transport against a fake verbs provider (tests/rdma/fake_verbs):
// late, failed and batched completions, a deregister while work is stalled,
// transfers longer than the port's largest message, unaligned proxied
// atomics, and a ring whose consumer stalls past MORI_PROXY_SLOTS. Two
// ranks on two simulated nodes, so each reaches the other over rdma only.
// Then the environment: rail-only QP counts at 2 nodes x 1, 2 and 4 ranks,
// several QPs per peer (work spread, fenced ops kept behind earlier puts),
// device include / exclude lists, GID index / SL / TC reaching modify_qp.
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "mori/device.h"
#include "mori/shmem.h"
#include "mori/team.h"
#include "mori/transport_rdma.h"
#include "tests/rdma/fake_verbs.h"
#include "tests/shmem/pe.h"
#include "tests/rdma/rdma_test_support.h"
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

// Every rank done with the window: it and its memory go.
void Close(World &w, const Window &win) {
  MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  MORI_EXPECT_OK(mori_window_destroy(win.win));
  MORI_EXPECT_OK(mori_mem_free(win.mem));
}

rdma_state *State(World &w) { return static_cast<rdma_state *>(mori_comm_transport_state(w.comm, &mori_transport_rdma_ops)); }

bool WaitHeld(size_t n) {
  for (int i = 0; i < 4000 && fake_verbs::Held() < n; i++) std::this_thread::sleep_for(std::chrono::microseconds(500));
  return fake_verbs::Held() == n;
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// (Timeouts here are seconds, and "at once" is half of one: a loaded machine
// can delay a thread by hundreds of ms, and the faults end at a timeout.)
TEST(RdmaFake, FailedCompletionInABatchDropsNoneOfTheOthers) {
  OnTwoNodes(4000, 1u << 30, [](int rank, World &w) {
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
      EXPECT_LT(MsSince(t0), 2000.0);
      // Three host puts, the middle one fails, the last is flushed.
      for (int i = 0; i < 3; i++) MORI_ASSERT_OK(mori_rdma_put(win.win, 1, 0, 4096, 64));
      ASSERT_EQ(fake_verbs::Release({IBV_WC_SUCCESS, IBV_WC_REM_ACCESS_ERR, IBV_WC_WR_FLUSH_ERR}), 3u);
      EXPECT_EQ(mori_rdma_quiet(w.comm), MORI_EIO);
      t0 = std::chrono::steady_clock::now();
      MORI_EXPECT_OK(mori_rdma_quiet(w.comm));
      EXPECT_LT(MsSince(t0), 2000.0);
      fake_verbs::Stall(false);
    }
    Close(w, win);
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

// Every wait here must succeed: 60 s, as 4 GiB each way took 3.6 s on a
// loaded CI machine under ASan, too close to a 5 s bound.
TEST(RdmaFake, TransfersBeyondTheLargestMessageGoInPieces) {
  OnTwoNodes(60000, kMax, [](int rank, World &w) {
    Window win;
    Open(w, kBytes + 8192, &win);  // sparse: never touched
    if (rank == 0) {
      size_t before = fake_verbs::Posts().size();
      MORI_ASSERT_OK(mori_rdma_put(win.win, 1, 0, 8192, kBytes));
      MORI_ASSERT_OK(mori_rdma_quiet(w.comm));
      ASSERT_EQ(mori_get_thread(win.view, 1, win.mem, 8192, kBytes), MORI_DEVICE_OK);
      ASSERT_EQ(mori_quiet_window(win.view, 60000 * kMs), MORI_DEVICE_OK);
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
    Close(w, win);
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
    Close(w, win);
  });
}

TEST(RdmaFake, SubmitThatTimesOutOnAStalledConsumerLeavesTheRingUsable) {
  OnTwoNodes(2000, 1u << 30, [](int rank, World &w) {
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
      // The proxy thread has posted something to the stalled NIC (on a busy
      // machine it may not have run yet when the submits time out): only
      // then does a quiet have work in flight to wait for.
      for (auto t = std::chrono::steady_clock::now(); fake_verbs::Posts().empty() && MsSince(t) < 5000.0;)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ASSERT_FALSE(fake_verbs::Posts().empty()) << "the proxy posted nothing in 5 s";
      // Nobody holds the transport's lock while waiting: a quiet times out
      // after its own timeout (2 s), not after the proxy's wait and then its
      // own (4 s).
      auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(mori_rdma_quiet(w.comm), MORI_ETIMEDOUT);
      EXPECT_LT(MsSince(t0), 3500.0);
      // The NIC recovers: everything submitted, and what comes after, is served.
      fake_verbs::Stall(false);
      fake_verbs::ReleaseAll();
      for (int i = 0; i < 10; i++)
        ASSERT_GT(mori_proxy_submit(win.view, MORI_PROXY_PUT, 1, 0, (uint64_t)(src - (const char *)win.mem), 8, 2000 * kMs), 0);
      EXPECT_EQ(mori_quiet_window(win.view, 5000 * kMs), MORI_DEVICE_OK);
      EXPECT_EQ(win.view.proxy->done, (uint64_t)accepted + 10);
      EXPECT_EQ(win.view.proxy->consumed, *win.view.proxy_tickets);
    }
    Close(w, win);
  });
}

}  // namespace

// ---- the environment (rdma_env.c, rail.c, several QPs per peer) ----

namespace {

using Env = std::map<std::string, std::string>;

// `nodes` simulated nodes of `per_node` ranks each (node-major unless
// `host_of` says otherwise), the fake provider with `devices`, `env` set.
void OnNodes(int nodes, int per_node, const Env &env, std::function<void(int, World &)> fn,
             std::vector<std::string> devices = {"fake0"}, std::function<std::string(int)> host_of = nullptr,
             uint32_t max_msg = 1u << 30) {
  EXPECT_RANKS_PASS(nodes * per_node, [=](int rank, int size) {
    std::string host = host_of ? host_of(rank) : "node-" + std::to_string(rank / per_node);
    setenv("MORI_HOST_ID", host.c_str(), 1);
    setenv("MORI_RDMA_TIMEOUT_MS", "2000", 1);
    setenv("MORI_SHMEM_MODE", "isolation", 1);
    for (const auto &kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    fake_verbs::Install(max_msg);
    fake_verbs::SetDevices(devices);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    fn(rank, w);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

bool Contains(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

// Rail-only at 2 nodes x per_node: each rank connects its per_node - 1
// same-host peers and its one same-rail peer, no one else.
void RailOnly(int per_node) {
  OnNodes(2, per_node, {{"MORI_ENABLE_RAIL_ONLY", "1"}}, [per_node](int rank, World &w) {
    rdma_state *s = State(w);
    int size = 2 * per_node, rail = rank % per_node;
    EXPECT_TRUE(s->rail_only);
    EXPECT_EQ(s->qps_created, per_node) << "rank " << rank;
    EXPECT_EQ(fake_verbs::LiveQps(), (size_t)per_node);
    int same_rail = (rank + per_node) % size;
    EXPECT_STREQ(mori_team_transport_name(w.comm, same_rail), "rdma");
    EXPECT_NE(mori_comm_peer_caps(w.comm, same_rail) & MORI_CAP_RDMA, 0u);
    for (int p = 0; p < size; p++) {
      bool same_host = p / per_node == rank / per_node;
      EXPECT_EQ(s->connect[p], p != rank && (same_host || p % per_node == rail)) << "rank " << rank << " peer " << p;
      if (same_host || p % per_node == rail) continue;
      // A cross-rail peer: no route, and an op to it names both ranks.
      EXPECT_STREQ(mori_team_transport_name(w.comm, p), "none") << p;
      EXPECT_EQ(mori_comm_queue_pairs(w.comm, p), 0);
      EXPECT_EQ(mori_comm_peer_caps(w.comm, p) & MORI_CAP_RDMA, 0u);
    }
    Window win;
    Open(w, 1 << 16, &win);
    MORI_EXPECT_OK(mori_rdma_put(win.win, same_rail, 0, 4096, 64));
    MORI_EXPECT_OK(mori_rdma_quiet(w.comm));
    if (per_node > 1) {
      int cross_rail = (rank + per_node + 1) % per_node + (rank < per_node ? per_node : 0);
      ASSERT_NE(cross_rail % per_node, rail);
      EXPECT_EQ(mori_rdma_put(win.win, cross_rail, 0, 4096, 64), MORI_EUNREACHABLE);
      std::string msg = mori_last_error();
      EXPECT_TRUE(Contains(msg, "rank " + std::to_string(rank) + " has no queue pair to rank " + std::to_string(cross_rail)))
          << msg;
      EXPECT_TRUE(Contains(msg, "MORI_ENABLE_RAIL_ONLY")) << msg;
      // Through the proxy (a kernel's put): refused and counted as failed.
      ASSERT_EQ(mori_put_thread(win.view, cross_rail, 0, (const char *)win.mem + 4096, 64), MORI_DEVICE_OK);
      EXPECT_EQ(mori_quiet_window(win.view, 1000 * kMs), MORI_DEVICE_EUNREACHABLE);
      EXPECT_EQ(win.view.proxy->failed, 1u);
    }
    Close(w, win);
  });
}

// What mori_info shows of rdma (mori_rdma_peer_status): the NIC and rail
// for a peer with queue pairs, and why not for the others.
TEST(RdmaEnv, PeerStatusNamesTheNicTheRailAndWhyNot) {
  OnNodes(2, 2, {{"MORI_ENABLE_RAIL_ONLY", "1"}}, [](int rank, World &w) {
    char nic[32], why[256];
    int rail = -2;
    int same_rail = (rank + 2) % 4, cross_rail = 3 - rank; // the other node, the other rail
    EXPECT_EQ(mori_rdma_peer_status(w.comm, same_rail, nic, sizeof(nic), &rail, why, sizeof(why)), 1);
    EXPECT_STREQ(nic, "fake0");
    EXPECT_EQ(rail, rank % 2);
    EXPECT_EQ(mori_rdma_peer_status(w.comm, cross_rail, nic, sizeof(nic), &rail, why, sizeof(why)), 0);
    EXPECT_TRUE(Contains(why, "MORI_ENABLE_RAIL_ONLY")) << why;
    EXPECT_EQ(mori_rdma_peer_status(w.comm, rank, nic, sizeof(nic), &rail, why, sizeof(why)), 0);
    EXPECT_STREQ(why, "this rank");
    EXPECT_EQ(mori_rdma_peer_status(w.comm, 4, nic, sizeof(nic), &rail, why, sizeof(why)), MORI_EINVAL);
  });
}

// A destroyed window or comm, or a NULL comm, handed to the host API is
// refused by name (each was read through before, as sdma's were).
TEST(RdmaEnv, ADestroyedWindowOrCommIsRefusedByName) {
  OnNodes(2, 1, {}, [](int rank, World &w) {
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    MORI_ASSERT_OK(mori_window_destroy(win));
    EXPECT_EQ(mori_rdma_put(win, 1 - rank, 0, 0, 8), MORI_EINVAL);
    EXPECT_TRUE(Contains(mori_last_error(), "rdma put: ")) << mori_last_error();
    EXPECT_TRUE(Contains(mori_last_error(), "is not a live window")) << mori_last_error();
    EXPECT_EQ(mori_rdma_atomic_add(win, 1 - rank, 0, 1), MORI_EINVAL);
    EXPECT_TRUE(Contains(mori_last_error(), "is not a live window")) << mori_last_error();
    MORI_EXPECT_OK(mori_mem_free(mem));
    char text[64];
    int flag = 0;
    EXPECT_EQ(mori_rdma_quiet(nullptr), MORI_EINVAL);
    EXPECT_TRUE(Contains(mori_last_error(), "rdma quiet: NULL comm")) << mori_last_error();
    mori_comm_t *gone = nullptr;
    MORI_ASSERT_OK(mori_test::MakeComm(w.bootstrap, &gone));
    MORI_ASSERT_OK(mori_comm_destroy(gone));
    EXPECT_EQ(mori_rdma_quiet(gone), MORI_EINVAL);
    EXPECT_TRUE(Contains(mori_last_error(), "is not a live comm")) << mori_last_error();
    EXPECT_EQ(mori_rdma_peer_status(gone, 0, text, sizeof(text), nullptr, text, sizeof(text)), MORI_EINVAL);
    EXPECT_EQ(mori_rdma_gda_status(gone, &flag, text, sizeof(text)), MORI_EINVAL);
    EXPECT_EQ(mori_rdma_memory_status(gone, text, sizeof(text)), MORI_EINVAL);
    EXPECT_TRUE(Contains(mori_last_error(), "rdma memory_status")) << mori_last_error();
    MORI_EXPECT_OK(mori_rdma_quiet(w.comm));  // the live one still works
  });
}

TEST(RdmaEnv, PeerStatusWithoutADeviceSaysWhichRanksHaveNone) {
  OnNodes(2, 1, {}, [](int rank, World &w) {
    char nic[32], why[256];
    int rail = -2;
    EXPECT_EQ(mori_rdma_peer_status(w.comm, 1 - rank, nic, sizeof(nic), &rail, why, sizeof(why)), 0);
    EXPECT_STREQ(nic, "");
    EXPECT_EQ(rail, -1);
    EXPECT_TRUE(Contains(why, "no usable device on rank(s) 0, 1")) << why;
  }, {});
}

TEST(RdmaEnv, RailOnlyAtTwoNodesOfOneConnectsTheOtherNode) { RailOnly(1); }
TEST(RdmaEnv, RailOnlyAtTwoNodesOfTwoConnectsSameRailAndSameHost) { RailOnly(2); }
TEST(RdmaEnv, RailOnlyAtTwoNodesOfFourConnectsSameRailAndSameHost) { RailOnly(4); }

TEST(RdmaEnv, WithoutRailOnlyEveryPeerIsConnected) {
  OnNodes(2, 2, {}, [](int rank, World &w) {
    EXPECT_FALSE(State(w)->rail_only);
    EXPECT_EQ(State(w)->qps_created, 3);
  });
}

TEST(RdmaEnv, RailOnlyOnAnInterleavedLayoutKeepsTheFullMesh) {
  // Hosts a, b, a, b: not node-major, so rank % 2 is not the rail.
  OnNodes(2, 2, {{"MORI_ENABLE_RAIL_ONLY", "1"}}, [](int rank, World &w) {
    EXPECT_FALSE(State(w)->rail_only);
    EXPECT_EQ(State(w)->qps_created, 3);
  }, {"fake0"}, [](int rank) { return rank % 2 ? "node-b" : "node-a"; });
}

TEST(RdmaEnv, RailOnlyOnUnequalNodesKeepsTheFullMesh) {
  // Hosts a, a, b: node sizes 2 and 1.
  EXPECT_RANKS_PASS(3, [](int rank, int size) {
    setenv("MORI_HOST_ID", rank < 2 ? "node-a" : "node-b", 1);
    setenv("MORI_ENABLE_RAIL_ONLY", "1", 1);
    fake_verbs::Install();
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    EXPECT_FALSE(State(w)->rail_only);
    EXPECT_EQ(State(w)->qps_created, 2);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

std::vector<fake_verbs::Posted> PostsSince(size_t before) {
  std::vector<fake_verbs::Posted> all = fake_verbs::Posts();
  return std::vector<fake_verbs::Posted>(all.begin() + (long)before, all.end());
}

TEST(RdmaEnv, SeveralQueuePairsPerPeerTakeRequestsInTurn) {
  OnNodes(2, 1, {{"MORI_NUM_QP_PER_PE", "3"}}, [](int rank, World &w) {
    rdma_state *s = State(w);
    EXPECT_EQ(s->num_qp, 3);
    EXPECT_EQ(s->qps_created, 3);
    EXPECT_EQ(mori_comm_queue_pairs(w.comm, 1 - rank), 3);
    EXPECT_EQ(mori_comm_queue_pairs(w.comm, rank), 0);
    EXPECT_EQ(fake_verbs::LiveQps(), 3u);
    Window win;
    Open(w, 1 << 16, &win);
    if (rank == 0) {
      size_t before = fake_verbs::Posts().size();
      for (int i = 0; i < 6; i++) MORI_ASSERT_OK(mori_rdma_put(win.win, 1, 0, 4096, 64));
      MORI_ASSERT_OK(mori_rdma_quiet(w.comm));
      std::map<uint32_t, int> per_qp;
      for (const auto &p : PostsSince(before)) per_qp[p.qp_num]++;
      EXPECT_EQ(per_qp.size(), 3u);
      for (const auto &kv : per_qp) EXPECT_EQ(kv.second, 2) << "QP " << kv.first;
      // Requests from the ring too.
      before = fake_verbs::Posts().size();
      for (int i = 0; i < 3; i++) ASSERT_EQ(mori_put_thread(win.view, 1, 0, (const char *)win.mem + 4096, 64), MORI_DEVICE_OK);
      ASSERT_EQ(mori_quiet_window(win.view, 2000 * kMs), MORI_DEVICE_OK);
      per_qp.clear();
      for (const auto &p : PostsSince(before)) per_qp[p.qp_num]++;
      EXPECT_EQ(per_qp.size(), 3u);
      // Every QP to rank 1 reaches rank 1's QP for rank 0 (the fake numbers
      // QPs per process: both ranks made 3, in the same order).
      for (int i = 0; i < 3; i++) EXPECT_EQ(fake_verbs::PathOf(s->qpn[3 + i]).dest_qp, s->qpn[3 + i]);
    }
    Close(w, win);
  });
}

TEST(RdmaEnv, PiecesOfOneTransferStayOnOneQueuePair) {
  OnNodes(2, 1, {{"MORI_NUM_QP_PER_PE", "2"}}, [](int rank, World &w) {
    Window win;
    Open(w, 1 << 16, &win);
    if (rank == 0) {
      size_t before = fake_verbs::Posts().size();
      MORI_ASSERT_OK(mori_rdma_put(win.win, 1, 0, 16384, 3 * 4096));
      MORI_ASSERT_OK(mori_rdma_quiet(w.comm));
      ASSERT_EQ(mori_put_thread(win.view, 1, 0, (const char *)win.mem + 16384, 3 * 4096), MORI_DEVICE_OK);
      ASSERT_EQ(mori_quiet_window(win.view, 2000 * kMs), MORI_DEVICE_OK);
      std::vector<fake_verbs::Posted> posts = PostsSince(before);
      ASSERT_EQ(posts.size(), 6u);
      for (int i = 1; i < 3; i++) EXPECT_EQ(posts[i].qp_num, posts[0].qp_num);
      for (int i = 4; i < 6; i++) EXPECT_EQ(posts[i].qp_num, posts[3].qp_num);
      EXPECT_NE(posts[0].qp_num, posts[3].qp_num) << "the next request takes the next QP";
    }
    Close(w, win);
  }, {"fake0"}, nullptr, 4096);
}

// Puts on two QPs are stalled: a fenced op (host atomic add, or a signal
// from the ring) is not posted until both completed, then goes on the
// latest put's QP, fenced.
TEST(RdmaEnv, FencedOpWaitsForPutsOnThePeersOtherQueuePairs) {
  OnNodes(2, 1, {{"MORI_NUM_QP_PER_PE", "2"}}, [](int rank, World &w) {
    Window win;
    Open(w, 1 << 16, &win);
    if (rank == 0) {
      const char *src = (const char *)win.mem + 4096;
      for (int round = 0; round < 2; round++) {
        fake_verbs::Stall(true);
        size_t before = fake_verbs::Posts().size();
        std::atomic<int> fenced_rc{1};
        std::thread fenced;
        if (round == 0) {
          MORI_ASSERT_OK(mori_rdma_put(win.win, 1, 0, 4096, 64));
          MORI_ASSERT_OK(mori_rdma_put(win.win, 1, 64, 4096, 64));
          fenced = std::thread([&] { fenced_rc = mori_rdma_atomic_add(win.win, 1, 1024, 1); });
        } else {
          ASSERT_EQ(mori_put_thread(win.view, 1, 0, src, 64), MORI_DEVICE_OK);
          ASSERT_EQ(mori_put_thread(win.view, 1, 64, src, 64), MORI_DEVICE_OK);
          ASSERT_EQ(mori_signal_set(win.view, 1, 1024, 7), MORI_DEVICE_OK);
        }
        ASSERT_TRUE(WaitHeld(2));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        EXPECT_EQ(PostsSince(before).size(), 2u) << "round " << round << ": the fenced op waits";
        fake_verbs::Stall(false);
        fake_verbs::ReleaseAll();
        if (round == 0) {
          fenced.join();
          EXPECT_EQ(fenced_rc.load(), 0) << mori_last_error();
          MORI_EXPECT_OK(mori_rdma_quiet(w.comm));
        } else {
          EXPECT_EQ(mori_quiet_window(win.view, 2000 * kMs), MORI_DEVICE_OK);
        }
        std::vector<fake_verbs::Posted> posts = PostsSince(before);
        ASSERT_EQ(posts.size(), 3u);
        EXPECT_NE(posts[0].qp_num, posts[1].qp_num) << "the puts were spread";
        EXPECT_EQ(posts[2].qp_num, posts[1].qp_num) << "the fenced op follows the latest put";
        EXPECT_NE(posts[2].send_flags & IBV_SEND_FENCE, 0u);
      }
    }
    Close(w, win);
  });
}

TEST(RdmaEnv, QueuePairCountsThatDifferBetweenRanksFailNamingThem) {
  EXPECT_RANKS_PASS(2, [](int rank, int size) {
    setenv("MORI_HOST_ID", rank == 0 ? "node-a" : "node-b", 1);
    setenv("MORI_NUM_QP_PER_PE", rank == 0 ? "2" : "1", 1);
    fake_verbs::Install();
    mori_bootstrap_t *b = mori_test::Bootstrap();
    ASSERT_NE(b, nullptr);
    mori_comm_t *comm = nullptr;
    EXPECT_EQ(mori_rdma_test::CreateRdmaComm(b, &comm), MORI_EINVAL);
    std::string msg = mori_last_error();
    EXPECT_TRUE(Contains(msg, "MORI_NUM_QP_PER_PE is")) << msg;
    EXPECT_TRUE(Contains(msg, rank == 0 ? "on rank 1" : "on rank 0")) << msg;
    mori_bootstrap_destroy(b);
  });
}

// Which device each local rank opens: 2 nodes x 2 ranks, four fake NICs.
void Devices(const Env &env, const std::string &local0, const std::string &local1) {
  OnNodes(2, 2, env, [=](int rank, World &w) {
    EXPECT_EQ(fake_verbs::Opened(), rank % 2 ? local1 : local0) << "rank " << rank;
    EXPECT_EQ(std::string(State(w)->device), rank % 2 ? local1 : local0);
    EXPECT_TRUE(State(w)->usable);
  }, {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"});
}

TEST(RdmaEnv, DeviceIncludeListIsTakenInItsOrderByLocalRank) { Devices({{"MORI_RDMA_DEVICES", "mlx5_3,mlx5_1"}}, "mlx5_3", "mlx5_1"); }
TEST(RdmaEnv, DeviceExcludeListLeavesTheOthersByLocalRank) {
  Devices({{"MORI_RDMA_DEVICES", "^mlx5_0,mlx5_2"}}, "mlx5_1", "mlx5_3");
}
TEST(RdmaEnv, WithoutAListLocalRanksSpreadOverEveryDevice) { Devices({}, "mlx5_0", "mlx5_1"); }
TEST(RdmaEnv, OneListedDeviceServesEveryLocalRank) { Devices({{"MORI_RDMA_DEVICES", "mlx5_2"}}, "mlx5_2", "mlx5_2"); }
TEST(RdmaEnv, TheOlderSingleDeviceNameStillWorks) { Devices({{"MORI_RDMA_DEVICE", "mlx5_1"}}, "mlx5_1", "mlx5_1"); }

TEST(RdmaEnv, AnExcludeListThatLeavesNothingMeansNoRdmaAndSaysWhy) {
  OnNodes(2, 1, {{"MORI_RDMA_DEVICES", "^fake0"}}, [](int rank, World &w) {
    EXPECT_FALSE(State(w)->usable);
    EXPECT_STREQ(mori_team_transport_name(w.comm, 1 - rank), "none");
    Window win;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &win.mem));
    MORI_ASSERT_OK(mori_window_create(w.comm, win.mem, &win.win));
    EXPECT_EQ(mori_rdma_put(win.win, 1 - rank, 0, 0, 8), MORI_EUNREACHABLE);
    std::string msg = mori_last_error();
    EXPECT_TRUE(Contains(msg, "no usable device on rank(s) 0, 1")) << msg;
    EXPECT_TRUE(Contains(msg, "MORI_RDMA_DEVICES=^fake0 leaves no RDMA device (present: fake0)")) << msg;
    Close(w, win);
  });
}

TEST(RdmaEnv, DeviceListsPickedDirectly) {
  const char *names[] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};
  auto pick = [&](const char *spec, const char *old, int local_rank) {
    if (spec) setenv("MORI_RDMA_DEVICES", spec, 1);
    else unsetenv("MORI_RDMA_DEVICES");
    if (old) setenv("MORI_RDMA_DEVICE", old, 1);
    else unsetenv("MORI_RDMA_DEVICE");
    rdma_config c;
    EXPECT_EQ(rdma_config_read(&c), 0) << mori_last_error();
    int chosen = -1;
    int rc = rdma_pick_device(&c, names, 4, local_rank, &chosen);
    return rc ? std::string(mori_err_name(rc)) : std::string(names[chosen]);
  };
  EXPECT_EQ(pick("mlx5_0,mlx5_1", nullptr, 3), "mlx5_1");
  EXPECT_EQ(pick("^mlx5_2,mlx5_3", nullptr, 3), "mlx5_1");
  EXPECT_EQ(pick("mlx5_9,mlx5_2", nullptr, 1), "mlx5_2") << "a missing name is warned about and skipped";
  EXPECT_EQ(pick("mlx5_9", nullptr, 0), "MORI_ENODEV");
  EXPECT_TRUE(Contains(mori_last_error(), "present: mlx5_0,mlx5_1,mlx5_2,mlx5_3")) << mori_last_error();
  EXPECT_EQ(pick("^mlx5_0,mlx5_1,mlx5_2,mlx5_3", nullptr, 0), "MORI_ENODEV");
  EXPECT_EQ(pick(nullptr, "mlx5_3", 0), "mlx5_3");
  EXPECT_EQ(pick("mlx5_1", "mlx5_3", 0), "mlx5_1") << "the guide's name wins";
  EXPECT_EQ(pick("mlx5_0,mlx5", nullptr, 1), "mlx5_0") << "names match whole, not as prefixes";
  unsetenv("MORI_RDMA_DEVICES");
  unsetenv("MORI_RDMA_DEVICE");
  rdma_config empty{};
  int none = 0;
  EXPECT_EQ(rdma_pick_device(&empty, names, 0, 0, &none), MORI_ENODEV);
}

// MORI_ENABLE_RAIL_ONLY reads as every switch does: "false", "off", "no"
// and "0" are off (any other word was taken as on, dropping the cross-rail
// queue pairs).
TEST(RdmaEnv, RailOnlyIsReadAsASwitch) {
  auto rail_only = [](const char *v) {
    if (v) setenv("MORI_ENABLE_RAIL_ONLY", v, 1);
    else unsetenv("MORI_ENABLE_RAIL_ONLY");
    rdma_config c;
    EXPECT_EQ(rdma_config_read(&c), 0) << mori_last_error();
    return c.rail_only;
  };
  for (const char *off : {"0", "false", "off", "no", "FALSE", "Off"}) EXPECT_FALSE(rail_only(off)) << off;
  for (const char *on : {"1", "true", "on", "yes", "TRUE"}) EXPECT_TRUE(rail_only(on)) << on;
  EXPECT_FALSE(rail_only(nullptr));
  unsetenv("MORI_ENABLE_RAIL_ONLY");
}

// GID index, service level and traffic class reach every QP's RTR.
void Path(const Env &env, int gid, int sl, int tc) {
  OnNodes(2, 1, env, [=](int rank, World &w) {
    rdma_state *s = State(w);
    EXPECT_EQ(s->gid_index, gid);
    for (int i = 0; i < s->num_qp; i++) {
      fake_verbs::Path path = fake_verbs::PathOf(s->qpn[(1 - rank) * s->num_qp + i]);
      EXPECT_EQ(path.sgid_index, gid);
      EXPECT_EQ(path.sl, sl);
      EXPECT_EQ(path.traffic_class, tc);
    }
  });
}

TEST(RdmaEnv, GidIndexServiceLevelAndTrafficClassReachModifyQp) {
  Path({{"MORI_IB_GID_INDEX", "0"}, {"MORI_RDMA_SL", "3"}, {"MORI_RDMA_TC", "106"}, {"MORI_NUM_QP_PER_PE", "2"}}, 0, 3, 106);
}
TEST(RdmaEnv, DefaultsAreGidIndexOneAndServiceLevelAndClassZero) { Path({}, 1, 0, 0); }
TEST(RdmaEnv, TheOlderGidIndexNameStillWorks) { Path({{"MORI_RDMA_GID_INDEX", "0"}}, 0, 0, 0); }
TEST(RdmaEnv, TheGuidesGidIndexNameWinsOverTheOlder) { Path({{"MORI_RDMA_GID_INDEX", "0"}, {"MORI_IB_GID_INDEX", "1"}}, 1, 0, 0); }
// Out of range or not a number: the comm fails on every rank naming the
// variable and the value (it fell back to 0 with a warning).
TEST(RdmaEnv, OutOfRangeServiceLevelOrClassFailsTheCommNamingIt) {
  const std::pair<const char *, const char *> cases[] = {{"MORI_RDMA_SL", "16"}, {"MORI_RDMA_TC", "x"}};
  for (const auto &c : cases) {
    EXPECT_RANKS_PASS(2, [c](int rank, int) {
      setenv("MORI_HOST_ID", rank == 0 ? "node-a" : "node-b", 1);
      setenv(c.first, c.second, 1);
      fake_verbs::Install(1u << 30);
      fake_verbs::SetDevices({"fake0"});
      mori_bootstrap_t *b = mori_test::Bootstrap();
      ASSERT_NE(b, nullptr);
      mori_comm_t *comm = nullptr;
      EXPECT_NE(mori_rdma_test::CreateRdmaComm(b, &comm), 0);
      EXPECT_NE(std::string(mori_last_error()).find(std::string(c.first) + "=\"" + c.second + "\""), std::string::npos)
          << mori_last_error();
      if (comm) mori_comm_destroy(comm);
      mori_bootstrap_destroy(b);
    });
  }
}

// MORI_RDMA_TIMEOUT_MS is a duration as the variable table says ("2s",
// "1500ms"; a bare number is milliseconds), the value the transport then
// waits with (it read a bare number only: "2s" passed the comm's check
// and then meant the bootstrap's timeout).
TEST(RdmaEnv, TimeoutIsReadAsTheDurationTheTableAccepts) {
  const std::pair<const char *, int> cases[] = {{"2s", 2000}, {"1500ms", 1500}, {"700", 700}};
  for (const auto &c : cases)
    OnNodes(2, 1, {{"MORI_RDMA_TIMEOUT_MS", c.first}}, [c](int, World &w) { EXPECT_EQ(State(w)->timeout_ms, c.second) << c.first; });
}

// shmem_num_qp_per_pe reports what the transport opened (two simulated
// nodes, so the peer is reached over rdma), and without rdma the variable.
TEST(RdmaEnv, ShmemReportsTheQueuePairsPerPeItOpened) {
  for (bool with_rdma : {true, false}) {
    EXPECT_RANKS_PASS(2, [with_rdma](int rank, int size) {
      mori_shmem_test::UseSmallHeap();
      setenv("MORI_HOST_ID", rank == 0 ? "node-a" : "node-b", 1);
      setenv("MORI_NUM_QP_PER_PE", "3", 1);
      fake_verbs::Install();
      static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops};
      static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops, &mori_transport_rdma_ops};
      MORI_ASSERT_OK(mori_shmem_use_plugins(handles, 2, transports, with_rdma ? 2 : 1));
      mori_shmem_uniqueid_t id = mori_shmem_test::ShareId(rank, with_rdma ? "qp_rdma" : "qp_p2p");
      MORI_ASSERT_OK(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, rank, size, &id));
      EXPECT_EQ(shmem_num_qp_per_pe(), 3);
      mori_comm_t *comm = nullptr;
      MORI_ASSERT_OK(mori_shmem_comm(&comm));
      EXPECT_EQ(mori_comm_queue_pairs(comm, 1 - rank), with_rdma ? 3 : 0);
      MORI_EXPECT_OK(shmem_barrier_all());
      MORI_EXPECT_OK(shmem_finalize());
    });
  }
}

}  // namespace

// The provider seam: a provider missing a function, or too small to hold
// the fields every provider fills, is refused naming what is missing; a
// comm keeps the provider it was made with.
TEST(RdmaProvider, AnIncompleteProviderIsRefusedNamingWhatIsMissing) {
  const mori_rdma_provider_t *current = nullptr;
  fake_verbs::Install();
  ASSERT_EQ(mori_rdma_provider(&current), 0) << mori_last_error();
  ASSERT_STREQ(current->name, "fake verbs");
  mori_verbs partial = *current->verbs;
  partial.ibv_modify_qp = nullptr;
  mori_rdma_provider_t missing = {sizeof(mori_rdma_provider_t), "partial", &partial, nullptr};
  EXPECT_EQ(mori_rdma_use_provider(&missing), MORI_EINVAL);
  EXPECT_NE(std::string(mori_last_error()).find("\"partial\" has no ibv_modify_qp"), std::string::npos) << mori_last_error();
  mori_rdma_provider_t tiny = {sizeof(size_t), "tiny", current->verbs, nullptr};
  EXPECT_EQ(mori_rdma_use_provider(&tiny), MORI_EINVAL);
  EXPECT_NE(std::string(mori_last_error()).find("\"tiny\""), std::string::npos) << mori_last_error();
  // Refused: the one set before is still in effect.
  ASSERT_EQ(mori_rdma_provider(&current), 0);
  EXPECT_STREQ(current->name, "fake verbs");
  fake_verbs::Uninstall();
}
