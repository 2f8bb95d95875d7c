// SPDX-License-Identifier: MIT
// Plug-in composition on the host platform, across separate processes.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "mori/team.h"
#include "mori/transport_rdma.h"
#include "mori/transport_sdma.h"
#include "tests/support/world.h"

using mori_test::TestRanks;

namespace {

const mori_handle_ops_t *const kHandles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops};

int CreateComm(mori_bootstrap_t *b, const std::vector<const mori_transport_ops_t *> &transports, mori_comm_t **out,
               uint32_t optional = 0) {
  mori_comm_attr_t attr;
  mori_comm_attr_init(&attr);
  attr.bootstrap = b;
  attr.handles = kHandles;
  attr.num_handles = 2;
  attr.transports = transports.data();
  attr.num_transports = (int)transports.size();
  attr.optional_transports = optional;
  return mori_comm_create(&attr, out);
}

// A stand-in NIC: RDMA and atomics to every other rank (host-posted ops are
// not used here; only the choice of transport is).
int FakeRdmaCaps(void *, mori_comm_t *comm, int peer, uint32_t *caps) {
  *caps = peer == mori_comm_rank(comm) ? 0 : MORI_CAP_RDMA | MORI_CAP_REMOTE_ATOMICS;
  return 0;
}
const mori_transport_ops_t kFakeRdma = {
    .size = sizeof(mori_transport_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "fake_nic",
    .peer_caps = FakeRdmaCaps,
};

// What a comm decided, as text that two comms can be compared by.
std::string Decisions(mori_comm_t *c) {
  std::string s;
  mori_team_t lsa, node;
  if (mori_team_get(c, MORI_TEAM_LSA, &lsa) == 0)
    s += "lsa " + std::to_string(lsa.start) + "+" + std::to_string(lsa.size) + ";";
  if (mori_team_get(c, MORI_TEAM_NODE, &node) == 0)
    s += "node " + std::to_string(node.start) + "+" + std::to_string(node.size) + ";";
  for (int p = 0; p < mori_comm_size(c); p++) {
    const mori_transport_ops_t *reach = mori_comm_transport_for(c, p), *copy = mori_comm_copy_engine_for(c, p);
    s += std::to_string(p) + ":" + (reach ? reach->name : "none") + "/" + (copy ? copy->name : "none") + "/" +
         std::to_string(mori_comm_peer_caps(c, p)) + ";";
  }
  return s;
}

TEST(Composition, EveryOrderOfTransportsGivesTheSameTeamsAndRoutes) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    // Two simulated nodes: inside a node p2p and sdma, across only the NIC.
    int per_node = size / 2;
    setenv("MORI_HOST_ID", rank < per_node ? "node-0" : "node-1", 1);
    mori_bootstrap_t *b = mori_test::Bootstrap();
    ASSERT_NE(b, nullptr);
    std::vector<const mori_transport_ops_t *> order = {&mori_transport_p2p_ops, &mori_transport_rdma_ops,
                                                       &mori_transport_sdma_ops, &kFakeRdma};
    std::sort(order.begin(), order.end());
    std::string first;
    int orders = 0;
    do {
      mori_comm_t *c = nullptr;
      MORI_ASSERT_OK(CreateComm(b, order, &c));
      std::string d = Decisions(c);
      if (first.empty()) first = d;
      EXPECT_EQ(d, first) << "order " << order[0]->name << "," << order[1]->name << "," << order[2]->name << ","
                          << order[3]->name;
      for (int p = 0; p < size; p++) {
        bool same_node = p / per_node == rank / per_node;
        const mori_transport_ops_t *reach = mori_comm_transport_for(c, p);
        ASSERT_NE(reach, nullptr) << "peer " << p;
        EXPECT_STREQ(reach->name, same_node ? "p2p" : "fake_nic") << "peer " << p;
        const mori_transport_ops_t *copy = mori_comm_copy_engine_for(c, p);
        EXPECT_STREQ(copy ? copy->name : "none", same_node ? "sdma" : "none") << "peer " << p;
        uint32_t caps = mori_comm_peer_caps(c, p);
        EXPECT_EQ((caps & MORI_CAP_LOAD_STORE) != 0, same_node) << "peer " << p;
      }
      MORI_EXPECT_OK(mori_comm_destroy(c));
      orders++;
    } while (std::next_permutation(order.begin(), order.end()));
    EXPECT_EQ(orders, 24);
    mori_bootstrap_destroy(b);
  });
}

