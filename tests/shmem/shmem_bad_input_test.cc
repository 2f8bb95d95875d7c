// SPDX-License-Identifier: MIT
// MORI Shmem's unhappy paths, across separate processes: every bad input
// is a negative code and a message that names the PE and the sizes, on
// every PE, within a bounded time — never a crash or a hang — and shmem is
// still usable afterwards.
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "shmem/internal/unique_id.h"
#include "tests/shmem/pe.h"

using mori_shmem_test::HeapOffset;
using mori_shmem_test::IdFile;
using mori_shmem_test::InitPe;
using mori_shmem_test::ReadIdBytes;
using mori_shmem_test::ShareId;
using mori_shmem_test::UseSmallHeap;
using mori_shmem_test::WriteId;
using mori_test::TestRanks;

namespace {

#define EXPECT_ERROR(expr, code, text)                                                                     \
  do {                                                                                                     \
    int rc_ = (expr);                                                                                      \
    EXPECT_EQ(rc_, (code)) << #expr << " -> " << mori_err_name(rc_) << ": " << mori_last_error();          \
    EXPECT_NE(std::string(mori_last_error()).find(text), std::string::npos) << #expr << ": " << mori_last_error(); \
  } while (0)

std::string Str(int v) { return std::to_string(v); }

// A shared file mapping of `bytes` (what shmem_buffer_register adopts on
// the host platform), or MAP_FAILED.
char *MapMemfd(const char *name, size_t bytes) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return (char *)MAP_FAILED;
  void *p = ftruncate(fd, (off_t)bytes) == 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  return (char *)p;
}

TEST(ShmemBadInput, EveryCallBeforeInitSaysNotInitialised) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    void *p = (void *)1;
    EXPECT_ERROR(shmem_mype(), MORI_ENOT_INITIALIZED, "shmem_mype: shmem is not initialised");
    EXPECT_ERROR(shmem_npes(), MORI_ENOT_INITIALIZED, "shmem_npes");
    EXPECT_ERROR(shmem_num_qp_per_pe(), MORI_ENOT_INITIALIZED, "shmem_num_qp_per_pe");
    EXPECT_ERROR(shmem_malloc(64, &p), MORI_ENOT_INITIALIZED, "shmem_malloc");
    EXPECT_EQ(p, nullptr);
    EXPECT_ERROR(shmem_malloc_align(64, 64, &p), MORI_ENOT_INITIALIZED, "shmem_malloc_align");
    EXPECT_ERROR(shmem_ext_malloc_with_flags(64, 0, &p), MORI_ENOT_INITIALIZED, "shmem_ext_malloc_with_flags");
    EXPECT_ERROR(shmem_free(&p), MORI_ENOT_INITIALIZED, "shmem_free");
    EXPECT_ERROR(shmem_buffer_register(&p, 8), MORI_ENOT_INITIALIZED, "shmem_buffer_register");
    EXPECT_ERROR(shmem_buffer_deregister(&p, 8), MORI_ENOT_INITIALIZED, "shmem_buffer_deregister");
    EXPECT_ERROR(shmem_barrier_all(), MORI_ENOT_INITIALIZED, "shmem_barrier_all");
    EXPECT_ERROR(shmem_module_init(&p), MORI_ENOT_INITIALIZED, "shmem_module_init");
    EXPECT_ERROR(mori_shmem_check(), MORI_ENOT_INITIALIZED, "mori_shmem_check");
    mori_shmem_device_state_t st;
    EXPECT_ERROR(mori_shmem_device_state(&st), MORI_ENOT_INITIALIZED, "mori_shmem_device_state");
    mori_comm_t *comm = nullptr;
    EXPECT_ERROR(mori_shmem_comm(&comm), MORI_ENOT_INITIALIZED, "mori_shmem_comm");
    EXPECT_EQ(shmem_ptr_p2p(&p, 0, 0), nullptr);
    EXPECT_NE(std::string(mori_last_error()).find("not initialised"), std::string::npos);
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(ShmemBadInput, InitArgumentsAreCheckedBeforeAnythingStarts) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    UseSmallHeap();
    mori_shmem_uniqueid_t id;
    MORI_ASSERT_OK(shmem_get_unique_id(&id));
    EXPECT_ERROR(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 1, &id), MORI_EINVAL, "no plug-ins listed");
    MORI_ASSERT_OK(mori_shmem_use_local_plugins());
    EXPECT_ERROR(shmem_init_attr(7, 0, 1, &id), MORI_EINVAL, "flags 7");
    EXPECT_ERROR(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, 2, 2, &id), MORI_EINVAL, "rank 2 of 2 PEs is out of range");
    EXPECT_ERROR(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 0, &id), MORI_EINVAL, "rank 0 of 0 PEs");
    EXPECT_ERROR(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 1, nullptr), MORI_EINVAL, "the unique ID is NULL");
    EXPECT_ERROR(mori_shmem_use_plugins(nullptr, 0, nullptr, 0), MORI_EINVAL, "handle libraries");
    MORI_ASSERT_OK(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 1, &id));  // still works
    EXPECT_ERROR(mori_shmem_use_local_plugins(), MORI_EBUSY, "call it before shmem_init_attr");
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(ShmemBadInput, InitTwiceIsRefusedAndTheFirstInitStands) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "twice"));
    mori_shmem_uniqueid_t other;
    MORI_ASSERT_OK(shmem_get_unique_id(&other));
    EXPECT_ERROR(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, rank, size, &other), MORI_EEXIST,
                 "already initialised as PE " + Str(rank) + " of " + Str(size));
    EXPECT_EQ(shmem_mype(), rank);
    MORI_EXPECT_OK(shmem_barrier_all());
    MORI_EXPECT_OK(shmem_finalize());
  });
}

