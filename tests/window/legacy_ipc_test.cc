// SPDX-License-Identifier: MIT
// Adopting memory mori did not allocate through legacy IPC handles
// (mori_mem_register_range), on the host platform, whose stand-in for the
// GPU runtimes' IPC handles behaves like them where it matters: a handle
// names a whole allocation made elsewhere (here a memfd each rank maps
// itself), and a peer opens it at an address of its own choosing. Each
// rank's range sits at a different offset of an allocation of a different
// size (as tensors of torch's caching allocator do); the window has a
// pointer table and no flat span; peers read and write through the table;
// two windows in one allocation share one open; bad input is refused,
// naming what was wrong.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/platform/platform.h"
#include "mori/address_map.h"
#include "mori/bootstrap.h"
#include "mori/heap.h"
#include "mori/mem.h"
#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

// A shared mapping made outside mori: a memfd of `bytes`, mapped whole.
struct Foreign {
  int fd = -1;
  size_t bytes = 0;
  char *base = nullptr;
  explicit Foreign(size_t n) : bytes(n) {
    fd = memfd_create("foreign", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)n) != 0) return;
    void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    base = p == MAP_FAILED ? nullptr : (char *)p;
  }
  ~Foreign() {
    if (base) munmap(base, bytes);
    if (fd >= 0) close(fd);
  }
};

int Barrier(World &w) { return mori_bootstrap_barrier(w.bootstrap); }

// Every rank fills its own range with its rank, then checks every peer's
// through the window's table.
void ExpectEveryPeerReadable(World &w, mori_window_t *win, char *mine, size_t bytes, int rank, int size, int salt) {
  memset(mine, rank + salt, bytes);
  ASSERT_EQ(Barrier(w), 0);
  void *const *ptrs = mori_window_ptrs(win);
  for (int p = 0; p < size; p++) {
    const unsigned char *peer = (const unsigned char *)ptrs[p];
    ASSERT_NE(peer, nullptr) << "rank " << p;
    for (size_t i = 0; i < bytes; i += 997)
      ASSERT_EQ(peer[i], (unsigned char)(p + salt)) << "rank " << rank << " reading rank " << p << " at byte " << i;
  }
  ASSERT_EQ(Barrier(w), 0);
}

TEST(LegacyIpc, RangesAtDifferentPlacesOfDifferentAllocationsAreReachedThroughTheTable) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    const size_t bytes = 16 * 1024;
    Foreign f((size_t)(rank + 2) * 64 * 1024);  // a different allocation size on every rank
    ASSERT_NE(f.base, nullptr);
    char *range = f.base + 4096 * (size_t)(rank + 1) + 64 * (size_t)rank;  // and a different place in it
    MORI_ASSERT_OK(mori_mem_register_range(range, bytes, nullptr));
    mori_mem_info_t info;
    MORI_ASSERT_OK(mori_mem_query(range + 100, &info));
    EXPECT_EQ(info.base, range);
    EXPECT_EQ(info.size, bytes);
    EXPECT_EQ(info.handle_type, MORI_HANDLE_LEGACY_IPC);
    EXPECT_TRUE(info.registered);
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, range, &win));
    mori_window_dev_t v = mori_window_device_view(win);
    EXPECT_EQ(v.stride, 0u) << "opened where the runtime chose: no flat span";
    // ... and flat_span says why (it blamed heap offsets, and advised
    // MORI_SHMEM_MODE, which cannot help here).
    mori_flat_span_t span;
    EXPECT_EQ(mori_window_flat_span(win, &span), MORI_ENOTSUP);
    EXPECT_NE(std::string(mori_last_error()).find("memory mori did not allocate (legacy_ipc handles)"), std::string::npos)
        << mori_last_error();
    EXPECT_EQ(mori_window_ptrs(win)[rank], range) << "the local entry is the registered range";
    ExpectEveryPeerReadable(w, win, range, bytes, rank, size, 1);
    // Writes through the table land in the peer's range: rank r writes the
    // last 64 bytes of rank r+1's range.
    int next = (rank + 1) % size;
    memset((char *)mori_window_ptrs(win)[next] + bytes - 64, 0x40 + rank, 64);
    ASSERT_EQ(Barrier(w), 0);
    int prev = (rank + size - 1) % size;
    for (int i = 0; i < 64; i++) ASSERT_EQ((unsigned char)range[bytes - 64 + i], (unsigned char)(0x40 + prev));
    // The address map of the window is the same table.
    mori_address_map_t m;
    MORI_ASSERT_OK(mori_window_address_map(win, &m));
    EXPECT_EQ(m.peer_bases[rank], (uint64_t)(uintptr_t)range);
    for (int p = 0; p < size; p++) EXPECT_EQ(m.peer_bases[p], (uint64_t)(uintptr_t)mori_window_ptrs(win)[p]);
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(range));
    EXPECT_NE(mori_mem_free(range), 0) << "the range was already unregistered";
    ASSERT_EQ(Barrier(w), 0);
  });
}

