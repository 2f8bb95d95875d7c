// SPDX-License-Identifier: MIT
// The window barrier under stress in CPU ranks: the pattern of torch's
// test_barrier_stress (a store into the next rank's buffer, a barrier on
// channel it % 4, a check, a barrier on channel (it + 1) % 4 of the same
// window) with a third window's barriers and put/wait signals on a first
// window interleaved, ranks out of step (random pauses on every rank but
// rank 0, which runs ahead into the next barrier of a channel before its
// peers have left the last one), and windows made and dropped between runs
// at different moments on each rank (so arena maps differ between ranks and
// released slots are zeroed and handed out again). The device barrier is
// the same inline code the GPU kernels run; what is checked is its state:
//  - every word of a new window's barrier area and signal pad reads zero
//    before any peer can have written it (slots zero when handed out);
//  - after each run, on every channel, this rank's epoch counter equals the
//    barriers it ran there and every peer's epoch in its area equals it too
//    (nobody lost an arrival, nobody counted one twice), and the pad is all
//    zero again (every signal consumed once);
//  - the data every round (writes before reads, in both directions).
// Every wait has a timeout, so a lost wake-up fails naming the run, the
// round, the window, the channel, who waited for whom and the epochs
// expected and seen, instead of hanging. MORI_STRESS_RUNS sets the runs.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mori/device.h"
#include "mori/window_ops.h"
#include "tests/support/world.h"

using mori_test::TestRanks;
using mori_test::World;