// An ID used a second time by the process that made it is refused at once,
// saying so (it read "another process holds that address"); a new ID works.
TEST(ShmemBadInput, AUniqueIdUsedTwiceIsNamedAsSuch) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    UseSmallHeap();
    mori_shmem_uniqueid_t id, fresh;
    MORI_ASSERT_OK(mori_shmem_use_local_plugins());
    MORI_ASSERT_OK(shmem_get_unique_id(&id));
    MORI_ASSERT_OK(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 1, &id));
    MORI_ASSERT_OK(shmem_finalize());
    EXPECT_ERROR(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 1, &id), MORI_EINVAL,
                 "this unique ID was used by an earlier shmem_init_attr of this process");
    MORI_ASSERT_OK(shmem_get_unique_id(&fresh));
    MORI_ASSERT_OK(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 1, &fresh));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(ShmemBadInput, UniqueIdOfTheWrongLengthOrDamagedIsRefused) {
  EXPECT_RANKS_PASS(1, [](int, int) {
    mori_shmem_uniqueid_t id, out;
    MORI_ASSERT_OK(shmem_get_unique_id(&id));
    MORI_EXPECT_OK(mori_shmem_uniqueid_from_bytes(id.bytes, sizeof(id.bytes), &out));
    EXPECT_EQ(memcmp(&id, &out, sizeof(id)), 0);
    EXPECT_ERROR(mori_shmem_uniqueid_from_bytes(id.bytes, 100, &out), MORI_EINVAL, "100 bytes; a unique ID has 128");
    EXPECT_ERROR(mori_shmem_uniqueid_from_bytes(id.bytes, 0, &out), MORI_EINVAL, "0 bytes");
    char zeros[128] = {0};
    EXPECT_ERROR(mori_shmem_uniqueid_from_bytes(zeros, sizeof(zeros), &out), MORI_EINVAL, "not a mori shmem unique ID");
    mori_shmem_uniqueid_t damaged = id;
    damaged.bytes[30] ^= 0x40;
    EXPECT_ERROR(mori_shmem_uniqueid_from_bytes(damaged.bytes, sizeof(damaged.bytes), &out), MORI_EINVAL, "checksum");
    // shmem_init_attr checks it too.
    MORI_ASSERT_OK(mori_shmem_use_local_plugins());
    EXPECT_ERROR(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, 0, 1, &damaged), MORI_EINVAL, "checksum");
    EXPECT_EQ(shmem_mype(), MORI_ENOT_INITIALIZED);
  });
}