TEST(LegacyIpc, TwoWindowsInOneAllocationShareOneOpenAndOutliveEachOther) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    const size_t bytes = 8 * 1024;
    Foreign f(256 * 1024);
    ASSERT_NE(f.base, nullptr);
    char *a = f.base + 4096 * (size_t)rank, *b = f.base + 128 * 1024 + 512 * (size_t)rank;
    MORI_ASSERT_OK(mori_mem_register_range(a, bytes, nullptr));
    MORI_ASSERT_OK(mori_mem_register_range(b, bytes, nullptr));
    mori_window_t *wa = nullptr, *wb = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, a, &wa));
    MORI_ASSERT_OK(mori_window_create(w.comm, b, &wb));
    ExpectEveryPeerReadable(w, wa, a, bytes, rank, size, 3);
    // Teardown in divergent order: even ranks drop a first, odd ranks b.
    if (rank % 2 == 0) MORI_EXPECT_OK(mori_window_destroy(wa));
    else MORI_EXPECT_OK(mori_window_destroy(wb));
    mori_window_t *live = rank % 2 == 0 ? wb : wa;
    char *mine = rank % 2 == 0 ? b : a;
    // The survivor still reads every peer: the shared open was not closed
    // under it. (Peers' survivors differ; each reads its own window's table.)
    memset(mine, 0x70 + rank, bytes);
    ASSERT_EQ(Barrier(w), 0);
    for (int p = 0; p < size; p++) {
      const unsigned char *peer = (const unsigned char *)mori_window_ptrs(live)[p];
      // Peer p wrote its own survivor, which is this window only when p has
      // the same parity.
      if (p % 2 == rank % 2) {
        ASSERT_EQ(peer[bytes / 2], (unsigned char)(0x70 + p)) << "rank " << p;
      }
    }
    ASSERT_EQ(Barrier(w), 0);
    MORI_EXPECT_OK(mori_window_destroy(live));
    MORI_EXPECT_OK(mori_mem_free(a));
    MORI_EXPECT_OK(mori_mem_free(b));
  });
}

TEST(LegacyIpc, BadRangesAreRefusedNamingWhy) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    (void)size;
    Foreign f(64 * 1024);
    ASSERT_NE(f.base, nullptr);
    int rc = mori_mem_register_range(f.base + 60 * 1024, 8 * 1024, nullptr);
    EXPECT_EQ(rc, MORI_ERANGE) << mori_last_error();
    EXPECT_NE(std::string(mori_last_error()).find("runs past the end"), std::string::npos) << mori_last_error();
    MORI_ASSERT_OK(mori_mem_register_range(f.base + 4096, 4096, nullptr));
    rc = mori_mem_register_range(f.base + 6000, 4096, nullptr);
    EXPECT_EQ(rc, MORI_EEXIST) << "overlaps the first: " << mori_last_error();
    rc = mori_mem_register_range(f.base, 4097, nullptr);
    EXPECT_EQ(rc, MORI_EEXIST) << "its last byte overlaps: " << mori_last_error();
    rc = mori_mem_register_range(f.base, 12288, nullptr);
    EXPECT_EQ(rc, MORI_EEXIST) << "it holds the first range whole: " << mori_last_error();
    MORI_EXPECT_OK(mori_mem_free(f.base + 4096));
    void *priv = mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(priv, MAP_FAILED);
    rc = mori_mem_register_range(priv, 4096, nullptr);
    EXPECT_EQ(rc, MORI_ENOT_OWNED) << "private memory cannot be shared: " << mori_last_error();
    munmap(priv, 65536);
    EXPECT_EQ(mori_mem_register_range(nullptr, 4096, nullptr), MORI_EINVAL);
    EXPECT_EQ(mori_mem_register_range(f.base, 0, nullptr), MORI_EINVAL);
    // The heap's free space is mori memory: registered, it was handed out
    // again by the next allocation, two allocations on the same bytes.
    setenv("MORI_SHMEM_MODE", "vmm", 1);
    void *carve = nullptr, *again = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &carve));
    MORI_ASSERT_OK(mori_mem_free(carve));
    rc = mori_mem_register_range(carve, 4096, nullptr);
    EXPECT_EQ(rc, MORI_EEXIST) << "free heap space was registered: " << mori_last_error();
    EXPECT_NE(std::string(mori_last_error()).find("symmetric heap"), std::string::npos) << mori_last_error();
    MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &again));
    MORI_EXPECT_OK(mori_mem_free(again));
    mori_mem_info_t info;
    EXPECT_EQ(mori_mem_query(f.base, nullptr), MORI_EINVAL) << "a NULL info crashed";
    EXPECT_EQ(mori_mem_query(f.base, &info), MORI_ENOT_OWNED);
    EXPECT_EQ(mori_mem_count(), 0) << "nothing registered is left behind on rank " << rank;
  });
}

