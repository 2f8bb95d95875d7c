// SPDX-License-Identifier: MIT
// MORI Shmem across separate processes on the host platform, started the
// way the Shmem Guide's unique-ID example does (rank 0 writes the ID to a
// file): every call of the guide, the device API in CPU PEs, registered
// buffers, init -> finalize -> init.
#include <dirent.h>
#include <ifaddrs.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "mori/device/shmem.h"
#include "tests/shmem/pe.h"
#include "tests/support/profile_calls.h"
#include "tests/support/user_memory.h"

using mori_shmem_test::HeapOffset;
using mori_shmem_test::InitPe;
using mori_shmem_test::UseSmallHeap;
using mori_test::ProfileCalls;
using mori_test::SharedMapping;  // the host platform's stand-in for device memory another allocator made
using mori_test::TestRanks;

namespace {

uint64_t Word(int writer, int owner, size_t i) { return ((uint64_t)writer << 40) ^ ((uint64_t)owner << 20) ^ (i * 2654435761u); }

// Every PE writes its row of every PE's buffer through shmem_ptr_p2p, then
// checks its own buffer.
void ExchangeThroughPeerPointers(uint64_t *buf, int me, int n, size_t row_words) {
  for (int pe = 0; pe < n; pe++) {
    uint64_t *dst = (uint64_t *)shmem_ptr_p2p(buf, me, pe);
    ASSERT_NE(dst, nullptr) << "PE " << pe << ": " << mori_last_error();
    for (size_t i = 0; i < row_words; i++) dst[me * row_words + i] = Word(me, pe, i);
  }
  MORI_ASSERT_OK(shmem_barrier_all());
  for (int w = 0; w < n; w++)
    for (size_t i = 0; i < row_words; i++) ASSERT_EQ(buf[w * row_words + i], Word(w, me, i)) << "from PE " << w;
  MORI_ASSERT_OK(shmem_barrier_all());
}

// Every PE's value of x, gathered over shmem's comm.
std::vector<uint64_t> Gather(uint64_t x) {
  mori_comm_t *comm = nullptr;
  EXPECT_EQ(mori_shmem_comm(&comm), 0) << mori_last_error();
  std::vector<uint64_t> all(comm ? mori_comm_size(comm) : 0);
  if (comm) {
    EXPECT_EQ(mori_comm_allgather(comm, &x, all.data(), sizeof(x)), 0) << mori_last_error();
  }
  return all;
}

TEST(Shmem, UniqueIdThroughAFileInitialisesEveryPe) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "init"));
    EXPECT_EQ(shmem_mype(), rank);
    EXPECT_EQ(shmem_npes(), size);
    EXPECT_EQ(shmem_num_qp_per_pe(), 1);
    MORI_EXPECT_OK(shmem_barrier_all());
    MORI_EXPECT_OK(shmem_finalize());
    EXPECT_EQ(shmem_mype(), MORI_ENOT_INITIALIZED);
    MORI_EXPECT_OK(shmem_finalize());  // idempotent
  });
}

