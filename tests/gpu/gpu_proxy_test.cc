// SPDX-License-Identifier: MIT
// The proxy ring on real GPUs. Two ranks are declared on different nodes
// (MORI_HOST_ID), so the window's peer is reachable only through the rdma
// transport; the copy-engine NIC (//transport/rdma/ce_nic, installed as
// the transport's provider) stands in for the NIC: it checks every request's keys and bounds,
// completes out of order and injects faults on demand. Kernels post puts,
// signals, atomics and gets through the ring; every byte and every signal
// is checked. Tagged gpu + manual: run by tools/gpu.sh on the device, with
// one GPU per rank, or both ranks on one GPU when there is only one. Host
// threads wait for these kernels by event: a synchronous copy on the legacy
// stream would keep the proxy thread from queueing the copies the kernel
// waits for (docs/multinode.md).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/platform/platform.h"
#include "mori/team.h"
#include "mori/transport_rdma.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/support/world.h"
#include "transport/rdma/ce_nic/ce_nic.h"

using mori_test::World;

// gpu_gda_test links tests/gpu/gda_swcx_provider.cc, which defines this:
// the software ConnectX over the copy-engine NIC, with MORI_RDMA_GDA=on, so
// the same kernels post to the NIC themselves instead of to the ring.
extern "C" int mori_test_gpu_rdma_install(void) __attribute__((weak));

namespace {

int Ranks() {
  const char *s = getenv("MORI_TEST_RANKS");
  return s ? atoi(s) : 2;
}

// Every rank its own node; the copy-engine NIC; bounded waits.
void JoinOwnNode(int rank, const char *faults) {
  ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error();
  setenv("MORI_HOST_ID", ("node-" + std::to_string(rank)).c_str(), 1);
  ASSERT_EQ(mori_test_gpu_rdma_install ? mori_test_gpu_rdma_install() : mori_ce_nic_install(), 0) << mori_last_error();
  setenv("MORI_RDMA_TIMEOUT_MS", "2000", 1);
  if (faults) setenv("MORI_RDMA_CE_FAULTS", faults, 1);
  else unsetenv("MORI_RDMA_CE_FAULTS");
}

// The host's copy of the kernel's pattern (gpu_kernels.cu, proxy_word).
uint32_t ProxyWord(int writer, int block, int round, uint64_t i) {
  return (uint32_t)(writer * 0x9E3779B1u) ^ ((uint32_t)block << 20) ^ ((uint32_t)round << 8) ^ (uint32_t)(i * 2654435761u);
}

struct Layout {
  uint64_t slot, recv, signals, counter, bytes;
  Layout(uint64_t slot, int blocks)
      : slot(slot), recv((uint64_t)blocks * 2 * slot), signals(2 * recv), counter(signals + (uint64_t)blocks * 8),
        bytes(counter + 8) {}
};

uint64_t ReadWord(int device, const void *p) {
  uint64_t v = 0;
  EXPECT_EQ(mori_platform_memcpy(device, &v, p, 8), 0) << mori_last_error();
  return v;
}

// How GPU memory is registered with the NIC (docs/multinode.md,
// "Registering memory with the NIC"). The platform's dma-buf export of a
// heap buffer: an fd (with the buffer's offset in it) where the driver
// offers dma-buf, else MORI_ENOTSUP with the driver's reason. The
// registration here is never dma-buf, and says why: the copy-engine NIC
// has no ibv_reg_dmabuf_mr; the software ConnectX (gpu_gda_test) forwards
// it to the copy-engine NIC, which refuses it, after the export.
TEST(GpuProxy, GpuMemoryRegistrationSaysDmabufOrWhyNot) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    JoinOwnNode(rank, nullptr);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    int device = -1;
    MORI_ASSERT_OK(mori_platform_current_device(&device));
    const uint64_t bytes = 1 << 20;
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(bytes, nullptr, &p));
    int fd = -1;
    uint64_t offset = 0;
    int rc = mori_platform_dmabuf_export(device, p, bytes, &fd, &offset);
    std::string refused = rc ? mori_last_error() : "";
    if (rc == 0) {
      EXPECT_GE(fd, 0);
      EXPECT_NE(fcntl(fd, F_GETFD), -1) << "the dma-buf fd is open";
      EXPECT_LT(offset, (uint64_t)sysconf(_SC_PAGESIZE)) << "the buffer starts in the fd's first page";
      MORI_EXPECT_OK(mori_platform_dmabuf_close(fd));
    } else {
      EXPECT_EQ(rc, MORI_ENOTSUP) << refused;
      EXPECT_TRUE(refused.rfind("cuda: ", 0) == 0 || refused.rfind("hip: ", 0) == 0) << refused;
    }
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    char how[320];
    MORI_ASSERT_OK(mori_rdma_memory_status(w.comm, how, sizeof(how)));
    std::string h = how;
    EXPECT_EQ(h.rfind("ibv_reg_mr (peer memory): no dma-buf: ", 0), 0u) << h;
    if (!mori_test_gpu_rdma_install) {
      EXPECT_NE(h.find("has no ibv_reg_dmabuf_mr"), std::string::npos) << h;
    } else if (rc == 0) {
      EXPECT_NE(h.find("ibv_reg_dmabuf_mr failed"), std::string::npos) << h;
    } else {
      EXPECT_NE(h.find(refused.substr(0, 6)), std::string::npos) << h << " (the export said: " << refused << ")";
    }
    if (rank == 0)
      printf("rank 0: dma-buf export of %llu bytes of heap memory on device %d: %s; the window's registration: %s\n",
             (unsigned long long)bytes, device, rc ? refused.c_str() : ("an fd, offset " + std::to_string(offset)).c_str(),
             how);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

