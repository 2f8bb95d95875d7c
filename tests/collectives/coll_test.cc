// SPDX-License-Identifier: MIT
// The collectives in CPU ranks (host platform), across separate processes:
// every result against a sequential reference in rank order, many calls
// back to back with fresh data each time, sub-teams, and the unhappy paths.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mori/collectives.h"
#include "mori/device/coll/impl/numeric__funcs.h"
#include "mori/mem.h"
#include "mori/team.h"
#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

uint8_t Byte(int src, int dst, size_t i, int call) { return (uint8_t)(src * 131 + dst * 31 + i * 7 + call * 13 + 1); }

// A symmetric buffer: an allocation and its window over the comm, torn
// down once every rank is done with it (peers write into it).
struct SymmetricBuffer {
  World &w;
  void *mem = nullptr;
  mori_window_t *win = nullptr;
  SymmetricBuffer(World &world, size_t bytes) : w(world) {
    MORI_EXPECT_OK(mori_mem_alloc(bytes, nullptr, &mem));
    MORI_EXPECT_OK(mori_window_create(w.comm, mem, &win));
  }
  ~SymmetricBuffer() {
    MORI_EXPECT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_window_destroy(win));
    MORI_EXPECT_OK(mori_mem_free(mem));
  }
  uint8_t *at(size_t offset) const { return (uint8_t *)mem + offset; }
};

void CheckAllToAll(mori_coll_t *coll, int me, int n, size_t bytes, int calls) {
  std::vector<uint8_t> in(bytes * n), out(bytes * n);
  for (int call = 0; call < calls; call++) {
    for (int dst = 0; dst < n; dst++)
      for (size_t i = 0; i < bytes; i++) in[dst * bytes + i] = Byte(me, dst, i, call);
    std::fill(out.begin(), out.end(), 0xee);
    MORI_ASSERT_OK(mori_all_to_all(coll, in.data(), out.data(), bytes, nullptr));
    for (int src = 0; src < n; src++)
      for (size_t i = 0; i < bytes; i++)
        ASSERT_EQ(out[src * bytes + i], Byte(src, me, i, call))
            << "bytes " << bytes << " call " << call << " from member " << src << " at " << i;
  }
}

TEST(Collectives, AllToAllEverySizeBackToBack) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = nullptr;
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.workspace_bytes = 4 << 20;
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    for (const char *algo : {"ll", "slices", ""}) {  // each forced, then the automatic choice
      setenv("MORI_A2A_ALGO", algo, 1);
      for (size_t bytes : {(size_t)1, (size_t)100, (size_t)4096, (size_t)65536 + 48, (size_t)300000}) {
        MORI_ASSERT_OK(mori_coll_reserve(coll, mori_all_to_all_workspace(coll, bytes)));
        CheckAllToAll(coll, rank, size, bytes, 5);
      }
    }
    unsetenv("MORI_A2A_ALGO");
    MORI_EXPECT_OK(mori_coll_check(coll));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// Direct all-to-all into a window: every size and slicing, mixed with
