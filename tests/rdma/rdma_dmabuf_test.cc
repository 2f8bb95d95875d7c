// SPDX-License-Identifier: MIT
// How the rdma transport registers memory with the NIC (register.c): GPU
// memory through dma-buf (ibv_reg_dmabuf_mr) where the platform exports
// one and the provider has the call, else ibv_reg_mr (peer memory), with
// the reason; host memory always with ibv_reg_mr. The platform's export is
// replaced by the test's (the host platform has no GPU memory), the
// provider is the fake verbs with or without ibv_reg_dmabuf_mr. Then end
// to end: a window's segment on two simulated nodes, and what
// mori_rdma_memory_status says before and after.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "mori/error.h"
#include "mori/transport_rdma.h"
#include "tests/rdma/fake_verbs.h"
#include "tests/support/world.h"
#include "transport/rdma/internal.h"

using mori_test::World;

namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// A stand-in for the driver's export: a memfd as the dma-buf, 4096 bytes
// of offset (as for memory that starts inside a page), or a refusal.
int exports = 0, last_fd = -1;
int ExportOk(int device, void *ptr, size_t size, int *fd, uint64_t *offset) {
  exports++;
  *fd = last_fd = memfd_create("fake-dmabuf", 0);
  *offset = 4096;
  return *fd >= 0 ? 0 : mori_error_set(MORI_EIO, "memfd_create: %s", strerror(errno));
}
int ExportRefused(int device, void *ptr, size_t size, int *fd, uint64_t *offset) {
  exports++;
  *fd = -1;
  return mori_error_set(MORI_ENOTSUP, "cuda: device %d does not support dma-buf (test)", device);
}
int CloseFd(int fd) { return close(fd) == 0 ? 0 : mori_error_set(MORI_EIO, "close"); }

const struct rdma_dmabuf_ops kGpuOk = {ExportOk, CloseFd, true};
const struct rdma_dmabuf_ops kGpuRefused = {ExportRefused, CloseFd, true};
const struct rdma_dmabuf_ops kHost = {ExportOk, CloseFd, false};

bool FdOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

struct Registration {
  ibv_mr *mr = nullptr;
  std::string how;
};

// A registration on a pd of the fake provider, as the transport does it.
Registration Register(const mori_rdma_provider_t *p, const struct rdma_dmabuf_ops &ops, void *base, size_t len) {
  static ibv_context ctx;
  static ibv_pd pd;
  pd.context = &ctx;
  char how[320];
  Registration r;
  r.mr = rdma_reg_memory(p, &pd, base, len, 3, kAccess, &ops, how, sizeof(how));
  r.how = how;
  return r;
}

TEST(RdmaDmabuf, GpuMemoryGoesThroughDmabufWhenExportedAndTheProviderTakesIt) {
  alignas(4096) static char mem[1 << 16];
  size_t before = fake_verbs::DmabufRegs().size(), plain = fake_verbs::PlainRegs();
  exports = 0;
  Registration r = Register(fake_verbs::Provider(true), kGpuOk, mem + 64, 8192);
  ASSERT_NE(r.mr, nullptr);
  EXPECT_EQ(r.how, "dma-buf (ibv_reg_dmabuf_mr)");
  EXPECT_EQ(exports, 1);
  EXPECT_EQ(fake_verbs::PlainRegs(), plain) << "no ibv_reg_mr when dma-buf worked";
  auto regs = fake_verbs::DmabufRegs();
  ASSERT_EQ(regs.size(), before + 1);
  EXPECT_EQ(regs.back().fd, last_fd);
  EXPECT_TRUE(regs.back().fd_open) << "the fd is open while the NIC takes it";
  EXPECT_EQ(regs.back().offset, 4096u) << "the export's offset, as the driver gave it";
  EXPECT_EQ(regs.back().length, 8192u);
  EXPECT_EQ(regs.back().iova, (uint64_t)(uintptr_t)(mem + 64)) << "work requests name the memory by its address";
  EXPECT_FALSE(FdOpen(last_fd)) << "the fd is closed once the region holds the buffer";
  EXPECT_EQ(fake_verbs::Provider(true)->verbs->ibv_dereg_mr(r.mr), 0);
}