TEST(Shmem, MallocPutsEveryAllocationAtTheSameHeapOffsetAndPeersReachIt) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "malloc"));
    mori_heap_stats_t before, after;
    MORI_ASSERT_OK(mori_heap_stats(-1, &before));
    size_t row = 64, bytes = row * 8 * size;
    std::vector<void *> held;
    for (int i = 0; i < 6; i++) {
      void *p = nullptr;
      if (i % 3 == 0) MORI_ASSERT_OK(shmem_malloc(bytes + 1000 * i, &p));
      if (i % 3 == 1) MORI_ASSERT_OK(shmem_malloc_align(1 << 16, bytes, &p));
      if (i % 3 == 2) MORI_ASSERT_OK(shmem_ext_malloc_with_flags(bytes, MORI_SHMEM_MALLOC_DEFAULT, &p));
      ASSERT_NE(p, nullptr);
      if (i % 3 == 1) {
        EXPECT_EQ((uintptr_t)p % (1 << 16), 0u);
      }
      for (uint64_t off : Gather(HeapOffset(p))) EXPECT_EQ(off, HeapOffset(p)) << "allocation " << i;
      EXPECT_EQ(shmem_ptr_p2p(p, rank, rank), p);
      ExchangeThroughPeerPointers((uint64_t *)p, rank, size, row);
      // An interior pointer translates too.
      if (size > 1) {
        int peer = (rank + 1) % size;
        EXPECT_EQ((char *)shmem_ptr_p2p((char *)p + 24, rank, peer), (char *)shmem_ptr_p2p(p, rank, peer) + 24);
      }
      held.push_back(p);
    }
    // A chunk's worth, then more: the heap grows and offsets stay symmetric.
    void *big = nullptr;
    MORI_ASSERT_OK(shmem_malloc(3 << 20, &big));
    for (uint64_t off : Gather(HeapOffset(big))) EXPECT_EQ(off, HeapOffset(big));
    ExchangeThroughPeerPointers((uint64_t *)big, rank, size, 1024);
    void *empty = (void *)1;
    MORI_EXPECT_OK(shmem_malloc(0, &empty));
    EXPECT_EQ(empty, nullptr);
    for (void *p : held) MORI_EXPECT_OK(shmem_free(p));
    MORI_EXPECT_OK(shmem_free(big));
    MORI_EXPECT_OK(shmem_free(nullptr));
    MORI_ASSERT_OK(mori_heap_stats(-1, &after));
    EXPECT_EQ(after.allocations, before.allocations) << "everything shmem_malloc gave back";
    MORI_EXPECT_OK(shmem_finalize());
  });
}