// staged calls on the same context (they share epochs and flags), the
// output at an offset inside the window.
TEST(Collectives, AllToAllIntoAWindowBackToBack) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = nullptr;
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.workspace_bytes = 1 << 20;
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    const size_t max_bytes = 300000, offset = 4096;
    SymmetricBuffer buf(w, offset + max_bytes * size);
    mori_window_t *win = buf.win;
    uint8_t *out = buf.at(offset);
    std::vector<uint8_t> in(max_bytes * size), staged(max_bytes * size);
    int call = 0;
    // Direct at every size (LL only for 1 byte), then the automatic choice
    // (LL lines through the staging for small chunks).
    for (const char *slice : {"16", "4096", "", "auto"}) {
      setenv("MORI_A2A_LL_MAX_BYTES", strcmp(slice, "auto") ? "1" : "", 1);
      setenv("MORI_COLL_SLICE_BYTES", strcmp(slice, "auto") ? slice : "", 1);
      for (size_t bytes : {(size_t)1, (size_t)100, (size_t)4096, (size_t)65536 + 48, max_bytes}) {
        for (int rep = 0; rep < 3; rep++, call++) {
          for (int dst = 0; dst < size; dst++)
            for (size_t i = 0; i < bytes; i++) in[dst * bytes + i] = Byte(rank, dst, i, call);
          memset(out, 0xee, bytes * size);
          MORI_ASSERT_OK(mori_all_to_all_window(coll, in.data(), win, offset, bytes, nullptr));
          for (int src = 0; src < size; src++)
            for (size_t i = 0; i < bytes; i++)
              ASSERT_EQ(out[src * bytes + i], Byte(src, rank, i, call))
                  << "bytes " << bytes << " call " << call << " from member " << src << " at " << i;
          if (rep == 1) {  // a staged call in between
            MORI_ASSERT_OK(mori_coll_reserve(coll, mori_all_to_all_workspace(coll, 1000)));
            MORI_ASSERT_OK(mori_all_to_all(coll, in.data(), staged.data(), 1000, nullptr));
          }
        }
      }
    }
    unsetenv("MORI_COLL_SLICE_BYTES");
    unsetenv("MORI_A2A_LL_MAX_BYTES");
    // Bad input, refused locally with the reason.
    EXPECT_EQ(mori_all_to_all_window(coll, in.data(), win, offset + 1, max_bytes, nullptr), MORI_ERANGE);
    EXPECT_NE(std::string(mori_last_error()).find("rank " + std::to_string(rank) + " writes"), std::string::npos)
        << mori_last_error();
    EXPECT_EQ(mori_all_to_all_window(coll, in.data(), nullptr, 0, 16, nullptr), MORI_EINVAL);
    EXPECT_EQ(mori_all_to_all_window(coll, out + 8, win, offset, 16, nullptr), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("overlap"), std::string::npos) << mori_last_error();
    MORI_EXPECT_OK(mori_coll_check(coll));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// A member that makes a staged call while the others write into its window
// is not waited for forever: the writers time out naming it.
TEST(Collectives, AllToAllIntoAWindowNamesAMemberThatNeverStarts) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    // 2 s, from a barrier: the writers start together, and one the machine
    // stalls past the timeout would be named instead of the absent member.
    attr.timeout_ms = 2000;
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    SymmetricBuffer buf(w, 64 * size);
    mori_window_t *win = buf.win;
    int last = size - 1;
    setenv("MORI_A2A_LL_MAX_BYTES", "1", 1);  // the direct algorithm, whose writers wait for the start
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank != last) {
      std::vector<uint8_t> in(64 * size);
      int rc = mori_all_to_all_window(coll, in.data(), win, 0, 64, nullptr);
      EXPECT_EQ(rc, MORI_EDEVICE_TIMEOUT);
      std::string msg = mori_last_error();
      EXPECT_NE(msg.find("for rank " + std::to_string(last)), std::string::npos) << msg;
    }
    unsetenv("MORI_A2A_LL_MAX_BYTES");
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// Rows member src sends to member dst at call `call` (0 included).
int64_t Rows(int src, int dst, int call) { return (src * 7 + dst * 13 + call * 5) % 11; }