TEST(ShmemBadInput, UniqueIdOfAnotherJobIsTurnedAwayAndTheJobGoesOn) {
  EXPECT_RANKS_PASS(TestRanks() + 1, [](int rank, int size) {
    UseSmallHeap();
    int job = size - 1, stray = size - 1;  // PEs 0..job-1; the last process holds another job's ID
    std::string turned_away = IdFile("otherjob_turned_away");
    if (rank != stray) {
      // The job's rank 0 is listening; the others join once the stray has
      // been turned away, so that the stray meets a start-up in progress.
      if (rank != 0) ReadIdBytes(turned_away);
      MORI_ASSERT_OK(InitPe(rank, job, "otherjob"));
      EXPECT_EQ(shmem_npes(), job);
      MORI_EXPECT_OK(shmem_barrier_all());
      MORI_EXPECT_OK(shmem_finalize());
      return;
    }
    // The same address as the job's rank 0, another job's secret.
    std::string bytes = ReadIdBytes(IdFile("otherjob"));
    mori_shmem_uniqueid_t id, forged;
    MORI_ASSERT_OK(mori_shmem_uniqueid_from_bytes(bytes.data(), bytes.size(), &id));
    mori_shmem_uid_info_t info;
    MORI_ASSERT_OK(mori_shmem_uid_parse(&id, &info));
    info.secret[0] ^= 0x5a;
    MORI_ASSERT_OK(mori_shmem_uid_compose(&info, &forged));
    MORI_ASSERT_OK(mori_shmem_use_local_plugins());
    EXPECT_ERROR(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, job > 1 ? 1 : 0, job > 1 ? job : 2, &forged), MORI_EACCES,
                 "secret");
    WriteId(turned_away, id);  // any content: the file's existence is the signal
  });
}

TEST(ShmemBadInput, MismatchedWorldSizesAreNamedOnEveryPeAndInitWorksAfterwards) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    int odd = size - 1;
    auto start = std::chrono::steady_clock::now();
    EXPECT_ERROR(InitPe(rank, rank == odd ? size + 1 : size, "worldsize"), MORI_EMISMATCH,
                 "rank " + Str(odd) + " says the world has " + Str(size + 1) + " ranks, rank 0 says " + Str(size));
    // Within the start-up grace (3 s once the odd PE is heard), not the
    // 60 s timeout; the bound leaves a loaded machine room to start PEs late.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "named within the start-up grace";
    EXPECT_EQ(shmem_mype(), MORI_ENOT_INITIALIZED);
    MORI_ASSERT_OK(InitPe(rank, size, "worldsize_again"));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(ShmemBadInput, APeThatNeverInitialisesIsNamedNotWaitedForForever) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    // 5 s: a PE the loaded machine stalls past a shorter timeout would be
    // named beside the absent one.
    setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "5000", 1);
    int absent = size - 1;
    if (rank == absent) {
      if (rank == 0) ShareId(rank, "absent");  // someone must still publish the ID
      return;
    }
    EXPECT_ERROR(InitPe(rank, size, "absent"), MORI_ERANK_TIMEOUT, "rank(s) " + Str(absent));
  });
}

