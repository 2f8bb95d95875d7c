// SPDX-License-Identifier: MIT
/* Collective contexts: the workspace window, and the plan of each call
 * (slices, items, which all-reduce algorithm) from its sizes. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/epoch_floor.h"
#include "collectives/internal.h"
#include "core/base/checked_math.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/trace.h"
#include "core/internal/agreement.h"
#include "core/internal/finalize.h"
#include "core/internal/window_live.h"
#include "core/internal/window_terms.h"
#include "mori/device/coll.h"
#include "mori/mem.h"
#include "mori/runtime.h"

enum {
  HEADER_BYTES = MORI_COLL_MAX_GRID * 8, /* the per-block epochs */
  MAX_SLICES = 256,                      /* per member and phase: the flags a call may use */
};

/* Sizes that shape calls; environment overrides exist for tuning runs. */
static uint64_t env_bytes(const char *name, uint64_t fallback) { return mori_env_size_or(name, fallback); }
static uint64_t env_count(const char *name, uint64_t fallback) { return (uint64_t)mori_env_int_or(name, (long long)fallback); }

/* The slice for `bytes` moved in flagged pieces: MORI_COLL_SLICE_BYTES, else
 * `target`; at most MAX_SLICES of them; a multiple of 16 bytes. */
static void plan_slices(uint64_t bytes, uint64_t target, uint64_t *slice, uint32_t *slices) {
  target = env_bytes("MORI_COLL_SLICE_BYTES", target);
  uint64_t s = bytes ? (bytes + target - 1) / target : 1;
  if (s > MAX_SLICES) s = MAX_SLICES;
  uint64_t each = bytes ? (bytes + s - 1) / s : 16;
  each = (each + 15) / 16 * 16;
  *slice = each;
  *slices = (uint32_t)(bytes ? (bytes + each - 1) / each : 1);
}

/* MORI_<name>=<one of choices> forces an algorithm (index), else -1. */
static int env_choice(const char *name, const char *const *choices, int count) {
  (void)choices, (void)count; /* the table's choices are these, in this order (core/base/env_table.c) */
  return mori_env_enum_or(name, -1);
}

void mori_coll_attr_init(mori_coll_attr_t *attr) { memset(attr, 0, sizeof(*attr)); }

static mori_coll_dev_t make_view(const mori_coll_t *c);

/* Bytes of the call slots of a context of `members` that checks calls:
 * two parities, a slot per member of the epoch and the signature
 * (mori_coll_dev_t). */
static size_t call_slot_bytes(int members, bool checks) {
  return checks ? 2 * (size_t)members * (1 + MORI_COLL_SIG_WORDS) * 8 : 0;
}

/* Bytes of the ready slots, the refusal slots, the grid word and the call
 * slots (mori_coll_dev_t), rounded so that staging stays 256-aligned. */
static size_t ready_bytes_for(int members, bool checks) {
  return ((size_t)members * (1 + MORI_COLL_REFUSALS_KEPT) * 8 + 8 + call_slot_bytes(members, checks) + 255) / 256 * 256;
}

static size_t ready_bytes(const mori_coll_t *c) { return ready_bytes_for(c->team.size, c->check_calls); }

/* The flags of a context of `members`, per parity. */
static uint64_t flag_slots_for(int members) { return 2ull * (uint64_t)(members > 0 ? members : 1) * MAX_SLICES; }

/* Where the grid word sits: after the refusal slots; the call slots follow it. */
static size_t grid_word_offset(const mori_coll_t *c) {
  return HEADER_BYTES + (size_t)c->flag_slots * 2 * sizeof(uint64_t) + (size_t)c->team.size * (1 + MORI_COLL_REFUSALS_KEPT) * 8;
}

/* A new workspace (window of the comm, collective) into *mem / *win,
 * leaving the context as it is. local_rc: this rank's failure so far,
 * which takes part in the rendezvous so that every rank fails together. */
static int make_workspace(mori_coll_t *c, size_t staging, int local_rc, void **mem_out, mori_window_t **win_out) {
  *mem_out = NULL;
  *win_out = NULL;
  /* The layout this context uses is its team's; the size is the largest
   * team's, the same on every rank (one window of the comm). */
  size_t flags = (size_t)flag_slots_for(c->largest_team) * 2 * sizeof(uint64_t) +
                 ready_bytes_for(c->largest_team, c->any_checks),
         total = 0;
  int rc = local_rc;
  if (!rc && (staging > SIZE_MAX - 255 || mori_add_overflows(HEADER_BYTES + flags, (staging + 255) / 256 * 256, &total)))
    rc = mori_error_set(MORI_ERANGE, "collectives: a workspace of %zu bytes overflows", staging);
  staging = rc ? 0 : (staging + 255) / 256 * 256; /* each half 16-byte aligned (LL lines), and more */
  mori_mem_attr_t attr;
  mori_mem_attr_init(&attr);
  attr.device = c->device;
  void *mem = NULL;
  if (!rc) rc = mori_mem_alloc(total, &attr, &mem);
  /* All of it zeroed (allocations are not; heap memory is reused): flags
   * start at 0, and staging holds no LL line of an earlier workspace, whose
   * epochs the new one's would repeat; but every block's counter at the
   * agreed start, in the first piece (every slot of the header: a member's
   * refusal reads up to its own grid of them). No peer writes any of it
   * before the rendezvous below completes. */
  enum { ZEROS = 1 << 20 }; /* uploaded piece by piece: no host buffer as large as the workspace */
  _Static_assert((size_t)HEADER_BYTES <= (size_t)ZEROS, "the block counters fit the first piece");
  uint64_t *piece = rc ? NULL : calloc(1, total < ZEROS ? total : ZEROS); /* total > HEADER_BYTES */
  if (!rc && !piece) rc = mori_error_set(MORI_ENOMEM, "collectives: zeroing a workspace of %zu bytes", total);
  for (int b = 0; piece && b < MORI_COLL_MAX_GRID; b++) piece[b] = c->epoch_base;
  for (size_t at = 0; !rc && at < total; at += ZEROS) {
    rc = mori_device_upload(c->device, (char *)mem + at, piece, total - at < ZEROS ? total - at : ZEROS);
    memset(piece, 0, HEADER_BYTES); /* the later pieces: zeros */
  }
  free(piece);
  /* This rank's grid, for a member's refusal to know how many of this
   * rank's block counters to wait for (grids may differ across devices). */
  uint64_t grid = c->grid;
  if (!rc) rc = mori_device_upload(c->device, (char *)mem + grid_word_offset(c), &grid, sizeof(grid));
  mori_window_t *win = NULL;
  /* Every rank takes part in the rendezvous even if it failed, so that all
   * fail together, naming it. */
  mori_window_terms_t terms = {.local_status = rc, .call_base = c->epoch_base};
  int wrc = mori_window_create_with_terms(c->comm, rc ? NULL : mem, &terms, &win);
  if (!rc) rc = wrc;
  if (rc) {
    mori_mem_free(mem);
    /* A failure brought in already says what it was (the verdict names it). */
    return local_rc ? rc : mori_error_context(rc, "collectives: workspace of %zu bytes per rank", total);
  }
  *mem_out = mem;
  *win_out = win;
  return 0;
}

