// SPDX-License-Identifier: MIT
/* Bodies of mori/device/ep/dispatch_combine.h. Internal: mori_ep_impl_*
 * may change between releases. */
#ifndef MORI_DEVICE_EP_IMPL_DISPATCH_COMBINE_FUNCS_H
#define MORI_DEVICE_EP_IMPL_DISPATCH_COMBINE_FUNCS_H

#include "mori/device/coll/impl/numeric__funcs.h"
#include "mori/device/ep/dispatch_combine.h"
#include "mori/device/put.h"

/* Fixed-count loops over registers are unrolled on GPUs (an array indexed
 * in a loop that is not would live in local memory). */
#if defined(MORI_DEVICE_COMPILER_HOST)
#define MORI_EP_UNROLL
#else
#define MORI_EP_UNROLL _Pragma("unroll")
#endif

MORI_DEVICE_INLINE char *mori_ep_impl_local(const mori_ep_dev_t *e, uint64_t off) {
  return (char *)mori_local_ptr(e->win, off);
}
MORI_DEVICE_INLINE char *mori_ep_impl_peer(const mori_ep_dev_t *e, int rank, uint64_t off) {
  return (char *)mori_peer_ptr(e->win, rank, off);
}
MORI_DEVICE_INLINE mori_ep_state_t *mori_ep_impl_state(const mori_ep_dev_t *e) {
  return (mori_ep_state_t *)mori_ep_impl_local(e, e->off_state);
}

/* A report for mori_ep_check (thread 0 of block 0): kept when none is,
 * else counted. */
MORI_DEVICE_INLINE void mori_ep_impl_report(mori_ep_state_t *st, int32_t rank, int32_t count, int32_t token, int32_t slot,
                                            int32_t index) {
  if (st->bad_seen) {
    st->bad_more++;
    return;
  }
  st->bad_rank = rank;
  st->bad_token = token;
  st->bad_slot = slot;
  st->bad_index = index;
  st->bad_count = count;
  st->bad_seen = 1;
}

/* A context stopped by an earlier kernel's failure (`stopped`: the state's
 * word, read by the caller beside its other loads of the state, so that the
 * kernel's start waits for one round trip, not two) runs each call as
 * refused, and a dispatch sends no token: its ranks are out of step (a peer
 * that was late, or one that skipped a call, would otherwise pair this
 * rank's later calls with the wrong ones of its own). Each such call is
 * reported once on this rank. Every block reads the same word: it changes
 * only when a kernel ends. The arguments stay where the kernel's parameters
 * are (a copy to change them would live in registers the loops need, or be
 * read through a pointer the loops' stores might alias): the caller keeps
 * what a stop changes, the token count and the refusal, in scalars. */
MORI_DEVICE_INLINE void mori_ep_impl_note_stopped(const mori_ep_dev_t *e, mori_ep_state_t *st, uint32_t stopped,
                                                  uint32_t block) {
  if (stopped && block == 0 && MORI_THREAD_RANK_BLOCK() == 0) mori_ep_impl_report(st, e->rank, MORI_EP_STOPPED, 0, 0, 0);
}

/* This thread's warp among the grid's, and how many there are. */
MORI_DEVICE_INLINE void mori_ep_impl_warps(uint32_t block, uint32_t grid, uint32_t *warp, uint32_t *warps) {
  uint32_t per = (uint32_t)(MORI_THREAD_COUNT_BLOCK() / MORI_THREAD_COUNT_WARP());
  *warp = block * per + (uint32_t)(MORI_THREAD_RANK_BLOCK() / MORI_THREAD_COUNT_WARP());
  *warps = grid * per;
}

/* Whether token t is dropped (an expert index out of range; *slot: the
 * first bad top-k slot). */
MORI_DEVICE_INLINE int mori_ep_impl_bad(const mori_ep_dev_t *e, const int32_t *idx, uint32_t t, uint32_t *slot) {
  uint32_t total = (uint32_t)e->world_size * e->experts_per_rank;
  for (uint32_t j = 0; j < e->top_k; j++) {
    int32_t x = idx[(uint64_t)t * e->top_k + j];
    if (x < 0 || (uint32_t)x >= total) {
      *slot = j;
      return 1;
    }
  }
  return 0;
}

/* Whether a peer reads token t's row (one of its experts is elsewhere). */
MORI_DEVICE_INLINE int mori_ep_impl_leaves(const mori_ep_dev_t *e, const int32_t *idx, uint32_t t) {
  for (uint32_t j = 0; j < e->top_k; j++) {
    uint32_t x = (uint32_t)idx[(uint64_t)t * e->top_k + j];
    if (x < (uint32_t)e->world_size * e->experts_per_rank && x / e->experts_per_rank != (uint32_t)e->rank) return 1;
  }
  return 0;
}

/* Warp votes and block-scope counters for the scan below. On the host
 * platform a block is one thread (a warp of one lane), so a vote is the
 * thread's own predicate and the counters are plain. */
#if defined(MORI_DEVICE_COMPILER_CUDA)
#define MORI_EP_VOTE(pred) ((uint64_t)__ballot_sync(0xffffffffu, (pred)))
#define MORI_EP_POPC(x) ((uint32_t)__popcll(x))
#define MORI_EP_SHARED_ADD(p, v) atomicAdd((p), (v))
#define MORI_EP_SHARED_MIN(p, v) atomicMin((p), (v))
#elif defined(MORI_DEVICE_COMPILER_HIP)
#define MORI_EP_VOTE(pred) ((uint64_t)__ballot((pred)))
#define MORI_EP_POPC(x) ((uint32_t)__popcll(x))
#define MORI_EP_SHARED_ADD(p, v) atomicAdd((p), (v))
#define MORI_EP_SHARED_MIN(p, v) atomicMin((p), (v))
#else
#define MORI_EP_VOTE(pred) ((uint64_t)((pred) != 0))
#define MORI_EP_POPC(x) ((uint32_t)__builtin_popcountll(x))
#define MORI_EP_SHARED_ADD(p, v) (*(p) += (v))
#define MORI_EP_SHARED_MIN(p, v) (*(p) = *(p) < (v) ? *(p) : (v))
#endif

/* The bit of token t's destinations among d0 .. d0 + 63 (0 when t is
 * dropped or out of range); *bad: t has an expert index out of range. */
MORI_DEVICE_INLINE uint64_t mori_ep_impl_dests(const mori_ep_dev_t *e, const int32_t *idx, uint32_t t, uint32_t T, int d0,
                                                int *bad) {
  *bad = 0;
  if (t >= T) return 0;
  uint32_t total = (uint32_t)e->world_size * e->experts_per_rank, K = e->top_k;
  const int32_t *row = idx + (uint64_t)t * K;
  uint64_t mask = 0;
  int out = 0;
  /* No exit inside the loop: the loads of a row are independent and go
   * out together (an exit at the first bad index would wait for each). */
  for (uint32_t j = 0; j < K; j++) {
    uint32_t x = (uint32_t)row[j];
    int d = (int)(x / e->experts_per_rank) - d0;
    out |= x >= total;
    if (x < total && d >= 0 && d < MORI_EP_SCAN_DESTS) mask |= 1ull << d;
  }
  *bad = out;
  return out ? 0 : mask;
}

/* Counts of one round of nt tokens (one per thread) for destinations
 * d0 .. d0 + dn - 1: each warp's count per destination, by vote, in
 * warp_at[w][d]. */
MORI_DEVICE_INLINE void mori_ep_impl_vote_counts(mori_ep_scan_scratch_t *sc, uint64_t mask, uint32_t dn, uint32_t w,
                                                 uint32_t lane) {
  for (uint32_t d = 0; d < dn; d++) {
    uint64_t v = MORI_EP_VOTE((mask >> d) & 1);
    if (lane == 0) sc->warp_at[w][d] = MORI_EP_POPC(v);
  }
}

