// SPDX-License-Identifier: MIT
/* See internal/node_channel.h. Layout of the shared area: a header, then per
 * rank two mailboxes used alternately by consecutive steps. A rank writes
 * step n into mailbox n % 2 and publishes n in its sequence word; it reads
 * every peer's mailbox n % 2 once that word says n. Reuse is safe without
 * acknowledgements: a rank writes step n + 2 only after finishing step
 * n + 1, which needed every peer to publish n + 1, which each peer does only
 * after it has read all of step n.
 *
 * That reasoning holds only while every rank finishes every step. A rank
 * that gives up on a step (a peer did not arrive in time) would otherwise
 * start the next one while the late peer is still at the old one, and from
 * then on pair its call k with the peer's call k - 1 without either
 * noticing. So a step that fails for a reason that concerns the ranks'
 * agreement (a timeout, a rank ahead or behind, a different call) fails the
 * channel for good: the first such failure is recorded in the shared
 * header, where every rank sees it in its current or next step, and every
 * later call fails naming the ranks. Each mailbox also carries what the call
 * is and its size, so different calls are never paired.
 *
 * A rank that exited or crashed never arrives: rather than wait for it
 * until the timeout (the TCP bootstrap notices a closed connection at
 * once), a waiting rank checks every few milliseconds whether the process
 * it waits for still exists, and fails the channel for good naming it.
 *
 * The area's name carries its creator's pid and pid namespace in the form
 * the host platform's sweep of /dev/shm knows (host_shm_sweep.c): a rank 0
 * killed between creating it and unlinking it leaves it behind, and the
 * next process's sweep removes it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#include <unistd.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/base/pid_namespace.h"
#include "core/internal/node_channel.h"
#include "mori/bootstrap.h"

enum { NAME_BYTES = 64, MAGIC = 0x6d6f72696e6f6465 /* "morinode" */ };

typedef struct mailbox {
  _Atomic uint64_t seq;
  uint64_t bytes;
  uint32_t what; /* the call's identity (a hash of its name) */
  uint32_t reserved;
  uint8_t data[MORI_NODE_CHANNEL_PAYLOAD];
  /* The call's name, cut to fit, for the message of a rank in another
   * call (the hash alone told nobody which); also pads the mailbox to a
   * multiple of the cache line. */
  char name[40];
} mailbox_t;

/* Why the channel failed, beyond its code: the other ranks' messages say it. */
enum { FAILED_OTHERWISE = 0, FAILED_EXITED = 1 /* the culprit's process ended */ };

/* The channel's first failure, once set never changed: the rank that found
 * it, the rank it concerns, the step, why and the code (see pack_failure). */
struct area_header {
  uint64_t magic;
  uint64_t size;
  _Atomic uint32_t failure_claimed; /* the first rank to fail it sets this, then the step and why, then the word */
  uint32_t failure_why;             /* FAILED_* */
  uint64_t failure_step;
  _Atomic uint64_t failure; /* 0: none */
  /* Every rank adds one after publishing a step, so step n is complete once
   * this reaches n * size (modulo 2^32); waiters sleep on it (a futex word
   * shared between processes) and the arrival that completes a step wakes
   * them. `sleepers` lets arrivals skip the wake when nobody sleeps. */
  _Atomic uint32_t arrivals;
  _Atomic uint32_t sleepers;
  uint8_t pad[16];
};
_Static_assert(sizeof(struct area_header) == 64, "the header is one cache line");

struct mori_node_channel {
  struct area_header *area;
  mailbox_t *boxes; /* [rank][2] */
  size_t area_bytes;
  int rank, size;
  uint64_t step;
  int timeout_ms;
  pid_t *pids;       /* [rank]: its process, to tell whether it still exists; 0: not judged (see member_t) */
  int failed_code;   /* 0 until the channel has failed */
  char failed[400];  /* why, repeated by every later call */
};

static size_t area_bytes(int size) { return sizeof(struct area_header) + (size_t)size * 2 * sizeof(mailbox_t); }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The lowest rank creates and sizes the area; its name goes to the others
 * through the bootstrap. Returns 0 with *base set, or an error. */