// shmem_malloc's collective steps (mori/profile.h's collective_step), in
// steady state (a chunk already mapped, its device-table row filled): the
// window's rendezvous alone checks that every PE carved the same size at
// the same heap offset with the same arguments. A step that came back
// (a separate agreement on the arguments, the offsets or the outcome)
// fails this test. shmem_free and shmem_malloc(0): one step each.
// A shmem_malloc larger than a heap chunk (vmm mode) names the size, the
// chunk and the variable that fixes it, on every PE; nothing stays.
TEST(Shmem, MallocLargerThanAChunkNamesTheVariable) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();  // vmm, 4 MiB chunks
    MORI_ASSERT_OK(InitPe(rank, size, "bigger"));
    void *p = nullptr;
    int held = mori_mem_count();  // shmem's own (its device state)
    EXPECT_EQ(shmem_malloc(8 << 20, &p), MORI_ENOTSUP);
    std::string msg = mori_last_error();
    EXPECT_NE(msg.find("8388608 bytes: larger than one chunk of the symmetric heap (4194304 bytes)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MORI_SHMEM_VMM_CHUNK_SIZE"), std::string::npos) << msg;
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(mori_mem_count(), held) << "nothing stays allocated";
    MORI_ASSERT_OK(shmem_malloc(1 << 20, &p));  // the next one works
    MORI_EXPECT_OK(shmem_free(p));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(Shmem, MallocTakesOneCollectiveStepAndFreeOne) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "steps"));
    void *warm = nullptr, *p = nullptr, *q = nullptr, *empty = (void *)1;
    MORI_ASSERT_OK(shmem_malloc(4096, &warm));  // the chunk is mapped and its row filled
    mori_profile_reset();
    MORI_ASSERT_OK(shmem_malloc(4096, &p));
    EXPECT_EQ(ProfileCalls("collective_step"), 1u) << "shmem_malloc";
    mori_profile_reset();
    MORI_ASSERT_OK(shmem_malloc_align(1 << 16, 8192, &q));
    EXPECT_EQ(ProfileCalls("collective_step"), 1u) << "shmem_malloc_align";
    mori_profile_reset();
    MORI_ASSERT_OK(shmem_malloc(0, &empty));
    EXPECT_EQ(empty, nullptr);
    EXPECT_EQ(ProfileCalls("collective_step"), 1u) << "shmem_malloc(0)";
    mori_profile_reset();
    MORI_EXPECT_OK(shmem_free(q));
    EXPECT_EQ(ProfileCalls("collective_step"), 1u) << "shmem_free";
    MORI_EXPECT_OK(shmem_free(p));
    MORI_EXPECT_OK(shmem_free(warm));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(Shmem, DeviceApiTranslatesPutsSignalsAndMeetsAtTheBarrier) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "device"));
    mori_shmem_device_state_t st;
    MORI_ASSERT_OK(mori_shmem_device_state(&st));
    EXPECT_EQ(st.size, sizeof(st));
    EXPECT_EQ(shmem_dev_mype(st), rank);
    EXPECT_EQ(shmem_dev_npes(st), size);
    uint64_t *data = nullptr, *sig = nullptr;
    MORI_ASSERT_OK(shmem_malloc(4096, (void **)&data));
    MORI_ASSERT_OK(shmem_malloc(64, (void **)&sig));
    sig[0] = 0;
    for (int pe = 0; pe < size; pe++)
      EXPECT_EQ(shmem_dev_ptr_p2p(st, data + 7, pe), shmem_ptr_p2p(data + 7, rank, pe)) << "PE " << pe;
    int stack = 0;
    EXPECT_EQ(shmem_dev_ptr_p2p(st, &stack, 0), nullptr);
    EXPECT_EQ(shmem_dev_ptr_p2p(st, data, size), nullptr);
    MORI_ASSERT_OK(shmem_barrier_all());
    // A ring: put my row into the next PE's buffer, then signal it.
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    uint64_t mine[8];
    for (int i = 0; i < 8; i++) mine[i] = Word(rank, next, i);
    EXPECT_EQ(shmem_dev_putmem_thread(st, data + 8 * rank, mine, sizeof(mine), next), MORI_DEVICE_OK);
    shmem_dev_fence();
    EXPECT_EQ(shmem_dev_signal_add(st, sig, 1, next), MORI_DEVICE_OK);
    uint64_t seen = 0;
    EXPECT_EQ(shmem_dev_signal_wait_until(st, sig, MORI_CMP_GE, 1, 10ull * 1000 * 1000 * 1000, &seen), MORI_DEVICE_OK);
    EXPECT_EQ(seen, 1u);
    for (int i = 0; i < 8; i++) EXPECT_EQ(data[8 * prev + i], Word(prev, rank, i));
    EXPECT_EQ(shmem_dev_barrier_all_block(st, 10ull * 1000 * 1000 * 1000), MORI_DEVICE_OK);
    // Get the previous PE's copy of what it received.
    uint64_t got[8];
    int before_prev = (prev + size - 1) % size;
    EXPECT_EQ(shmem_dev_getmem_block(st, got, data + 8 * before_prev, sizeof(got), prev), MORI_DEVICE_OK);
    for (int i = 0; i < 8; i++) EXPECT_EQ(got[i], Word(before_prev, prev, i));
    EXPECT_EQ(shmem_dev_signal_set(st, sig, 0, rank), MORI_DEVICE_OK);
    // A wait nobody answers times out and leaves a record for the host.
    EXPECT_EQ(shmem_dev_signal_wait_until(st, sig, MORI_CMP_EQ, 99, 20ull * 1000 * 1000, nullptr), MORI_DEVICE_ETIMEDOUT);
    EXPECT_EQ(mori_shmem_check(), MORI_EDEVICE_TIMEOUT);
    MORI_EXPECT_OK(mori_shmem_check());  // reported once
    MORI_EXPECT_OK(shmem_barrier_all());
    MORI_EXPECT_OK(shmem_free(sig));
    MORI_EXPECT_OK(shmem_free(data));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(Shmem, BufferRegisterMakesExistingMemoryReachableUntilDeregistered) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "register"));
    size_t map_bytes = 1 << 20;
    char *mapping = (char *)SharedMapping(map_bytes);
    ASSERT_NE(mapping, nullptr);
    uint64_t *buf = (uint64_t *)(mapping + 8192);
    size_t bytes = 64 * 8 * size;
    MORI_ASSERT_OK(shmem_buffer_register(buf, bytes));
    ExchangeThroughPeerPointers(buf, rank, size, 64);
    mori_window_t *win = nullptr;
    MORI_EXPECT_OK(mori_shmem_window(buf + 3, &win));
    EXPECT_NE(win, nullptr);
    EXPECT_EQ(shmem_buffer_register(buf, bytes), MORI_EEXIST) << "registered twice";
    EXPECT_EQ(shmem_buffer_deregister(buf, bytes + 8), MORI_EINVAL);
    MORI_EXPECT_OK(shmem_buffer_deregister(buf, bytes));
    EXPECT_EQ(shmem_ptr_p2p(buf, rank, rank), nullptr) << "no longer shmem memory";
    EXPECT_EQ(shmem_buffer_deregister(buf, bytes), MORI_ENOT_OWNED);
    MORI_EXPECT_OK(shmem_barrier_all());  // every PE is done with every mapping
    MORI_EXPECT_OK(shmem_finalize());
    munmap(mapping, map_bytes);
  });
}