/* Block `block`'s chunk of T tokens among `grid` contiguous chunks: [lo, hi). */
MORI_DEVICE_INLINE void mori_ep_impl_chunk(uint32_t T, uint32_t block, uint32_t grid, uint32_t *lo, uint32_t *hi) {
  uint32_t per = (T + grid - 1) / grid;
  *lo = (uint64_t)block * per < T ? block * per : T;
  *hi = T - *lo < per ? T : *lo + per;
}

/* The block's scan scratch: shared memory on GPUs, its slot of the window's
 * scan area on the host platform. */
MORI_DEVICE_INLINE mori_ep_scan_scratch_t *mori_ep_impl_scan_scratch(const mori_ep_dev_t *e, uint32_t block) {
#if defined(MORI_DEVICE_COMPILER_HOST)
  return (mori_ep_scan_scratch_t *)mori_ep_impl_local(e, e->off_scan) + block;
#else
  (void)e, (void)block;
  __shared__ mori_ep_scan_scratch_t scan_scratch;
  return &scan_scratch;
#endif
}

/* Dispatch's send half, every block: the per-destination lists of what
 * this rank sends (each ascending in token order), pos, and (the last
 * block) the header, in two steps with the staging of the rows between
 * them (its loads overlap the wait for the earlier chunks).
 *
 * T: the tokens the call sends (0 for a stopped context's call; the count
 * takes the call's own number and `stopped`, which zeroes what it
 * publishes, so that its loads need not wait for the stopped word); refused:
 * the header says the call was refused. Block b takes the b-th of `grid`
 * contiguous chunks of the tokens (mori_ep_impl_chunk). With one block
 * there is one chunk and one pass. Otherwise, mori_ep_impl_scan_count
 * counts the chunk's tokens per destination (and its dropped tokens) and
 * publishes the counts, tagged with the call's epoch (device scope: only
 * blocks of this kernel read them); mori_ep_impl_scan_place then waits for
 * the counts of every earlier chunk (they are published before any block
 * waits, so no chunk waits on a chain) and starts each destination's list
 * at their sum. It places the chunk's tokens: a round of nt tokens (one per
 * thread; thread i reads token i's row, coalesced) is a warp vote per
 * destination (each warp's count and each lane's place among its warp's
 * tokens) and a pass over the warps (one thread per destination), two block
 * barriers per round whatever the world size up to 64 (a pass per 64
 * destinations beyond). The last block's totals are the header's counts.
 * Returns 0, or the error of a wait for an earlier chunk (its record: this
 * rank, channel 5, the epoch, the count ready seen). */
MORI_DEVICE_INLINE void mori_ep_impl_scan_count(const mori_ep_dev_t *e, const mori_ep_args_t *a, uint32_t T, uint32_t stopped,
                                                uint64_t epoch, uint32_t block, uint32_t grid) {
  int n = e->world_size;
  uint32_t tid = (uint32_t)MORI_THREAD_RANK_BLOCK(), nt = (uint32_t)MORI_THREAD_COUNT_BLOCK();
  uint32_t lane = (uint32_t)MORI_THREAD_RANK_WARP();
  mori_ep_scan_scratch_t *sc = mori_ep_impl_scan_scratch(e, block);
  uint32_t *mine = (uint32_t *)mori_ep_impl_local(e, e->off_chunk) + (uint64_t)block * (uint64_t)(n + 2);
  uint32_t lo, hi;
  mori_ep_impl_chunk(T, block, grid, &lo, &hi);
  if (tid == 0) sc->bad_count = 0, sc->bad_first = 0xffffffffu;
  if (grid == 1) return; /* one chunk: scan_place counts as it places */
  for (int d0 = 0; d0 < n; d0 += MORI_EP_SCAN_DESTS) {
    uint32_t dn = (uint32_t)(n - d0 < MORI_EP_SCAN_DESTS ? n - d0 : MORI_EP_SCAN_DESTS);
    for (uint32_t d = tid; d < dn; d += nt) sc->total[d] = 0;
    MORI_SYNC_BLOCK();
    for (uint32_t r = lo; r < hi; r += nt) {
      int bad = 0;
      uint64_t mask = mori_ep_impl_dests(e, a->indices, r + tid, hi, d0, &bad);
      if (bad && d0 == 0) {
        MORI_EP_SHARED_ADD(&sc->bad_count, 1u);
        MORI_EP_SHARED_MIN(&sc->bad_first, r + tid);
      }
      for (uint32_t d = 0; d < dn; d++) {
        uint64_t v = MORI_EP_VOTE((mask >> d) & 1);
        if (lane == 0 && v) MORI_EP_SHARED_ADD(&sc->total[d], MORI_EP_POPC(v));
      }
    }
    MORI_SYNC_BLOCK();
    for (uint32_t d = tid; d < dn; d += nt) mine[d0 + (int)d] = stopped ? 0 : sc->total[d];
    MORI_SYNC_BLOCK(); /* total is reset for the next group */
  }
  if (tid == 0) {
    mine[n] = stopped ? 0 : sc->bad_count;
    mine[n + 1] = stopped ? 0xffffffffu : sc->bad_first;
    /* Ordered after the block's stores by the barrier above (cumulative). */
    mori_atomic_store_release_device_u64((uint64_t *)mori_ep_impl_local(e, e->off_chunk_ready) + block, epoch);
  }
}