TEST(RdmaDmabuf, ProviderWithoutRegDmabufMrGivesPeerMemoryAndSaysSo) {
  alignas(4096) static char mem[8192];
  exports = 0;
  size_t plain = fake_verbs::PlainRegs();
  Registration r = Register(fake_verbs::Provider(false), kGpuOk, mem, sizeof(mem));
  ASSERT_NE(r.mr, nullptr);
  EXPECT_EQ(r.how, "ibv_reg_mr (peer memory): no dma-buf: the provider (fake verbs) has no ibv_reg_dmabuf_mr");
  EXPECT_EQ(exports, 0) << "nothing exported that nobody could register";
  EXPECT_EQ(fake_verbs::PlainRegs(), plain + 1);
  EXPECT_EQ(fake_verbs::Provider(false)->verbs->ibv_dereg_mr(r.mr), 0);
}

// A provider built before the field existed (a smaller `size`) has none,
// whatever lies past its end.
TEST(RdmaDmabuf, ProviderBuiltBeforeTheFieldReadsAsLackingIt) {
  mori_rdma_provider_t older = *fake_verbs::Provider(true);
  older.size = offsetof(mori_rdma_provider_t, ibv_reg_dmabuf_mr);
  EXPECT_EQ(mori_rdma_provider_reg_dmabuf_mr(&older), nullptr);
  EXPECT_NE(mori_rdma_provider_reg_dmabuf_mr(fake_verbs::Provider(true)), nullptr);
  alignas(4096) static char mem[4096];
  Registration r = Register(&older, kGpuOk, mem, sizeof(mem));
  ASSERT_NE(r.mr, nullptr);
  EXPECT_NE(r.how.find("has no ibv_reg_dmabuf_mr"), std::string::npos) << r.how;
  EXPECT_EQ(older.verbs->ibv_dereg_mr(r.mr), 0);
}

TEST(RdmaDmabuf, PlatformThatCannotExportGivesPeerMemoryWithItsReason) {
  alignas(4096) static char mem[4096];
  size_t before = fake_verbs::DmabufRegs().size(), plain = fake_verbs::PlainRegs();
  Registration r = Register(fake_verbs::Provider(true), kGpuRefused, mem, sizeof(mem));
  ASSERT_NE(r.mr, nullptr);
  EXPECT_EQ(r.how, "ibv_reg_mr (peer memory): no dma-buf: cuda: device 3 does not support dma-buf (test)");
  EXPECT_EQ(fake_verbs::DmabufRegs().size(), before);
  EXPECT_EQ(fake_verbs::PlainRegs(), plain + 1);
  EXPECT_EQ(fake_verbs::Provider(true)->verbs->ibv_dereg_mr(r.mr), 0);
}

TEST(RdmaDmabuf, NicThatRefusesTheDmabufGivesPeerMemoryAndTheFdIsClosed) {
  fake_verbs::InstallWithDmabuf(EOPNOTSUPP);  // every dma-buf registration fails
  alignas(4096) static char mem[4096];
  size_t plain = fake_verbs::PlainRegs();
  Registration r = Register(fake_verbs::Provider(true), kGpuOk, mem, sizeof(mem));
  fake_verbs::InstallWithDmabuf(0);
  fake_verbs::Uninstall();
  ASSERT_NE(r.mr, nullptr);
  EXPECT_EQ(r.how, std::string("ibv_reg_mr (peer memory): no dma-buf: ibv_reg_dmabuf_mr failed: ") + strerror(EOPNOTSUPP));
  EXPECT_EQ(fake_verbs::PlainRegs(), plain + 1);
  EXPECT_FALSE(FdOpen(last_fd)) << "a refused fd is closed too";
  EXPECT_EQ(fake_verbs::Provider(true)->verbs->ibv_dereg_mr(r.mr), 0);
}

TEST(RdmaDmabuf, HostMemoryIsRegisteredPlainlyWithoutAskingForDmabuf) {
  alignas(4096) static char mem[4096];
  exports = 0;
  Registration r = Register(fake_verbs::Provider(true), kHost, mem, sizeof(mem));
  ASSERT_NE(r.mr, nullptr);
  EXPECT_EQ(r.how, "ibv_reg_mr (host memory)");
  EXPECT_EQ(exports, 0);
  EXPECT_EQ(fake_verbs::Provider(true)->verbs->ibv_dereg_mr(r.mr), 0);
}