// A registered buffer is symmetric: the same size at the same offset of
// each PE's allocation (a peer's address is its window base plus this PE's
// offset). Placements or sizes that differ are refused on every PE, naming
// the PE, instead of peers being reached at the wrong bytes; a buffer that
// contains a registered one is refused too.
TEST(Shmem, BufferRegisterRefusesPlacementsThatDifferAndOverlaps) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "placement"));
    size_t map_bytes = 1 << 16;
    char *mapping = (char *)SharedMapping(map_bytes);
    ASSERT_NE(mapping, nullptr);
    int last = size - 1;
    char *at = mapping + 4096 * (rank == last ? 2 : 1);
    EXPECT_EQ(shmem_buffer_register(at, 4096), MORI_EMISMATCH);
    EXPECT_NE(std::string(mori_last_error()).find("PE " + std::to_string(last) + "'s buffer starts 8192 bytes into"),
              std::string::npos)
        << mori_last_error();
    EXPECT_EQ(shmem_buffer_register(mapping + 4096, rank == last ? 2048 : 4096), MORI_EMISMATCH);
    EXPECT_NE(std::string(mori_last_error()).find("PE " + std::to_string(last) + " registers 2048 bytes, PE 0 4096"),
              std::string::npos)
        << mori_last_error();
    EXPECT_EQ(shmem_ptr_p2p(mapping + 4096, rank, rank), nullptr) << "nothing stays registered";
    uint64_t *inner = (uint64_t *)(mapping + 16384);
    MORI_ASSERT_OK(shmem_buffer_register(inner, 64 * 8 * size));
    ExchangeThroughPeerPointers(inner, rank, size, 64);
    EXPECT_EQ(shmem_buffer_register(mapping, map_bytes), MORI_EEXIST) << "it contains the registered buffer";
    EXPECT_NE(std::string(mori_last_error()).find("overlaps a registered buffer"), std::string::npos) << mori_last_error();
    MORI_EXPECT_OK(shmem_buffer_deregister(inner, 64 * 8 * size));
    MORI_EXPECT_OK(shmem_barrier_all());
    MORI_EXPECT_OK(shmem_finalize());
    munmap(mapping, map_bytes);
  });
}

// Memory that is neither a shareable mapping nor the runtime's: the error
// carries both reasons, each as it was written.
TEST(Shmem, BufferRegisterOfPrivateMemoryNamesBothReasons) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "private"));
    // PE 0 alone passes private memory (so its own message is the one part
    // of the verdict, whole); the others pass what they could share.
    std::vector<char> heap_memory(8192);
    char *shared = (char *)SharedMapping(4096);
    ASSERT_NE(shared, nullptr);
    EXPECT_NE(shmem_buffer_register(rank == 0 ? heap_memory.data() : shared, 4096), 0);
    std::string msg = mori_last_error();
    if (rank == 0) {
      EXPECT_NE(msg.find("not a virtual-memory mapping ("), std::string::npos) << msg;
      size_t second = msg.find("not memory of the runtime's allocator either (");
      ASSERT_NE(second, std::string::npos) << msg;
      EXPECT_NE(msg.find("mem_register_range", second), std::string::npos) << "the second reason as written: " << msg;
    }
    EXPECT_EQ(shmem_ptr_p2p(shared, rank, rank), nullptr) << "nothing stays registered";
    MORI_EXPECT_OK(shmem_finalize());
    munmap(shared, 4096);
  });
}

