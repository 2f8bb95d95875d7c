// SPDX-License-Identifier: MIT
/* Where a new context's epochs start. A context destroyed (or a workspace
 * replaced) after a call timed out may still have kernels of that call, or
 * later ones, queued on some rank; they write their epochs into the flags
 * (and, for the collectives, the slots and LL lines) of memory that a new
 * context may now occupy, and a write that carried an epoch the new one
 * waits for would pass off stale data as a member's. So every context
 * starts at a base above the last one this process took, and every rank
 * takes the largest base any rank proposes.
 *
 * A base is generation << 40 | spread. The generation grows by one per
 * base taken: no context makes 2^39 calls, so a later base lies above
 * every epoch of an earlier context, and flags compared whole never pass.
 * The spread, below 2^31, moves by the golden ratio of 2^31 each time: an
 * LL line carries only its epoch's low 32 bits, spread + call, and the
 * spreads of any two bases a few generations apart differ by hundreds of
 * millions of calls, so an earlier context's line does not equal one of a
 * new context's calls, and no call before the 2^31st has low bits 0 (what
 * an unwritten line reads). A process's first context starts at 0, so its
 * numbers are the calls'. One floor serves every kind of context: a late
 * kernel of a MoE context may write into a collective workspace carved
 * where it was, and the reverse. Past MORI_EPOCH_GENERATIONS bases (what
 * a MoE flag can hold) the generation stops growing: new contexts then
 * start where the last did, as they all did before bases. The floor is
 * read before the agreement and moved after it: a context made, timed out
 * and destroyed by another thread of this process during that agreement
 * is not seen by it (docs/api.md). */
#include "collectives/epoch_floor.h"

#include <stdbool.h>

#define GENERATION (1ull << MORI_EPOCH_GENERATION_BITS)
#define SPREAD_MASK 0x7fffffffull
#define SPREAD_STEP 0x4f1bbcddull /* 2^31 / golden ratio, odd */

static uint64_t next_base; /* atomic: the least base a new context may take */

uint64_t mori_epoch_floor_propose(void) { return __atomic_load_n(&next_base, __ATOMIC_ACQUIRE); }

void mori_epoch_floor_taken(uint64_t base) {
  uint64_t generation = base / GENERATION;
  uint64_t next = generation + 1 >= MORI_EPOCH_GENERATIONS
                      ? base
                      : (generation + 1) * GENERATION + ((base & SPREAD_MASK) + SPREAD_STEP) % (1ull << 31);
  uint64_t seen = mori_epoch_floor_propose();
  while (seen < next && !__atomic_compare_exchange_n(&next_base, &seen, next, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
  }
}