// A range around a whole heap reservation holds heap space too (only its
// two ends were checked), and a peer's memory that mori maps here for a
// window (heap carves, and memory of its own in isolation mode) is the
// peer's: both are refused, naming why. Before, a range around the heap
// was refused only for a live carve inside it, and a peer's mapping was
// registered as this rank's memory wherever the platform could share it.
void ExpectHeapAndPeerMappingsRefused(const char *mode, int rank, int size) {
  setenv("MORI_SHMEM_MODE", mode, 1);
  World w;
  ASSERT_TRUE(w.ok());
  void *mem = nullptr;
  MORI_ASSERT_OK(mori_mem_alloc(64 * 1024, nullptr, &mem));
  mori_heap_location_t where;
  if (mori_heap_locate(mem, &where) == 0) {  // a carve freed again: the heap stays, nothing live inside it
    MORI_ASSERT_OK(mori_mem_free(mem));
    size_t limit = (size_t)where.max_chunks * where.chunk_size;
    int rc = mori_mem_register_range((char *)where.heap_base - 4096, limit + 8192, nullptr);
    EXPECT_EQ(rc, MORI_EEXIST) << "a range around the heap: " << mori_last_error();
    EXPECT_NE(std::string(mori_last_error()).find("symmetric heap"), std::string::npos) << mori_last_error();
    MORI_ASSERT_OK(mori_mem_alloc(64 * 1024, nullptr, &mem));
  }
  mori_window_t *win = nullptr;
  MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
  int peer = (rank + 1) % size;
  char *theirs = (char *)mori_window_peer_ptr(win, peer);
  ASSERT_NE(theirs, nullptr);
  for (size_t at : {(size_t)0, (size_t)60 * 1024}) {
    int rc = mori_mem_register_range(theirs + at, 4096, nullptr);
    EXPECT_EQ(rc, MORI_EEXIST) << "rank " << peer << "'s memory at +" << at << ": " << mori_last_error();
    EXPECT_NE(std::string(mori_last_error()).find("rank " + std::to_string(peer) + "'s memory"), std::string::npos)
        << mori_last_error();
    if (rc == 0) (void)mori_mem_free(theirs + at);
  }
  // The same through mori_mem_register, which takes the whole mapping.
  void *base = nullptr;
  int rc = mori_mem_register(theirs, nullptr, &base);
  EXPECT_NE(rc, 0) << "rank " << peer << "'s mapping was registered as this rank's";
  if (rc == MORI_EEXIST) {
    EXPECT_NE(std::string(mori_last_error()).find("rank " + std::to_string(peer) + "'s memory"), std::string::npos)
        << mori_last_error();
  }
  if (rc == 0) (void)mori_mem_free(base);
  ASSERT_EQ(Barrier(w), 0);
  MORI_EXPECT_OK(mori_window_destroy(win));
  MORI_EXPECT_OK(mori_mem_free(mem));
  unsetenv("MORI_SHMEM_MODE");
}

TEST(LegacyIpc, RangesAroundAHeapOrOverAPeersHeapMappingAreRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) { ExpectHeapAndPeerMappingsRefused("vmm", rank, size); });
}