// Variable all-to-all: sizes drawn per call and per pair (zeros too), rows
// that are not a multiple of 16 bytes, back to back with other calls on the
// same context, every byte and the splits/offsets checked.
TEST(Collectives, AllToAllVSizesOnTheDevice) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, nullptr, &coll));
    const size_t max_rows = 11 * (size_t)size;
    for (size_t row_bytes : {(size_t)24, (size_t)4096 + 8}) {
      SymmetricBuffer buf(w, 64 + max_rows * row_bytes);
      mori_window_t *win = buf.win;
      uint8_t *out = buf.at(64);
      std::vector<uint8_t> in(max_rows * row_bytes);
      std::vector<int64_t> splits(size), got(2 * size);
      for (int call = 0; call < 6; call++) {
        size_t at = 0;
        for (int dst = 0; dst < size; dst++) {
          splits[dst] = Rows(rank, dst, call);
          for (size_t i = 0; i < (size_t)splits[dst] * row_bytes; i++) in[at + i] = Byte(rank, dst, i, call);
          at += (size_t)splits[dst] * row_bytes;
        }
        memset(out, 0xee, max_rows * row_bytes);
        MORI_ASSERT_OK(mori_all_to_all_v(coll, in.data(), splits.data(), win, 64, max_rows, row_bytes, got.data(), nullptr));
        int64_t offset = 0;
        for (int src = 0; src < size; src++) {
          int64_t rows = Rows(src, rank, call);
          ASSERT_EQ(got[src], rows) << "rows from member " << src << " at call " << call;
          ASSERT_EQ(got[size + src], offset) << "offset of member " << src << " at call " << call;
          for (size_t i = 0; i < (size_t)rows * row_bytes; i++)
            ASSERT_EQ(out[offset * row_bytes + i], Byte(src, rank, i, call))
                << "row bytes " << row_bytes << " call " << call << " from member " << src << " at " << i;
          offset += rows;
        }
        if (call == 2) {  // other calls on the same context in between
          std::vector<uint8_t> a(64 * size), b(64 * size);
          MORI_ASSERT_OK(mori_all_to_all(coll, a.data(), b.data(), 64, nullptr));
        }
      }
    }
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// What would overflow a destination's out is not written: the sender says
// how many rows were needed and how many fit; every rank goes on.
TEST(Collectives, AllToAllVRefusesWhatDoesNotFit) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, nullptr, &coll));
    const size_t cap = 4, row_bytes = 16;
    SymmetricBuffer buf(w, cap * row_bytes);
    mori_window_t *win = buf.win;
    // Every member sends 3 rows to member 0: 3 * size > 4 rows for size >= 2.
    std::vector<int64_t> splits(size, 0), got(2 * size);
    splits[0] = 3;
    std::vector<uint8_t> in(3 * row_bytes, 1);
    // Member 0 (whose out is too small) and every member whose rows start
    // past its end (all but 0) say so; nothing waits for the rows not sent.
    int rc = mori_all_to_all_v(coll, in.data(), splits.data(), win, 0, cap, row_bytes, got.data(), nullptr);
    EXPECT_EQ(rc, MORI_ERANGE);
    EXPECT_NE(std::string(mori_last_error()).find("rows needed"), std::string::npos) << mori_last_error();
    // Bad arguments, refused locally.
    EXPECT_EQ(mori_all_to_all_v(coll, in.data(), splits.data(), win, 0, cap + 1, row_bytes, got.data(), nullptr),
              MORI_ERANGE);
    EXPECT_EQ(mori_all_to_all_v(coll, in.data(), splits.data(), win, 0, cap, 0, got.data(), nullptr), MORI_EINVAL);
    EXPECT_EQ(mori_all_to_all_v(coll, in.data(), nullptr, win, 0, cap, row_bytes, got.data(), nullptr), MORI_EINVAL);
    // The context still works: one row to the next member.
    std::fill(splits.begin(), splits.end(), 0);
    splits[(rank + 1) % size] = 1;
    MORI_ASSERT_OK(mori_all_to_all_v(coll, in.data(), splits.data(), win, 0, cap, row_bytes, got.data(), nullptr));
    EXPECT_EQ(got[(rank + size - 1) % size], 1);
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// Rows member src sends to member dst's expert e at call `call`.
int64_t ExpertRows(int src, int dst, int e, int call) { return (src * 5 + dst * 3 + e * 7 + call) % 6; }