MORI_DEVICE_INLINE int mori_ep_impl_scan_place(const mori_ep_dev_t *e, const mori_ep_args_t *a, uint32_t T, int refused,
                                               uint64_t p, uint64_t epoch, uint32_t block, uint32_t grid) {
  int n = e->world_size;
  uint32_t K = e->top_k, M = e->max_tokens;
  uint32_t tid = (uint32_t)MORI_THREAD_RANK_BLOCK(), nt = (uint32_t)MORI_THREAD_COUNT_BLOCK();
  uint32_t ws = (uint32_t)MORI_THREAD_COUNT_WARP(), lane = (uint32_t)MORI_THREAD_RANK_WARP(), w = tid / ws;
  uint32_t nw = (nt + ws - 1) / ws;
  mori_ep_scan_scratch_t *sc = mori_ep_impl_scan_scratch(e, block);
  uint64_t below = lane ? (~0ull >> (64 - lane)) : 0; /* the lanes before this one */
  int32_t *hdr = (int32_t *)mori_ep_impl_local(e, e->off_hdr + p * e->hdr_bytes);
  int32_t *list = (int32_t *)mori_ep_impl_local(e, e->off_list) + p * (uint64_t)n * M;
  int32_t *pos = (int32_t *)mori_ep_impl_local(e, e->off_pos) + p * (uint64_t)M * (uint64_t)n;
  uint32_t *chunks = (uint32_t *)mori_ep_impl_local(e, e->off_chunk);
  uint64_t *chunk_ready = (uint64_t *)mori_ep_impl_local(e, e->off_chunk_ready);
  uint32_t row = (uint32_t)n + 2; /* a chunk's words: counts, bad count, first bad token */
  uint32_t lo, hi;
  mori_ep_impl_chunk(T, block, grid, &lo, &hi);
  int last = block == grid - 1, rc = MORI_DEVICE_OK;
  if (grid > 1) {
    /* The earlier chunks' counts: one thread per chunk waits for them. */
    uint64_t start = 0; /* one clock for this thread's chunks */
    for (uint32_t j = tid; j < block && !rc; j += nt) {
      uint64_t seen;
      for (uint32_t spin = 0; (seen = mori_load_volatile_u64(chunk_ready + j)) < epoch; spin++) {
        rc = mori_wait_check(e->win, spin, &start, e->timeout_ns, e->rank, 5, epoch, seen);
        if (rc) break;
        mori_pause();
      }
      if (!rc) (void)mori_atomic_load_acquire_device_u64(chunk_ready + j);
    }
    if (MORI_SYNC_BLOCK_OR(rc != MORI_DEVICE_OK)) return MORI_DEVICE_ETIMEDOUT;
    /* The last block reports the dropped tokens of every chunk. */
    if (last)
      for (uint32_t j = tid; j < block; j += nt) {
        const volatile uint32_t *c = chunks + (uint64_t)j * row;
        uint32_t count = c[n], first = c[n + 1];
        if (count) {
          MORI_EP_SHARED_ADD(&sc->bad_count, count);
          MORI_EP_SHARED_MIN(&sc->bad_first, first);
        }
      }
  }
  for (int d0 = 0; d0 < n; d0 += MORI_EP_SCAN_DESTS) {
    uint32_t dn = (uint32_t)(n - d0 < MORI_EP_SCAN_DESTS ? n - d0 : MORI_EP_SCAN_DESTS);
    /* Where this chunk's tokens start in each list: the earlier chunks' sum. */
    for (uint32_t d = tid; d < dn; d += nt) sc->total[d] = 0;
    MORI_SYNC_BLOCK();
    for (uint32_t x = tid; x < block * dn; x += nt) {
      uint32_t c = ((const volatile uint32_t *)chunks)[(uint64_t)(x / dn) * row + (uint64_t)d0 + x % dn];
      if (c) MORI_EP_SHARED_ADD(&sc->total[x % dn], c);
    }
    MORI_SYNC_BLOCK();
    int bad = 0, bad_next = 0;
    uint64_t mask = mori_ep_impl_dests(e, a->indices, lo + tid, hi, d0, &bad);
    for (uint32_t r = lo; r < hi; r += nt) {
      uint32_t t = r + tid;
      /* The next round's row is read now: its loads are in flight while
       * this round votes and waits at its barriers. */
      uint64_t mask_next = mori_ep_impl_dests(e, a->indices, t + nt, hi, d0, &bad_next);
      if (bad && d0 == 0 && grid == 1) { /* with several chunks the first pass counted them */
        MORI_EP_SHARED_ADD(&sc->bad_count, 1u);
        MORI_EP_SHARED_MIN(&sc->bad_first, t);
      }
      mori_ep_impl_vote_counts(sc, mask, dn, w, lane);
      MORI_SYNC_BLOCK();
      for (uint32_t d = tid; d < dn; d += nt) {
        uint32_t at = sc->total[d];
        for (uint32_t k = 0; k < nw; k++) {
          uint32_t c = sc->warp_at[k][d];
          sc->warp_at[k][d] = at;
          at += c;
        }
        sc->total[d] = at;
      }
      MORI_SYNC_BLOCK();
      for (uint32_t d = 0; d < dn; d++) {
        uint64_t v = MORI_EP_VOTE((mask >> d) & 1);
        if (t >= hi) continue;
        int32_t o = -1;
        if ((mask >> d) & 1) {
          o = (int32_t)(sc->warp_at[w][d] + MORI_EP_POPC(v & below));
          list[(uint64_t)(d0 + (int)d) * M + (uint64_t)o] = (int32_t)t;
        }
        pos[(uint64_t)t * (uint64_t)n + (uint64_t)(d0 + (int)d)] = o;
      }
      MORI_SYNC_BLOCK(); /* warp_at is rewritten by the next round */
      mask = mask_next;
      bad = bad_next;
    }
    if (last)
      for (uint32_t d = tid; d < dn; d += nt) hdr[MORI_EP_HDR_COUNTS + d0 + (int)d] = (int32_t)sc->total[d];
    MORI_SYNC_BLOCK(); /* total is reset for the next group */
  }
  if (last && tid == 0) {
    hdr[MORI_EP_HDR_BAD_COUNT] = refused ? MORI_EP_REFUSED_DISPATCH : (int32_t)sc->bad_count;
    hdr[MORI_EP_HDR_TOKENS] = (int32_t)T;
    if (sc->bad_count) {
      uint32_t first = sc->bad_first, slot = 0;
      mori_ep_impl_bad(e, a->indices, first, &slot);
      hdr[MORI_EP_HDR_BAD_TOKEN] = (int32_t)first;
      hdr[MORI_EP_HDR_BAD_SLOT] = (int32_t)slot;
      hdr[MORI_EP_HDR_BAD_INDEX] = a->indices[(uint64_t)first * K + slot];
    }
  }
  return MORI_DEVICE_OK;
}

/* What a block whose steps failed adds to a done counter beside its 1:
 * the last block to arrive learns from the same atomic whether any block
 * failed (grids stay far below 2^16 blocks). */
#define MORI_EP_DONE_FAILED (1u << 16)

/* Every block arrives; returns 1 in thread 0 of the last block to arrive
 * (after every block's stores are visible), 0 elsewhere. failed_here: this
 * block's steps failed (thread 0's word); *any_failed (in the last block,
 * when not NULL): some block's did. */
MORI_DEVICE_INLINE int mori_ep_impl_last_block(uint32_t *done, uint32_t grid, int failed_here, int *any_failed) {
  MORI_SYNC_BLOCK();
  int last = 0;
  if (MORI_THREAD_RANK_BLOCK() == 0) {
    mori_fence_system();
    uint32_t before = mori_atomic_add_u32(done, 1u + (failed_here ? MORI_EP_DONE_FAILED : 0u));
    last = (before & (MORI_EP_DONE_FAILED - 1u)) == grid - 1;
    if (last) {
      if (any_failed) *any_failed = failed_here || before >= MORI_EP_DONE_FAILED;
      *(volatile uint32_t *)done = 0; /* every block has arrived: ready for the next kernel */
      mori_fence_system();
    }
  }
  return last;
}

/* The last block raises this rank's flag (at `flags`, indexed by source)
 * on every rank: a release store, or through the proxy for a rank outside
 * the load/store team (a failed submit leaves its record in the mailbox,
 * and that rank's wait times out). */
MORI_DEVICE_INLINE void mori_ep_impl_publish(const mori_ep_dev_t *e, uint64_t flags, uint64_t epoch) {
  for (int r = 0; r < e->world_size; r++) (void)mori_signal_set(e->win, r, flags + (uint64_t)e->rank * 8, epoch);
}

/* Until the flags at `flags` of sources [from, to) hold >= epoch (thread
 * 0 polls, then the block reads what they guard). A wait that times out or
 * is aborted leaves its record (peer, channel) and returns the error. */
MORI_DEVICE_INLINE int mori_ep_impl_wait_sources(const mori_ep_dev_t *e, uint64_t flags, uint64_t epoch, uint32_t channel,
                                                 int from, int to) {
  int rc = MORI_DEVICE_OK;
  if (MORI_THREAD_RANK_BLOCK() == 0) {
    uint64_t start = 0; /* one clock for the sources: the wait ends within the timeout */
    for (int s = from; s < to && !rc; s++) {
      uint64_t *flag = (uint64_t *)mori_ep_impl_local(e, flags + (uint64_t)s * 8), seen;
      /* Plain polling, then one acquire: an acquire load per spin would
       * drop the L1 cache of the whole multiprocessor every time, and the
       * blocks that share it (still building their lists) would then miss
       * on every load. */
      for (uint32_t spin = 0; ((seen = mori_load_volatile_u64(flag)) & MORI_EP_FLAG_EPOCH) < epoch; spin++) {
        /* The record's seen: the epoch alone (a combine flag's dtype and
         * refusal bits are no call number). */
        rc = mori_wait_check(e->win, spin, &start, e->timeout_ns, s, channel, epoch, seen & MORI_EP_FLAG_EPOCH);
        if (rc) break;
        mori_pause();
      }
      if (!rc) (void)mori_atomic_load_acquire_u64(flag);
    }
  }
  return MORI_SYNC_BLOCK_OR(rc != MORI_DEVICE_OK) ? MORI_DEVICE_ETIMEDOUT : MORI_DEVICE_OK;
}