// A NULL module handle is named once: "shmem_module_init: shmem_module_init:"
// said the call twice.
TEST(ShmemBadInput, ANullModuleHandleIsNamedOnce) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "module"));
    EXPECT_ERROR(shmem_module_init(nullptr), MORI_EINVAL, "shmem_module_init: the module handle is NULL");
    std::string msg = mori_last_error();
    EXPECT_EQ(msg.find("shmem_module_init"), msg.rfind("shmem_module_init")) << msg;
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(ShmemBadInput, NonPowerOfTwoAlignmentFailsOnEveryPeNamingIt) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "align"));
    void *p = (void *)1;
    int odd = size - 1;
    EXPECT_ERROR(shmem_malloc_align(rank == odd ? 3000 : 4096, 4096, &p), MORI_EINVAL, "alignment 3000 is not a power of two");
    EXPECT_EQ(p, nullptr);
    if (rank != odd) {
      EXPECT_NE(std::string(mori_last_error()).find("rank(s) " + Str(odd) + " failed; rank " + Str(odd) + ": "), std::string::npos) << mori_last_error();
    }
    EXPECT_ERROR(shmem_malloc_align(0, 4096, &p), MORI_EINVAL, "alignment 0");
    // Nothing was allocated: the next allocation lands where it would have.
    MORI_ASSERT_OK(shmem_malloc_align(1 << 12, 4096, &p));
    MORI_EXPECT_OK(shmem_free(p));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

// A NULL out on one PE is that PE's bad argument in the allocation's
// rendezvous: every PE fails at once, naming it, and the next allocation
// and barrier work. Before, that PE returned before the rendezvous; the
// others waited out their timeout and every later collective call failed.
TEST(ShmemBadInput, ANullOutOnOnePeFailsEveryPeAtOnceAndTheJobGoesOn) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "nullout"));
    int odd = size - 1;
    void *p = (void *)1;
    auto start = std::chrono::steady_clock::now();
    EXPECT_ERROR(shmem_malloc(4096, rank == odd ? nullptr : &p), MORI_EINVAL, "shmem_malloc: out is NULL");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "the other PEs waited for PE " << odd;
    if (rank != odd) {
      EXPECT_EQ(p, nullptr);
      EXPECT_NE(std::string(mori_last_error()).find("rank(s) " + Str(odd) + " failed"), std::string::npos) << mori_last_error();
    }
    MORI_ASSERT_OK(shmem_barrier_all());
    MORI_ASSERT_OK(shmem_malloc(4096, &p));
    MORI_EXPECT_OK(shmem_free(p));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

// As on a GPU, freed heap memory waits for a device sync before reuse. A
// shmem_malloc that failed on every PE because of one PE (a NULL out, a
// size of its own) made the others free a carve no kernel ever saw: it
// waited as a pending free, so their next carve landed after it while the
// odd PE's landed on it, and the next, correct, shmem_malloc failed with
// "the ranks' allocation sequences diverged" on every PE.
TEST(ShmemBadInput, AfterOnePesFailureTheNextMallocLandsInStepWithDeferredFrees) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    setenv("MORI_HEAP_DEFER_FREES", "1", 1);  // what GPUs do
    MORI_ASSERT_OK(InitPe(rank, size, "deferred"));
    int odd = size - 1;
    void *p = (void *)1;
    EXPECT_ERROR(shmem_malloc(64 << 10, rank == odd ? nullptr : &p), MORI_EINVAL, "out is NULL");
    MORI_ASSERT_OK(shmem_malloc(4096, &p));
    MORI_EXPECT_OK(shmem_free(p));
    if (size > 1) {
      EXPECT_ERROR(shmem_malloc(rank == odd ? (128 << 10) : (64 << 10), &p), MORI_EMISMATCH, "ranks disagree on the size");
      MORI_ASSERT_OK(shmem_malloc(4096, &p));
      MORI_EXPECT_OK(shmem_free(p));
    }
    MORI_EXPECT_OK(shmem_finalize());
    unsetenv("MORI_HEAP_DEFER_FREES");
  });
}