static int open_area(mori_bootstrap_t *b, int rank, int size, char *name, void **base) {
  size_t bytes = area_bytes(size);
  int rc = 0, fd = -1;
  if (rank == 0) {
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce)) nonce = now_ns() ^ (uint64_t)getpid();
    /* The form host_shm_sweep.c parses: creator's pid, then pid namespace. */
    snprintf(name, NAME_BYTES, "/mori-node.%d.%016llx.p%llx", (int)getpid(), (unsigned long long)nonce,
             (unsigned long long)mori_pid_namespace());
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) rc = mori_error_errno("node channel: shm_open(%s)", name);
    if (!rc && ftruncate(fd, (off_t)bytes) != 0) {
      rc = mori_error_errno("node channel: sizing %zu bytes", bytes);
      /* Nobody will open it: neither the descriptor nor the name may outlive this. */
      close(fd);
      fd = -1;
      shm_unlink(name);
    }
    if (rc) name[0] = '\0';
  }
  int brc = mori_bootstrap_bcast(b, name, NAME_BYTES, 0);
  if (brc) {
    if (fd >= 0) close(fd);
    if (rank == 0 && name[0]) shm_unlink(name); /* nobody will open it */
    return brc;
  }
  if (rank != 0 && !name[0]) return mori_error_set(MORI_EIO, "node channel: rank 0 could not create it");
  if (rank != 0) {
    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return mori_error_errno("node channel: shm_open(%s)", name);
  }
  if (rc) return rc;
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return mori_error_errno("node channel: mapping %zu bytes", bytes);
  *base = p;
  return 0;
}

/* What each rank tells the others once it has tried to map the area. */
typedef struct member {
  int32_t failed; /* it could not map the area */
  int32_t pid;
  uint64_t pid_namespace; /* 0: unknown */
} member_t;

/* The pid by which this rank judges whether `m` still exists, or 0: only a
 * pid of this very pid namespace names the same process here (ranks in
 * other containers of the host have pids of their own), and an unknown
 * namespace is not assumed to be this one, as a wrong "it exited" would
 * fail a healthy comm where a wrong "it lives" only waits to the timeout. */
static pid_t judged_pid(const member_t *m, uint64_t my_ns) {
  if (m->pid <= 0 || !my_ns || m->pid_namespace != my_ns || m->pid == (int32_t)getpid()) return 0;
  return (pid_t)m->pid;
}

int mori_node_channel_create(mori_bootstrap_t *b, int rank, int size, bool one_host, mori_node_channel_t **out) {
  *out = NULL;
  if (!one_host || size < 2 || !mori_env_bool_or("MORI_NODE_CHANNEL", true)) return 0;
  /* The failure word names ranks in 16 bits (pack_failure): past that, the
   * bootstrap carries the steps, which names any rank. */
  if (size > UINT16_MAX) return 0;
  char name[NAME_BYTES] = "";
  void *base = NULL;
  int rc = open_area(b, rank, size, name, &base);
  /* Every rank learns whether every rank has the area mapped, and which
   * process each rank is (for the waits, see rank_exited). */
  uint64_t my_ns = mori_pid_namespace();
  member_t mine = {.failed = rc ? 1 : 0, .pid = (int32_t)getpid(), .pid_namespace = my_ns};
  member_t *all = calloc((size_t)size, sizeof(member_t));
  pid_t *pids = calloc((size_t)size, sizeof(pid_t));
  int arc = all && pids ? mori_bootstrap_allgather(b, &mine, all, sizeof(mine))
                        : mori_error_set(MORI_ENOMEM, "node channel: rank %d's table of %d ranks", rank, size);
  bool everyone = arc == 0;
  for (int r = 0; everyone && r < size; r++) everyone = all[r].failed == 0;
  for (int r = 0; everyone && r < size; r++) pids[r] = judged_pid(&all[r], my_ns);
  free(all);
  if (rank == 0 && name[0]) shm_unlink(name); /* mapped everywhere (or abandoned): the name is done */
  if (!everyone) {
    if (base) munmap(base, area_bytes(size));
    free(pids);
    if (arc) return arc; /* the bootstrap itself failed: the comm cannot go on */
    MORI_INFO("node channel: not available (%s); collective steps use the bootstrap", rc ? mori_last_error() : "a peer failed");
    return 0;
  }
  mori_node_channel_t *ch = calloc(1, sizeof(*ch));
  if (!ch) {
    munmap(base, area_bytes(size));
    free(pids);
    return mori_error_set(MORI_ENOMEM, "node channel");
  }
  ch->area = base;
  ch->pids = pids;
  ch->boxes = (mailbox_t *)((char *)base + sizeof(struct area_header));
  ch->area_bytes = area_bytes(size);
  ch->rank = rank;
  ch->size = size;
  ch->timeout_ms = mori_bootstrap_timeout_ms(b); /* the caller's: the bootstrap's timeout_ms */
  if (rank == 0) {
    ch->area->magic = MAGIC;
    ch->area->size = (uint64_t)size;
  }
  *out = ch;
  return 0;
}