// The host API over the same executor, on GPU memory: put, atomic add, get.
TEST(GpuProxy, HostApiPutsAddsAndGetsGpuMemory) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    JoinOwnNode(rank, nullptr);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    int peer = rank ^ 1, device = -1;
    MORI_ASSERT_OK(mori_platform_current_device(&device));
    const uint64_t bytes = 1 << 20, counter = bytes, staging = bytes / 2;
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(bytes + 8, nullptr, &p));
    ASSERT_EQ(gpu_zero(p, bytes + 8), 0) << gpu_last_error();
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    std::vector<uint32_t> mine(4096 / 4);
    for (size_t i = 0; i < mine.size(); i++) mine[i] = ProxyWord(rank, 1, 2, i);
    MORI_ASSERT_OK(mori_platform_memcpy(device, (char *)p + staging, mine.data(), 4096));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_ASSERT_OK(mori_rdma_put(win, peer, 0, staging, 4096));
    MORI_ASSERT_OK(mori_rdma_atomic_add(win, peer, counter, 5 + rank));
    MORI_ASSERT_OK(mori_rdma_atomic_add(win, peer, counter, 100));
    MORI_ASSERT_OK(mori_rdma_quiet(w.comm));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    EXPECT_EQ(ReadWord(device, (char *)p + counter), (uint64_t)(105 + peer));
    std::vector<uint32_t> got(4096 / 4);
    MORI_ASSERT_OK(mori_platform_memcpy(device, got.data(), p, 4096));
    size_t wrong = 0;
    for (size_t i = 0; i < got.size(); i++) wrong += got[i] != ProxyWord(peer, 1, 2, i);
    EXPECT_EQ(wrong, 0u) << "words from rank " << peer;
    MORI_ASSERT_OK(mori_rdma_get(win, peer, staging, 0, 4096));  // what this rank put there
    MORI_ASSERT_OK(mori_rdma_quiet(w.comm));
    MORI_ASSERT_OK(mori_platform_memcpy(device, got.data(), (char *)p + staging, 4096));
    wrong = 0;
    for (size_t i = 0; i < got.size(); i++) wrong += got[i] != ProxyWord(rank, 1, 2, i);
    EXPECT_EQ(wrong, 0u);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