// A device put or get whose range leaves the heap chunk it starts in is
// refused (ERANGE) and writes nothing: a peer's chunks are mapped apart,
// so its end went into whatever mapping follows (a SIGSEGV here); within
// a chunk, and to this PE, it runs. A request larger than a chunk is
// refused before anything is allocated, naming the variable.
TEST(Shmem, DevicePutsThatLeaveTheirChunkAreRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();  // vmm, 4 MiB chunks
    MORI_ASSERT_OK(InitPe(rank, size, "span"));
    char *x = nullptr, *y = nullptr;
    // shmem's own state takes the start of chunk 0: x fills the rest of
    // it, y starts chunk 1.
    MORI_ASSERT_OK(shmem_malloc((4 << 20) - 4096, (void **)&x));
    MORI_ASSERT_OK(shmem_malloc(4096, (void **)&y));
    ASSERT_EQ(x + (4 << 20) - 4096, y) << "the layout this test needs";
    mori_shmem_device_state_t st;
    MORI_ASSERT_OK(mori_shmem_device_state(&st));
    memset(y - 8, '.', 16);
    MORI_ASSERT_OK(shmem_barrier_all());
    int peer = (rank + 1) % size;
    const char src[9] = "ABCDEFGH";
    char back[8];
    if (size > 1) {
      EXPECT_EQ(shmem_dev_putmem_thread(st, y - 4, src, 8, peer), MORI_DEVICE_ERANGE);
      EXPECT_EQ(shmem_dev_getmem_thread(st, back, y - 4, 8, peer), MORI_DEVICE_ERANGE);
    }
    EXPECT_EQ(shmem_dev_putmem_thread(st, y - 8, src, 8, peer), MORI_DEVICE_OK);  // the end of chunk 0
    MORI_ASSERT_OK(shmem_barrier_all());
    EXPECT_EQ(std::string(y - 8, 16), "ABCDEFGH........") << "only the put within its chunk landed";
    MORI_ASSERT_OK(shmem_barrier_all());
    // Larger than a chunk, and than the machine: the chunk is the reason
    // given, found before anything is allocated (it was "1 TiB of shared
    // memory asked for, but only ... is free", after trying).
    void *big = nullptr;
    EXPECT_EQ(shmem_malloc((size_t)1 << 40, &big), MORI_ENOTSUP);
    EXPECT_NE(std::string(mori_last_error()).find("larger than one chunk"), std::string::npos) << mori_last_error();
    MORI_ASSERT_OK(shmem_free(y));
    MORI_ASSERT_OK(shmem_free(x));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

// A signal is a put of 8 bytes: its word must lie in one chunk (ERANGE, as
// a put's) and be aligned (EINVAL); a wait's comparison must be one mori
// knows (EINVAL), and a wait that fails still says what it read last.
// Before, a signal at a chunk's last 4 bytes stored 8 bytes past it (a
// fault where the next chunk was not mapped), an unaligned one tore the
// word beside it, any unknown comparison meant "greater than", and a
// timed-out wait left *seen_out as it was.
TEST(Shmem, DeviceSignalsCheckTheirWordAndWaitsTheirComparison) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();  // vmm, 4 MiB chunks
    MORI_ASSERT_OK(InitPe(rank, size, "signals"));
    char *x = nullptr, *y = nullptr;
    MORI_ASSERT_OK(shmem_malloc((4 << 20) - 4096, (void **)&x));
    MORI_ASSERT_OK(shmem_malloc(4096, (void **)&y));
    mori_heap_location_t at;
    MORI_ASSERT_OK(mori_heap_locate(y, &at));
    ASSERT_EQ(at.offset, 0u) << "the layout this test needs: y starts a chunk";
    ASSERT_EQ(x + (4 << 20) - 4096, y) << "the layout this test needs: x ends the chunk before";
    mori_shmem_device_state_t st;
    MORI_ASSERT_OK(mori_shmem_device_state(&st));
    memset(y - 16, 0, 32);
    MORI_ASSERT_OK(shmem_barrier_all());
    int peer = (rank + 1) % size;
    if (size > 1) {
      EXPECT_EQ(shmem_dev_signal_set(st, (uint64_t *)(y - 4), 1, peer), MORI_DEVICE_ERANGE);
      EXPECT_EQ(shmem_dev_signal_add(st, (uint64_t *)(y - 4), 1, peer), MORI_DEVICE_ERANGE);
    }
    EXPECT_EQ(shmem_dev_signal_set(st, (uint64_t *)(y - 13), 1, peer), MORI_DEVICE_EINVAL);
    EXPECT_EQ(shmem_dev_signal_add(st, (uint64_t *)(y - 13), 1, peer), MORI_DEVICE_EINVAL);
    EXPECT_EQ(shmem_dev_signal_set(st, (uint64_t *)(y - 8), 7, peer), MORI_DEVICE_OK);  // the end of chunk 0
    MORI_ASSERT_OK(shmem_barrier_all());
    uint64_t words[4];
    memcpy(words, y - 16, sizeof(words));
    EXPECT_EQ(words[0], 0u) << "an unaligned signal wrote";
    EXPECT_EQ(words[1], 7u);
    EXPECT_EQ(words[2], 0u) << "a signal across the chunk's end wrote";
    uint64_t *sig = (uint64_t *)(y - 8), seen = 0xdead;
    EXPECT_EQ(shmem_dev_signal_wait_until(st, sig, (mori_cmp_t)99, 6, 1000000, &seen), MORI_DEVICE_EINVAL);
    EXPECT_EQ(shmem_dev_signal_wait_until(st, sig, (mori_cmp_t)5, 8, 1000000, &seen), MORI_DEVICE_EINVAL)
        << "5 is OpenSHMEM's GE: refused, never another test";
    EXPECT_EQ(shmem_dev_signal_wait_until(st, sig, (mori_cmp_t)7, 8, 1000000, &seen), MORI_DEVICE_EINVAL);
    EXPECT_EQ(seen, 0xdeadu) << "an unknown comparison read nothing";
    EXPECT_EQ(shmem_dev_signal_wait_until(st, sig, MORI_CMP_EQ, 8, 20ull * 1000 * 1000, &seen), MORI_DEVICE_ETIMEDOUT);
    EXPECT_EQ(seen, 7u) << "a timed-out wait says what it read last";
    EXPECT_EQ(mori_shmem_check(), MORI_EDEVICE_TIMEOUT);
    EXPECT_EQ(shmem_dev_signal_wait_until(st, sig, MORI_CMP_GT, 6, 1000000, &seen), MORI_DEVICE_OK);
    EXPECT_EQ(seen, 7u);
    // LT and LE (mori's numbers 4 and 6).
    EXPECT_EQ(shmem_dev_signal_wait_until(st, sig, MORI_CMP_LT, 8, 1000000, &seen), MORI_DEVICE_OK);
    EXPECT_EQ(shmem_dev_signal_wait_until(st, sig, MORI_CMP_LE, 7, 1000000, &seen), MORI_DEVICE_OK);
    EXPECT_EQ(shmem_dev_signal_wait_until(st, sig, MORI_CMP_LT, 7, 1000000, &seen), MORI_DEVICE_ETIMEDOUT);
    EXPECT_EQ(mori_shmem_check(), MORI_EDEVICE_TIMEOUT);
    MORI_ASSERT_OK(shmem_barrier_all());
    MORI_ASSERT_OK(shmem_free(y));
    MORI_ASSERT_OK(shmem_free(x));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

// This process's open sockets (the listeners of unique IDs among them).
int OpenSockets() {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  char target[64];
  while (dirent *e = readdir(d)) {
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    ssize_t len = readlink(path.c_str(), target, sizeof(target) - 1);
    if (len > 0 && std::string(target, (size_t)len).rfind("socket:", 0) == 0) n++;
  }
  closedir(d);
  return n;
}

// mori_finalize leaves nothing of mori behind: the listening sockets of
// unique IDs made and never used went on listening until the process ended.
TEST(Shmem, MoriFinalizeClosesTheSocketsOfUnusedUniqueIds) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    int before = OpenSockets();
    mori_shmem_uniqueid_t a, b;
    MORI_ASSERT_OK(shmem_get_unique_id(&a));
    MORI_ASSERT_OK(shmem_get_unique_id(&b));
    EXPECT_EQ(OpenSockets(), before + 2);
    MORI_ASSERT_OK(mori_finalize());
    EXPECT_EQ(OpenSockets(), before) << "a unique ID's socket outlived mori_finalize";
  });
}

