// SPDX-License-Identifier: MIT
/* Bodies of mori/device/coll/sync.h, and what every collective call does
 * around its data: address flags and staging on a member, signal a flag
 * once a block's stores are done, wait for one (bounded, abort-aware,
 * never a trap). Block scope: every thread of the block calls, in the same
 * order. Internal: mori_coll_impl_* may change between releases. */
#ifndef MORI_DEVICE_COLL_IMPL_SYNC_FUNCS_H
#define MORI_DEVICE_COLL_IMPL_SYNC_FUNCS_H

#include "mori/device/coll/sync.h"
#include "mori/device/coll/types.h"
#include "mori/device/put.h"

/* The epoch of the call about to run, for block `block` (< c.grid). */
MORI_DEVICE_INLINE uint64_t mori_coll_epoch(mori_coll_dev_t c, uint32_t block) {
  return mori_load_volatile_u64(c.epochs + block) + 1;
}

MORI_DEVICE_INLINE char *mori_coll_impl_at(mori_coll_dev_t c, int member, uint64_t offset) {
  return (char *)mori_peer_ptr(c.win, mori_team_to_world(c.team, member), offset);
}

/* Flag `slot` of `parity` in `member`'s workspace. */
MORI_DEVICE_INLINE uint64_t *mori_coll_impl_flag(mori_coll_dev_t c, int member, uint64_t epoch, uint64_t slot) {
  uint64_t parity = epoch & 1;
  return (uint64_t *)mori_coll_impl_at(c, member, c.flags_offset + (parity * c.flag_slots + slot) * 8);
}

/* Byte `offset` of the staging half of `parity` in `member`'s workspace. */
MORI_DEVICE_INLINE char *mori_coll_impl_staging(mori_coll_dev_t c, int member, uint64_t epoch, uint64_t offset) {
  uint64_t parity = epoch & 1;
  return mori_coll_impl_at(c, member, c.data_offset + parity * (c.data_bytes / 2) + offset);
}

/* Byte `offset` of the LL part of the staging half of `parity` in
 * `member`'s workspace: the second half of each half. LL lines carry their
 * call's epoch in the data words, so a word of raw data (what the slices,
 * RS/AG and one-shot algorithms stage, in the first part) that a call left
 * there would read as a line of a later call whenever it holds that epoch;
 * raw data never enters this part, and LL lines never leave it. */
MORI_DEVICE_INLINE char *mori_coll_impl_ll_staging(mori_coll_dev_t c, int member, uint64_t epoch, uint64_t offset) {
  return mori_coll_impl_staging(c, member, epoch, c.data_bytes / 4 + offset);
}

/* Member `member`'s ready slot for `source` (see mori_coll_dev_t). */
MORI_DEVICE_INLINE uint64_t *mori_coll_impl_ready(mori_coll_dev_t c, int member, int source) {
  return (uint64_t *)mori_coll_impl_at(c, member, c.ready_offset + (uint64_t)source * 8);
}

/* After the block's stores to a member: flag := epoch (release, system
 * scope, by one thread once every thread's stores are done). */
MORI_DEVICE_INLINE void mori_coll_impl_signal_block(uint64_t *flag, uint64_t epoch) {
  MORI_SYNC_BLOCK();
  if (MORI_THREAD_RANK_BLOCK() == 0) mori_atomic_store_release_u64(flag, epoch);
}

/* The slot in `member`'s workspace where `source` marks call `epoch` refused. */
MORI_DEVICE_INLINE uint64_t *mori_coll_impl_refusal(mori_coll_dev_t c, int member, int source, uint64_t epoch) {
  return (uint64_t *)mori_coll_impl_at(c, member,
                                       c.refused_offset + ((uint64_t)source * MORI_COLL_REFUSALS_KEPT +
                                                           epoch % MORI_COLL_REFUSALS_KEPT) * 8);
}

/* The member (as a world rank) that refused call `epoch`, as this rank's
 * slots say, or -1. Read only when a wait is slow (see wait_block). */
