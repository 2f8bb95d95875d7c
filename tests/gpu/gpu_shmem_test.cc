// SPDX-License-Identifier: MIT
// MORI Shmem on real GPUs (one process per GPU, the unique ID through a
// file): the device API of mori/device/shmem.h in a kernel, device-side
// translation against the host's, shmem_module_init into a module loaded at
// run time, and the init thread's CPU placement. Tagged gpu + manual: run
// by tools/gpu.sh on the device.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "mori/shmem.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/gpu/shmem_kernels.h"
#include "tests/shmem/pe.h"

using mori_shmem_test::InitPe;

namespace {

int Ranks() {
  const char *s = getenv("MORI_TEST_RANKS");
  return s ? atoi(s) : 2;
}

// Each PE on its own GPU; the heap small enough for any device.
void StartPe(int rank, int size, const std::string &tag) {
  ASSERT_GE(gpu_select_device(rank), 0) << gpu_last_error();
  setenv("MORI_SHMEM_MODE", "vmm", 1);
  setenv("MORI_SHMEM_VMM_CHUNK_SIZE", "64M", 1);
  setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "30000", 1);
  MORI_ASSERT_OK(InitPe(rank, size, tag));
}

TEST(GpuShmem, KernelPutsSignalsAndMeetsEveryPeAtTheDeviceBarrier) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    StartPe(rank, size, "gpu_ring");
    mori_shmem_device_state_t st;
    MORI_ASSERT_OK(mori_shmem_device_state(&st));
    const uint64_t words = 4096;
    uint64_t *data = nullptr, *sig = nullptr;
    MORI_ASSERT_OK(shmem_malloc(words * 8 * size, (void **)&data));
    MORI_ASSERT_OK(shmem_malloc(64, (void **)&sig));
    ASSERT_EQ(gpu_shmem_zero(sig, 64), 0) << gpu_shmem_last_error();
    MORI_ASSERT_OK(shmem_barrier_all());
    int prev = (rank + size - 1) % size;
    for (uint64_t round = 1; round <= 3; round++) {
      int device_rc = -1;
      ASSERT_EQ(gpu_shmem_ring(st, data, words, sig, round, 5ull * 1000 * 1000 * 1000, &device_rc), 0)
          << gpu_shmem_last_error();
      EXPECT_EQ(device_rc, 0) << "round " << round;
      std::vector<uint64_t> row(words);
      ASSERT_EQ(gpu_shmem_copy_to_host(row.data(), data + prev * words, words * 8), 0) << gpu_shmem_last_error();
      for (uint64_t i = 0; i < words; i++)
        ASSERT_EQ(row[i], gpu_shmem_pattern(prev, rank, i, round)) << "round " << round << " word " << i;
      // The previous PE's next round writes into this row: not before it
      // has been read here.
      MORI_ASSERT_OK(shmem_barrier_all());
    }
    MORI_EXPECT_OK(mori_shmem_check());
    MORI_EXPECT_OK(shmem_barrier_all());
    MORI_EXPECT_OK(shmem_free(sig));
    MORI_EXPECT_OK(shmem_free(data));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(GpuShmem, DeviceTranslationMatchesTheHosts) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    StartPe(rank, size, "gpu_ptr");
    mori_shmem_device_state_t st;
    MORI_ASSERT_OK(mori_shmem_device_state(&st));
    void *p = nullptr;
    MORI_ASSERT_OK(shmem_malloc(1 << 20, &p));
    for (int pe = 0; pe < size; pe++) {
      void *dev = (void *)1;
      ASSERT_EQ(gpu_shmem_ptr_p2p(st, (char *)p + 100, pe, &dev), 0) << gpu_shmem_last_error();
      EXPECT_EQ(dev, shmem_ptr_p2p((char *)p + 100, rank, pe)) << "PE " << pe;
      EXPECT_NE(dev, nullptr) << "PE " << pe << " (one node: every PE is load/store reachable)";
    }
    MORI_EXPECT_OK(shmem_barrier_all());
    MORI_EXPECT_OK(shmem_free(p));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