void mori_node_channel_destroy(mori_node_channel_t *ch) {
  if (!ch) return;
  munmap(ch->area, ch->area_bytes);
  free(ch->pids);
  free(ch);
}

/* A sleeping rank wakes at least every slice to re-check its deadline and
 * whether the rank it waits for still exists (rank_exited): a slice bounds
 * how late a death is noticed, and costs a wake-up and a few system calls
 * per waiting rank. */
enum { SPINS_BEFORE_SLEEP = 64, SLEEP_SLICE_MS = 10 };

#ifdef __linux__
/* Shared (not FUTEX_PRIVATE): the word lives in memory mapped by several
 * processes. */
static void futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns) {
  struct timespec ts = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
  (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}
static void futex_wake_all(_Atomic uint32_t *word) { (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0); }
#else
static void futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t timeout_ns) {
  (void)word;
  (void)expected;
  struct timespec ts = {0, timeout_ns < 20000 ? (long)timeout_ns : 20000};
  nanosleep(&ts, NULL);
}
static void futex_wake_all(_Atomic uint32_t *word) { (void)word; }
#endif

/* Wakes the ranks asleep in a step (a step completed, or the channel failed). */
static void wake_sleepers(struct area_header *h) {
  if (atomic_load(&h->sleepers)) futex_wake_all(&h->arrivals);
}

/* Waits a little for `box` to reach `step`: spins briefly (ranks often
 * arrive within microseconds of each other), then sleeps until the arrival
 * that completes a step wakes it, for at most `left_ns` and at most a slice,
 * so that the caller re-checks the failure word and its deadline. With more
 * ranks than cores a rank that spins or yields takes the core from the rank
 * it waits for; a sleeping rank costs nothing and wakes at once. */
static void wait_a_little(struct area_header *h, mailbox_t *box, uint64_t step, unsigned spins, uint64_t left_ns) {
  if (spins < SPINS_BEFORE_SLEEP) return;
  /* Dekker-style with the arriving rank (seq, then arrivals, then sleepers):
   * either it sees us counted among the sleepers and wakes us, or we see its
   * arrival (the box's sequence or the changed word) before sleeping. */
  atomic_fetch_add(&h->sleepers, 1);
  uint32_t seen = atomic_load(&h->arrivals);
  if (atomic_load(&box->seq) != step && !atomic_load(&h->failure)) {
    const uint64_t slice = (uint64_t)SLEEP_SLICE_MS * 1000000ull;
    futex_wait(&h->arrivals, seen, left_ns < slice ? left_ns + 1 : slice);
  }
  atomic_fetch_sub(&h->sleepers, 1);
}

/* failure word: reporter + 1 in bits 0..15, culprit + 1 (0: none) in bits
 * 16..31, the code's negation in bits 32..63. */
static uint64_t pack_failure(int reporter, int culprit, int code) {
  return (uint64_t)(uint16_t)(reporter + 1) | (uint64_t)(uint16_t)(culprit + 1) << 16 | (uint64_t)(uint32_t)(-code) << 32;
}

/* The channel cannot go on: remember why here, and tell the other ranks
 * (the first failure of any rank wins); `why` (FAILED_*) lets their
 * messages say what happened to the culprit. Returns code with the error
 * set. */
static int fail_channel(mori_node_channel_t *ch, int code, int culprit, uint32_t why, const char *fmt, ...) MORI_PRINTF(5, 6);
static int fail_channel(mori_node_channel_t *ch, int code, int culprit, uint32_t why, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ch->failed, sizeof(ch->failed), fmt, ap);
  va_end(ap);
  ch->failed_code = code;
  uint32_t unclaimed = 0;
  if (atomic_compare_exchange_strong(&ch->area->failure_claimed, &unclaimed, 1)) {
    ch->area->failure_step = ch->step;
    ch->area->failure_why = why;
    atomic_store(&ch->area->failure, pack_failure(ch->rank, culprit, code));
    wake_sleepers(ch->area);
  }
  return mori_error_set(code, "%s; this comm's collective steps cannot go on", ch->failed);
}