/* A combine's flag word for call `epoch` (see MORI_EP_FLAG_EPOCH). */
MORI_HOST_DEVICE uint64_t mori_ep_impl_combine_flag(uint64_t epoch, uint32_t dtype, int refused) {
  return epoch | ((uint64_t)(dtype + 1) << MORI_EP_FLAG_DTYPE_SHIFT) | (refused ? MORI_EP_FLAG_REFUSED : 0);
}

/* The first other source whose combine flag for call `epoch` says it
 * refused the call (*why = MORI_EP_REFUSED_COMBINE) or combines in another
 * dtype than `dtype` (*why = MORI_EP_COMBINE_DTYPE_MISMATCH, *theirs its
 * dtype), or -1; *self_refused: this rank's own send half was refused (by
 * its kernel: a host refusal runs no receive half), which that half has
 * reported already (thread 0, after the waits). */
MORI_DEVICE_INLINE int mori_ep_impl_combine_peer_bad(const mori_ep_dev_t *e, uint64_t epoch, uint32_t dtype, int *why,
                                                     uint32_t *theirs, int *self_refused) {
  for (int s = 0; s < e->world_size; s++) {
    uint64_t f = mori_load_volatile_u64((const uint64_t *)mori_ep_impl_local(e, e->off_cflag + (uint64_t)s * 8));
    if ((f & MORI_EP_FLAG_EPOCH) != epoch) continue; /* a later call's already: nothing to compare */
    if (s == e->rank) {
      *self_refused = (f & MORI_EP_FLAG_REFUSED) != 0;
      continue;
    }
    uint32_t d = (uint32_t)((f >> MORI_EP_FLAG_DTYPE_SHIFT) & 15u) - 1u;
    if (f & MORI_EP_FLAG_REFUSED) *why = MORI_EP_REFUSED_COMBINE;
    else if (d != dtype) *why = MORI_EP_COMBINE_DTYPE_MISMATCH;
    else continue;
    *theirs = d;
    return s;
  }
  return -1;
}

/* Until every source's flag at `flags` holds >= epoch. */
MORI_DEVICE_INLINE int mori_ep_impl_wait_all(const mori_ep_dev_t *e, uint64_t flags, uint64_t epoch, uint32_t channel) {
  return mori_ep_impl_wait_sources(e, flags, epoch, channel, 0, e->world_size);
}

/* Block 0 fetches what the ranks outside the load/store team published for
 * this call into this rank's window through the proxy (dispatch: their
 * headers, then the lists of what they send this rank; combine: where this
 * rank's rows start in their dispatch outputs), then raises ready[which],
 * after a failure too (its record is in the mailbox); the other blocks wait
 * for it. */
MORI_DEVICE_INLINE int mori_ep_impl_fetch_remote(const mori_ep_dev_t *e, uint64_t p, uint64_t epoch, int which, uint32_t block,
                                                 int rc) {
  uint64_t *ready = (uint64_t *)mori_ep_impl_local(e, e->off_ready) + which;
  int n = e->world_size, me = e->rank;
  uint64_t M = e->max_tokens;
  if (MORI_THREAD_RANK_BLOCK() == 0 && block == 0) {
    for (int s = 0; s < n && !rc; s++) {
      if (mori_ep_impl_peer(e, s, 0)) continue;
      if (which == 0)
        rc = mori_get_thread(e->win, s, mori_ep_impl_local(e, e->off_rhdr + (uint64_t)s * e->hdr_bytes),
                             e->off_hdr + p * e->hdr_bytes, e->hdr_bytes);
      else
        rc = mori_get_thread(e->win, s, mori_ep_impl_local(e, e->off_rbase + (uint64_t)s * 4),
                             e->off_base + (p * (uint64_t)(n + 1) + (uint64_t)me) * 4, 4);
    }
    if (!rc) rc = mori_quiet_window(e->win, e->timeout_ns);
    for (int s = 0; s < n && !rc && which == 0; s++) {
      if (mori_ep_impl_peer(e, s, 0)) continue;
      int32_t count = ((const int32_t *)mori_ep_impl_local(e, e->off_rhdr + (uint64_t)s * e->hdr_bytes))[MORI_EP_HDR_COUNTS + me];
      if (count > 0)
        rc = mori_get_thread(e->win, s, mori_ep_impl_local(e, e->off_rlist + (uint64_t)s * M * 4),
                             e->off_list + (p * (uint64_t)n + (uint64_t)me) * M * 4, (uint64_t)count * 4);
    }
    if (!rc && which == 0) rc = mori_quiet_window(e->win, e->timeout_ns);
    mori_fence_system();
    mori_atomic_store_release_u64(ready, epoch);
  } else if (MORI_THREAD_RANK_BLOCK() == 0 && !rc) {
    rc = mori_wait_word(e->win, ready, MORI_CMP_GE, epoch, e->timeout_ns, e->rank, 2 + (uint32_t)which, NULL);
  }
  return MORI_SYNC_BLOCK_OR(rc != MORI_DEVICE_OK) ? MORI_DEVICE_EUNREACHABLE : MORI_DEVICE_OK;
}

/* Source s's header and its list of what it sends this rank: in its
 * window, or the copies fetched from it. */
MORI_DEVICE_INLINE const int32_t *mori_ep_impl_hdr(const mori_ep_dev_t *e, int s, uint64_t p) {
  const char *h = mori_ep_impl_peer(e, s, e->off_hdr + p * e->hdr_bytes);
  return (const int32_t *)(h ? h : mori_ep_impl_local(e, e->off_rhdr + (uint64_t)s * e->hdr_bytes));
}
MORI_DEVICE_INLINE const int32_t *mori_ep_impl_list(const mori_ep_dev_t *e, int s, uint64_t p) {
  uint64_t M = e->max_tokens;
  const char *l = mori_ep_impl_peer(e, s, e->off_list + (p * (uint64_t)e->world_size + (uint64_t)e->rank) * M * 4);
  return (const int32_t *)(l ? l : mori_ep_impl_local(e, e->off_rlist + (uint64_t)s * M * 4));
}

/* Every proxy request of the block is complete (remote contexts only). */
MORI_DEVICE_INLINE int mori_ep_impl_quiet_block(const mori_ep_dev_t *e, int rc) {
  if (!e->remote) return rc;
  MORI_SYNC_BLOCK();
  int r = MORI_DEVICE_OK;
  if (MORI_THREAD_RANK_BLOCK() == 0) r = mori_quiet_window(e->win, e->timeout_ns);
  return MORI_SYNC_BLOCK_OR(r != MORI_DEVICE_OK || rc != MORI_DEVICE_OK) ? (rc ? rc : MORI_DEVICE_EUNREACHABLE)
                                                                         : MORI_DEVICE_OK;
}