TEST(GpuProxy, PutsSignalsAtomicsAndGetsReachThePeerThroughTheRing) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    JoinOwnNode(rank, nullptr);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    int peer = rank ^ 1;
    ASSERT_LT(peer, size) << "an even number of ranks";
    EXPECT_STREQ(mori_team_transport_name(w.comm, peer), "rdma");
    const int blocks = 8, rounds = 64;
    Layout l(256 << 10, blocks);
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(l.bytes, nullptr, &p));
    ASSERT_EQ(gpu_zero(p, l.bytes), 0) << gpu_last_error();
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    mori_window_dev_t view = mori_window_device_view(win);
    ASSERT_NE(view.proxy, nullptr);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    int rc = -1, device = -1;
    MORI_ASSERT_OK(mori_platform_current_device(&device));
    unsigned long long bad = ~0ull;
    // Ping-pong inside one kernel per rank (two ranks may share one GPU:
    // their kernels are time-sliced).
    ASSERT_EQ(gpu_proxy_exchange(view, peer, l.slot, blocks, rounds, 20000000000ull, &rc, &bad), 0) << gpu_last_error();
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(bad, 0u) << "words that differed, over " << rounds << " rounds of " << blocks << " x " << l.slot << " bytes";
    MORI_EXPECT_OK(mori_window_check(win));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // Every signal holds the last round; the counter got one add per block and round.
    for (int b = 0; b < blocks; b++) EXPECT_EQ(ReadWord(device, (char *)p + l.signals + 8 * b), (uint64_t)rounds) << "block " << b;
    EXPECT_EQ(ReadWord(device, (char *)p + l.counter), (uint64_t)blocks * rounds);
    // get: what this rank put last into the peer (block 3, its last slot), read back into block 3's other send slot.
    uint64_t last = (3 * 2 + (uint64_t)((rounds - 1) % 2)) * l.slot, other = (3 * 2 + (uint64_t)(rounds % 2)) * l.slot;
    ASSERT_EQ(gpu_proxy_get(view, peer, other, l.recv + last, l.slot, &rc), 0) << gpu_last_error();
    EXPECT_EQ(rc, 0);
    std::vector<uint32_t> got(l.slot / 4);
    MORI_ASSERT_OK(mori_platform_memcpy(device, got.data(), (char *)p + other, l.slot));
    size_t wrong = 0;
    for (size_t i = 0; i < got.size(); i++) wrong += got[i] != ProxyWord(rank, 3, rounds - 1, i);
    EXPECT_EQ(wrong, 0u);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

// GPU posting only: a warp's batch is one claim and one doorbell
// (mori_gda_put_warp), a warp cut short by the block's size included. The
// software ConnectX reads every WQE as the PRM lays it out, so a WQE in the
// wrong place is a wrong address, key or length: every destination slot
// holds exactly the longest put it got, and nothing after it.
TEST(GpuProxy, WarpBatchesOfGpuPostingLandEveryLanesBytes) {
  if (!mori_test_gpu_rdma_install) GTEST_SKIP() << "GPU posting is gpu_gda_test's";
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    JoinOwnNode(rank, nullptr);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    int peer = rank ^ 1;
    ASSERT_LT(peer, size) << "an even number of ranks";
    // 32 threads: one warp; 48: a second warp of 16 lanes, short by the
    // block's size, posting beside the first on the same queue pairs.
    for (const int lanes : {32, 48}) {
      SCOPED_TRACE(std::to_string(lanes) + " threads");
      const int sets = GPU_GDA_WARP_BATCH_SETS, batches = 400;  // 12 800 WQEs or more: the queue wraps
      const uint64_t slot = 256, recv = lanes * slot, bytes = recv + (uint64_t)sets * lanes * slot;
      void *p = nullptr;
      MORI_ASSERT_OK(mori_mem_alloc(bytes, nullptr, &p));
      ASSERT_EQ(gpu_zero(p, bytes), 0) << gpu_last_error();
      std::vector<uint32_t> src(recv / 4);
      for (size_t i = 0; i < src.size(); i++) src[i] = ProxyWord(rank, 7, 0, i);
      ASSERT_EQ(gpu_copy_in(p, src.data(), recv), 0) << gpu_last_error();
      mori_window_t *win = nullptr;
      MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
      mori_window_dev_t view = mori_window_device_view(win);
      ASSERT_NE(view.gda, nullptr) << "GPU posting was not chosen";
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      int rc = -1, device = -1;
      MORI_ASSERT_OK(mori_platform_current_device(&device));
      ASSERT_EQ(gpu_gda_warp_batches(view, peer, slot, recv, batches, lanes, &rc), 0) << gpu_last_error();
      EXPECT_EQ(rc, 0);
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      std::vector<uint32_t> got((bytes - recv) / 4);
      MORI_ASSERT_OK(mori_platform_memcpy(device, got.data(), (char *)p + recv, bytes - recv));
      size_t wrong = 0;
      for (int set = 0; set < sets; set++)
        for (int lane = 0; lane < lanes; lane++) {
          uint64_t longest = 0;
          for (int b = set; b < batches; b += sets) longest = std::max(longest, gpu_gda_warp_batch_bytes(lane, b));
          const uint32_t *at = got.data() + ((uint64_t)set * lanes + (uint64_t)lane) * slot / 4;
          for (uint64_t i = 0; i < slot / 4; i++) {
            uint32_t want = i * 4 < longest ? ProxyWord(peer, 7, 0, (uint64_t)lane * slot / 4 + i) : 0;
            if (at[i] != want && wrong++ < 8)
              ADD_FAILURE() << "set " << set << " lane " << lane << " word " << i << ": " << at[i] << ", want " << want;
          }
        }
      EXPECT_EQ(wrong, 0u);
      MORI_EXPECT_OK(mori_window_check(win));
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      MORI_EXPECT_OK(mori_window_destroy(win));
      MORI_EXPECT_OK(mori_mem_free(p));
    }
  });
}