static void use_workspace(mori_coll_t *c, void *mem, mori_window_t *win, size_t staging) {
  c->memory = mem;
  c->win = win;
  c->staging_bytes = (staging + 255) / 256 * 256;
  c->view = make_view(c);
}

static void drop_workspace(mori_coll_t *c) {
  mori_window_destroy(c->win);
  mori_mem_free(c->memory);
  c->win = NULL;
  c->memory = NULL;
  c->staging_bytes = 0; /* every call needs more: it says to reserve */
  memset(&c->view, 0, sizeof(c->view));
}

int mori_coll_create(mori_comm_t *comm, const mori_coll_attr_t *attr, mori_coll_t **out) {
  if (!comm) return mori_error_set(MORI_EINVAL, "coll_create: comm is required");
  MORI_TRACE_SCOPE("coll_create");
  if (out) *out = NULL;
  mori_coll_attr_t defaults;
  mori_coll_attr_init(&defaults);
  if (!attr) attr = &defaults;
  int base, size, me = mori_comm_rank(comm);
  mori_comm_lsa(comm, &base, &size, NULL);
  mori_team_t team = attr->team;
  if (team.size == 0) team = (mori_team_t){base, 1, size, me - base};
  else team.rank = mori_team_from_world(team, me);
  /* A NULL out is this rank's status in the first step, as any bad
   * argument: returning before it left the others waiting in it. */
  bool check_calls = attr->check_calls || mori_env_bool_or("MORI_COLL_CHECK_CALLS", false);
  int largest_team = 1;
  bool any_checks = false;
  uint64_t epoch_base = 0;
  int rc = mori_coll_agree_team(comm, team, check_calls, mori_epoch_floor_propose(),
                                out ? 0 : mori_error_set(MORI_EINVAL, "coll_create: out is NULL"), &largest_team, &any_checks,
                                &epoch_base);
  if (rc) return rc; /* every rank alike: nothing was made */
  mori_epoch_floor_taken(epoch_base);
  /* Only a member checks the members: a rank outside the team has another
   * load/store team, and its verdict is not the members'. */
  for (int i = 0; team.rank >= 0 && i < team.size && !rc; i++) {
    int w = mori_team_to_world(team, i);
    if (w < base || w >= base + size)
      rc = mori_error_set(MORI_EUNREACHABLE, "coll_create: member %d (world rank %d) is outside rank %d's load/store team [%d, %d)",
                          i, w, me, base, base + size);
  }
  /* Without memory for the context this rank still takes the workspace's
   * step, which the peers are in, through a stand-in: every rank fails
   * there naming it, at once instead of at the timeout (as long as the
   * step's own table, a few hundred bytes per rank, can be had). */
  mori_coll_t stand_in, *c = calloc(1, sizeof(*c)), *setup = c;
  if (!c) {
    memset(&stand_in, 0, sizeof(stand_in));
    setup = &stand_in;
    if (!rc) rc = mori_error_set(MORI_ENOMEM, "coll_create: rank %d's context (%zu bytes)", me, sizeof(*c));
  }
  setup->finalizes = mori_finalize_count();
  setup->comm = comm;
  setup->team = team;
  setup->check_calls = check_calls;
  setup->device = mori_comm_device(comm);
  setup->flag_slots = flag_slots_for(team.size);
  setup->largest_team = largest_team > team.size ? largest_team : team.size;
  setup->any_checks = any_checks || check_calls;
  setup->epoch_base = epoch_base;
  if (!rc) rc = mori_coll_grid(setup->device, &setup->grid); /* after a failure: would overwrite its message */
  /* The deadline the caller gave the comm's bootstrap, as the header says. */
  uint64_t timeout_ms = attr->timeout_ms ? attr->timeout_ms : (uint64_t)mori_bootstrap_timeout_ms(mori_comm_bootstrap(comm));
  setup->timeout_ns = timeout_ms > UINT64_MAX / 1000000ull ? UINT64_MAX : timeout_ms * 1000000ull; /* saturates */
  /* The window is collective over the comm: made even after a local error,
   * which make_workspace passes on, so every rank fails together. */
  size_t staging = attr->workspace_bytes ? attr->workspace_bytes : (size_t)1 << 20;
  void *mem = NULL;
  mori_window_t *win = NULL;
  rc = make_workspace(setup, staging, rc, &mem, &win);
  if (rc) {
    free(c);
    return rc;
  }
  use_workspace(c, mem, win, staging);
  *out = c;
  return 0;
}