MORI_DEVICE_INLINE int mori_coll_impl_refused_by(mori_coll_dev_t c, uint64_t epoch) {
  if (!c.refused_offset) return -1;
  const char *mine = (const char *)c.epochs; /* this rank's workspace starts with the epochs */
  for (int m = 0; m < c.team.size; m++) {
    uint64_t offset = c.refused_offset + ((uint64_t)m * MORI_COLL_REFUSALS_KEPT + epoch % MORI_COLL_REFUSALS_KEPT) * 8;
    if (mori_atomic_load_acquire_u64((uint64_t *)(mine + offset)) == epoch) return mori_team_to_world(c.team, m);
  }
  return -1;
}

/* When a member refused call `epoch`: leaves the refusal's record (code
 * MORI_DEVICE_EINVAL; peer = the refusing member, channel
 * MORI_COLL_REFUSED_CHANNEL, expected = the call's epoch, seen = the rank
 * the caller waited for) and returns its code; else MORI_DEVICE_OK. */
MORI_DEVICE_INLINE int mori_coll_impl_check_refused(mori_coll_dev_t c, uint64_t epoch, int peer_world, uint64_t waited) {
  int refuser = mori_coll_impl_refused_by(c, epoch);
  if (refuser < 0) return MORI_DEVICE_OK;
  return mori_device_report(c.win, MORI_DEVICE_EINVAL, refuser, MORI_COLL_REFUSED_CHANNEL, waited, epoch,
                            (uint64_t)peer_world);
}

/* What a slow wait of call `epoch` checks at the polls that read the clock:
 * an abort, a member's refusal of the call, the call's timeout. Leaves the
 * record and returns its code, or MORI_DEVICE_OK to go on waiting. */
MORI_DEVICE_INLINE int mori_coll_impl_wait_verdict(mori_coll_dev_t c, uint64_t start, uint64_t epoch, int peer_world,
                                                   uint32_t channel, uint64_t seen) {
  uint64_t waited = mori_clock_since(start);
  if (mori_aborted(c.win)) return mori_device_report(c.win, MORI_DEVICE_EABORTED, peer_world, channel, waited, epoch, seen);
  int refused = mori_coll_impl_check_refused(c, epoch, peer_world, waited);
  if (refused) return refused;
  if (c.timeout_ns && waited > c.timeout_ns)
    return mori_device_report(c.win, MORI_DEVICE_ETIMEDOUT, peer_world, channel, waited, epoch, seen);
  return MORI_DEVICE_OK;
}

/* Until this rank's `flag` holds >= epoch (acquire). One thread polls; the
 * block then reads what the flag guards. A wait that times out, is aborted
 * or finds the call refused by a member leaves a record in the mailbox
 * (channel: the flag's slot) and returns the error; the data read after it
 * is not valid. The timeout counts from the call's start
 * (c.call_start_ns): once one wait has used it up, the call's later waits
 * give up after 64 polls (the clock is read at the 64th and then every
 * 1024th, so a wait that is met soon reads it never). */
MORI_DEVICE_INLINE int mori_coll_impl_wait_block(mori_coll_dev_t c, const uint64_t *flag, uint64_t epoch, int peer_world,
                                            uint32_t channel) {
  int rc = MORI_DEVICE_OK;
  if (MORI_THREAD_RANK_BLOCK() == 0) {
    uint64_t start = 0, seen = 0;
    for (uint32_t spin = 0; (seen = mori_atomic_load_acquire_u64((uint64_t *)flag)) < epoch; spin++) {
      if (spin == 0) start = c.call_start_ns ? c.call_start_ns : mori_clock_ns();
      if (((spin & 1023) == 1023 || spin == 63) &&
          (rc = mori_coll_impl_wait_verdict(c, start, epoch, peer_world, channel, seen)) != MORI_DEVICE_OK)
        break;
      mori_pause();
    }
  }
  MORI_SYNC_BLOCK();
  return rc;
}

/* Until the LL line at `line` (this rank's memory) carries `epoch` in both
 * halves; *word gets its 8 data bytes. One thread, its own line: the data
 * is its own arrival flag. A wait that times out, is aborted or finds the
 * call refused leaves a record (peer_world, channel) and returns the error. */