// MoE dispatch (expert-major out, expert starts aligned) then combine back
// with the splits/offsets the dispatch wrote: the combine's out equals the
// dispatch's in, every byte; the dispatch's out and its splits/offsets
// against a reference built here.
TEST(Collectives, AllToAllVExpertsDispatchThenCombineRoundTrips) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, nullptr, &coll));
    const uint32_t E = 3;
    const size_t row_bytes = 40, max_rows = 5 * E * (size_t)size + 8 * E;  // + alignment padding
    SymmetricBuffer a(w, max_rows * row_bytes), b(w, max_rows * row_bytes);
    mori_window_t *dispatched = a.win, *combined = b.win;
    uint8_t *mid = a.at(0), *back = b.at(0);
    std::vector<uint8_t> in(max_rows * row_bytes);
    std::vector<int64_t> splits(size * E), mid_so(2 * E * size), back_so(2 * size * E);
    for (size_t align : {(size_t)1, (size_t)4}) {
      for (int call = 0; call < 4; call++) {
        size_t at = 0;  // in: member-major (d, e), a byte pattern of (me, d, e, row)
        for (int d = 0; d < size; d++)
          for (uint32_t e = 0; e < E; e++) {
            splits[d * E + e] = ExpertRows(rank, d, (int)e, call);
            for (size_t i = 0; i < (size_t)splits[d * E + e] * row_bytes; i++)
              in[at + i] = Byte(rank, d * 16 + (int)e, i, call);
            at += (size_t)splits[d * E + e] * row_bytes;
          }
        MORI_ASSERT_OK(mori_all_to_all_v_experts(coll, in.data(), splits.data(), E, align, dispatched, 0, max_rows,
                                                 row_bytes, mid_so.data(), nullptr));
        int64_t start = 0;  // expert-major reference
        for (uint32_t e = 0; e < E; e++) {
          int64_t row = start;
          for (int src = 0; src < size; src++) {
            int64_t rows = ExpertRows(src, rank, (int)e, call);
            ASSERT_EQ(mid_so[e * size + src], rows) << "expert " << e << " from " << src << " call " << call;
            ASSERT_EQ(mid_so[E * size + e * size + src], row) << "expert " << e << " from " << src << " call " << call;
            for (size_t i = 0; i < (size_t)rows * row_bytes; i++)
              ASSERT_EQ(mid[row * row_bytes + i], Byte(src, rank * 16 + (int)e, i, call))
                  << "expert " << e << " from " << src << " at byte " << i << " call " << call;
            row += rows;
          }
          int64_t taken = (row - start + (int64_t)align - 1) / (int64_t)align * (int64_t)align;
          start += taken > (int64_t)align ? taken : (int64_t)align;  // an empty expert still takes `align` rows
        }
        MORI_ASSERT_OK(mori_all_to_all_v_combine(coll, mid, mid_so.data(), E, combined, 0, max_rows, row_bytes,
                                                 back_so.data(), nullptr));
        ASSERT_EQ(memcmp(back, in.data(), at), 0) << "combine(dispatch(in)) != in at call " << call;
        int64_t row = 0;
        for (int src = 0; src < size; src++)
          for (uint32_t e = 0; e < E; e++) {
            ASSERT_EQ(back_so[src * E + e], ExpertRows(rank, src, (int)e, call));
            ASSERT_EQ(back_so[size * E + src * E + e], row);
            row += back_so[src * E + e];
          }
      }
    }
    EXPECT_EQ(mori_all_to_all_v_experts(coll, in.data(), splits.data(), 0, 1, dispatched, 0, max_rows, row_bytes,
                                        mid_so.data(), nullptr),
              MORI_EINVAL);
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

// The reference: element i reduced over ranks in rank order, in fp32.
float Value(int rank, size_t i, int call) { return (float)((int)((rank * 7919 + i * 104729 + call * 31) % 2001) - 1000) / 64.0f; }

void CheckAllReduce(mori_coll_t *coll, int me, int n, size_t count, mori_dtype_t dtype, mori_redop_t op, int calls,
                    bool in_place) {
  size_t esize = mori_coll_impl_dtype_size(dtype);
  std::vector<uint8_t> in(count * esize + 8), out(count * esize + 8);
  for (int call = 0; call < calls; call++) {
    for (size_t i = 0; i < count; i++) mori_coll_impl_store_elem(in.data(), i, dtype, Value(me, i, call));
    std::fill(out.begin(), out.end(), 0xee);
    void *dst = in_place ? in.data() : out.data();
    MORI_ASSERT_OK(mori_all_reduce(coll, in.data(), dst, count, dtype, op, nullptr));
    for (size_t i = 0; i < count; i++) {
      float acc = 0;
      for (int r = 0; r < n; r++) {
        uint8_t tmp[4];
        mori_coll_impl_store_elem(tmp, 0, dtype, Value(r, i, call));
        float x = mori_coll_impl_load_elem(tmp, 0, dtype);
        acc = r == 0 ? x : mori_coll_impl_reduce(acc, x, op);
      }
      uint8_t want[4], got[4];
      mori_coll_impl_store_elem(want, 0, dtype, mori_coll_impl_reduce_finish(acc, op, n));
      memcpy(got, (uint8_t *)dst + i * esize, esize);
      ASSERT_EQ(memcmp(want, got, esize), 0) << "count " << count << " dtype " << dtype << " op " << op << " call "
                                             << call << " element " << i << ": want " << mori_coll_impl_load_elem(want, 0, dtype)
                                             << " got " << mori_coll_impl_load_elem(got, 0, dtype);
    }
    if (!in_place) {
      for (size_t b = count * esize; b < out.size(); b++) ASSERT_EQ(out[b], 0xee) << "wrote past the end";
    }
  }
}

