// SPDX-License-Identifier: MIT
// Microbenchmark (not a test): the message rate of GPU-initiated posting on
// the host platform, beside the proxy's, in the same run. Two CPU ranks
// declared on two nodes (MORI_HOST_ID), the software ConnectX reading the
// WQEs rank 0 writes and executing them on the inner provider: libibverbs
// when an RDMA device is present (Soft-RoCE in tools/rdma_vm_test.sh's
// guest), else the copy-engine NIC (MORI_BENCH_PROVIDER=verbs|copy_engine
// forces one).
// The two paths share one comm and one window: its device view posts from
// the calling thread (GPU posting), a copy of it without GPU posting's table
// hands every put to the proxy thread.
//
// Per round and put size, rank 0 puts MORI_BENCH_OPS messages (default
// 2000) to rank 1 on each path, then quiets; the rate is messages over the
// time from the first put to the quiet's return. The paths alternate which
// goes first from round to round; round 0 is a warm-up. One line per path
// and size: "RESULT {json}" with the median, the range and every round.
//   bazel run //tests/gda:bench_gda_msgrate
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mori/device.h"
#include "mori/transport_rdma.h"
#include "tests/support/world.h"
#include "transport/rdma/ce_nic/ce_nic.h"
#include "transport/rdma/swcx/swcx.h"

namespace {

constexpr uint64_t kSecond = 1000ull * 1000 * 1000;

// The first RDMA device's name, or "" when there is none.
std::string FirstRdmaDevice() {
  DIR *d = opendir("/sys/class/infiniband");
  if (!d) return "";
  std::string name;
  while (struct dirent *e = readdir(d))
    if (e->d_name[0] != '.') {
      name = e->d_name;
      break;
    }
  closedir(d);
  return name;
}

int EnvInt(const char *name, int fallback) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : fallback;
}

struct Series {
  const char *path;
  uint64_t bytes;
  std::vector<double> rates;
};

// Puts `ops` messages of `bytes` to `peer` through `view`, then quiets;
// messages per second, or a negative device error code.
double Rate(mori_window_dev_t view, int peer, uint8_t *src, uint64_t dst_base, uint64_t bytes, int ops) {
  auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < ops; k++) {
    int rc = mori_put_thread(view, peer, dst_base + (uint64_t)(k % 64) * bytes, src + (k % 64), bytes);
    if (rc) return rc < 0 ? rc : -rc;
  }
  int rc = mori_quiet_window(view, 60 * kSecond);
  if (rc) return rc < 0 ? rc : -rc;
  return ops / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main() {
  const int rounds = EnvInt("MORI_BENCH_ROUNDS", 5), ops = EnvInt("MORI_BENCH_OPS", 2000);
  std::string inner = getenv("MORI_BENCH_PROVIDER") ? getenv("MORI_BENCH_PROVIDER") : "";
  std::string device = FirstRdmaDevice();
  if (inner.empty()) inner = device.empty() ? "copy_engine" : "verbs";
  if (inner != "verbs" && inner != "copy_engine") {
    fprintf(stderr, "bench_gda_msgrate: MORI_BENCH_PROVIDER=%s: want verbs or copy_engine\n", inner.c_str());
    return 2;
  }
  const std::string provider =
      inner == "verbs" ? "swcx over libibverbs (" + (device.empty() ? std::string("no device") : device) + ")"
                       : "swcx over copy_engine";
  int failures = 0;
  std::string msg = mori_test::RunRanks(
      2,
      [&](int rank, int size) {
        setenv("MORI_HOST_ID", rank == 0 ? "node-a" : "node-b", 1);
        setenv("MORI_RDMA_GDA", "on", 1);
        setenv("MORI_SHMEM_MODE", "isolation", 1);
        if (mori_swcx_install(inner == "verbs" ? nullptr : mori_ce_nic_provider()) != 0) {
          ADD_FAILURE() << "mori_swcx_install: " << mori_last_error();
          return;
        }
        mori_test::World w(0, {&mori_transport_rdma_ops});
        ASSERT_TRUE(w.ok());
        int enabled = 0;
        char why[256];
        ASSERT_EQ(mori_rdma_gda_status(w.comm, &enabled, why, sizeof(why)), 0) << mori_last_error();
        ASSERT_EQ(enabled, 1) << "GPU posting was not chosen: " << why;
        const uint64_t kWindow = 1 << 20, kDst = 1 << 19;
        void *mem = nullptr;
        mori_window_t *win = nullptr;
        ASSERT_EQ(mori_mem_alloc(kWindow, nullptr, &mem), 0) << mori_last_error();
        memset(mem, 0, kWindow);
        ASSERT_EQ(mori_window_create(w.comm, mem, &win), 0) << mori_last_error();
        mori_window_dev_t gda = mori_window_device_view(win);
        ASSERT_NE(gda.gda, nullptr);
        mori_window_dev_t proxy = gda;
        proxy.gda = nullptr;  // the device API then hands every put to the proxy
        uint8_t *src = static_cast<uint8_t *>(mem);
        for (uint64_t i = 0; i < kDst; i++) src[i] = (uint8_t)(i * 7 + 1);
        std::vector<Series> series;
        for (uint64_t bytes : {8ull, 4096ull})
          for (const char *path : {"gda", "proxy"}) series.push_back({path, bytes, {}});
        for (int round = 0; round <= rounds; round++) {
          for (uint64_t bytes : {8ull, 4096ull})
            for (int turn = 0; turn < 2; turn++) {
              bool gda_turn = (turn == 0) == (round % 2 == 0);
              ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
              if (rank != 0) continue;
              double rate = Rate(gda_turn ? gda : proxy, 1, src, kDst, bytes, ops);
              ASSERT_GT(rate, 0) << (gda_turn ? "GPU posting" : "the proxy") << ", " << bytes
                                 << " bytes, round " << round << ": device error " << rate;
              if (round == 0) continue;  // warm-up
              for (Series &s : series)
                if (s.bytes == bytes && !strcmp(s.path, gda_turn ? "gda" : "proxy")) s.rates.push_back(rate);
            }
        }
        ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
        // What rank 0 put last, at 4096 bytes: message k landed at slot k % 64.
        if (rank == 1) {
          for (int k = ops - 64; k < ops; k++)
            ASSERT_EQ(memcmp(src + kDst + (uint64_t)(k % 64) * 4096, src + (k % 64), 4096), 0) << "message " << k;
        }
        if (rank == 0) {
          for (Series &s : series) {
            std::vector<double> v = s.rates;
            std::sort(v.begin(), v.end());
            std::string all;
            for (double r : s.rates) all += (all.empty() ? "" : ", ") + std::to_string((long long)r);
            printf("RESULT {\"bench\": \"gda_msgrate\", \"path\": \"%s\", \"bytes\": %llu, \"ops\": %d, \"rounds\": %d, "
                   "\"msgs_per_s\": %.0f, \"msgs_per_s_min\": %.0f, \"msgs_per_s_max\": %.0f, \"per_round\": [%s], "
                   "\"ranks\": %d, \"platform\": \"host\", \"provider\": \"%s\"}\n",
                   s.path, (unsigned long long)s.bytes, ops, rounds, v[v.size() / 2], v.front(), v.back(), all.c_str(),
                   size, provider.c_str());
          }
          fflush(stdout);
        }
        ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
        EXPECT_EQ(mori_window_destroy(win), 0) << mori_last_error();
        mori_mem_free(mem);
      },
      600000);
  if (!msg.empty()) {
    fprintf(stderr, "bench_gda_msgrate: %s\n", msg.c_str());
    failures++;
  }
  return failures ? 1 : 0;
}