// The Shmem Guide's own example registers a tensor of torch's caching
// allocator: memory of the runtime's plain allocator (cudaMalloc), which has
// no VMM handle. It is adopted through the runtime's IPC handles: every PE
// reaches every other PE's buffer through shmem_ptr_p2p, whatever offset of
// whatever allocation size it sits at, until it is deregistered.
TEST(GpuShmem, BufferRegisterTakesMemoryOfTheRuntimesAllocator) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    StartPe(rank, size, "gpu_register");
    const uint64_t bytes = 1024 * 7168 * 2;  // the guide's bf16 [1024, 7168] tensor
    const uint64_t block = bytes + ((uint64_t)rank + 1) * (1 << 20);
    char *raw = (char *)gpu_alloc(block);
    ASSERT_NE(raw, nullptr) << gpu_last_error();
    char *buf = raw + 512 * (uint64_t)rank;
    std::vector<unsigned char> mine(bytes, (unsigned char)(0x40 + rank));
    ASSERT_EQ(gpu_copy_in(buf, mine.data(), bytes), 0) << gpu_last_error();
    MORI_ASSERT_OK(shmem_buffer_register(buf, bytes));
    MORI_ASSERT_OK(shmem_barrier_all());
    std::vector<unsigned char> seen(bytes);
    for (int pe = 0; pe < size; pe++) {
      void *peer = shmem_ptr_p2p(buf + 100, rank, pe);
      ASSERT_NE(peer, nullptr) << "PE " << pe << ": " << mori_last_error();
      if (pe == rank) {
        EXPECT_EQ(peer, buf + 100);
      }
      ASSERT_EQ(gpu_copy_out(seen.data(), (char *)peer - 100, bytes), 0) << gpu_last_error();
      for (uint64_t i = 0; i < bytes; i += 4093)
        ASSERT_EQ(seen[i], (unsigned char)(0x40 + pe)) << "PE " << pe << " byte " << i;
    }
    MORI_ASSERT_OK(shmem_barrier_all());
    MORI_EXPECT_OK(shmem_buffer_deregister(buf, bytes));
    EXPECT_EQ(shmem_ptr_p2p(buf, rank, (rank + 1) % size), nullptr) << "deregistered";
    MORI_EXPECT_OK(shmem_barrier_all());
    gpu_free(raw);
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(GpuShmem, ModuleInitFillsGlobalGpuStatesOfALoadedModule) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    StartPe(rank, size, "gpu_module");
    void *module = nullptr;
    int rc = gpu_shmem_module_load(&module);
    if (rc == MORI_ENOTSUP) {
      printf("PE %d: module init not tested here: %s\n", rank, gpu_shmem_last_error());
      MORI_EXPECT_OK(shmem_finalize());
      return;
    }
    ASSERT_EQ(rc, 0) << gpu_shmem_last_error();
    MORI_ASSERT_OK(shmem_module_init(module));
    int mype = -1, npes = -1;
    uint64_t heap_base = 0;
    ASSERT_EQ(gpu_shmem_module_read(module, &mype, &npes, &heap_base), 0) << gpu_shmem_last_error();
    mori_shmem_device_state_t st;
    MORI_ASSERT_OK(mori_shmem_device_state(&st));
    EXPECT_EQ(mype, rank);
    EXPECT_EQ(npes, size);
    EXPECT_EQ(heap_base, st.heap_base);
    gpu_shmem_module_unload(module);
    MORI_EXPECT_OK(shmem_finalize());
  });
}

std::string CpuList(const cpu_set_t &set) {
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

TEST(GpuShmem, InitThreadRunsOnCpusNearItsGpu) {
  EXPECT_RANKS_PASS(Ranks(), [](int rank, int size) {
    cpu_set_t before, after;
    pthread_getaffinity_np(pthread_self(), sizeof(before), &before);
    StartPe(rank, size, "gpu_affinity");
    pthread_getaffinity_np(pthread_self(), sizeof(after), &after);
    printf("PE %d: CPUs before init %d, after %d: %s\n", rank, CPU_COUNT(&before), CPU_COUNT(&after), CpuList(after).c_str());
    EXPECT_GT(CPU_COUNT(&after), 0);
    cpu_set_t outside;
    CPU_AND(&outside, &after, &before);
    EXPECT_EQ(CPU_COUNT(&outside), CPU_COUNT(&after)) << "pinned within the CPUs it was allowed";
    MORI_EXPECT_OK(shmem_finalize());
  });
}

}  // namespace
