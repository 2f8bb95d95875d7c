// SPDX-License-Identifier: MIT
// The choice between GPU-initiated posting and the proxy, per comm, over
// the copy-engine NIC (two ranks declared on two nodes): each missing step
// gives the proxy and names itself (and the rank) in mori_rdma_gda_status,
// the proxy then serves the window (its device view has no gda table);
// MORI_RDMA_GDA=on fails comm creation naming the step; off says so.
#include <errno.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "mori/device.h"
#include "mori/transport_rdma.h"
#include "tests/rdma/rdma_test_support.h"
#include "tests/support/world.h"
#include "transport/rdma/ce_nic/ce_nic.h"
#include "transport/rdma/provider.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

void JoinTwoNodes(int rank, int size) { mori_rdma_test::SetTwoNodeHostIds(rank, size); }

// What the test provider's mlx5dv_init_obj does, set per rank (each rank is
// a process of its own).
enum HookMode { kRefuse, kWideStride, kPlausible };
HookMode g_mode = kRefuse;

// A description in the shape the device layer wants, over plain memory: it
// gets a rank through every local step (nothing is ever posted to it).
void Describe(struct mlx5dv_qp *q, struct mlx5dv_cq *c, uint32_t stride) {
  const uint32_t n = 512;
  q->sq.buf = aligned_alloc(4096, (size_t)n * 64);
  q->sq.wqe_cnt = n;
  q->sq.stride = stride;
  q->dbrec = static_cast<__be32 *>(aligned_alloc(4096, 4096));
  q->bf.reg = aligned_alloc(4096, 4096);
  q->bf.size = 256;
  c->buf = aligned_alloc(4096, (size_t)n * 64);
  c->cqe_cnt = n;
  c->cqe_size = 64;
  c->dbrec = static_cast<__be32 *>(aligned_alloc(4096, 4096));
}

// The QPs the hook described: GPU posting's own (the transport's QPs are
// never described).
std::set<struct ibv_qp *> g_described;

int TestInitObj(struct mlx5dv_obj *obj, uint64_t type) {
  if (g_mode == kRefuse) return EOPNOTSUPP;
  if (!(type & MLX5DV_OBJ_QP) || !(type & MLX5DV_OBJ_CQ)) return EINVAL;
  Describe(obj->qp.out, obj->cq.out, g_mode == kWideStride ? 128 : 64);
  g_described.insert(obj->qp.in);
  return 0;
}

// Connecting GPU posting's QPs fails on this rank when set: the step each
// rank takes alone, after the outcomes were exchanged.
bool g_fail_gda_connect = false;

int ModifyQpFailingGdaConnect(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
  if (g_fail_gda_connect && g_described.count(qp) && (mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR)
    return EIO;
  return (mori_ce_nic_provider()->verbs->ibv_modify_qp)(qp, attr, mask);
}

mori_rdma_provider_t g_with_hook;
struct mori_verbs g_verbs_with_fault;

// The copy-engine NIC, with or without the hook.
void UseProvider(bool hook) {
  if (!hook) {
    ASSERT_EQ(mori_ce_nic_install(), 0);
    return;
  }
  g_with_hook = *mori_ce_nic_provider();
  g_with_hook.size = sizeof(g_with_hook);
  g_with_hook.name = "copy-engine NIC with a test mlx5dv_init_obj";
  g_with_hook.mlx5dv_init_obj = TestInitObj;
  g_verbs_with_fault = *g_with_hook.verbs;
  g_verbs_with_fault.ibv_modify_qp = ModifyQpFailingGdaConnect;
  g_with_hook.verbs = &g_verbs_with_fault;
  ASSERT_EQ(mori_rdma_use_provider(&g_with_hook), 0);
}

// The comm's choice, checked the same on every rank, and the proxy still
// serving a window when GPU posting was not chosen.
void ExpectProxyBecause(const World &w, int rank, int size, const std::string &reason) {
  int enabled = -1;
  char why[256];
  ASSERT_EQ(mori_rdma_gda_status(w.comm, &enabled, why, sizeof(why)), 0) << mori_last_error();
  EXPECT_EQ(enabled, 0) << why;
  EXPECT_NE(std::string(why).find(reason), std::string::npos) << "rank " << rank << " says: " << why;
  void *mem = nullptr;
  mori_window_t *win = nullptr;
  ASSERT_EQ(mori_mem_alloc(4096, nullptr, &mem), 0);
  ASSERT_EQ(mori_window_create(w.comm, mem, &win), 0) << mori_last_error();
  mori_window_dev_t view = mori_window_device_view(win);
  EXPECT_EQ(view.gda, nullptr) << "no GPU-posting table when the proxy was chosen";
  EXPECT_NE(view.proxy, nullptr);
  int other = (rank + size / 2) % size;
  memset(mem, rank + 1, 64);
  EXPECT_EQ(mori_rdma_put(win, other, 1024 + 64 * (size_t)rank, 0, 64), 0) << mori_last_error();
  EXPECT_EQ(mori_rdma_quiet(w.comm), 0) << mori_last_error();
  EXPECT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
  for (int r = 0; r < size; r++)
    if ((r + size / 2) % size == rank) {  // the rank whose `other` is this one
      EXPECT_EQ(((unsigned char *)mem)[1024 + 64 * r], r + 1) << "from rank " << r;
    }
  EXPECT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
  EXPECT_EQ(mori_window_destroy(win), 0);
  EXPECT_EQ(mori_mem_free(mem), 0);
}

TEST(GdaChoice, ProviderWithoutTheHookGivesTheProxy) {
  int size = TestRanks();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinTwoNodes(rank, size);
    UseProvider(false);
    unsetenv("MORI_RDMA_GDA");
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    ExpectProxyBecause(w, rank, size, "cannot describe its queues (no mlx5dv_init_obj)");
  });
}