MORI_DEVICE_INLINE int mori_coll_impl_wait_ll_line(mori_coll_dev_t c, const uint64_t *line, uint64_t epoch, int peer_world,
                                              uint32_t channel, uint64_t *word) {
  uint64_t flag = (uint64_t)(uint32_t)epoch << 32, lo, hi, start = 0;
  for (uint32_t spin = 0;; spin++) {
    mori_load_ll_line(line, &lo, &hi);
    if ((lo & 0xffffffff00000000ull) == flag && (hi & 0xffffffff00000000ull) == flag) break;
    if (spin == 0) start = c.call_start_ns ? c.call_start_ns : mori_clock_ns(); /* see wait_block */
    if ((spin & 1023) == 1023 || spin == 63) {
      int bad = mori_coll_impl_wait_verdict(c, start, epoch, peer_world, channel, lo >> 32);
      if (bad) return bad;
    }
    mori_pause();
  }
  *word = (lo & 0xffffffffull) | (hi << 32);
  return MORI_DEVICE_OK;
}

/* Member `member`'s slot of `epoch`'s parity in `owner`'s workspace:
 * {epoch, the signature's words}. A member writes its slot of call e in
 * every member's workspace at the start of e (block 0), which it reaches
 * only once its kernel of e - 1 has ended, and it reaches e + 2 (the same
 * slot again) only once it has read every member's slot of e + 1, which
 * each member writes only after every block of its kernel of e has read
 * all of its slots of e. So no slot is written while a block still reads
 * it, as long as every block reads every other member's slot of the call
 * (a member's slot in its own workspace is neither written nor read; a
 * difference does not stop the reading; only a timeout or an abort does,
 * after which the members are out of step anyway). */
MORI_DEVICE_INLINE uint64_t *mori_coll_impl_call_slot(mori_coll_dev_t c, int owner, int member, uint64_t epoch) {
  uint64_t slot = (epoch & 1) * (uint64_t)c.team.size + (uint64_t)member;
  return (uint64_t *)mori_coll_impl_at(c, owner, c.calls_offset + slot * (1 + MORI_COLL_SIG_WORDS) * 8);
}

/* One member's slot of call `epoch` against this rank's signature, by one
 * thread: waits for it, then (compare) reads every word, the loads issued
 * together rather than each after the last one's comparison, and compares.
 * 0: the same; 1: a word differs (block 0 leaves the record); 2: the
 * wait ended (a timeout, an abort or a refusal: the wait's record) or the
 * member is out of step (block 0's record). */
MORI_DEVICE_INLINE int mori_coll_impl_check_member(mori_coll_dev_t c, const mori_coll_call_sig_t *sig, uint32_t block,
                                                   uint64_t epoch, int m, int compare) {
  const uint64_t *slot = mori_coll_impl_call_slot(c, c.team.rank, m, epoch);
  int peer = mori_team_to_world(c.team, m);
  uint32_t channel = MORI_COLL_MISMATCH_CHANNEL + MORI_COLL_SIG_WORDS;
  uint64_t start = 0, seen = 0;
  for (uint32_t spin = 0; (seen = mori_atomic_load_acquire_u64((uint64_t *)slot)) < epoch; spin++) {
    if (spin == 0) start = c.call_start_ns ? c.call_start_ns : mori_clock_ns(); /* see wait_block */
    if (((spin & 1023) == 1023 || spin == 63) && mori_coll_impl_wait_verdict(c, start, epoch, peer, channel, seen)) return 2;
    mori_pause();
  }
  if (seen != epoch) { /* a later call's: the members are out of step (see call_slot) */
    if (block == 0) mori_device_report(c.win, MORI_DEVICE_EMISMATCH, peer, MORI_COLL_OUT_OF_STEP_CHANNEL, 0, epoch, seen);
    return 2;
  }
  if (!compare) return 0;
  uint64_t theirs[MORI_COLL_SIG_WORDS];
  for (int w = 0; w < MORI_COLL_SIG_WORDS; w++) theirs[w] = mori_load_volatile_u64(slot + 1 + w);
  /* Every block reads the same slots and so finds the same difference:
   * block 0 alone leaves the record, so that a host that reads the mailbox
   * while the kernel runs is not handed it twice. The first difference is
   * named. */
  for (int w = 0; w < MORI_COLL_SIG_WORDS; w++)
    if (theirs[w] != sig->word[w]) {
      if (block == 0)
        mori_device_report(c.win, MORI_DEVICE_EMISMATCH, peer, MORI_COLL_MISMATCH_CHANNEL + (uint32_t)w, epoch, sig->word[w],
                           theirs[w]);
      return 1;
    }
  return 0;
}