// Two buffers registered in one mapping share its adoption: deregistering
// one leaves the other's memory mori memory (it was released under it),
// and a third slice registers beside the second.
TEST(Shmem, BuffersInOneMappingKeepItUntilTheLastIsDeregistered) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "shared_mapping"));
    size_t map_bytes = 64 << 10;
    char *mapping = (char *)SharedMapping(map_bytes);
    ASSERT_NE(mapping, nullptr);
    uint64_t *a = (uint64_t *)(mapping + 4096), *b = (uint64_t *)(mapping + 16384), *c = (uint64_t *)(mapping + 32768);
    size_t bytes = 64 * 8 * size;
    MORI_ASSERT_OK(shmem_buffer_register(a, bytes));
    MORI_ASSERT_OK(shmem_buffer_register(b, bytes));
    MORI_ASSERT_OK(shmem_buffer_deregister(a, bytes));
    mori_mem_info_t info;
    MORI_EXPECT_OK(mori_mem_query(b, &info));  // still mori memory
    EXPECT_NE(shmem_ptr_p2p(b, rank, rank), nullptr);
    ExchangeThroughPeerPointers(b, rank, size, 64);
    MORI_ASSERT_OK(shmem_buffer_register(c, bytes));
    ExchangeThroughPeerPointers(c, rank, size, 64);
    MORI_EXPECT_OK(shmem_barrier_all());
    MORI_ASSERT_OK(shmem_buffer_deregister(b, bytes));
    MORI_EXPECT_OK(mori_mem_query(c, &info));
    MORI_ASSERT_OK(shmem_buffer_deregister(c, bytes));
    EXPECT_EQ(mori_mem_query(c, &info), MORI_ENOT_OWNED) << "the last one took the adoption with it";
    MORI_EXPECT_OK(shmem_barrier_all());
    MORI_EXPECT_OK(shmem_finalize());
    munmap(mapping, map_bytes);
  });
}