// LL lines carry their call's epoch in the data words. A sliced
// all-to-all (call 1) leaves raw data in the staging half that call 3
// uses again; data whose odd int32 words equal 3 looked like call 3's
// lines there, and a member that reads before the late member wrote took
// call 1's bytes for call 3's (65536 wrong words, MORI_OK). LL lines now
// have a part of each half that raw data never enters. Each LL kind:
// all-to-all, all-reduce, the all-to-all-v splits matrix.
TEST(Collectives, RawDataLeftInStagingIsNeverTakenForALaterCallsLines) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    const size_t raw_bytes = 512 << 10, ll_bytes = 256 << 10;  // the late member's lines land in call 1's data
    const int late = size - 1;
    for (const char *victim : {"all_to_all", "all_reduce", "all_to_all_v"}) {
      SCOPED_TRACE(victim);
      mori_coll_attr_t attr;
      mori_coll_attr_init(&attr);
      attr.workspace_bytes = 4 * (size_t)size * raw_bytes;
      attr.timeout_ms = 20000;
      mori_coll_t *coll = nullptr;
      MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
      // Call 1 (epoch 1): sliced, staged; every odd int32 word is 3.
      std::vector<int32_t> in(raw_bytes / 4 * size), out(raw_bytes / 4 * size);
      for (size_t i = 0; i < in.size(); i++) in[i] = (i & 1) ? 3 : 1000 + rank;
      setenv("MORI_A2A_ALGO", "slices", 1);
      MORI_ASSERT_OK(mori_all_to_all(coll, in.data(), out.data(), raw_bytes, nullptr));
      unsetenv("MORI_A2A_ALGO");
      // Call 2 (epoch 2): the other half.
      float one = 1, sum = 0;
      MORI_ASSERT_OK(mori_all_reduce(coll, &one, &sum, 1, MORI_FLOAT32, MORI_REDOP_SUM, nullptr));
      ASSERT_EQ(sum, (float)size);
      // Call 3 (epoch 3, call 1's half), an LL call the last member starts late.
      if (rank == late) usleep(300 * 1000);
      std::string v = victim;
      if (v == "all_to_all") {
        for (size_t i = 0; i < ll_bytes / 4 * size; i++) in[i] = 7000000 + rank * 1000 + (int)(i % 1000);
        setenv("MORI_A2A_ALGO", "ll", 1);
        MORI_ASSERT_OK(mori_all_to_all(coll, in.data(), out.data(), ll_bytes, nullptr));
        unsetenv("MORI_A2A_ALGO");
        for (int src = 0; src < size; src++)
          for (size_t i = 0; i < ll_bytes / 4; i++)
            ASSERT_EQ(out[src * ll_bytes / 4 + i], 7000000 + src * 1000 + (int)((rank * ll_bytes / 4 + i) % 1000))
                << "word " << i << " from rank " << src;
      } else if (v == "all_reduce") {
        std::vector<float> x(ll_bytes / 4, (float)(rank + 1)), y(ll_bytes / 4, -1);
        setenv("MORI_ALLREDUCE_ALGO", "ll", 1);
        MORI_ASSERT_OK(mori_all_reduce(coll, x.data(), y.data(), x.size(), MORI_FLOAT32, MORI_REDOP_SUM, nullptr));
        unsetenv("MORI_ALLREDUCE_ALGO");
        for (size_t i = 0; i < y.size(); i++) ASSERT_EQ(y[i], (float)(size * (size + 1) / 2)) << "element " << i;
      } else {
        SymmetricBuffer rows(w, 64 * 8);
        std::vector<int64_t> splits(size, 0), got(2 * (size_t)size, -7);
        if (rank == late) splits[0] = 2;  // two rows to rank 0, nothing else from anyone
        std::vector<char> data(64 * 8);
        MORI_ASSERT_OK(mori_all_to_all_v(coll, data.data(), splits.data(), rows.win, 0, 64, 8, got.data(), nullptr));
        for (int src = 0; src < size; src++)
          ASSERT_EQ(got[src], rank == 0 && src == late ? 2 : 0) << "rows from rank " << src;
      }
      MORI_EXPECT_OK(mori_coll_check(coll));
      MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
      MORI_EXPECT_OK(mori_coll_destroy(coll));
    }
  });
}

TEST(Collectives, AllReduceBothAlgorithmsEveryTypeAndOp) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, nullptr, &coll));
    for (const char *algo : {"ll", "rsag", "oneshot"}) {
      setenv("MORI_ALLREDUCE_ALGO", algo, 1);
      for (mori_dtype_t dtype : {MORI_FLOAT32, MORI_BFLOAT16, MORI_FLOAT16})
        for (mori_redop_t op : {MORI_REDOP_SUM, MORI_REDOP_AVG, MORI_REDOP_MAX, MORI_REDOP_MIN})
          for (size_t count : {(size_t)1, (size_t)7, (size_t)1000, (size_t)33333}) {
            size_t need = mori_all_reduce_workspace(coll, count, dtype);
            MORI_ASSERT_OK(mori_coll_reserve(coll, need));
            CheckAllReduce(coll, rank, size, count, dtype, op, 2, (count % 2) == 1);
          }
    }
    unsetenv("MORI_ALLREDUCE_ALGO");
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