/* mori_finalize released every window and allocation of the process,
 * this context's workspace too: its calls refuse from then on. */
static bool released(const mori_coll_t *c) { return c->finalizes != mori_finalize_count(); }

static int released_or_fail(const mori_coll_t *c, const char *what) {
  if (!released(c)) return 0;
  return mori_error_set(MORI_EINVAL, "%s: mori_finalize released the context's workspace: destroy the context and make a new one",
                        what);
}

int mori_coll_destroy(mori_coll_t *c) {
  if (!c) return 0;
  if (!released(c)) drop_workspace(c);
  free(c);
  return 0;
}

/* Collective: every rank takes part in one agreement of the sizes asked
 * (a rank whose workspace is large enough too, so that no rank skips the
 * step the others take), and the workspace grows to the largest, a new one
 * made before the old one goes, so a failure leaves the context as it was. */
int mori_coll_reserve(mori_coll_t *c, size_t bytes) {
  if (!c) return mori_error_set(MORI_EINVAL, "coll_reserve: NULL context");
  MORI_TRACE_SCOPE("coll_reserve", MORI_TA("bytes", bytes));
  int n = mori_comm_size(c->comm);
  /* Each rank's size, and its epoch floor: a new workspace starts at the
   * largest (epoch_floor.c). */
  uint64_t mine[2] = {bytes, mori_epoch_floor_propose()}, (*all)[2] = calloc((size_t)n, sizeof(*all));
  int rc = all ? released_or_fail(c, "coll_reserve")
               : mori_error_set(MORI_ENOMEM, "coll_reserve: rank %d's table", mori_comm_rank(c->comm));
  rc = mori_agree_gather(c->comm, rc, "coll_reserve", mine, all, sizeof(mine));
  uint64_t want = 0, base = 0;
  for (int r = 0; !rc && r < n; r++) {
    if (all[r][0] > want) want = all[r][0];
    if (all[r][1] > base) base = all[r][1];
  }
  free(all);
  if (rc || want <= c->staging_bytes) return rc;
  c->epoch_base = base;
  mori_epoch_floor_taken(base);
  size_t grown = c->staging_bytes * 2 > want ? c->staging_bytes * 2 : (size_t)want, before = c->staging_bytes;
  /* The old one goes first: a heap sized for one workspace holds the new
   * one once the old is freed. When the new one cannot be made (every rank
   * fails together), the old size is made again, so the context goes on as
   * it was; failing that too, it has no workspace and every call says to
   * reserve. */
  drop_workspace(c);
  void *mem = NULL;
  mori_window_t *win = NULL;
  rc = make_workspace(c, grown, 0, &mem, &win);
  if (rc) {
    mori_error_saved_t cause;
    mori_error_save(&cause);
    if (make_workspace(c, before, 0, &mem, &win) == 0) use_workspace(c, mem, win, before);
    mori_error_restore(&cause);
    return rc;
  }
  use_workspace(c, mem, win, grown);
  return 0;
}

mori_team_t mori_coll_team(const mori_coll_t *c) { return c ? c->team : (mori_team_t){0, 0, 0, -1}; }
mori_comm_t *mori_coll_comm(const mori_coll_t *c) { return c ? c->comm : NULL; }
size_t mori_coll_workspace_bytes(const mori_coll_t *c) { return c ? c->staging_bytes : 0; }

mori_coll_dev_t mori_coll_device_view(const mori_coll_t *c) { return c->view; }
int mori_coll_checks_calls(const mori_coll_t *c) { return c && c->check_calls; }

static mori_coll_dev_t make_view(const mori_coll_t *c) {
  mori_coll_dev_t d;
  memset(&d, 0, sizeof(d));
  d.win = mori_window_device_view(c->win);
  d.team = c->team;
  char *local = (char *)mori_window_local_ptr(c->win);
  d.epochs = (uint64_t *)local;
  d.grid = c->grid;
  d.flags_offset = HEADER_BYTES;
  d.flag_slots = c->flag_slots;
  d.ready_offset = HEADER_BYTES + c->flag_slots * 2 * sizeof(uint64_t);
  d.refused_offset = d.ready_offset + (uint64_t)c->team.size * 8;
  d.data_offset = d.ready_offset + ready_bytes(c);
  d.calls_offset = c->check_calls ? grid_word_offset(c) + 8 : 0;
  d.data_bytes = c->staging_bytes;
  d.timeout_ns = c->timeout_ns;
  return d;
}

int mori_coll_check(mori_coll_t *c) {
  if (!c || !c->win) return 0;
  return released(c) ? released_or_fail(c, "coll_check") : mori_window_check(c->win);
}

static int enough(const mori_coll_t *c, size_t need, const char *what) {
  if (need <= c->staging_bytes) return 0;
  return mori_error_set(MORI_ENOMEM, "%s needs %zu bytes of workspace per rank, the context has %zu: call mori_coll_reserve",
                        what, need, c->staging_bytes);
}

static int member_or_fail(const mori_coll_t *c, const char *what) {
  int rc = released_or_fail(c, what);
  if (rc || c->team.rank >= 0) return rc;
  return mori_error_set(MORI_EINVAL, "%s: rank %d is not a member of the context's team", what, mori_comm_rank(c->comm));
}