// A NIC that counts its inits (one process per rank: per rank).
int optional_inits = 0;
int CountedInit(mori_comm_t *, void **state) {
  optional_inits++;
  *state = nullptr;
  return 0;
}
const mori_transport_ops_t kCountedNic = {
    .size = sizeof(mori_transport_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "counted_nic",
    .init = CountedInit,
    .peer_caps = FakeRdmaCaps,
};

TEST(Composition, AnOptionalTransportIsInitialisedOnlyWhenAPeerNeedsItInOneCreation) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_bootstrap_t *b = mori_test::Bootstrap();
    ASSERT_NE(b, nullptr);
    const mori_transport_ops_t *const listed[] = {&kCountedNic, &mori_transport_p2p_ops};  // the NIC first: order is no cue
    mori_comm_attr_t attr;
    mori_comm_attr_init(&attr);
    attr.bootstrap = b;
    attr.handles = kHandles;
    attr.num_handles = 2;
    attr.transports = listed;
    attr.num_transports = 2;
    attr.optional_transports = 1u << 0;
    // One node: p2p reaches everyone, the NIC is never opened.
    setenv("MORI_HOST_ID", "one-node", 1);
    mori_comm_t *c = nullptr;
    MORI_ASSERT_OK(mori_comm_create(&attr, &c));
    EXPECT_EQ(optional_inits, 0);
    EXPECT_EQ(mori_comm_transport_state(c, &kCountedNic), nullptr);
    for (int p = 0; p < size; p++) EXPECT_STREQ(mori_comm_transport_for(c, p)->name, "p2p") << "peer " << p;
    MORI_EXPECT_OK(mori_comm_destroy(c));
    // Two simulated nodes: every rank has peers p2p does not reach, so every
    // rank opens the NIC once, in the same creation.
    int per_node = size / 2;
    setenv("MORI_HOST_ID", rank < per_node ? "node-0" : "node-1", 1);
    MORI_ASSERT_OK(mori_comm_create(&attr, &c));
    EXPECT_EQ(optional_inits, 1);
    for (int p = 0; p < size; p++) {
      bool same_node = (p < per_node) == (rank < per_node);
      const mori_transport_ops_t *reach = mori_comm_transport_for(c, p);
      ASSERT_NE(reach, nullptr) << "peer " << p;
      EXPECT_STREQ(reach->name, same_node ? "p2p" : "counted_nic") << "peer " << p;
    }
    MORI_EXPECT_OK(mori_comm_destroy(c));
    // A bit beyond the list is refused.
    attr.optional_transports = 1u << 2;
    EXPECT_EQ(mori_comm_create(&attr, &c), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("optional_transports 0x4 names transports beyond the 2 listed"),
              std::string::npos)
        << mori_last_error();
    unsetenv("MORI_HOST_ID");
    mori_bootstrap_destroy(b);
  });
}

TEST(Composition, CopyEnginesWithoutLoadStoreFailNamingTheCapability) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_bootstrap_t *b = mori_test::Bootstrap();
    ASSERT_NE(b, nullptr);
    mori_comm_t *c = nullptr;
    EXPECT_EQ(CreateComm(b, {&mori_transport_sdma_ops}, &c), MORI_EINVAL);
    std::string msg = mori_last_error();
    EXPECT_NE(msg.find("transport sdma on rank " + std::to_string(rank) + " needs load/store for rank "), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("and no other listed transport provides it (list p2p for load/store)"), std::string::npos) << msg;
    EXPECT_EQ(c, nullptr);
    // With p2p listed (after it, even) it works.
    MORI_EXPECT_OK(CreateComm(b, {&mori_transport_sdma_ops, &mori_transport_p2p_ops}, &c));
    MORI_EXPECT_OK(mori_comm_destroy(c));
    // p2p optional: sdma's requirement is what makes it initialise (it
    // was refused, telling the caller to list the p2p it had listed).
    MORI_EXPECT_OK(CreateComm(b, {&mori_transport_sdma_ops, &mori_transport_p2p_ops}, &c, 1u << 1));
    if (c) {
      EXPECT_STREQ(mori_comm_transport_for(c, (rank + 1) % size)->name, "p2p");
      EXPECT_EQ(mori_comm_copy_engine_for(c, (rank + 1) % size), &mori_transport_sdma_ops);
      MORI_EXPECT_OK(mori_comm_destroy(c));
    }

    mori_bootstrap_destroy(b);
  });
}