// Both ways of registering `own` (the range, and the mapping around it)
// are refused as this rank's own memory, and nothing is left registered.
void ExpectRegisteringRefusedAsOwn(char *own, int rank, const std::string &what) {
  int rc = mori_mem_register_range(own, 4096, nullptr);
  EXPECT_EQ(rc, MORI_EEXIST) << what << ": " << mori_last_error();
  EXPECT_NE(std::string(mori_last_error()).find("rank " + std::to_string(rank) + "'s own memory"), std::string::npos)
      << mori_last_error();
  if (rc == 0) (void)mori_mem_free(own);
  void *base = nullptr;
  rc = mori_mem_register(own, nullptr, &base);
  EXPECT_EQ(rc, MORI_EEXIST) << what << ", whole mapping: " << mori_last_error();
  EXPECT_NE(std::string(mori_last_error()).find("rank " + std::to_string(rank) + "'s own memory"), std::string::npos)
      << mori_last_error();
  if (rc == 0) (void)mori_mem_free(base);
  EXPECT_EQ(mori_mem_count(), 1) << "only the allocation itself is mori memory";
}

// This rank's own slot of a flat span (rank p at base + p * stride, p this
// rank) is a second mapping of its own memory: the heap chunk, or the
// window's memory in isolation mode. Registered, it became a second
// allocation over bytes mori hands out (carves of the heap, or the
// window's own allocation): only the peers' slots were refused.
void ExpectOwnFlatSlotRefused(const char *mode, int rank, int size) {
  setenv("MORI_SHMEM_MODE", mode, 1);
  World w;
  ASSERT_TRUE(w.ok());
  void *mem = nullptr;
  MORI_ASSERT_OK(mori_mem_alloc(64 * 1024, nullptr, &mem));
  mori_window_t *win = nullptr;
  MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
  mori_flat_span_t span;
  MORI_ASSERT_OK(mori_window_flat_span(win, &span));
  char *own = (char *)(uintptr_t)(span.base + (uint64_t)rank * span.stride);
  ASSERT_NE((void *)own, mem);
  ExpectRegisteringRefusedAsOwn(own, rank, std::string(mode) + ": rank " + std::to_string(rank) + "'s own slot");
  ASSERT_EQ(Barrier(w), 0);
  MORI_EXPECT_OK(mori_window_destroy(win));
  MORI_EXPECT_OK(mori_mem_free(mem));
  unsetenv("MORI_SHMEM_MODE");
}

TEST(LegacyIpc, ThisRanksOwnSlotOfAFlatSpanIsRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    ExpectOwnFlatSlotRefused("vmm", rank, size);
  });
}

// A window's signal pads live in the comm's signal arena, memory mori made
// for itself outside the heap and the registry: this rank's own pad (the
// pointer mori_window_signal_pads hands out for it) was registered as user
// memory, a second allocation over mori's signals.
TEST(LegacyIpc, ThisRanksOwnSignalPadIsRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = 4096;
    void *mem = nullptr;
    MORI_ASSERT_OK(mori_mem_alloc(64 * 1024, &attr, &mem));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, mem, &win));
    char *pad = (char *)mori_window_signal_pads(win)[rank];
    ASSERT_NE(pad, nullptr);
    ExpectRegisteringRefusedAsOwn(pad, rank, "rank " + std::to_string(rank) + "'s own signal pad");
    ASSERT_EQ(Barrier(w), 0);
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
  });
}

TEST(LegacyIpc, ThisRanksOwnSlotOfAFlatSpanInIsolationModeIsRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    ExpectOwnFlatSlotRefused("isolation", rank, size);
  });
}

TEST(LegacyIpc, RangesOverAPeersMappingOfAnAllocationAreRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) { ExpectHeapAndPeerMappingsRefused("isolation", rank, size); });
}

// Adopted memory: a peer's whole allocation is opened here, not only its
// range, and all of it is the peer's (only the range was checked).
TEST(LegacyIpc, RangesOverAPeersOpenedAllocationAreRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Foreign f(256 * 1024);
    ASSERT_NE(f.base, nullptr);
    MORI_ASSERT_OK(mori_mem_register_range(f.base + 64 * 1024, 64 * 1024, nullptr));
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_window_create(w.comm, f.base + 64 * 1024, &win));
    int peer = (rank + 1) % size;
    char *theirs = (char *)mori_window_peer_ptr(win, peer);
    ASSERT_NE(theirs, nullptr);
    for (long at : {-64L * 1024, 0L, 100L * 1024}) {  // before the peer's range, in it, after it
      int rc = mori_mem_register_range(theirs + at, 4096, nullptr);
      EXPECT_EQ(rc, MORI_EEXIST) << "rank " << peer << "'s allocation at " << at << ": " << mori_last_error();
      EXPECT_NE(std::string(mori_last_error()).find("rank " + std::to_string(peer) + "'s memory"), std::string::npos)
          << mori_last_error();
      if (rc == 0) (void)mori_mem_free(theirs + at);
    }
    ASSERT_EQ(Barrier(w), 0);
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(f.base + 64 * 1024));
  });
}