TEST(ShmemBadInput, DivergingSizesFlagsOrHeapHistoriesAreNamed) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "diverge"));
    int odd = size - 1;
    void *p = nullptr;
    if (size > 1) {
      EXPECT_ERROR(shmem_malloc(rank == odd ? 8192 : 4096, &p), MORI_EMISMATCH,
                   "ranks disagree on the size (rank 0: 4096 bytes, rank " + Str(odd) + ": 8192 bytes)");
      EXPECT_ERROR(shmem_ext_malloc_with_flags(4096, rank == odd ? MORI_SHMEM_MALLOC_CACHED : 0, &p), MORI_EMISMATCH,
                   "ranks disagree on the flags (rank 0: 0x0, rank " + Str(odd) + ": 0x2)");
      EXPECT_ERROR(shmem_malloc_align(rank == odd ? 8192 : 4096, 4096, &p), MORI_EMISMATCH,
                   "ranks disagree on the alignment (rank 0: 0x1000, rank " + Str(odd) + ": 0x2000)");
      // An empty allocation on one PE only is a size the others did not ask for.
      EXPECT_ERROR(shmem_malloc(rank == odd ? 0 : 4096, &p), MORI_EMISMATCH,
                   "ranks disagree on the size (rank 0: 4096 bytes, rank " + Str(odd) + ": 0 bytes)");
      EXPECT_EQ(p, nullptr);
      // A carve only the odd PE made shifts its heap: the offsets differ.
      void *extra = nullptr;
      if (rank == odd) MORI_ASSERT_OK(mori_mem_alloc(4096, nullptr, &extra));
      EXPECT_ERROR(shmem_malloc(4096, &p), MORI_EMISMATCH, "rank " + Str(odd) + "'s carve is at heap offset");
      EXPECT_EQ(p, nullptr);
      if (extra) MORI_EXPECT_OK(mori_mem_free(extra));
    }
    // Larger than a heap chunk (4 MiB here): not heap memory, so no heap
    // offset to agree on; refused on every PE, nothing left allocated.
    mori_heap_stats_t before, after;
    MORI_ASSERT_OK(mori_heap_stats(-1, &before));
    EXPECT_ERROR(shmem_malloc(5 << 20, &p), MORI_ENOTSUP, "larger than one chunk of the symmetric heap (4194304 bytes)");
    EXPECT_EQ(p, nullptr);
    MORI_ASSERT_OK(mori_heap_stats(-1, &after));
    EXPECT_EQ(after.allocations, before.allocations);
    // The heap holds normal memory here: uncached memory is refused, not faked.
    EXPECT_ERROR(shmem_ext_malloc_with_flags(4096, MORI_SHMEM_MALLOC_UNCACHED, &p), MORI_ENOTSUP,
                 "uncached memory asked for, the heap holds cached (normal) memory");
    EXPECT_ERROR(shmem_ext_malloc_with_flags(4096, 0x80, &p), MORI_EINVAL, "unknown flag bits 0x80");
    EXPECT_ERROR(shmem_ext_malloc_with_flags(4096, MORI_SHMEM_MALLOC_CACHED | MORI_SHMEM_MALLOC_UNCACHED, &p), MORI_EINVAL,
                 "both cached and uncached");
    MORI_ASSERT_OK(shmem_ext_malloc_with_flags(4096, MORI_SHMEM_MALLOC_CACHED, &p));
    MORI_EXPECT_OK(shmem_free(p));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(ShmemBadInput, ForeignFreedOrDivergingFreesFailOnEveryPeAndFreeNothing) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "free"));
    void *p = nullptr, *q = nullptr;
    MORI_ASSERT_OK(shmem_malloc(4096, &p));
    MORI_ASSERT_OK(shmem_malloc(4096, &q));
    int odd = size - 1, stack = 0;
    EXPECT_ERROR(shmem_free(rank == odd ? (void *)&stack : p), MORI_ENOT_OWNED, "was not allocated by shmem_malloc");
    if (rank != odd) {
      EXPECT_NE(std::string(mori_last_error()).find("rank(s) " + Str(odd) + " failed; rank " + Str(odd) + ": "), std::string::npos) << mori_last_error();
    }
    EXPECT_NE(shmem_ptr_p2p(p, rank, rank), nullptr) << "nothing was freed";
    EXPECT_ERROR(shmem_free((char *)p + 8), MORI_EINVAL, "is inside the allocation");
    if (size > 1) {
      EXPECT_ERROR(shmem_free(rank == odd ? q : p), MORI_EMISMATCH,
                   "PE " + Str(odd) + " frees heap offset " + std::to_string(HeapOffset(q)));
    }
    MORI_EXPECT_OK(shmem_free(p));
    EXPECT_ERROR(shmem_free(p), MORI_EINVAL, "double free");
    EXPECT_ERROR(shmem_free((char *)p + 8), MORI_EINVAL, "which was freed");  // not "not allocated by shmem_malloc"
    EXPECT_ERROR(shmem_buffer_deregister(q, 4096), MORI_EINVAL, "it is a shmem allocation: use shmem_free");
    MORI_EXPECT_OK(shmem_free(q));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