/* A call this rank refused (`rc`, its own arguments) while the members
 * may have launched theirs: this rank's part still runs, taking the call's
 * epoch and moving nothing (mori_coll_refuse_block), so the context's
 * calls stay paired and the members' waits end at once naming this rank
 * (their mori_coll_check says so). Not for a rank outside the team or a
 * context without a workspace: those take no part in any call. Returns rc,
 * with its message kept. */
static int refuse(mori_coll_t *c, int rc, void *stream) {
  if (!c || released(c)) return rc;
  mori_error_saved_t cause;
  mori_error_save(&cause);
  int lrc = mori_coll_refuse(c, stream);
  mori_error_restore(&cause);
  if (lrc) return mori_error_context(rc, "(and this rank's part of the refused call could not be launched: %s)", mori_strerror(lrc));
  return rc;
}

/* A call with nothing to move (count or bytes 0): no launch and no epoch
 * (a call that synchronised nobody but took an epoch would let a rank run
 * a call ahead into the staging a peer still reads), unless the context
 * checks calls: then the call takes its epoch and compares its signature
 * with the members', which synchronises them (every member has ended its
 * call before when it gives its signature), and moves nothing. So one
 * member's 0 beside the others' count is named rather than paired with
 * its next call. (There a refused call with nothing to move takes its
 * epoch too: refuse.) An empty call plans nothing: its signature holds
 * its kind and size alone. */
static int nothing_to_move(mori_coll_t *c, mori_coll_call_sig_t sig, void *stream) {
  if (!c->check_calls || !c->win) return 0;
  mori_allreduce_args_t none;
  memset(&none, 0, sizeof(none));
  none.threads = 32;
  none.share[0] = c->grid;
  none.sig = sig;
  return mori_coll_launch_all_reduce(c, &none, stream);
}

int mori_coll_refuse(mori_coll_t *c, void *stream) {
  if (!c) return mori_error_set(MORI_EINVAL, "coll_refuse: NULL context");
  MORI_TRACE_SCOPE("coll_refuse");
  int rc = released_or_fail(c, "coll_refuse");
  if (rc || !c->win || c->team.rank < 0) return rc;
  rc = mori_coll_launch_refusal(c, stream);
  return rc ? mori_error_context(rc, "coll_refuse: this rank's part of the refused call") : 0;
}

/* Whether the grid is split among the kinds of items (push, reduce,
 * receive side by side) or every block takes items in order, kind after
 * kind. Measured on 2 x H200 (tests/gpu/bench_coll): the split moves a
 * 16 MiB-per-member all-to-all in 55 us instead of 61, and is slower for
 * every all-reduce (16 MiB: 97 us instead of 76) and for smaller
 * all-to-alls. MORI_COLL_BLOCK_SHARE=0|1 forces it off or on. */
static void share_blocks(const mori_coll_t *c, bool by_default, const uint32_t kind_end[3], uint32_t share[2]) {
  bool on = mori_env_bool_or("MORI_COLL_BLOCK_SHARE", by_default);
  share[0] = c->grid;
  share[1] = 0;
  if (on) mori_coll_share_blocks(c->grid, kind_end, share);
}

/* ---- all-to-all ---- */

/* Staged (out is any memory): small chunks as LL lines (no flag round
 * after the data), larger ones in flagged slices; MORI_A2A_ALGO=ll|slices
 * forces one. Direct (out is a window): flagged slices into the members'
 * out. Slices and threads are the best of a sweep on 2 x H200
 * (tests/gpu/bench_coll; MORI_COLL_SLICE_BYTES and MORI_COLL_THREADS
 * override them): LL in 2 KiB items of 256 threads (a thread per line:
 * latency, not bandwidth, decides at these sizes); staged slices of a
 * 64th of the chunk (16 KiB to 128 KiB); direct slices of a 32nd (at
 * least 16 KiB), with 128 threads up to 1 MiB and 256 beyond. */
static void plan_all_to_all(const mori_coll_t *c, size_t bytes, bool direct, mori_a2a_args_t *a) {
  static const char *const algos[] = {"slices", "ll"};
  memset(a, 0, sizeof(*a));
  a->bytes = bytes;
  int forced = env_choice("MORI_A2A_ALGO", algos, 2);
  if (direct) a->algo = MORI_A2A_DIRECT;
  else
    a->algo = forced >= 0 ? (uint32_t)forced
            : bytes <= env_bytes("MORI_A2A_LL_MAX_BYTES", 256u << 10) ? MORI_A2A_LL : MORI_A2A_SLICES;
  uint64_t target;
  if (a->algo == MORI_A2A_LL) {
    target = 2u << 10;
    a->threads = 256;
  } else if (a->algo == MORI_A2A_SLICES) {
    target = bytes / 64 < (16u << 10) ? 16u << 10 : bytes / 64 > (128u << 10) ? 128u << 10 : bytes / 64;
    a->threads = 256;
  } else {
    target = bytes / 32 < (16u << 10) ? 16u << 10 : bytes / 32;
    a->threads = bytes <= (1u << 20) ? 128 : 256;
  }
  plan_slices(bytes, target, &a->slice, &a->slices);
  uint32_t n = (uint32_t)c->team.size, S = a->slices;
  a->items = (2 * n - 1) * S;
  a->kind_end[0] = (n - 1) * S;
  a->kind_end[1] = n * S;
  a->kind_end[2] = a->items;
  share_blocks(c, bytes > (4u << 20), a->kind_end, a->share);
}