TEST(LegacyIpc, RangesOfDifferentSizesFailTheWindowOnEveryRankNamingTheSizes) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    (void)size;
    World w;
    ASSERT_TRUE(w.ok());
    Foreign f(128 * 1024);
    ASSERT_NE(f.base, nullptr);
    size_t bytes = rank == 1 ? 12 * 1024 : 8 * 1024;
    MORI_ASSERT_OK(mori_mem_register_range(f.base, bytes, nullptr));
    mori_window_t *win = nullptr;
    int rc = mori_window_create(w.comm, f.base, &win);
    EXPECT_NE(rc, 0);
    std::string err = mori_last_error();
    EXPECT_NE(err.find("rank 1: 12288"), std::string::npos) << err;
    EXPECT_EQ(win, nullptr);
    MORI_EXPECT_OK(mori_mem_free(f.base));
    // The comm still works afterwards.
    MORI_ASSERT_OK(mori_mem_register_range(f.base, 8 * 1024, nullptr));
    MORI_ASSERT_OK(mori_window_create(w.comm, f.base, &win));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(f.base));
  });
}

}  // namespace

namespace {

// A handle whose owner unregistered the memory (or exited) does not open:
// a clear error, never a mapping of something else.
TEST(LegacyIpc, AHandleOfMemoryItsOwnerUnregisteredIsRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    Foreign f(64 * 1024);
    ASSERT_NE(f.base, nullptr);
    mori_pmem_t mem;
    MORI_ASSERT_OK(mori_platform_ipc_describe(f.base + 4096, 8192, -1, &mem));
    mori_shareable_t mine;
    memset(&mine, 0, sizeof(mine));
    mine.type = MORI_HANDLE_LEGACY_IPC;
    mine.fd = -1;
    memcpy(mine.blob, mem.name, sizeof(mine.blob));
    mine.offset = mem.offset;
    mine.size = mem.size;
    std::vector<mori_shareable_t> all((size_t)size);
    MORI_ASSERT_OK(mori_comm_allgather(w.comm, &mine, all.data(), sizeof(mine)));
    // While the owner holds it, the next rank opens it and sees its bytes.
    int next = (rank + 1) % size;
    memset(f.base + 4096, 0x30 + rank, 64);
    ASSERT_EQ(Barrier(w), 0);
    void *opened = nullptr;
    MORI_ASSERT_OK(mori_platform_ipc_open(&all[next], 0, &opened));
    EXPECT_EQ(((unsigned char *)opened)[4096], 0x30 + next);
    MORI_EXPECT_OK(mori_platform_ipc_close(0, opened));
    ASSERT_EQ(Barrier(w), 0);
    // The owner lets go of it (what mori_mem_free of the range does).
    MORI_EXPECT_OK(mori_platform_mem_release(&mem));
    // ...and makes another shared file, which likely takes the same
    // descriptor number: the handle must not open that one either.
    Foreign other(128 * 1024);
    ASSERT_NE(other.base, nullptr);
    ASSERT_EQ(Barrier(w), 0);
    int rc = mori_platform_ipc_open(&all[next], 0, &opened);
    EXPECT_NE(rc, 0) << "a released handle opened";
    EXPECT_NE(std::string(mori_last_error()).find("opening a peer's memory"), std::string::npos) << mori_last_error();
    // A malformed handle.
    mori_shareable_t junk = all[next];
    memset(junk.blob, 0x5a, sizeof(junk.blob));
    EXPECT_EQ(mori_platform_ipc_open(&junk, 0, &opened), MORI_EINVAL) << mori_last_error();
    // Its own handle is refused (runtimes refuse it too).
    EXPECT_EQ(mori_platform_ipc_open(&all[rank], 0, &opened), MORI_EINVAL) << mori_last_error();
    ASSERT_EQ(Barrier(w), 0);
  });
}

}  // namespace