/* The slots of the other members only: this rank's own signature is the
 * one it compares with (a context of one member checks nothing). One
 * thread per member, so the waits overlap; every thread of every block
 * leaves with the block's verdict. A thread that found a difference still
 * waits for its later members' slots (see call_slot: every slot of the
 * call is read) but names no second difference; one whose wait ended
 * stops. */
MORI_DEVICE_INLINE int mori_coll_check_call(mori_coll_dev_t c, const mori_coll_call_sig_t *sig, uint32_t block, uint64_t epoch) {
  if (!c.calls_offset || c.team.size < 2) return 0;
  int me = c.team.rank, bad = 0;
  if (block == 0)
    for (int m = MORI_THREAD_RANK_BLOCK(); m < c.team.size; m += MORI_THREAD_COUNT_BLOCK()) {
      if (m == me) continue;
      uint64_t *slot = mori_coll_impl_call_slot(c, m, me, epoch);
      for (int w = 0; w < MORI_COLL_SIG_WORDS; w++) *(volatile uint64_t *)(slot + 1 + w) = sig->word[w];
      mori_atomic_store_release_u64(slot, epoch); /* after the words */
    }
  for (int m = MORI_THREAD_RANK_BLOCK(); m < c.team.size && bad < 2; m += MORI_THREAD_COUNT_BLOCK()) {
    int verdict = m == me ? 0 : mori_coll_impl_check_member(c, sig, block, epoch, m, !bad);
    if (verdict > bad) bad = verdict;
  }
  return MORI_SYNC_BLOCK_OR(bad);
}

/* How a call's blocks share its kinds of items (at most three: e.g. push,
 * reduce, receive), decided on the host once per call: share[0] blocks for
 * kind 0, share[1] for kind 1, the rest of the grid for kind 2, in
 * proportion to their counts and at least one each, so the kinds run side
 * by side instead of queueing behind each other in the same blocks. A kind
 * waits only for an earlier kind (of another rank), so with every block
 * resident nothing deadlocks. share[0] == grid means no split: every block
 * takes items in order, kind after kind (also what a grid smaller than the
 * number of kinds gets). */
MORI_HOST_DEVICE void mori_coll_share_blocks(uint32_t grid, const uint32_t end[3], uint32_t share[2]) {
  uint32_t counts[3], total = 0, kinds = 0;
  for (int k = 0; k < 3; k++) {
    uint32_t begin = k ? end[k - 1] : 0;
    counts[k] = end[k] > begin ? end[k] - begin : 0;
    total += counts[k];
    kinds += counts[k] > 0;
  }
  share[0] = grid;
  share[1] = 0;
  if (grid < kinds || kinds < 2) return;
  uint32_t part[3], given = 0;
  for (int k = 0; k < 3; k++) {
    part[k] = counts[k] ? (uint32_t)(((uint64_t)grid * counts[k]) / total) : 0;
    if (counts[k] && part[k] == 0) part[k] = 1;
    given += part[k];
  }
  while (given > grid) /* rounding up for tiny kinds: take back from the largest */
    for (int k = 0; k < 3 && given > grid; k++)
      if (part[k] > 1 && part[k] >= part[(k + 1) % 3] && part[k] >= part[(k + 2) % 3]) {
        part[k]--;
        given--;
      }
  for (int k = 0; given < grid; k = (k + 1) % 3) /* leftovers to the kinds with items */
    if (counts[k]) {
      part[k]++;
      given++;
    }
  share[0] = part[0];
  share[1] = part[1];
}

/* Which items block `block` runs: first, first + stride, ... below last.
 * Scalar on purpose: it runs at the start of every block of every call. */