/* a * b * c, or SIZE_MAX when it does not fit (a need no workspace has). */
static size_t saturating_product(uint64_t a, uint64_t b, uint64_t c) {
  size_t ab, abc;
  if (mori_mul_overflows((size_t)a, (size_t)b, &ab) || mori_mul_overflows(ab, (size_t)c, &abc)) return SIZE_MAX;
  return abc;
}

/* Staging is two halves (parities), and each half two parts, raw data and
 * LL lines (mori_coll_impl_ll_staging), each taking one of them: a call
 * whose staging takes `extent` bytes of its part needs 4 * extent. */
enum { STAGING_PER_EXTENT = 4 };

/* Staging a planned staged all-to-all needs (every source; both halves, both parts). */
static size_t a2a_staging(const mori_coll_t *c, const mori_a2a_args_t *a) {
  /* slice * slices covers the chunk, so it overflows only with it: from
   * the chunk itself (rounded up to 8 bytes, times 2 for LL lines). */
  uint64_t slot = a->bytes > SIZE_MAX - 64 ? SIZE_MAX : mori_coll_impl_a2a_slot_bytes(a);
  return saturating_product(STAGING_PER_EXTENT, (uint64_t)c->team.size, slot);
}

size_t mori_all_to_all_workspace(const mori_coll_t *c, size_t bytes_per_rank) {
  if (!c) return 0;
  mori_a2a_args_t a;
  plan_all_to_all(c, bytes_per_rank, false, &a);
  return a2a_staging(c, &a);
}

/* The calling rank, for messages. */
static int rank_of(const mori_coll_t *c) { return mori_comm_rank(c->comm); }

static int check_all_to_all(mori_coll_t *c, const void *in, const void *out, size_t bytes, const char *what) {
  if (!c) return mori_error_set(MORI_EINVAL, "%s: NULL context", what);
  if (bytes && (!in || !out))
    return mori_error_set(MORI_EINVAL, "%s: rank %d's %s is NULL (%zu bytes per member)", what, rank_of(c),
                          in ? "out" : "in", bytes);
  size_t span;
  if (mori_mul_overflows(bytes, (size_t)c->team.size, &span))
    return mori_error_set(MORI_ERANGE, "%s: rank %d: %zu bytes per member times %d members overflows", what, rank_of(c),
                          bytes, c->team.size);
  /* The sizes in the message: a size far too large makes separate buffers
   * overlap, and that is what to look at then. */
  if (mori_ranges_overlap(in, span, out, span))
    return mori_error_set(MORI_EINVAL,
                          "%s: rank %d's in [%p, +%zu) and out [%p, +%zu) overlap (%zu bytes per member times %d "
                          "members; in place is not supported)",
                          what, rank_of(c), in, span, out, span, bytes, c->team.size);
  return member_or_fail(c, what);
}

int mori_all_to_all(mori_coll_t *c, const void *in, void *out, size_t bytes, void *stream) {
  MORI_TRACE_SCOPE("all_to_all", MORI_TA("bytes", bytes));
  int rc = check_all_to_all(c, in, out, bytes, "all_to_all");
  /* A refused call with something to move takes its epoch all the same
   * (refuse); one with nothing to move, see nothing_to_move. */
  if (rc) return bytes || mori_coll_checks_calls(c) ? refuse(c, rc, stream) : rc;
  mori_a2a_args_t a = {0};
  if (bytes == 0) return nothing_to_move(c, mori_coll_sig_all_to_all(&a, 0, 0), stream);
  plan_all_to_all(c, bytes, false, &a);
  a.sig = mori_coll_sig_all_to_all(&a, 0, 0);
  /* A workspace too small is refused as any other argument: it is the same
   * on every rank when the sizes are, but a member that refused the call
   * for another reason takes the call's epoch, and so must every rank
   * (the next call was paired with the one after it). The part in flight
   * does not keep mori_coll_reserve from following at once: an old
   * workspace's memory is reused only after a device synchronisation. */
  if ((rc = enough(c, a2a_staging(c, &a), "all_to_all")) != 0) return refuse(c, rc, stream);
  a.in = (const char *)in;
  a.out = (char *)out;
  return mori_coll_launch_all_to_all(c, &a, stream);
}

/* mori_all_to_all_window's checks of this rank's arguments. */
static int all_to_all_window_check(mori_coll_t *c, const void *in, mori_window_t *out_win, size_t out_offset, size_t bytes) {
  if (!c || !out_win) return mori_error_set(MORI_EINVAL, "all_to_all_window: NULL context or window");
  int rc = mori_window_check_live(out_win, "all_to_all_window");
  if (rc) return rc;
  char *out = (char *)mori_window_local_ptr(out_win) + out_offset;
  if ((rc = check_all_to_all(c, in, out, bytes, "all_to_all_window")) != 0 || bytes == 0) return rc;
  int me = mori_comm_rank(c->comm);
  if (mori_window_comm(out_win) != c->comm)
    return mori_error_set(MORI_EINVAL, "all_to_all_window: rank %d's output window is of another comm than the context",
                          me);
  size_t span = bytes * (size_t)c->team.size, end;
  if (mori_add_overflows(out_offset, span, &end) || end > mori_window_size(out_win))
    return mori_error_set(MORI_ERANGE,
                          "all_to_all_window: rank %d writes [%zu, %zu + %zu) of a window of %zu bytes per rank", me,
                          out_offset, out_offset, span, mori_window_size(out_win));
  for (int m = 0; m < c->team.size; m++)
    if (!mori_window_peer_ptr(out_win, mori_team_to_world(c->team, m)))
      return mori_error_set(MORI_EUNREACHABLE, "all_to_all_window: member %d (world rank %d) cannot be written by rank %d",
                            m, mori_team_to_world(c->team, m), me);
  return 0;
}