// mori_finalize while MORI Shmem is initialised finalizes it first: its
// calls then say so instead of using the windows mori_finalize released
// (shmem_ptr_p2p crashed), shmem_finalize after it is a no-op, and MORI
// Shmem initialises again.
TEST(Shmem, MoriFinalizeFinalizesShmemFirst) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "mori_finalize0"));
    void *p = nullptr;
    MORI_ASSERT_OK(shmem_malloc(64 * 8 * size, &p));
    MORI_ASSERT_OK(shmem_barrier_all());
    MORI_ASSERT_OK(mori_finalize());
    EXPECT_EQ(shmem_mype(), MORI_ENOT_INITIALIZED);
    EXPECT_EQ(shmem_ptr_p2p(p, rank, (rank + 1) % size), nullptr);
    EXPECT_NE(shmem_free(p), 0);
    MORI_EXPECT_OK(shmem_finalize());
    EXPECT_EQ(mori_mem_count(), 0);
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "mori_finalize1"));
    MORI_ASSERT_OK(shmem_malloc(64 * 8 * size, &p));
    ExchangeThroughPeerPointers((uint64_t *)p, rank, size, 64);
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(Shmem, FinalizeThenInitAgainWorksRoundAfterRound) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    for (int round = 0; round < 3; round++) {
      MORI_ASSERT_OK(InitPe(rank, size, "again" + std::to_string(round)));
      EXPECT_EQ(shmem_mype(), rank);
      void *p = nullptr;
      MORI_ASSERT_OK(shmem_malloc(64 * 8 * size, &p));
      ExchangeThroughPeerPointers((uint64_t *)p, rank, size, 64);
      if (round == 1) MORI_ASSERT_OK(shmem_free(p));  // left for finalize in the other rounds
      MORI_ASSERT_OK(shmem_finalize());
      EXPECT_EQ(shmem_ptr_p2p(p, rank, rank), nullptr);
      EXPECT_EQ(mori_mem_count(), 0) << "finalize released everything shmem held";
    }
  });
}