MORI_HOST_DEVICE void mori_coll_block_range(uint32_t grid, uint32_t block, const uint32_t end[3], const uint32_t share[2],
                                            uint32_t *first, uint32_t *stride, uint32_t *last) {
  uint32_t s0 = share[0], s1 = share[1];
  if (s0 >= grid) {
    *first = block;
    *stride = grid;
    *last = end[2];
  } else if (block < s0) {
    *first = block;
    *stride = s0;
    *last = end[0];
  } else if (block < s0 + s1) {
    *first = end[0] + (block - s0);
    *stride = s1;
    *last = end[1];
  } else {
    *first = end[1] + (block - s0 - s1);
    *stride = grid - s0 - s1;
    *last = end[2];
  }
}

/* The block is done with the call: it records the epoch, for its next call
 * (stream-ordered after this one) to take the next. */
MORI_DEVICE_INLINE void mori_coll_finish_block(mori_coll_dev_t c, uint32_t block, uint64_t epoch) {
  MORI_SYNC_BLOCK();
  if (MORI_THREAD_RANK_BLOCK() == 0) *(volatile uint64_t *)(c.epochs + block) = epoch;
}

/* This rank's part of a call it refused (its own arguments). A call may
 * write into the half (parity) of staging and flags that the call two
 * before it used, which is safe only once every member is done with that
 * one: a call that moves data gets there by needing every member's data,
 * a refusal by waiting for it. So every block first waits until every
 * block of every member has finished the call before (the members' epoch
 * counters; every block, so that a fused kernel's next call in any block
 * starts only then), block 0 then marks the call refused in every member's
 * slots, and every block takes the call's epoch and moves nothing. The members' waits in this call then
 * end at once, naming this rank, and the context's later calls stay
 * paired. A wait that times out or is aborted leaves the usual record
 * (peer: the member, channel: its block) and the call goes on without the
 * mark, as a call whose member never came. */
MORI_DEVICE_INLINE void mori_coll_refuse_block(mori_coll_dev_t c, uint32_t block) {
  uint64_t epoch = mori_coll_epoch(c, block);
  if (c.refused_offset) {
    uint64_t start = c.call_start_ns ? c.call_start_ns : mori_clock_ns();
    int rc = MORI_DEVICE_OK;
    for (int member = 0; member < c.team.size && !rc; member++) {
      uint64_t grid = mori_load_volatile_u64(
          (const uint64_t *)mori_coll_impl_at(c, member, c.refused_offset + (uint64_t)c.team.size * MORI_COLL_REFUSALS_KEPT * 8));
      if (grid > MORI_COLL_MAX_GRID) grid = MORI_COLL_MAX_GRID;
      for (uint64_t b = (uint64_t)MORI_THREAD_RANK_BLOCK(); b < grid && !rc; b += (uint64_t)MORI_THREAD_COUNT_BLOCK()) {
        const uint64_t *done = (const uint64_t *)mori_coll_impl_at(c, member, b * 8);
        uint64_t seen = 0;
        for (uint32_t spin = 0; (seen = mori_load_volatile_u64(done)) + 1 < epoch; spin++) {
          if ((spin & 1023) == 1023 || spin == 63) {
            uint64_t waited = mori_clock_since(start);
            int bad = mori_aborted(c.win) ? MORI_DEVICE_EABORTED
                    : (c.timeout_ns && waited > c.timeout_ns) ? MORI_DEVICE_ETIMEDOUT : 0;
            if (bad) {
              rc = mori_device_report(c.win, bad, mori_team_to_world(c.team, member), (uint32_t)b, waited, epoch - 1, seen);
              break;
            }
          }
          mori_pause();
        }
      }
    }
    rc = MORI_SYNC_BLOCK_OR(rc != MORI_DEVICE_OK);
    if (!rc && block == 0 && MORI_THREAD_RANK_BLOCK() == 0)
      for (int m = 0; m < c.team.size; m++)
        mori_atomic_store_release_u64(mori_coll_impl_refusal(c, m, c.team.rank, epoch), epoch);
  }
  mori_coll_finish_block(c, block, epoch);
}

#endif