int mori_all_to_all_window(mori_coll_t *c, const void *in, mori_window_t *out_win, size_t out_offset, size_t bytes,
                           void *stream) {
  MORI_TRACE_SCOPE("all_to_all_window", MORI_TA("bytes", bytes), MORI_TA("out_offset", out_offset));
  int rc = all_to_all_window_check(c, in, out_win, out_offset, bytes);
  if (rc) return bytes || mori_coll_checks_calls(c) ? refuse(c, rc, stream) : rc; /* see mori_all_to_all */
  if (bytes == 0) {
    mori_a2a_args_t none = {0};
    return nothing_to_move(c, mori_coll_sig_all_to_all(&none, mori_window_ordinal(out_win), out_offset), stream);
  }
  char *out = (char *)mori_window_local_ptr(out_win) + out_offset;
  mori_a2a_args_t a;
  /* Small chunks are faster as LL lines through the staging (no wait for
   * the destination to start: latency decides there), when the workspace
   * holds them; the workspace is the same on every rank (it grows only
   * collectively), so every rank makes the same choice. */
  plan_all_to_all(c, bytes, false, &a);
  bool ll = bytes <= env_bytes("MORI_A2A_LL_MAX_BYTES", 256u << 10) && a2a_staging(c, &a) <= c->staging_bytes;
  if (!ll) plan_all_to_all(c, bytes, true, &a);
  a.sig = mori_coll_sig_all_to_all(&a, mori_window_ordinal(out_win), out_offset);
  a.in = (const char *)in;
  a.out = out;
  a.out_win = mori_window_device_view(out_win);
  a.out_offset = out_offset;
  return mori_coll_launch_all_to_all(c, &a, stream);
}

/* ---- all-to-all with sizes on the device ---- */

size_t mori_all_to_all_v_workspace(const mori_coll_t *c, uint32_t experts) {
  if (!c) return 0;
  return saturating_product(STAGING_PER_EXTENT, mori_coll_impl_a2av_matrix_bytes(c->team.size, experts ? experts : 1), 1);
}

/* A variable all-to-all's checks of this rank's arguments. */
static int all_to_all_v_check(mori_coll_t *c, const char *what, uint32_t experts, uint64_t align, const void *in,
                              const int64_t *in_splits, mori_window_t *out_win, size_t out_offset, size_t out_rows,
                              size_t row_bytes, const int64_t *out_splits_offsets) {
  if (!c || !out_win || !in_splits || !out_splits_offsets || (!in && row_bytes))
    return mori_error_set(MORI_EINVAL, "%s: NULL argument", what);
  int live = mori_window_check_live(out_win, what);
  if (live) return live;
  int me = mori_comm_rank(c->comm);
  if (row_bytes == 0) return mori_error_set(MORI_EINVAL, "%s: rank %d gave rows of 0 bytes", what, me);
  if (experts == 0 || align == 0)
    return mori_error_set(MORI_EINVAL, "%s: rank %d gave %u experts per rank and an alignment of %llu rows", what, me,
                          experts, (unsigned long long)align);
  /* Row counts are summed on the device: bounded, they cannot wrap. */
  if (out_rows >= MORI_A2AV_BAD_ROWS)
    return mori_error_set(MORI_ERANGE, "%s: rank %d's out of %zu rows; at most %llu rows", what, me, out_rows,
                          MORI_A2AV_BAD_ROWS - 1);
  /* The caller's alignment (the expert layout's; the others pass 1, and an
   * out of 0 rows is valid for them: rows that do arrive are reported). */
  if (align > 1 && align > out_rows)
    return mori_error_set(MORI_EINVAL, "%s: rank %d gave an alignment of %llu rows, more than its out of %zu rows", what,
                          me, (unsigned long long)align, out_rows);
  int rc = member_or_fail(c, what);
  if (rc) return rc;
  if (mori_window_comm(out_win) != c->comm)
    return mori_error_set(MORI_EINVAL, "%s: rank %d's output window is of another comm than the context", what, me);
  size_t span, end;
  if (mori_mul_overflows(out_rows, row_bytes, &span) || mori_add_overflows(out_offset, span, &end) ||
      end > mori_window_size(out_win))
    return mori_error_set(MORI_ERANGE, "%s: rank %d's out of %zu rows of %zu bytes at offset %zu exceeds its window of %zu bytes",
                          what, me, out_rows, row_bytes, out_offset, mori_window_size(out_win));
  /* Peers write their rows into out as soon as the sizes are known, while
   * this rank may still be reading its own rows from in: an input inside
   * out would be overwritten before it is sent. (Its length is on the
   * device: an input that starts below out and runs into it is not seen.) */
  const char *out_at = (const char *)mori_window_local_ptr(out_win) + out_offset;
  if (in && (const char *)in >= out_at && (size_t)((const char *)in - out_at) < span)
    return mori_error_set(MORI_EINVAL,
                          "%s: rank %d's in (%p) lies inside its out [%p, +%zu bytes) (%zu rows of %zu bytes): peers' "
                          "rows would overwrite input not yet sent; in place is not supported",
                          what, me, in, (const void *)out_at, span, out_rows, row_bytes);
  for (int m = 0; m < c->team.size; m++)
    if (!mori_window_peer_ptr(out_win, mori_team_to_world(c->team, m)))
      return mori_error_set(MORI_EUNREACHABLE, "%s: member %d (world rank %d) cannot be written by rank %d", what, m,
                            mori_team_to_world(c->team, m), me);
  return 0;
}