// shmem_finalize keeps the device's heap (shared with mori_mem_alloc and
// the torch backend; mori_finalize releases it): heap settings changed for
// the next init do not apply, and that init says so, naming each one.
TEST(Shmem, ReinitWithOtherHeapSettingsSaysTheyDoNotApply) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "reheap0"));
    MORI_ASSERT_OK(shmem_finalize());
    setenv("MORI_SHMEM_HEAP_SIZE", "128M", 1);
    int rc = 0;
    std::string log = mori_test::StderrOf([&] { rc = InitPe(rank, size, "reheap1"); });
    MORI_ASSERT_OK(rc);
    EXPECT_NE(log.find("MORI_SHMEM_HEAP_SIZE=128 MiB (the heap's is 64 MiB)"), std::string::npos) << log;
    MORI_EXPECT_OK(shmem_finalize());
    MORI_EXPECT_OK(mori_finalize());  // releases the heap: the next init makes it as asked
    MORI_ASSERT_OK(InitPe(rank, size, "reheap2"));
    mori_heap_stats_t st;
    MORI_ASSERT_OK(mori_heap_stats(-1, &st));
    EXPECT_EQ(st.limit, (size_t)128 << 20);
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(Shmem, ModuleInitIsNotSupportedOnTheHostPlatform) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "module"));
    int fake_module = 0;
    EXPECT_EQ(shmem_module_init(&fake_module), MORI_ENOTSUP);
    EXPECT_NE(std::string(mori_last_error()).find("no GPU modules on the host platform"), std::string::npos)
        << mori_last_error();
    EXPECT_EQ(shmem_module_init(nullptr), MORI_EINVAL);
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(Shmem, DisableP2pLeavesOnlyThisPeReachableByLoadStore) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    setenv("MORI_DISABLE_P2P", "1", 1);
    MORI_ASSERT_OK(InitPe(rank, size, "nop2p"));
    void *p = nullptr;
    MORI_ASSERT_OK(shmem_malloc(4096, &p));
    mori_shmem_device_state_t st;
    MORI_ASSERT_OK(mori_shmem_device_state(&st));
    EXPECT_EQ(shmem_ptr_p2p(p, rank, rank), p);
    for (int pe = 0; pe < size; pe++) {
      if (pe == rank) continue;
      EXPECT_EQ(shmem_ptr_p2p(p, rank, pe), nullptr);
      EXPECT_NE(std::string(mori_last_error()).find("not reached by load/store"), std::string::npos) << mori_last_error();
      EXPECT_EQ(shmem_dev_ptr_p2p(st, p, pe), nullptr);
      EXPECT_EQ(shmem_dev_putmem_thread(st, p, &st, 8, pe), MORI_DEVICE_EUNREACHABLE);
    }
    EXPECT_EQ(shmem_dev_barrier_all_block(st, 1000000), size > 1 ? MORI_DEVICE_EUNREACHABLE : MORI_DEVICE_OK);
    MORI_EXPECT_OK(shmem_barrier_all());
    MORI_EXPECT_OK(shmem_free(p));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(Shmem, SocketIfnameChoosesTheBootstrapInterface) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    setenv("MORI_SOCKET_IFNAME", "lo", 1);
    MORI_ASSERT_OK(InitPe(rank, size, "ifname"));
    MORI_EXPECT_OK(shmem_barrier_all());
    MORI_EXPECT_OK(shmem_finalize());
    if (rank == 0) {
      setenv("MORI_SOCKET_IFNAME", "no-such-nic", 1);
      mori_shmem_uniqueid_t id;
      EXPECT_EQ(shmem_get_unique_id(&id), MORI_EINVAL);
      EXPECT_NE(std::string(mori_last_error()).find("MORI_SOCKET_IFNAME=\"no-such-nic\" matches no interface"),
                std::string::npos)
          << mori_last_error();
      // Every interface excluded, loopback too: no fallback to loopback.
      std::string all = "^";
      struct ifaddrs *ifs = nullptr;
      ASSERT_EQ(getifaddrs(&ifs), 0);
      for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
        if (all.find("," + std::string(i->ifa_name) + ",") == std::string::npos) all += std::string(i->ifa_name) + ",";
      freeifaddrs(ifs);
      setenv("MORI_SOCKET_IFNAME", all.c_str(), 1);
      EXPECT_EQ(shmem_get_unique_id(&id), MORI_EINVAL) << all;
      EXPECT_NE(std::string(mori_last_error()).find("matches no interface"), std::string::npos) << mori_last_error();
    }
  });
}

}  // namespace