namespace {

constexpr int kRounds = 20;
constexpr int kInts = 256;                    // ints of the buffers written every round
constexpr uint64_t kTimeoutNs = 10000000000;  // a lost wake-up fails after 10 s, named
// A pad this large takes a third of a 2 MiB arena: the comm goes through its
// arenas quickly and then reclaims released slots (zeroed after a device
// synchronisation) and hands them out again.
constexpr size_t kLargePad = 600 << 10;

int Runs(int size) {
  const char *env = getenv("MORI_STRESS_RUNS");
  if (env && atoi(env) > 0) return atoi(env);
  return size <= 2 ? 1000 : size <= 4 ? 400 : 150;
}

struct Window {
  const char *name;
  void *mem = nullptr;
  mori_window_t *win = nullptr;
  size_t pad = 0;
  // Barriers this rank ran on each channel of this window.
  int barriers[MORI_BARRIER_CHANNELS] = {};
  Window(const char *name, mori_comm_t *comm, size_t bytes, size_t pad) : name(name), pad(pad) {
    mori_mem_attr_t attr;
    mori_mem_attr_init(&attr);
    attr.signal_pad_size = pad;
    EXPECT_EQ(mori_mem_alloc(bytes, &attr, &mem), 0) << mori_last_error();
    EXPECT_EQ(mori_window_create(comm, mem, &win), 0) << mori_last_error();
  }
  ~Window() {
    EXPECT_EQ(mori_window_destroy(win), 0) << mori_last_error();
    EXPECT_EQ(mori_mem_free(mem), 0) << mori_last_error();
  }
  Window(const Window &) = delete;
  Window &operator=(const Window &) = delete;
};

// This rank's barrier area (plain memory on the host platform): the epoch
// peer i stored for channel c, and this rank's counter of channel c.
uint64_t Received(const mori_window_dev_t &v, int channel, int lsa_index) {
  return __atomic_load_n(mori_barrier_word(v, v.lsa_rank, (uint64_t)channel * v.lsa_size + lsa_index),
                         __ATOMIC_ACQUIRE);
}
uint64_t Counter(const mori_window_dev_t &v, int channel) {
  return __atomic_load_n(mori_barrier_word(v, v.lsa_rank, (uint64_t)MORI_BARRIER_CHANNELS * v.lsa_size + channel),
                         __ATOMIC_ACQUIRE);
}

std::string Where(int run, int round, const Window &w, int channel) {
  return "run " + std::to_string(run) + " round " + std::to_string(round) + " window " + w.name + " channel " +
         std::to_string(channel);
}

// Before any peer can have written it: every word of the area and the pad.
void ExpectFresh(const Window &w, int run) {
  mori_window_dev_t v = mori_window_device_view(w.win);
  for (int c = 0; c < MORI_BARRIER_CHANNELS; c++) {
    EXPECT_EQ(Counter(v, c), 0u) << "run " << run << " window " << w.name << ": counter of channel " << c
                                 << " on a new window";
    for (int i = 0; i < v.lsa_size; i++)
      EXPECT_EQ(Received(v, c, i), 0u) << "run " << run << " window " << w.name << ": channel " << c
                                       << ", epoch of LSA rank " << i << " on a new window";
  }
  const uint32_t *pad = w.pad ? (const uint32_t *)mori_window_signal_pads(w.win)[v.world_rank] : nullptr;
  for (size_t i = 0; pad && i < w.pad / 4; i++)
    ASSERT_EQ(__atomic_load_n(&pad[i], __ATOMIC_ACQUIRE), 0u)
        << "run " << run << " window " << w.name << ": pad word " << i << " on a new window";
}

// Once every peer has passed this rank's last barrier on the window: every
// arrival counted once, on every channel; every signal consumed.
void ExpectSettled(const Window &w, int run) {
  mori_window_dev_t v = mori_window_device_view(w.win);
  for (int c = 0; c < MORI_BARRIER_CHANNELS; c++) {
    EXPECT_EQ(Counter(v, c), (uint64_t)w.barriers[c]) << "run " << run << " window " << w.name << " channel " << c
                                                      << ": this rank's epoch counter after its barriers";
    for (int i = 0; i < v.lsa_size; i++) {
      if (i == v.lsa_rank) continue;
      EXPECT_EQ(Received(v, c, i), (uint64_t)w.barriers[c])
          << "run " << run << " window " << w.name << " channel " << c << ": the epoch rank " << v.lsa_base + i
          << " stored here (every rank ran the same barriers)";
    }
  }
  const uint32_t *pad = w.pad ? (const uint32_t *)mori_window_signal_pads(w.win)[v.world_rank] : nullptr;
  for (size_t i = 0; pad && i < w.pad / 4; i++)
    ASSERT_EQ(__atomic_load_n(&pad[i], __ATOMIC_ACQUIRE), 0u)
        << "run " << run << " window " << w.name << ": pad word " << i << " after matched signals";
}

#define STRESS_OK(expr, where)                                                                          \
  do {                                                                                                  \
    int stress_rc_ = (expr);                                                                            \
    ASSERT_EQ(stress_rc_, 0) << (where) << ": " << #expr << " -> " << mori_err_name(stress_rc_) << ": " \
                             << mori_last_error();                                                      \
  } while (0)

void Barrier(Window &w, int channel, int run, int round) {
  w.barriers[channel]++;
  STRESS_OK(mori_window_barrier(w.win, channel, kTimeoutNs, nullptr), Where(run, round, w, channel));
}

TEST(BarrierStress, InterleavedWindowsAndChannelsWithRanksOutOfStepAndWindowsReused) {
  EXPECT_RANKS_PASS(
      TestRanks(),
      [](int rank, int size) {
        World world;
        ASSERT_TRUE(world.ok());
        int runs = Runs(size), next = (rank + 1) % size, prev = (rank - 1 + size) % size;
        std::mt19937 rng(1234 + rank);
        // Third windows of earlier runs this rank has not dropped yet: each
        // goes 0-2 runs later, at a different run on each rank.
        std::vector<std::pair<int, Window *>> late;
        for (int run = 0; run < runs; run++) {
          // One window's pad is large every other run, so arenas fill and
          // released slots are reclaimed and reused.
          Window *w1 = new Window("w1", world.comm, 4096, run % 2 ? kLargePad : 4 * 4 * (size_t)size);
          ASSERT_NO_FATAL_FAILURE(ExpectFresh(*w1, run));
          Window *w2 = new Window("w2", world.comm, kInts * sizeof(int), 0);
          ASSERT_NO_FATAL_FAILURE(ExpectFresh(*w2, run));
          Window *w3 = new Window("w3", world.comm, 4096, 4 * (size_t)size);
          ASSERT_NO_FATAL_FAILURE(ExpectFresh(*w3, run));
          int *mine = (int *)w2->mem, *to_next = (int *)mori_window_peer_ptr(w2->win, next);
          int *inbox = (int *)w1->mem, *to_next_inbox = (int *)mori_window_peer_ptr(w1->win, next);
          for (int it = 0; it < kRounds; it++) {
            int value = run * 1000 + it * 10 + rank;
            for (int k = 0; k < kInts; k++) __atomic_store_n(&to_next[k], value + k, __ATOMIC_RELAXED);
            // Every rank but rank 0 pauses now and then: rank 0 runs ahead.
            if (rank != 0 && rng() % 4 == 0) usleep(rng() % 200);
            ASSERT_NO_FATAL_FAILURE(Barrier(*w2, it % 4, run, it));
            int want = run * 1000 + it * 10 + prev;
            for (int k = 0; k < kInts; k++)
              ASSERT_EQ(__atomic_load_n(&mine[k], __ATOMIC_RELAXED), want + k)
                  << Where(run, it, *w2, it % 4) << ": word " << k << " from rank " << prev;
            if (it % 3 == 0) {
              ASSERT_NO_FATAL_FAILURE(Barrier(*w3, (it / 3) % 4, run, it));
            }
            if (it % 5 == 0) {
              // A signal carries a word to the next rank through w1's pad.
              __atomic_store_n(&to_next_inbox[0], value, __ATOMIC_RELAXED);
              STRESS_OK(mori_window_put_signal(w1->win, next, 0, kTimeoutNs, nullptr), Where(run, it, *w1, 0) + " put");
              STRESS_OK(mori_window_wait_signal(w1->win, prev, 0, kTimeoutNs, nullptr),
                        Where(run, it, *w1, 0) + " wait");
              ASSERT_EQ(__atomic_load_n(&inbox[0], __ATOMIC_RELAXED), want)
                  << Where(run, it, *w1, 0) << ": signalled word";
            }
            if (rank != 0 && rng() % 8 == 0) sched_yield();
            ASSERT_NO_FATAL_FAILURE(Barrier(*w2, (it + 1) % 4, run, it));
          }
          ASSERT_NO_FATAL_FAILURE(Barrier(*w1, 1, run, kRounds));
          ASSERT_NO_FATAL_FAILURE(ExpectSettled(*w1, run));
          ASSERT_NO_FATAL_FAILURE(ExpectSettled(*w2, run));
          ASSERT_NO_FATAL_FAILURE(ExpectSettled(*w3, run));
          // Dropped in an order and at a time of each rank's own.
          if ((rank + run) % 2) {
            delete w1;
            delete w2;
          } else {
            delete w2;
            delete w1;
          }
          late.emplace_back(run + (rank + run) % 3, w3);
          for (size_t i = 0; i < late.size();) {
            if (late[i].first > run) {
              i++;
              continue;
            }
            delete late[i].second;
            late.erase(late.begin() + (long)i);
          }
          // A broken invariant is reported once, not once per run after it
          // (the other ranks then time out in their next barrier, named).
          if (::testing::Test::HasFailure()) break;
        }
        for (auto &l : late) delete l.second;
      },
      600000);
}

}  // namespace