// A transport built against an older, smaller ops struct: it ends after
// segment_register (no deregister, device_info or fini).
struct OlderTransportOps {
  uint32_t size;
  uint32_t abi_version;
  const char *name;
  uint32_t requires;
  int (*init)(mori_comm_t *comm, void **state);
  int (*peer_caps)(void *state, mori_comm_t *comm, int peer, uint32_t *caps);
  int (*segment_register)(void *state, mori_segment_t *seg, void **seg_state);
};
static_assert(sizeof(OlderTransportOps) < sizeof(mori_transport_ops_t), "the older struct is a prefix");

int g_registered = 0;
int g_initialised = 0;
int OlderInit(mori_comm_t *, void **state) {
  g_initialised++;
  *state = &g_registered;
  return 0;
}
int OlderCaps(void *, mori_comm_t *, int, uint32_t *caps) {
  *caps = 0; /* reaches nobody; only watches segments */
  return 0;
}
int OlderRegister(void *state, mori_segment_t *seg, void **seg_state) {
  ++*static_cast<int *>(state);
  *seg_state = seg;
  return 0;
}
const OlderTransportOps kOlder = {sizeof(OlderTransportOps), 1, "older", 0, OlderInit, OlderCaps, OlderRegister};

TEST(Composition, AnOlderSmallerOpsStructLoadsWithDefaults) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_bootstrap_t *b = mori_test::Bootstrap();
    ASSERT_NE(b, nullptr);
    mori_comm_t *c = nullptr;
    const auto *older = reinterpret_cast<const mori_transport_ops_t *>(&kOlder);
    MORI_ASSERT_OK(CreateComm(b, {older, &mori_transport_p2p_ops}, &c));
    EXPECT_EQ(g_initialised, 1);
    void *p = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &p));
    mori_window_t *w = nullptr;
    int registered_before = g_registered;
    MORI_ASSERT_OK(mori_window_create(c, p, &w));
    EXPECT_GE(g_registered, registered_before + 1) << "segment_register of the older struct was called";
    // The device view asks every transport for device info: the default answers.
    mori_window_dev_t view = mori_window_device_view(w);
    EXPECT_EQ(view.world_size, size);
    // Destroy calls deregister, and comm destroy fini: both defaults.
    MORI_EXPECT_OK(mori_window_destroy(w));
    MORI_EXPECT_OK(mori_mem_free(p));
    MORI_EXPECT_OK(mori_comm_destroy(c));
    mori_bootstrap_destroy(b);
  });
}

TEST(Composition, BadOpsStructsAreRefusedByName) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    mori_bootstrap_t *b = mori_test::Bootstrap();
    ASSERT_NE(b, nullptr);
    mori_comm_t *c = nullptr;
    mori_transport_ops_t no_caps = {};
    no_caps.size = sizeof(no_caps);
    no_caps.abi_version = MORI_PLUGIN_ABI_VERSION;
    no_caps.name = "capless";
    EXPECT_EQ(CreateComm(b, {&mori_transport_p2p_ops, &no_caps}, &c), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("transport 'capless' lacks the mandatory op peer_caps"),
              std::string::npos)
        << mori_last_error();
    mori_transport_ops_t future = mori_transport_p2p_ops;
    future.abi_version = MORI_PLUGIN_ABI_VERSION + 1;
    EXPECT_EQ(CreateComm(b, {&future}, &c), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("ABI version"), std::string::npos) << mori_last_error();
    mori_transport_ops_t tiny = mori_transport_p2p_ops;
    tiny.size = 8;
    EXPECT_EQ(CreateComm(b, {&tiny}, &c), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("smaller than the mandatory part"), std::string::npos)
        << mori_last_error();
    EXPECT_EQ(CreateComm(b, {&mori_transport_p2p_ops, &mori_transport_p2p_ops}, &c), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("listed twice"), std::string::npos) << mori_last_error();
    mori_bootstrap_destroy(b);
  });
}

}  // namespace