// A pointer into freed memory is named with the allocation freed there
// last: the heap reuses places, and it named the oldest one it remembered.
TEST(ShmemBadInput, AFreedPointerIsNamedWithTheLatestAllocationFreedThere) {
  EXPECT_RANKS_PASS(1, [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "freed-latest"));
    void *first = nullptr, *second = nullptr, *out = nullptr;
    MORI_ASSERT_OK(shmem_malloc(16, &first));
    MORI_ASSERT_OK(shmem_free(first));
    MORI_ASSERT_OK(shmem_malloc(64, &second));
    MORI_ASSERT_OK(shmem_free(second));
    ASSERT_EQ(second, first) << "the layout this test needs: the heap reuses the place";
    EXPECT_ERROR(mori_shmem_translate(second, 0, &out), MORI_ENOT_OWNED, "(64 bytes)");
    MORI_EXPECT_OK(shmem_finalize());
  });
}

TEST(ShmemBadInput, PointerTranslationAndRegistrationRefuseWhatTheyCannotServe) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "ptr"));
    void *p = nullptr;
    MORI_ASSERT_OK(shmem_malloc(4096, &p));
    int stack = 0;
    EXPECT_EQ(shmem_ptr_p2p(p, (rank + 1) % (size + 1), rank), nullptr);
    EXPECT_NE(std::string(mori_last_error()).find("is not this PE"), std::string::npos) << mori_last_error();
    EXPECT_EQ(shmem_ptr_p2p(p, rank, size), nullptr);
    EXPECT_NE(std::string(mori_last_error()).find("dest_pe " + Str(size) + " outside"), std::string::npos);
    EXPECT_EQ(shmem_ptr_p2p(p, rank, -1), nullptr);
    EXPECT_EQ(shmem_ptr_p2p(&stack, rank, rank), nullptr);
    EXPECT_NE(std::string(mori_last_error()).find("not in a shmem allocation"), std::string::npos);
    // Private memory cannot be shared with peers: every PE is told which PE.
    std::string private_buf(4096, 'x');
    EXPECT_ERROR(shmem_buffer_register(rank == size - 1 ? &private_buf[0] : nullptr, 4096),
                 rank == size - 1 ? MORI_ENOT_OWNED : MORI_EINVAL, "shmem_buffer_register");
    EXPECT_ERROR(shmem_buffer_register(p, 64), MORI_EEXIST, "overlaps a shmem allocation");
    // The private buffer's PE says why neither way of adopting it works.
    if (rank == size - 1) {
      EXPECT_EQ(shmem_buffer_register(&private_buf[0], 4096), MORI_ENOT_OWNED);
      std::string why = mori_last_error();
      EXPECT_NE(why.find("PE " + Str(rank) + " cannot share"), std::string::npos) << why;
      EXPECT_NE(why.find("not a virtual-memory mapping"), std::string::npos) << why;
      EXPECT_NE(why.find("runtime's allocator"), std::string::npos) << why;
    } else {
      EXPECT_ERROR(shmem_buffer_register(nullptr, 4096), MORI_EINVAL, "shmem_buffer_register");
    }
    MORI_EXPECT_OK(shmem_free(p));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