/* Another rank failed the channel: this rank fails too, naming it. */
static int failed_elsewhere(mori_node_channel_t *ch, uint64_t word) {
  int reporter = (int)(word & 0xffff) - 1, culprit = (int)((word >> 16) & 0xffff) - 1;
  int code = -(int)(uint32_t)(word >> 32);
  unsigned long long at = (unsigned long long)ch->area->failure_step;
  if (culprit >= 0 && ch->area->failure_why == FAILED_EXITED)
    snprintf(ch->failed, sizeof(ch->failed),
             "node channel: rank %d exited or crashed (rank %d found it gone at step %llu); rank %d was at step %llu", culprit,
             reporter, at, ch->rank, (unsigned long long)ch->step);
  else if (culprit >= 0)
    snprintf(ch->failed, sizeof(ch->failed), "node channel: rank %d failed step %llu because of rank %d (%s); rank %d was at step %llu",
             reporter, at, culprit, mori_err_name(code), ch->rank, (unsigned long long)ch->step);
  else
    snprintf(ch->failed, sizeof(ch->failed), "node channel: rank %d failed step %llu (%s); rank %d was at step %llu", reporter, at,
             mori_err_name(code), ch->rank, (unsigned long long)ch->step);
  ch->failed_code = code;
  return mori_error_set(code, "%s; this comm's collective steps cannot go on", ch->failed);
}

int mori_node_channel_fail(mori_node_channel_t *ch, int code, const char *why) {
  if (ch->failed_code) return mori_error_set(ch->failed_code, "%s; this comm's collective steps cannot go on", ch->failed);
  uint64_t word = atomic_load(&ch->area->failure);
  if (word) return failed_elsewhere(ch, word); /* the first failure is the one every rank names */
  return fail_channel(ch, code, -1, FAILED_OTHERWISE, "node channel: rank %d failed step %llu: %s", ch->rank,
                      (unsigned long long)ch->step, why);
}

/* Whether process `pid` (of this pid namespace) has ended. pidfd_open
 * (Linux 5.3) also sees a process that ended and that its parent has not
 * reaped yet (a zombie, which kill() still finds: a launcher that reaps its
 * ranks late would hide a crash until the timeout); without it (an older
 * kernel, a seccomp filter), kill(pid, 0) failing with ESRCH. A process of
 * another user (EPERM) counts as alive. A pid the kernel has handed on to
 * another process since the rank ended (pid reuse) looks alive too: that
 * wait then lasts to the timeout, as every wait did before this check. */
static bool process_ended(pid_t pid) {
#if defined(__linux__) && defined(SYS_pidfd_open)
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, 0); /* readable once the process has ended */
    close(fd);
    return n == 1 && (p.revents & POLLIN);
  }
  if (errno == ESRCH) return true;
#endif
  return kill(pid, 0) != 0 && errno == ESRCH;
}

/* Whether rank r, which has not published `step` in `box`, is gone for good.
 * Its box is read again after its process is found ended: a rank that
 * published the step and then exited (its work done) did arrive. */
static bool rank_exited(mori_node_channel_t *ch, int r, mailbox_t *box, uint64_t step) {
  return ch->pids[r] && process_ended(ch->pids[r]) && atomic_load(&box->seq) < step;
}

uint32_t mori_call_identity(const char *what) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; what && *what; what++) h = (h ^ (uint8_t)*what) * 16777619u;
  return h;
}

int mori_node_channel_allgather(mori_node_channel_t *ch, const char *what, const void *send, void *recv, size_t bytes) {
  return mori_node_channel_allgather_grace(ch, what, send, recv, bytes, 0);
}