/* Largest s with pre[s] <= i (the source of output row i). */
MORI_DEVICE_INLINE int mori_ep_impl_source(const uint32_t *pre, int n, uint32_t i) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (pre[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/* Dispatch's output row i, by one warp: a token's row, its top-k weights
 * (NULL: zeros) and indices, and its scales (NULL: zeros). */
MORI_DEVICE_INLINE void mori_ep_impl_emit_row(const mori_ep_dev_t *e, uint32_t i, const char *row, const float *w,
                                              const int32_t *idx, const char *scale, int lane, int lanes) {
  uint32_t K = e->top_k, tb = e->token_bytes, sb = e->scale_bytes;
  char *out = mori_ep_impl_local(e, e->off_out_tok), *out_sc = mori_ep_impl_local(e, e->off_out_scale);
  float *out_w = (float *)mori_ep_impl_local(e, e->off_out_w);
  int32_t *out_idx = (int32_t *)mori_ep_impl_local(e, e->off_out_idx);
  mori_copy_cooperative(out + (uint64_t)i * tb, row, tb, lane, lanes);
  for (uint32_t j = (uint32_t)lane; j < K; j += (uint32_t)lanes) {
    out_w[(uint64_t)i * K + j] = w ? w[j] : 0.0f;
    out_idx[(uint64_t)i * K + j] = idx[j];
  }
  if (sb && scale) mori_copy_cooperative(out_sc + (uint64_t)i * sb, scale, sb, lane, lanes);
  else if (sb)
    for (uint32_t j = (uint32_t)lane; j < sb; j += (uint32_t)lanes) out_sc[(uint64_t)i * sb + j] = 0;
}

/* A fused dispatch's rows from this rank to itself, by the block that
 * placed them: the tokens of its own chunk listed for this rank go from
 * the input straight to output rows pre_me + their place in the list.
 * Nothing here waits for another block: the places are this block's own
 * (scan_place), and pre_me (the rows of lower ranks) is known. */
MORI_DEVICE_INLINE void mori_ep_impl_own_rows(const mori_ep_dev_t *e, const mori_ep_args_t *a, uint32_t T, uint64_t p,
                                              uint32_t pre_me, uint32_t block, uint32_t grid) {
  int n = e->world_size, me = e->rank;
  uint32_t K = e->top_k, M = e->max_tokens, tb = e->token_bytes, sb = e->scale_bytes;
  int lane = MORI_THREAD_RANK_WARP(), lanes = MORI_THREAD_COUNT_WARP();
  uint32_t bw = (uint32_t)(MORI_THREAD_RANK_BLOCK() / lanes), nbw = (uint32_t)((MORI_THREAD_COUNT_BLOCK() + lanes - 1) / lanes);
  const int32_t *pos = (const int32_t *)mori_ep_impl_local(e, e->off_pos) + p * (uint64_t)M * (uint64_t)n;
  int32_t *src_pos = (int32_t *)mori_ep_impl_local(e, e->off_src_pos);
  uint32_t lo, hi;
  mori_ep_impl_chunk(T, block, grid, &lo, &hi);
  for (uint32_t t = lo + bw; t < hi; t += nbw) {
    int32_t o = pos[(uint64_t)t * (uint64_t)n + (uint64_t)me];
    if (o < 0) continue;
    uint32_t i = pre_me + (uint32_t)o;
    if (lane == 0) src_pos[i] = me * (int32_t)M + (int32_t)t;
    mori_ep_impl_emit_row(e, i, (const char *)a->input + (uint64_t)t * tb, a->weights ? a->weights + (uint64_t)t * K : NULL,
                          a->indices + (uint64_t)t * K, a->scales ? (const char *)a->scales + (uint64_t)t * sb : NULL, lane,
                          lanes);
  }
}

MORI_DEVICE_INLINE int mori_ep_dispatch_grid(const mori_ep_dev_t *ep, const mori_ep_args_t *a, uint32_t block, uint32_t grid) {
  /* A private copy of the context: read through the kernel parameter's
   * address, every store of the loops below might alias it and force it to
   * be read again. */
#if defined(MORI_DEVICE_COMPILER_HOST)
  if (grid > MORI_EP_HOST_MAX_BLOCKS || block >= grid) return MORI_DEVICE_EINVAL; /* the scan scratch holds no more */
#endif
  const mori_ep_dev_t ctx = *ep, *e = &ctx;
  mori_ep_state_t *st = mori_ep_impl_state(e);
  uint32_t stopped = *(volatile uint32_t *)&st->stopped;
  uint64_t done_before = mori_load_volatile_u64(&st->dispatch_epoch);
  int send = (a->phases & MORI_EP_PHASE_SEND) != 0, recv = (a->phases & MORI_EP_PHASE_RECV) != 0, fused = send && recv;
  uint64_t epoch = done_before + (uint64_t)send, p = epoch & 1;
  /* What a stopped context changes (mori_ep_impl_note_stopped). */
  int refused = a->refused || stopped;
  uint32_t T = stopped && send ? 0 : a->num_tokens;
  mori_ep_impl_note_stopped(e, st, stopped, block);
  int n = e->world_size, me = e->rank, rc = MORI_DEVICE_OK;
  uint32_t K = e->top_k, M = e->max_tokens, tb = e->token_bytes, sb = e->scale_bytes;
  int lane = MORI_THREAD_RANK_WARP(), lanes = MORI_THREAD_COUNT_WARP();
  uint32_t warp, warps;
  mori_ep_impl_warps(block, grid, &warp, &warps);
  if (send) {
    /* The count reads the indices of every token the call was given: its
     * loads need not wait for the stopped word, which only zeroes what it
     * publishes (a stopped context's call sends no token: T is 0). */
    mori_ep_impl_scan_count(e, a, a->num_tokens, stopped && send, epoch, block, grid);
    char *tok = mori_ep_impl_local(e, e->off_stage_tok) + p * (uint64_t)M * tb;
    float *w = (float *)mori_ep_impl_local(e, e->off_stage_w) + p * (uint64_t)M * K;
    int32_t *idx = (int32_t *)mori_ep_impl_local(e, e->off_stage_idx) + p * (uint64_t)M * K;
    char *sc = mori_ep_impl_local(e, e->off_stage_scale) + p * (uint64_t)M * sb;
    for (uint32_t t = warp; t < T; t += warps) {
      /* Rows only this rank reads are read from the input by the fused
       * call, and with every rank in reach their weights, indices and
       * scales too (mori_ep_impl_own_rows): nothing of them is staged. */
      int leaves = !fused || mori_ep_impl_leaves(e, a->indices, t);
      if (leaves) mori_copy_cooperative(tok + (uint64_t)t * tb, (const char *)a->input + (uint64_t)t * tb, tb, lane, lanes);
      else if (!e->remote) continue;
      for (uint32_t j = (uint32_t)lane; j < K; j += (uint32_t)lanes) {
        idx[(uint64_t)t * K + j] = a->indices[(uint64_t)t * K + j];
        w[(uint64_t)t * K + j] = a->weights ? a->weights[(uint64_t)t * K + j] : 0.0f;
      }
      if (sb) {
        if (a->scales)
          mori_copy_cooperative(sc + (uint64_t)t * sb, (const char *)a->scales + (uint64_t)t * sb, sb, lane, lanes);
        else
          for (uint32_t j = (uint32_t)lane; j < sb; j += (uint32_t)lanes) sc[(uint64_t)t * sb + j] = 0;
      }
    }
    rc = mori_ep_impl_scan_place(e, a, T, refused, p, epoch, block, grid);
    /* A block whose lists are incomplete keeps the flag down: no peer reads
     * them, and every rank's wait for this rank ends in its timeout. */
    if (rc && MORI_THREAD_RANK_BLOCK() == 0) (void)mori_atomic_add_u32(&st->scan_failed, 1);
    if (mori_ep_impl_last_block(&st->done[0], grid, 0, NULL)) {
      if (!*(volatile uint32_t *)&st->scan_failed) mori_ep_impl_publish(e, e->off_dflag, epoch);
      *(volatile uint32_t *)&st->scan_failed = 0;
    }
  }
  if (recv) {
    uint32_t *pre = (uint32_t *)mori_ep_impl_local(e, e->off_prefix) + (uint64_t)block * (uint64_t)(n + 1);
    /* A fused call with every rank in reach copies this rank's rows to
     * itself first, each block those of its own chunk: they wait only for
     * the lower ranks' headers (where this rank's rows start), not for the
     * grid's arrival or the higher ranks. At world size 1 that is the
     * whole dispatch. The gather below leaves them out. */
    int own = fused && !e->remote;
    if (own && !rc) rc = mori_ep_impl_wait_sources(e, e->off_dflag, epoch, 0, 0, me);
    if (own && !rc) {
      if (MORI_THREAD_RANK_BLOCK() == 0) {
        pre[0] = 0;
        for (int s = 0; s < me; s++) pre[s + 1] = pre[s] + (uint32_t)mori_ep_impl_hdr(e, s, p)[MORI_EP_HDR_COUNTS + me];
      }
      MORI_SYNC_BLOCK();
      mori_ep_impl_own_rows(e, a, T, p, pre[me], block, grid);
    }
    /* A block whose lists failed does not wait for this rank's own flag,
     * which stays down. */
    if (!rc) rc = mori_ep_impl_wait_sources(e, e->off_dflag, epoch, 0, own ? me : 0, n);
    if (e->remote) rc = mori_ep_impl_fetch_remote(e, p, epoch, 0, block, rc);
    if (!rc && MORI_THREAD_RANK_BLOCK() == 0) {
      int32_t *base = (int32_t *)mori_ep_impl_local(e, e->off_base) + p * (uint64_t)(n + 1);
      pre[0] = 0;
      for (int s = 0; s < n; s++) {
        const int32_t *h = mori_ep_impl_hdr(e, s, p);
        pre[s + 1] = pre[s] + (uint32_t)h[MORI_EP_HDR_COUNTS + me];
        if (block == 0) {
          base[s] = (int32_t)pre[s];
          /* A dropped token, or a refused call: recorded once, until the
           * host reads it. Not a refusal of a call this rank refused too
           * (its own call returned the error; a record of it would hide
           * the next report). */
          int32_t bad = h[MORI_EP_HDR_BAD_COUNT];
          if (bad != 0 && !(bad < 0 && refused))
            mori_ep_impl_report(st, s, bad, h[MORI_EP_HDR_BAD_TOKEN], h[MORI_EP_HDR_BAD_SLOT], h[MORI_EP_HDR_BAD_INDEX]);
        }
      }
      if (block == 0) {
        base[n] = (int32_t)pre[n];
        *(int32_t *)mori_ep_impl_local(e, e->off_recv_num) = (int32_t)pre[n];
      }
    }
    MORI_SYNC_BLOCK();
    /* The rows left to gather: every source's, less this rank's own when
     * they went first (j counts them without that gap). */
    uint32_t rows = rc ? 0 : pre[n], gap_at = rc ? 0 : pre[me], gap = rc || !own ? 0 : pre[me + 1] - pre[me];
    char *out = mori_ep_impl_local(e, e->off_out_tok), *out_sc = mori_ep_impl_local(e, e->off_out_scale);
    float *out_w = (float *)mori_ep_impl_local(e, e->off_out_w);
    int32_t *out_idx = (int32_t *)mori_ep_impl_local(e, e->off_out_idx);
    int32_t *src_pos = (int32_t *)mori_ep_impl_local(e, e->off_src_pos);
    for (uint32_t j = warp; j < rows - gap; j += warps) {
      uint32_t i = j < gap_at ? j : j + gap;
      int s = mori_ep_impl_source(pre, n, i);
      uint32_t t = (uint32_t)mori_ep_impl_list(e, s, p)[i - pre[s]];
      if (lane == 0) src_pos[i] = s * (int32_t)M + (int32_t)t;
      if (!mori_ep_impl_peer(e, s, 0)) { /* through the proxy, straight into the outputs */
        uint64_t at = p * M + t;
        int r = mori_get_warp(e->win, s, out + (uint64_t)i * tb, e->off_stage_tok + at * tb, tb);
        if (!r) r = mori_get_warp(e->win, s, out_w + (uint64_t)i * K, e->off_stage_w + at * K * 4, (uint64_t)K * 4);
        if (!r) r = mori_get_warp(e->win, s, out_idx + (uint64_t)i * K, e->off_stage_idx + at * K * 4, (uint64_t)K * 4);
        if (!r && sb) r = mori_get_warp(e->win, s, out_sc + (uint64_t)i * sb, e->off_stage_scale + at * sb, sb);
        if (r && !rc) rc = r;
        continue;
      }
      uint64_t at = p * M + t;
      const char *row = s == me && fused ? (const char *)a->input + (uint64_t)t * tb
                                         : mori_ep_impl_peer(e, s, e->off_stage_tok) + at * (uint64_t)tb;
      mori_ep_impl_emit_row(e, i, row, (const float *)mori_ep_impl_peer(e, s, e->off_stage_w) + at * (uint64_t)K,
                            (const int32_t *)mori_ep_impl_peer(e, s, e->off_stage_idx) + at * (uint64_t)K,
                            mori_ep_impl_peer(e, s, e->off_stage_scale) + at * (uint64_t)sb, lane, lanes);
    }
    rc = mori_ep_impl_quiet_block(e, rc);
  }
  /* A failure of this kernel stops the context for the kernels after it. */
  int failed = 0;
  if (mori_ep_impl_last_block(&st->done[1], grid, rc != MORI_DEVICE_OK, &failed)) {
    if (failed) *(volatile uint32_t *)&st->stopped = 1;
    if (send) *(volatile uint64_t *)&st->dispatch_epoch = epoch;
  }
  return rc;
}

/* Half-width element conversions of the combine's inner loop: the
 * hardware's on CUDA (one instruction each, round to nearest even as the
 * portable forms), the portable ones elsewhere. Each dtype has its own
 * loop below: a select between the bf16 and fp16 forms inside one loop made
 * the GPU run both (the fp16 one with its subnormal loop) for every element. */
#if defined(MORI_DEVICE_COMPILER_CUDA)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define MORI_EP_FP16_TO_FLOAT(h) __half2float(__ushort_as_half(h))
#define MORI_EP_FLOAT_TO_FP16(f) __half_as_ushort(__float2half_rn(f))
#define MORI_EP_FLOAT_TO_BF16(f) __bfloat16_as_ushort(__float2bfloat16_rn(f))
#else
#define MORI_EP_FP16_TO_FLOAT(h) mori_coll_impl_fp16_to_float(h)
#define MORI_EP_FLOAT_TO_FP16(f) mori_coll_impl_float_to_fp16(f)
#define MORI_EP_FLOAT_TO_BF16(f) mori_coll_impl_float_to_bf16(f)
#endif

/* 8 elements of `dtype` at `p` (16-byte aligned) as floats, added to acc. */
MORI_DEVICE_INLINE void mori_ep_impl_add8(float acc[8], const char *p, uint32_t dtype) {
  const mori_vec16_t *v = (const mori_vec16_t *)p;
  if (dtype == MORI_FLOAT32) {
    mori_vec16_t x = v[0], y = v[1];
    uint64_t words[4] = {x.lo, x.hi, y.lo, y.hi};
    MORI_EP_UNROLL
    for (int k = 0; k < 8; k++) acc[k] += mori_coll_impl_bits_to_float((uint32_t)(words[k / 2] >> (32 * (k % 2))));
    return;
  }
  mori_vec16_t x = v[0];
  if (dtype == MORI_BFLOAT16) {
    MORI_EP_UNROLL
    for (int k = 0; k < 8; k++) acc[k] += mori_coll_impl_bf16_to_float((uint16_t)((k < 4 ? x.lo : x.hi) >> (16 * (k % 4))));
  } else {
    MORI_EP_UNROLL
    for (int k = 0; k < 8; k++) acc[k] += MORI_EP_FP16_TO_FLOAT((uint16_t)((k < 4 ? x.lo : x.hi) >> (16 * (k % 4))));
  }
}

MORI_DEVICE_INLINE void mori_ep_impl_store8(char *p, const float acc[8], uint32_t dtype) {
  mori_vec16_t *v = (mori_vec16_t *)p;
  if (dtype == MORI_FLOAT32) {
    uint64_t words[4];
    MORI_EP_UNROLL
    for (int k = 0; k < 4; k++)
      words[k] = (uint64_t)mori_coll_impl_float_to_bits(acc[2 * k]) |
                 ((uint64_t)mori_coll_impl_float_to_bits(acc[2 * k + 1]) << 32);
    mori_vec16_t x = {words[0], words[1]}, y = {words[2], words[3]};
    v[0] = x;
    v[1] = y;
    return;
  }
  uint64_t lo = 0, hi = 0;
  if (dtype == MORI_BFLOAT16) {
    MORI_EP_UNROLL
    for (int k = 0; k < 8; k++) {
      uint64_t h = (uint64_t)MORI_EP_FLOAT_TO_BF16(acc[k]);
      if (k < 4) lo |= h << (16 * k);
      else hi |= h << (16 * (k - 4));
    }
  } else {
    MORI_EP_UNROLL
    for (int k = 0; k < 8; k++) {
      uint64_t h = (uint64_t)MORI_EP_FLOAT_TO_FP16(acc[k]);
      if (k < 4) lo |= h << (16 * k);
      else hi |= h << (16 * (k - 4));
    }
  }
  mori_vec16_t x = {lo, hi};
  v[0] = x;
}

MORI_DEVICE_INLINE int mori_ep_combine_grid(const mori_ep_dev_t *ep, const mori_ep_args_t *a, uint32_t block, uint32_t grid) {
  /* A private copy of the context (see mori_ep_dispatch_grid). */
  const mori_ep_dev_t ctx = *ep, *e = &ctx;
  mori_ep_state_t *st = mori_ep_impl_state(e);
  uint32_t stopped = *(volatile uint32_t *)&st->stopped;
  uint64_t done_before = mori_load_volatile_u64(&st->combine_epoch);
  uint64_t dp = mori_load_volatile_u64(&st->dispatch_epoch) & 1; /* the parity of the dispatch being combined */
  int send = (a->phases & MORI_EP_PHASE_SEND) != 0, recv = (a->phases & MORI_EP_PHASE_RECV) != 0, fused = send && recv;
  uint64_t epoch = done_before + (uint64_t)send;
  int refused = a->refused || stopped; /* what a stopped context changes (mori_ep_impl_note_stopped) */
  mori_ep_impl_note_stopped(e, st, stopped, block);
  int n = e->world_size, me = e->rank, rc = MORI_DEVICE_OK;
  uint32_t K = e->top_k, M = e->max_tokens, H = e->hidden_dim, dtype = a->dtype;
  uint64_t rs = (uint64_t)H * mori_coll_impl_dtype_size(dtype);
  int lane = MORI_THREAD_RANK_WARP(), lanes = MORI_THREAD_COUNT_WARP();
  uint32_t warp, warps;
  mori_ep_impl_warps(block, grid, &warp, &warps);
  char *reg = mori_ep_impl_local(e, e->off_comb_in);
  const char *in = (const char *)a->input;
  int external = in && in != reg;
  /* The rows the dispatch delivered: its own count (base[n]), which a
   * reset (recv_num := 0) leaves alone; what the send half sends. */
  uint32_t delivered =
      send ? (uint32_t)((const volatile int32_t *)mori_ep_impl_local(e, e->off_base))[dp * (uint64_t)(n + 1) + (uint64_t)n] : 0;
  /* An input or weights of fewer rows than that: the call runs as refused
   * before reading a row of them, so that no block reads past the caller's
   * tensors, and the peers' combines end naming this rank. Every block
   * reads the same words, so every block decides alike. */
  if (send && !refused && a->rows_known) {
    int short_input = in && a->input_rows < delivered, short_weights = a->weights && a->weights_rows < delivered;
    if (short_input || short_weights) {
      refused = 1;
      if (block == 0 && MORI_THREAD_RANK_BLOCK() == 0)
        mori_ep_impl_report(st, me, MORI_EP_COMBINE_ROWS, (int32_t)delivered, short_input ? 0 : 1,
                            (int32_t)(short_input ? a->input_rows : a->weights_rows));
    }
  }
  float *reg_w = (float *)mori_ep_impl_local(e, e->off_comb_w_in);
  if (send) {
    /* Two combines of one dispatch: every rank has finished reading this
     * rank's rows of the previous combine before they are overwritten
     * (with a dispatch in between this holds already). */
    rc = mori_ep_impl_wait_all(e, e->off_cdone, epoch - 1, 4);
    /* A block whose wait failed copies nothing (a slow peer may still be
     * reading those rows) and keeps the flag down, so every peer's wait for
     * it ends in its timeout, reported, rather than in rows half
     * overwritten. */
    uint32_t rows = rc != MORI_DEVICE_OK || refused ? 0 : delivered;
    if (rc != MORI_DEVICE_OK && MORI_THREAD_RANK_BLOCK() == 0) (void)mori_atomic_add_u32(&st->send_failed, 1);
    const int32_t *src_pos = (const int32_t *)mori_ep_impl_local(e, e->off_src_pos);
    for (uint32_t i = warp; i < rows; i += warps) {
      /* Rows that came from this rank are read from the input by the fused call. */
      if (external && (!fused || src_pos[i] / (int32_t)M != me))
        mori_copy_cooperative(reg + (uint64_t)i * rs, in + (uint64_t)i * rs, rs, lane, lanes);
      /* Without weights, zeros: a source that sums weights adds nothing for
       * this rank's copies (rather than the last combine's). */
      for (uint32_t j = (uint32_t)lane; j < K; j += (uint32_t)lanes)
        reg_w[(uint64_t)i * K + j] = a->weights ? a->weights[(uint64_t)i * K + j] : 0.0f;
    }
    if (mori_ep_impl_last_block(&st->done[2], grid, 0, NULL)) {
      if (!*(volatile uint32_t *)&st->send_failed)
        mori_ep_impl_publish(e, e->off_cflag, mori_ep_impl_combine_flag(epoch, dtype, refused));
      *(volatile uint32_t *)&st->send_failed = 0;
    }
  }
  /* A refused call reads nothing: the receive half only says it is done. */
  if (recv && !refused) {
    const int32_t *pos = (const int32_t *)mori_ep_impl_local(e, e->off_pos) + dp * (uint64_t)M * (uint64_t)n;
    char *out = mori_ep_impl_local(e, e->off_comb_out);
    float *out_w = (float *)mori_ep_impl_local(e, e->off_comb_w_out);
    int vec = H % 8 == 0 && (((uintptr_t)in & 15) == 0 || !external);
    /* A fused call first finishes the tokens that need nothing from this
     * call's other halves: those with no copy (zeros) and those whose only
     * copy is on this rank (every token at world size 1). That copy is in
     * the caller's input or the registered one (written before the call),
     * its weights in the caller's weights (has_weights: given), its row
     * where this rank's previous dispatch put it. A block left with no
     * other token does not wait for the flags at all. */
    int own = fused && vec, others = !own;
    if (own) {
      uint32_t own_base = (uint32_t)((const int32_t *)mori_ep_impl_local(e, e->off_base))[dp * (uint64_t)(n + 1) + (uint64_t)me];
      for (uint32_t t = warp; t < a->num_tokens; t += warps) {
        const int32_t *tp = pos + (uint64_t)t * (uint64_t)n;
        int copies = 0, only = 0;
        for (int d = 0; d < n; d++)
          if (tp[d] >= 0 && copies++ == 0) only = d;
        if (copies > 1 || (copies == 1 && only != me)) {
          others = 1;
          continue;
        }
        uint64_t row = (uint64_t)own_base + (uint64_t)(copies ? tp[me] : 0);
        if (copies) mori_copy_cooperative(out + (uint64_t)t * rs, (external ? in : reg) + row * rs, rs, lane, lanes);
        else
          for (uint64_t x = (uint64_t)lane; x < rs / 16; x += (uint64_t)lanes) {
            mori_vec16_t zero = {0, 0};
            ((mori_vec16_t *)(out + (uint64_t)t * rs))[x] = zero;
          }
        if (a->has_weights)
          for (uint32_t j = (uint32_t)lane; j < K; j += (uint32_t)lanes)
            out_w[(uint64_t)t * K + j] = copies ? a->weights[row * K + j] : 0.0f;
      }
    }
    /* (With the proxy, every block takes part: block 0 starts the fetches
     * that the others wait for.) */
    if (MORI_SYNC_BLOCK_OR(others) || e->remote) {
      int waited = mori_ep_impl_wait_all(e, e->off_cflag, epoch, 1);
      if (!rc) rc = waited; /* the first failure (the send half's wait for the readers, or this one) */
      /* A rank that refused this combine sent nothing, and rows of another
       * dtype than this rank's would be summed as garbage: no token is
       * summed (the first block to see it records why, once, until the
       * host reads it). */
      int why = 0, peer = -1, self_refused = 0;
      uint32_t theirs = 0;
      if (!rc && MORI_THREAD_RANK_BLOCK() == 0)
        peer = mori_ep_impl_combine_peer_bad(e, epoch, dtype, &why, &theirs, &self_refused);
      /* Reported by the first block that sees it (block 0 may have had only
       * this rank's own tokens, and no wait), once a call. */
      if (peer >= 0) {
        uint64_t last = mori_load_volatile_u64(&st->combine_bad_epoch);
        if (last < epoch && mori_atomic_cas_u64(&st->combine_bad_epoch, last, epoch) == last)
          mori_ep_impl_report(st, peer, why, 0, (int32_t)dtype, (int32_t)theirs);
      }
      int skip = MORI_SYNC_BLOCK_OR(peer >= 0 || self_refused);
      if (e->remote) rc = mori_ep_impl_fetch_remote(e, dp, epoch, 1, block, rc);
      uint32_t *bases = (uint32_t *)mori_ep_impl_local(e, e->off_prefix) + (uint64_t)block * (uint64_t)(n + 1);
      if (!rc && MORI_THREAD_RANK_BLOCK() == 0)
        for (int d = 0; d < n; d++) {
          const int32_t *b = (const int32_t *)mori_ep_impl_peer(e, d, e->off_base + dp * (uint64_t)(n + 1) * 4);
          bases[d] = (uint32_t)(b ? b[me] : ((const int32_t *)mori_ep_impl_local(e, e->off_rbase))[d]);
        }
      MORI_SYNC_BLOCK();
      uint32_t T = rc || skip ? 0 : a->num_tokens;
      /* Copies on ranks outside the load/store team first come through the
       * proxy into fetch[t][c] (c: the copy's place among t's destinations). */
      uint64_t fetch_row = (uint64_t)H * e->comb_elem_bytes;
      char *fetch = mori_ep_impl_local(e, e->off_fetch);
      float *fetch_w = (float *)mori_ep_impl_local(e, e->off_fetch_w);
      if (e->remote) {
        for (uint32_t t = warp; t < T; t += warps) {
          const int32_t *tp = pos + (uint64_t)t * (uint64_t)n;
          for (int d = 0, c = 0; d < n; d++) {
            if (tp[d] < 0) continue;
            uint64_t row = (uint64_t)bases[d] + (uint64_t)tp[d], slot = (uint64_t)t * e->copies + (uint64_t)c++;
            if (mori_ep_impl_peer(e, d, 0)) continue;
            int r = mori_get_warp(e->win, d, fetch + slot * fetch_row, e->off_comb_in + row * rs, rs);
            if (!r && a->has_weights) r = mori_get_warp(e->win, d, fetch_w + slot * K, e->off_comb_w_in + row * K * 4, (uint64_t)K * 4);
            if (r && !rc) rc = r;
          }
        }
        rc = mori_ep_impl_quiet_block(e, rc);
        if (rc) T = 0;
      }
      for (uint32_t t = warp; t < T; t += warps) {
        const int32_t *tp = pos + (uint64_t)t * (uint64_t)n;
        /* Where copy d of token t is: the caller's input (this rank's own
         * rows, fused call), the destination's registered input, or fetch. */
#define MORI_EP_COPY_ROW(d, c)                                                                  \
  (d == me && fused && external              ? in + ((uint64_t)bases[d] + (uint64_t)tp[d]) * rs \
   : mori_ep_impl_peer(e, d, e->off_comb_in) ? mori_ep_impl_peer(e, d, e->off_comb_in) +        \
                                                   ((uint64_t)bases[d] + (uint64_t)tp[d]) * rs  \
                                               : fetch + ((uint64_t)t * e->copies + (uint64_t)(c)) * fetch_row)
        int copies = 0, only = 0;
        for (int d = 0; d < n; d++)
          if (tp[d] >= 0 && copies++ == 0) only = d;
        if (own && (copies == 0 || (copies == 1 && only == me))) continue; /* done above */
        if (vec && copies == 1) {
          /* One copy (every expert of the token on one rank): the sum is
           * that copy, so it is a plain copy, eight 16-byte loads in flight
           * per lane and no conversions. Widening a half or a float and
           * rounding it back gives the value itself; only a negative zero,
           * which 0 + x would make positive, keeps its sign here. */
          mori_copy_cooperative(out + (uint64_t)t * rs, MORI_EP_COPY_ROW(only, 0), rs, lane, lanes);
        } else if (vec) {
          /* Four groups of 8 elements per lane at a time: four independent
           * 16-byte loads in flight per copy. */
          uint32_t G = H / 8, step = (uint32_t)lanes;
          uint64_t esz = rs / H;
          for (uint32_t g0 = (uint32_t)lane; g0 < G; g0 += 4 * step) {
            float acc[4][8];
            MORI_EP_UNROLL
            for (int u = 0; u < 4; u++) {
              MORI_EP_UNROLL
              for (int k = 0; k < 8; k++) acc[u][k] = 0;
            }
            for (int d = 0, c = 0; d < n; d++) {
              if (tp[d] < 0) continue;
              const char *row = MORI_EP_COPY_ROW(d, c);
              MORI_EP_UNROLL
              for (int u = 0; u < 4; u++) {
                uint32_t g = g0 + (uint32_t)u * step;
                if (g < G) mori_ep_impl_add8(acc[u], row + (uint64_t)g * 8 * esz, dtype);
              }
              c++;
            }
            MORI_EP_UNROLL
            for (int u = 0; u < 4; u++) {
              uint32_t g = g0 + (uint32_t)u * step;
              if (g < G) mori_ep_impl_store8(out + (uint64_t)t * rs + (uint64_t)g * 8 * esz, acc[u], dtype);
            }
          }
        } else {
          for (uint32_t x = (uint32_t)lane; x < H; x += (uint32_t)lanes) {
            float acc = 0;
            for (int d = 0, c = 0; d < n; d++) {
              if (tp[d] < 0) continue;
              acc += mori_coll_impl_load_elem(MORI_EP_COPY_ROW(d, c), x, dtype);
              c++;
            }
            mori_coll_impl_store_elem(out + (uint64_t)t * rs, x, dtype, acc);
          }
        }
#undef MORI_EP_COPY_ROW
        if (a->has_weights)
          for (uint32_t j = (uint32_t)lane; j < K; j += (uint32_t)lanes) {
            float acc = 0;
            for (int d = 0, c = 0; d < n; d++) {
              if (tp[d] < 0) continue;
              uint64_t row = (uint64_t)bases[d] + (uint64_t)tp[d];
              const float *w = (const float *)mori_ep_impl_peer(e, d, e->off_comb_w_in);
              acc += w ? w[row * K + j] : fetch_w[((uint64_t)t * e->copies + (uint64_t)c) * K + j];
              c++;
            }
            out_w[(uint64_t)t * K + j] = acc;
          }
      }
    }
  }
  int failed = 0; /* as in dispatch */
  if (mori_ep_impl_last_block(&st->done[3], grid, rc != MORI_DEVICE_OK, &failed)) {
    if (failed) *(volatile uint32_t *)&st->stopped = 1;
    if (recv) { /* this rank has read every copy of this combine */
      mori_ep_impl_publish(e, e->off_cdone, epoch);
      /* Nobody waits for these before the next combine: let them complete
       * now, so that no request is left in flight when the context goes. */
      if (e->remote) (void)mori_quiet_window(e->win, e->timeout_ns);
    }
    if (send) *(volatile uint64_t *)&st->combine_epoch = epoch;
  }
  return rc;
}

#endif