// A binding's own refusal of one PE's arguments (mori_shmem_refused): that
// PE takes the call's collective step, failing it, so every PE's
// shmem_malloc / shmem_free / shmem_buffer_register fails at once naming
// it and its reason, nothing is made or freed, and the next call pairs
// with the next call on every PE.
TEST(ShmemBadInput, ARefusalOfOnePesArgumentsFailsTheCallOnEveryPeInStep) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "refused"));
    const int last = size - 1;
    const std::string named = "PE " + Str(last) + " refused its arguments: size 1.5";
    void *p = nullptr;
    if (rank == last) {
      EXPECT_ERROR(mori_shmem_refused("shmem_malloc", "size 1.5 is not an int"), MORI_EINVAL, named);
    } else {
      EXPECT_ERROR(shmem_malloc(4096, &p), MORI_EINVAL, named);
      EXPECT_EQ(p, nullptr);
    }
    MORI_ASSERT_OK(shmem_malloc(4096, &p));  // every PE's next call is this one
    for (int pe = 0; pe < size; pe++) ASSERT_NE(shmem_ptr_p2p(p, rank, pe), nullptr);
    if (rank == last) {
      EXPECT_ERROR(mori_shmem_refused("shmem_free", "size 1.5 is not a pointer"), MORI_EINVAL, named);
    } else {
      EXPECT_ERROR(shmem_free(p), MORI_EINVAL, named);
    }
    EXPECT_NE(shmem_ptr_p2p(p, rank, rank), nullptr) << "nothing was freed";
    const size_t bytes = 1 << 16;
    char *buf = MapMemfd("register_refused", bytes);
    ASSERT_NE(buf, MAP_FAILED);
    if (rank == last) {
      EXPECT_ERROR(mori_shmem_refused("shmem_buffer_register", "size 1.5 bytes"), MORI_EINVAL, named);
    } else {
      EXPECT_ERROR(shmem_buffer_register(buf, bytes), MORI_EINVAL, named);
    }
    MORI_EXPECT_OK(shmem_buffer_register(buf, bytes));  // nothing was registered, and in step
    MORI_EXPECT_OK(shmem_buffer_deregister(buf, bytes));
    MORI_EXPECT_OK(shmem_free(p));
    // Not a collective it knows: refused locally, nothing taken.
    EXPECT_ERROR(mori_shmem_refused("shmem_barrier_all", "x"), MORI_EINVAL, "not one of the collective calls");
    EXPECT_ERROR(mori_shmem_refused(nullptr, "x"), MORI_EINVAL, "call is required");
    MORI_EXPECT_OK(shmem_barrier_all());
    MORI_EXPECT_OK(shmem_finalize());
    EXPECT_ERROR(mori_shmem_refused("shmem_malloc", "x"), MORI_ENOT_INITIALIZED, "shmem_malloc");
    munmap(buf, bytes);
  });
}

// A range whose end wraps the address space was accepted on every PE (the
// end check overflowed) and then could not be deregistered: now every PE
// fails naming the range.
TEST(ShmemBadInput, ARegistrationRangeThatWrapsIsRefusedOnEveryPe) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "wrap"));
    const size_t bytes = 1 << 16;
    char *p = MapMemfd("register_wrap", bytes);
    ASSERT_NE(p, MAP_FAILED);
    EXPECT_ERROR(shmem_buffer_register(p + 16, SIZE_MAX - 8), MORI_ERANGE, "runs past the end of the address space");
    EXPECT_NE(std::string(mori_last_error()).find("+" + std::to_string(SIZE_MAX - 8) + " bytes)"), std::string::npos)
        << mori_last_error();
    EXPECT_ERROR(shmem_buffer_register(p + 16, bytes), MORI_EINVAL, "run past the end of its mapping");
    MORI_EXPECT_OK(shmem_buffer_register(p, bytes));  // the whole mapping still registers
    MORI_EXPECT_OK(shmem_buffer_deregister(p, bytes));
    MORI_EXPECT_OK(shmem_finalize());
    munmap(p, bytes);
  });
}

}  // namespace