int mori_node_channel_allgather_grace(mori_node_channel_t *ch, const char *what, const void *send, void *recv,
                                      size_t bytes, int grace_ms) {
  if (ch->failed_code)
    return mori_error_set(ch->failed_code, "failed earlier: %s; this comm's collective steps cannot go on", ch->failed);
  if (bytes > MORI_NODE_CHANNEL_PAYLOAD)
    return mori_error_set(MORI_EINVAL, "node channel: %zu bytes exceed a mailbox (%d)", bytes, MORI_NODE_CHANNEL_PAYLOAD);
  uint64_t word = atomic_load(&ch->area->failure);
  if (word) return failed_elsewhere(ch, word);
  uint64_t step = ++ch->step;
  uint32_t id = mori_call_identity(what);
  int parity = (int)(step & 1);
  mailbox_t *mine = &ch->boxes[ch->rank * 2 + parity];
  memcpy(mine->data, send, bytes);
  mine->bytes = bytes;
  mine->what = id;
  snprintf(mine->name, sizeof(mine->name), "%s", what ? what : "?");
  atomic_store(&mine->seq, step); /* sequentially consistent: ordered before our reads of the failure word */
  /* The step's last arrival (whatever the interleaving, the (step * size)-th
   * increment comes after every rank published this step) wakes the rest. */
  uint32_t arrived = atomic_fetch_add(&ch->area->arrivals, 1) + 1;
  if (arrived == (uint32_t)(step * (uint64_t)ch->size)) wake_sleepers(ch->area);
  const uint64_t slice = (uint64_t)SLEEP_SLICE_MS * 1000000ull;
  uint64_t limit_ms = (uint64_t)ch->timeout_ms + (uint64_t)(grace_ms > 0 ? grace_ms : 0);
  uint64_t start = now_ns(), limit = limit_ms * 1000000ull, next_check = start + slice;
  for (int r = 0; r < ch->size; r++) {
    mailbox_t *box = &ch->boxes[r * 2 + parity];
    for (unsigned spins = 0;; spins++) {
      uint64_t seen = atomic_load_explicit(&box->seq, memory_order_acquire);
      if (seen == step) break;
      if ((word = atomic_load(&ch->area->failure)) != 0) return failed_elsewhere(ch, word);
      if (seen > step)
        return fail_channel(ch, MORI_EMISMATCH, r, FAILED_OTHERWISE,
                            "node channel: rank %d is at step %llu, rank %d at %llu (a collective was skipped)", r,
                            (unsigned long long)seen, ch->rank, (unsigned long long)step);
      uint64_t now = now_ns(), waited = now - start;
      /* Once a slice, not on every spin: the check costs system calls. */
      if (now >= next_check) {
        next_check = now + slice;
        if (rank_exited(ch, r, box, step))
          return fail_channel(ch, MORI_ERANK_TIMEOUT, r, FAILED_EXITED,
                              "node channel: rank %d (pid %d) exited or crashed before step %llu (rank %d waiting)", r,
                              (int)ch->pids[r], (unsigned long long)step, ch->rank);
      }
      /* Past the limit: one more look first, so a rank that published
       * since the load above (and may pass this step on that) is not
       * failed here; the steps' outcomes differ only when it comes later. */
      if (waited > limit && atomic_load_explicit(&box->seq, memory_order_acquire) == step) break;
      if (waited > limit) {
        char missing[256];
        size_t used = 0;
        int count = 0;
        for (int q = r; q < ch->size && used + 12 < sizeof(missing); q++)
          if (atomic_load_explicit(&ch->boxes[q * 2 + parity].seq, memory_order_acquire) != step)
            used += (size_t)snprintf(missing + used, sizeof(missing) - used, "%s%d", count++ ? ", " : "", q);
        return fail_channel(ch, MORI_ERANK_TIMEOUT, r, FAILED_OTHERWISE,
                            "node channel: %s %s did not arrive within %llu ms (step %llu, rank %d waiting)",
                            count > 1 ? "ranks" : "rank", missing, (unsigned long long)limit_ms, (unsigned long long)step,
                            ch->rank);
      }
      wait_a_little(ch->area, box, step, spins, limit - waited);
    }
    if (box->bytes != bytes || box->what != id) {
      char theirs[sizeof(box->name)];
      memcpy(theirs, box->name, sizeof(theirs));
      theirs[sizeof(theirs) - 1] = '\0'; /* the peer's bytes: ended here whatever they hold */
      if (strlen(theirs) == sizeof(theirs) - 1) memcpy(theirs + sizeof(theirs) - 4, "...", 3); /* said cut short */
      return fail_channel(ch, MORI_EMISMATCH, r, FAILED_OTHERWISE,
                          "node channel: at step %llu rank %d made another call (%s: %llu bytes, call %08x) than rank %d (%s: "
                          "%zu bytes, call %08x)",
                          (unsigned long long)step, r, theirs, (unsigned long long)box->bytes, box->what, ch->rank,
                          what ? what : "?", bytes, id);
    }
    memcpy((char *)recv + (size_t)r * bytes, box->data, bytes);
  }
  /* A peer that gave up on this step after we had published it: fail it here
   * too, rather than go on alone. */
  if ((word = atomic_load(&ch->area->failure)) != 0) return failed_elsewhere(ch, word);
  return 0;
}