// The host platform's own: plain host memory, and the export says why not.
TEST(RdmaDmabuf, HostPlatformHasNoDmabuf) {
  EXPECT_FALSE(rdma_dmabuf_ops()->gpu_memory);
  int fd = 7;
  uint64_t offset = 9;
  char mem[64];
  EXPECT_EQ(rdma_dmabuf_ops()->export_fd(0, mem, sizeof(mem), &fd, &offset), MORI_ENOTSUP);
  EXPECT_EQ(fd, -1);
  EXPECT_NE(std::string(mori_last_error()).find("host platform"), std::string::npos) << mori_last_error();
}

// End to end: a window's segment on two nodes, registered as `ops` and the
// provider allow, and what the comm says about it before and after.
void WindowOnTwoNodes(const struct rdma_dmabuf_ops *ops, bool provider_dmabuf, const std::string &plan, const std::string &after) {
  EXPECT_RANKS_PASS(2, [=](int rank, int size) {
    setenv("MORI_HOST_ID", rank == 0 ? "node-a" : "node-b", 1);
    setenv("MORI_SHMEM_MODE", "isolation", 1);
    if (provider_dmabuf) fake_verbs::InstallWithDmabuf();
    else fake_verbs::Install();
    rdma_use_dmabuf_ops(ops);
    World w(0, {&mori_transport_rdma_ops});
    ASSERT_TRUE(w.ok());
    char how[320];
    MORI_ASSERT_OK(mori_rdma_memory_status(w.comm, how, sizeof(how)));
    EXPECT_EQ(std::string(how), plan);
    size_t before = fake_verbs::DmabufRegs().size();
    void *mem = nullptr;
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(1 << 20, nullptr, &mem));
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    MORI_ASSERT_OK(mori_rdma_memory_status(w.comm, how, sizeof(how)));
    EXPECT_EQ(std::string(how), after);
    if (after.rfind("dma-buf", 0) == 0) {
      // One of the new regions (the window's; its synchronisation area has
      // one of its own) holds the window.
      auto regs = fake_verbs::DmabufRegs();
      ASSERT_GT(regs.size(), before);
      uint64_t lo = (uint64_t)(uintptr_t)mem, hi = lo + (1 << 20);
      bool held = false;
      for (size_t i = before; i < regs.size(); i++) held |= regs[i].iova <= lo && regs[i].iova + regs[i].length >= hi;
      EXPECT_TRUE(held) << "no dma-buf region holds the window";
    }
    // Data still moves (the fake moves none, but posts and completes).
    MORI_EXPECT_OK(mori_rdma_put(win, 1 - rank, 0, 0, 64));
    MORI_EXPECT_OK(mori_rdma_quiet(w.comm));
    ASSERT_EQ(mori_bootstrap_barrier(w.bootstrap), 0);
    MORI_EXPECT_OK(mori_window_destroy(win));
    mori_mem_free(mem);
    rdma_use_dmabuf_ops(nullptr);
    fake_verbs::Uninstall();
  });
}

TEST(RdmaDmabufComm, SegmentGoesThroughDmabufAndTheStatusSaysSo) {
  WindowOnTwoNodes(&kGpuOk, true,
                   "dma-buf (ibv_reg_dmabuf_mr) where the platform exports one, else ibv_reg_mr (peer memory); nothing "
                   "registered yet",
                   "dma-buf (ibv_reg_dmabuf_mr)");
}

TEST(RdmaDmabufComm, PlatformRefusalFallsBackToPeerMemoryAndTheStatusSaysWhy) {
  WindowOnTwoNodes(&kGpuRefused, true,
                   "dma-buf (ibv_reg_dmabuf_mr) where the platform exports one, else ibv_reg_mr (peer memory); nothing "
                   "registered yet",
                   "ibv_reg_mr (peer memory): no dma-buf: cuda: device 0 does not support dma-buf (test)");
}

TEST(RdmaDmabufComm, ProviderWithoutItPlansPeerMemory) {
  WindowOnTwoNodes(&kGpuOk, false, "ibv_reg_mr (peer memory): no dma-buf: the provider (fake verbs) has no ibv_reg_dmabuf_mr",
                   "ibv_reg_mr (peer memory): no dma-buf: the provider (fake verbs) has no ibv_reg_dmabuf_mr");
}

TEST(RdmaDmabufComm, HostPlatformRegistersHostMemory) {
  WindowOnTwoNodes(nullptr, true, "ibv_reg_mr (host memory)", "ibv_reg_mr (host memory)");
}

}  // namespace