/* Every variable all-to-all: checks (a refusal still takes the call's
 * epoch: the sizes are on the device, so every call moves something),
 * then one kernel of the layout. */
static int all_to_all_v(mori_coll_t *c, const char *what, uint32_t layout, uint32_t experts, uint64_t align,
                        const void *in, const int64_t *in_splits, mori_window_t *out_win, size_t out_offset,
                        size_t out_rows, size_t row_bytes, int64_t *out_splits_offsets, void *stream) {
  MORI_TRACE_SCOPE("all_to_all_v", MORI_TS("op", what), MORI_TA("row_bytes", row_bytes), MORI_TA("experts", experts));
  int rc = all_to_all_v_check(c, what, experts, align, in, in_splits, out_win, out_offset, out_rows, row_bytes,
                              out_splits_offsets);
  if (rc) return refuse(c, rc, stream);
  /* A workspace too small: see mori_all_to_all (refused as well). */
  if ((rc = enough(c, mori_all_to_all_v_workspace(c, experts), what)) != 0) return refuse(c, rc, stream);
  size_t span = out_rows * row_bytes; /* checked above */
  mori_a2av_args_t a = {.in = (const char *)in,
                        .in_splits = in_splits,
                        .out_splits_offsets = out_splits_offsets,
                        .out = (char *)mori_window_local_ptr(out_win) + out_offset,
                        .out_win = mori_window_device_view(out_win),
                        .out_offset = out_offset,
                        .out_rows = out_rows,
                        .row_bytes = row_bytes,
                        .align = align,
                        .layout = layout,
                        .experts = experts};
  /* The sizes are on the device: the pieces per member follow what it can
   * get at most (out spread evenly over the members), one per 128 KiB
   * (the direct all-to-all's best slices), 1 to 32. */
  uint64_t per = span / (size_t)c->team.size, pieces = (per + (128u << 10) - 1) / (128u << 10);
  pieces = env_count("MORI_A2AV_PIECES", pieces < 1 ? 1 : pieces > 32 ? 32 : pieces);
  if (pieces > MAX_SLICES) pieces = MAX_SLICES;
  a.pieces = (uint32_t)pieces;
  uint32_t n = (uint32_t)c->team.size, P = a.pieces;
  a.items = (2 * n - 1) * P;
  a.kind_end[0] = (n - 1) * P;
  a.kind_end[1] = n * P;
  a.kind_end[2] = a.items;
  a.threads = 256;
  share_blocks(c, false, a.kind_end, a.share);
  a.sig = mori_coll_sig_all_to_all_v(&a, mori_window_ordinal(out_win));
  return mori_coll_launch_all_to_all_v(c, &a, stream);
}

int mori_all_to_all_v(mori_coll_t *c, const void *in, const int64_t *in_splits, mori_window_t *out_win,
                      size_t out_offset, size_t out_rows, size_t row_bytes, int64_t *out_splits_offsets, void *stream) {
  return all_to_all_v(c, "all_to_all_v", MORI_A2AV_RANKS, 1, 1, in, in_splits, out_win, out_offset, out_rows, row_bytes,
                      out_splits_offsets, stream);
}

int mori_all_to_all_v_experts(mori_coll_t *c, const void *in, const int64_t *in_splits, uint32_t experts, size_t align,
                              mori_window_t *out_win, size_t out_offset, size_t out_rows, size_t row_bytes,
                              int64_t *out_splits_offsets, void *stream) {
  return all_to_all_v(c, "all_to_all_v_experts", MORI_A2AV_EXPERTS, experts, align, in, in_splits, out_win, out_offset,
                      out_rows, row_bytes, out_splits_offsets, stream);
}

int mori_all_to_all_v_combine(mori_coll_t *c, const void *in, const int64_t *in_splits_offsets, uint32_t experts,
                              mori_window_t *out_win, size_t out_offset, size_t out_rows, size_t row_bytes,
                              int64_t *out_splits_offsets, void *stream) {
  return all_to_all_v(c, "all_to_all_v_combine", MORI_A2AV_COMBINE, experts, 1, in, in_splits_offsets, out_win,
                      out_offset, out_rows, row_bytes, out_splits_offsets, stream);
}

/* ---- all-reduce ---- */

/* Measured on 2 x H200 (tests/gpu/bench_coll): LL up to 256 KiB (items of
 * a 128th of the lines, at least 64); above, at two members, one shot in
 * flagged 16 KiB slices up to 1 MiB (the link bytes equal reduce-scatter +
 * all-gather's, in one phase fewer), and reduce-scatter + all-gather beyond,
 * and at any size above 256 KiB with more members, each part in 128 slices
 * (at least 16 KiB). MORI_ALLREDUCE_ALGO=ll|rsag|oneshot forces one. */