TEST(GdaChoice, OffGivesTheProxyAndSaysSo) {
  int size = TestRanks();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinTwoNodes(rank, size);
    UseProvider(true);
    g_mode = kPlausible;
    setenv("MORI_RDMA_GDA", "off", 1);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    ExpectProxyBecause(w, rank, size, "MORI_RDMA_GDA=off");
  });
}

TEST(GdaChoice, ARefusingInitObjGivesTheProxy) {
  int size = TestRanks();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinTwoNodes(rank, size);
    UseProvider(true);
    g_mode = kRefuse;
    unsetenv("MORI_RDMA_GDA");
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    ExpectProxyBecause(w, rank, size, "mlx5dv_init_obj failed: Operation not supported");
  });
}

TEST(GdaChoice, QueuesOfTheWrongShapeGiveTheProxy) {
  int size = TestRanks();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinTwoNodes(rank, size);
    UseProvider(true);
    g_mode = kWideStride;
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    ExpectProxyBecause(w, rank, size, "send-queue stride is not 64 bytes");
  });
}

// Both ends of a QP post from the GPU or neither: one rank that cannot
// gives every rank the proxy, and the others name it.
TEST(GdaChoice, OneRankMissingAStepGivesEveryRankTheProxy) {
  int size = TestRanks();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinTwoNodes(rank, size);
    UseProvider(true);
    g_mode = rank == size - 1 ? kRefuse : kPlausible;
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    std::string reason = rank == size - 1 ? "mlx5dv_init_obj failed" : "rank " + std::to_string(size - 1) + ": ";
    ExpectProxyBecause(w, rank, size, reason);
  });
}

// Every rank passed the local steps, and one then fails to connect its
// GPU-posting QPs (each rank connects its own ends after the exchange):
// every rank takes the proxy, naming that rank, instead of the others
// posting from the GPU to a rank that took the proxy alone.
TEST(GdaChoice, OneRankFailingToConnectGivesEveryRankTheProxy) {
  int size = TestRanks();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinTwoNodes(rank, size);
    UseProvider(true);
    g_mode = kPlausible;
    g_fail_gda_connect = rank == size - 1;
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    ExpectProxyBecause(w, rank, size, "rank " + std::to_string(size - 1) + ": rdma gda: GPU-posting queue pair");
  });
}

// No rank has an RDMA device (the list excludes the only one): with GPU
// posting demanded, comm creation fails on every rank saying so (it
// succeeded with the proxy's "no usable device").
TEST(GdaChoice, OnWithoutAnyDeviceFailsCommCreation) {
  int size = TestRanks();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinTwoNodes(rank, size);
    UseProvider(false);
    setenv("MORI_RDMA_GDA", "on", 1);
    setenv("MORI_RDMA_DEVICES", "^mori_ce0", 1);
    mori_bootstrap_t *b = mori_test::Bootstrap(0);
    ASSERT_NE(b, nullptr);
    mori_comm_t *comm = nullptr;
    EXPECT_EQ(mori_rdma_test::CreateRdmaComm(b, &comm), MORI_ENOTSUP);
    std::string err = mori_last_error();
    EXPECT_NE(err.find("MORI_RDMA_GDA=on, but GPU posting needs an RDMA device on every rank"), std::string::npos) << err;
    EXPECT_NE(err.find("no usable device on rank(s)"), std::string::npos) << err;
    if (comm) mori_comm_destroy(comm);
    mori_bootstrap_destroy(b);
    unsetenv("MORI_RDMA_GDA");
    unsetenv("MORI_RDMA_DEVICES");
  });
}

TEST(GdaChoice, OnFailsCommCreationNamingTheStep) {
  int size = TestRanks();
  EXPECT_RANKS_PASS(size, [](int rank, int size) {
    JoinTwoNodes(rank, size);
    UseProvider(false);
    setenv("MORI_RDMA_GDA", "on", 1);
    mori_bootstrap_t *b = mori_test::Bootstrap(0);
    ASSERT_NE(b, nullptr);
    mori_comm_t *comm = nullptr;
    int rc = mori_rdma_test::CreateRdmaComm(b, &comm);
    EXPECT_NE(rc, 0);
    std::string err = mori_last_error();
    EXPECT_NE(err.find("MORI_RDMA_GDA=on"), std::string::npos) << err;
    EXPECT_NE(err.find("no mlx5dv_init_obj"), std::string::npos) << err;
    EXPECT_NE(err.find("rank " + std::to_string(rank)), std::string::npos) << err;
    if (comm) mori_comm_destroy(comm);
    mori_bootstrap_destroy(b);
    unsetenv("MORI_RDMA_GDA");
  });
}

}  // namespace