namespace {

// The guide's defaults hold for the shmem API: without MORI_SHMEM_MODE the
// heap is static, so MORI_SHMEM_HEAP_SIZE is required — every PE fails
// naming it, and init works again once it is set; the heap is then static
// and of the uncached type.
TEST(ShmemBadInput, TheGuidesHeapDefaultsHoldAndTheHeapSizeIsRequired) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    unsetenv("MORI_SHMEM_MODE");
    unsetenv("MORI_SHMEM_HEAP_SIZE");
    unsetenv("MORI_SHMEM_HEAP_TYPE");
    EXPECT_ERROR(InitPe(rank, size, "defaults-1"), MORI_EINVAL, "MORI_SHMEM_HEAP_SIZE must be set");
    EXPECT_NE(std::string(mori_last_error()).find("the shmem API's default"), std::string::npos) << mori_last_error();
    setenv("MORI_SHMEM_HEAP_SIZE", "32M", 1);
    MORI_ASSERT_OK(InitPe(rank, size, "defaults-2"));
    mori_heap_stats_t stats;
    MORI_ASSERT_OK(mori_heap_stats(-1, &stats));
    EXPECT_EQ(stats.mode, MORI_HEAP_STATIC);
    EXPECT_EQ(stats.uncached, 1);
    EXPECT_EQ(stats.limit, (size_t)32 << 20);
    void *p = nullptr;
    MORI_ASSERT_OK(shmem_malloc(1 << 20, &p));
    MORI_EXPECT_OK(shmem_free(p));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

// A static heap too large for the address space left: every PE fails
// init with ENOMEM naming MORI_SHMEM_HEAP_SIZE, the variable to lower (it
// named MORI_SHMEM_MODE, which was already static), and init works again
// with a heap that fits.
TEST(ShmemBadInput, AHeapTooLargeForTheAddressSpaceNamesTheVariableToLower) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    UseSmallHeap();
    setenv("MORI_SHMEM_MODE", "static", 1);
    setenv("MORI_SHMEM_HEAP_SIZE", "64T", 1);
    EXPECT_ERROR(InitPe(rank, size, "huge-heap"), MORI_ENOMEM, "MORI_SHMEM_HEAP_SIZE");
    EXPECT_EQ(std::string(mori_last_error()).find("MORI_SHMEM_MODE"), std::string::npos) << mori_last_error();
    MORI_ASSERT_OK(mori_finalize());
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "heap-that-fits"));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

// A heap of another kind on one PE (MORI_SHMEM_HEAP_TYPE, the mode, the
// chunk size) fails init on every PE, naming the PE and the variable: a
// PE with uncached memory beside PEs with normal memory initialised, and
// on AMD one symmetric allocation then mixed fine- and coarse-grained
// memory.
TEST(ShmemBadInput, HeapsOfAnotherKindOnOnePeFailInitOnEveryPe) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 2) return;
    UseSmallHeap();
    int last = size - 1;
    if (rank == last) setenv("MORI_SHMEM_HEAP_TYPE", "uncached", 1);
    EXPECT_ERROR(InitPe(rank, size, "heap-type"), MORI_EMISMATCH, "MORI_SHMEM_HEAP_TYPE");
    EXPECT_NE(std::string(mori_last_error()).find("PE " + std::to_string(last) + "'s heap memory is uncached"),
              std::string::npos)
        << mori_last_error();
    MORI_ASSERT_OK(mori_finalize());  // the heaps go; the next init makes them anew
    UseSmallHeap();
    if (rank == last) setenv("MORI_SHMEM_VMM_CHUNK_SIZE", "8M", 1);
    EXPECT_ERROR(InitPe(rank, size, "chunk-size"), MORI_EMISMATCH, "MORI_SHMEM_VMM_CHUNK_SIZE");
    MORI_ASSERT_OK(mori_finalize());
    UseSmallHeap();
    MORI_ASSERT_OK(InitPe(rank, size, "alike"));
    MORI_EXPECT_OK(shmem_finalize());
  });
}

}  // namespace