static void plan_all_reduce(const mori_coll_t *c, size_t count, mori_dtype_t dtype, mori_allreduce_args_t *a) {
  static const char *const algos[] = {"ll", "rsag", "oneshot"};
  memset(a, 0, sizeof(*a));
  int n = c->team.size;
  uint64_t esize = mori_coll_impl_dtype_size(dtype), bytes = count * esize;
  a->count = count;
  a->dtype = dtype;
  int forced = env_choice("MORI_ALLREDUCE_ALGO", algos, 3);
  if (forced >= 0) a->algo = (uint32_t)forced;
  else if (bytes <= env_bytes("MORI_ALLREDUCE_LL_MAX_BYTES", 256u << 10)) a->algo = MORI_ALLREDUCE_LL;
  else if (n == 2 && bytes <= (1u << 20)) a->algo = MORI_ALLREDUCE_ONESHOT;
  else a->algo = MORI_ALLREDUCE_RS_AG;
  a->threads = 512;
  if (a->algo == MORI_ALLREDUCE_LL) {
    uint64_t lines = (bytes + 7) / 8;
    a->lines_per_item = env_count("MORI_ALLREDUCE_LL_LINES", lines > 64 * 128 ? (lines + 127) / 128 : 64);
    uint64_t runs = lines ? (lines + a->lines_per_item - 1) / a->lines_per_item : 1;
    a->items = (uint32_t)(2 * runs);
    a->kind_end[0] = (uint32_t)runs;
    a->kind_end[1] = a->kind_end[2] = a->items;
    share_blocks(c, false, a->kind_end, a->share);
    return;
  }
  int parts = a->algo == MORI_ALLREDUCE_ONESHOT ? 1 : n;
  a->part_elems = ((count + (uint64_t)parts - 1) / (uint64_t)parts + 7) / 8 * 8;
  uint64_t slice_bytes;
  uint32_t slices;
  uint64_t part_bytes = a->part_elems * esize;
  plan_slices(part_bytes, a->algo == MORI_ALLREDUCE_RS_AG && part_bytes / 128 > (16u << 10) ? part_bytes / 128 : 16u << 10,
              &slice_bytes, &slices);
  a->slice_elems = (slice_bytes / esize + 7) / 8 * 8;
  a->slices = (uint32_t)((a->part_elems + a->slice_elems - 1) / a->slice_elems);
  a->items = (uint32_t)(a->algo == MORI_ALLREDUCE_ONESHOT ? n : 2 * n - 1) * a->slices;
  a->kind_end[0] = (uint32_t)(n - 1) * a->slices;
  a->kind_end[1] = (uint32_t)n * a->slices;
  a->kind_end[2] = a->items;
  share_blocks(c, false, a->kind_end, a->share);
}

/* Staging a planned all-reduce needs (both halves, both parts). */
static size_t ar_staging(const mori_coll_t *c, const mori_allreduce_args_t *a) {
  uint64_t n = (uint64_t)c->team.size, esize = mori_coll_impl_dtype_size(a->dtype);
  if (a->count > SIZE_MAX / 64) return SIZE_MAX; /* no workspace holds it (and the sums below would wrap) */
  if (a->algo == MORI_ALLREDUCE_LL) return saturating_product(STAGING_PER_EXTENT * n, (a->count * esize + 7) / 8, 16);
  uint64_t regions = a->algo == MORI_ALLREDUCE_ONESHOT ? 1 : 2;
  return saturating_product(STAGING_PER_EXTENT * regions * n, a->part_elems, esize);
}

size_t mori_all_reduce_workspace(const mori_coll_t *c, size_t count, mori_dtype_t dtype) {
  if (!c) return 0;
  mori_allreduce_args_t a;
  plan_all_reduce(c, count, dtype, &a);
  return ar_staging(c, &a);
}

/* mori_all_reduce's checks of this rank's arguments. */
static int all_reduce_check(mori_coll_t *c, const void *in, const void *out, size_t count, mori_dtype_t dtype,
                            mori_redop_t op) {
  if (!c) return mori_error_set(MORI_EINVAL, "all_reduce: NULL context");
  int me = rank_of(c);
  if (count && (!in || !out))
    return mori_error_set(MORI_EINVAL, "all_reduce: rank %d's %s is NULL (%zu elements)", me, in ? "out" : "in", count);
  if (dtype != MORI_FLOAT32 && dtype != MORI_BFLOAT16 && dtype != MORI_FLOAT16)
    return mori_error_set(MORI_EINVAL, "all_reduce: rank %d's dtype %d is not float32, bfloat16 or float16", me, (int)dtype);
  if (op < MORI_REDOP_SUM || op > MORI_REDOP_MIN)
    return mori_error_set(MORI_EINVAL, "all_reduce: rank %d's op %d is not sum, avg, max or min", me, (int)op);
  size_t span;
  if (mori_mul_overflows(count, (size_t)mori_coll_impl_dtype_size(dtype), &span))
    return mori_error_set(MORI_ERANGE, "all_reduce: rank %d: %zu elements of %u bytes overflow", me, count,
                          (unsigned)mori_coll_impl_dtype_size(dtype));
  if (in != out && mori_ranges_overlap(in, span, out, span))
    return mori_error_set(MORI_EINVAL,
                          "all_reduce: rank %d's in [%p, +%zu) and out [%p, +%zu) overlap without being the same buffer "
                          "(%zu elements; in place is in == out)",
                          me, in, span, out, span, count);
  return member_or_fail(c, "all_reduce");
}

int mori_all_reduce(mori_coll_t *c, const void *in, void *out, size_t count, mori_dtype_t dtype, mori_redop_t op,
                    void *stream) {
  MORI_TRACE_SCOPE("all_reduce", MORI_TA("count", count), MORI_TA("dtype", dtype), MORI_TA("op", op));
  int rc = all_reduce_check(c, in, out, count, dtype, op);
  if (rc) return count || mori_coll_checks_calls(c) ? refuse(c, rc, stream) : rc; /* see mori_all_to_all */
  mori_allreduce_args_t a = {.dtype = dtype, .op = op};
  if (count == 0) return nothing_to_move(c, mori_coll_sig_all_reduce(&a), stream);
  plan_all_reduce(c, count, dtype, &a);
  a.op = op;
  a.sig = mori_coll_sig_all_reduce(&a);
  if ((rc = enough(c, ar_staging(c, &a), "all_reduce")) != 0) return refuse(c, rc, stream); /* see mori_all_to_all */
  a.in = in;
  a.out = out;
  return mori_coll_launch_all_reduce(c, &a, stream);
}