TEST(GpuProxy, AFailedRequestReachesTheKernelAndTheRestStillComplete) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    JoinOwnNode(rank, rank == 0 ? "fail@5" : nullptr);  // rank 0's fifth work request fails
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    int peer = rank ^ 1;
    void *p = nullptr;
    const uint64_t bytes = 1 << 20;
    MORI_ASSERT_OK(mori_mem_alloc(bytes, nullptr, &p));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    mori_window_dev_t view = mori_window_device_view(win);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank == 0) {
      int rc = 0;
      // Two launches of 16 puts each: the quiet sees every one done, and
      // the fifth and everything after it failed (its queue pair flushed them).
      ASSERT_GE(gpu_bench_proxy_throughput(view, peer, 4096, 16, 1, 1, &rc), 0) << gpu_last_error();
      EXPECT_EQ(rc, MORI_EUNREACHABLE);
      EXPECT_EQ(view.proxy->done, 32u);
      EXPECT_EQ(view.proxy->failed, 28u);
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(p));
  });
}

TEST(GpuProxy, AStalledPeerTimesOutInsideTheKernelAndTeardownLeavesNothingBehind) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    JoinOwnNode(rank, rank == 0 ? "stall@1" : nullptr);  // nothing rank 0 sends ever completes
    setenv("MORI_RDMA_TIMEOUT_MS", "500", 1);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    int peer = rank ^ 1;
    Layout l(64 << 10, 2);
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(l.bytes, nullptr, &p));
    ASSERT_EQ(gpu_zero(p, l.bytes), 0) << gpu_last_error();
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, p, &win));
    mori_window_dev_t view = mori_window_device_view(win);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    int rc = 0;
    unsigned long long bad = 0;
    // Both sides wait for a signal that never comes (rank 0's never leave,
    // so rank 1 never answers the round either): 300 ms, then a timeout.
    ASSERT_EQ(gpu_proxy_exchange(view, peer, l.slot, 2, 4, 300000000ull, &rc, &bad), 0) << gpu_last_error();
    EXPECT_EQ(rc, MORI_EDEVICE_TIMEOUT);
    EXPECT_EQ(mori_window_check(win), MORI_EDEVICE_TIMEOUT);
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    // Rank 0's stalled requests: the deregistration waits MORI_RDMA_TIMEOUT_MS,
    // moves the queue pair to error (flushing them) and frees nothing under them.
    int destroyed = mori_window_destroy(win);
    if (rank == 1) MORI_EXPECT_OK(destroyed);
    MORI_EXPECT_OK(mori_mem_free(p));
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
  });
}

}  // namespace