TEST(Collectives, SubTeamOfEvenRanks) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    if (size < 4) GTEST_SKIP() << "needs 4 ranks";
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.team = (mori_team_t){0, 2, size / 2, -1};
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));  // collective over the whole comm
    mori_team_t team = mori_coll_team(coll);
    EXPECT_EQ(team.rank, rank % 2 == 0 ? rank / 2 : -1);
    if (rank % 2 == 0) {
      CheckAllToAll(coll, team.rank, team.size, 1000, 3);
      CheckAllReduce(coll, team.rank, team.size, 500, MORI_FLOAT32, MORI_REDOP_SUM, 3, false);
    } else {
      int x = 0;
      EXPECT_EQ(mori_all_to_all(coll, &x, &x + 1, 0, nullptr), MORI_EINVAL) << "not a member";
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

TEST(Collectives, BadInputIsRefusedWithAReason) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.workspace_bytes = 4096;
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    std::vector<uint8_t> in(1 << 20), out(1 << 20);
    EXPECT_EQ(mori_all_to_all(coll, in.data(), out.data(), 65536, nullptr), MORI_ENOMEM);
    EXPECT_NE(std::string(mori_last_error()).find("mori_coll_reserve"), std::string::npos) << mori_last_error();
    EXPECT_EQ(mori_all_to_all(coll, in.data(), in.data() + 8, 16, nullptr), MORI_EINVAL);
    EXPECT_NE(std::string(mori_last_error()).find("overlap"), std::string::npos) << mori_last_error();
    EXPECT_EQ(mori_all_reduce(coll, in.data(), out.data(), 16, (mori_dtype_t)9, MORI_REDOP_SUM, nullptr), MORI_EINVAL);
    EXPECT_EQ(mori_all_reduce(coll, in.data(), out.data(), 16, MORI_FLOAT32, (mori_redop_t)9, nullptr), MORI_EINVAL);
    // After growing, the same call works on every rank.
    MORI_ASSERT_OK(mori_coll_reserve(coll, mori_all_to_all_workspace(coll, 65536)));
    CheckAllToAll(coll, rank, size, 65536, 2);
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

TEST(Collectives, MembersOutsideTheLoadStoreTeamAreRefused) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    setenv("MORI_HOST_ID", rank < size / 2 ? "node-0" : "node-1", 1);
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.team = (mori_team_t){0, 1, size, -1};  // the world, across both nodes
    mori_coll_t *coll = nullptr;
    EXPECT_EQ(mori_coll_create(w.comm, &attr, &coll), MORI_EUNREACHABLE);
    EXPECT_NE(std::string(mori_last_error()).find("outside rank"), std::string::npos) << mori_last_error();
    // The default team (the node) works.
    MORI_ASSERT_OK(mori_coll_create(w.comm, nullptr, &coll));
    EXPECT_EQ(mori_coll_team(coll).size, size / 2);
    CheckAllToAll(coll, mori_coll_team(coll).rank, size / 2, 256, 2);
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

TEST(Collectives, AMemberThatNeverCallsIsNamedWithinTheTimeout) {
  EXPECT_RANKS_PASS(TestRanks(), [](int rank, int size) {
    World w;
    ASSERT_TRUE(w.ok());
    mori_coll_attr_t attr;
    mori_coll_attr_init(&attr);
    attr.timeout_ms = 2000;  // from a barrier, as above
    mori_coll_t *coll = nullptr;
    MORI_ASSERT_OK(mori_coll_create(w.comm, &attr, &coll));
    int last = size - 1;
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    if (rank != last) {
      std::vector<uint8_t> in(64 * size), out(64 * size);
      int rc = mori_all_to_all(coll, in.data(), out.data(), 64, nullptr);
      EXPECT_EQ(rc, MORI_EDEVICE_TIMEOUT);
      std::string msg = mori_last_error();
      EXPECT_NE(msg.find("for rank " + std::to_string(last)), std::string::npos) << msg;
    }
    MORI_ASSERT_OK(mori_bootstrap_barrier(w.bootstrap));
    MORI_EXPECT_OK(mori_coll_destroy(coll));
  });
}

}  // namespace
