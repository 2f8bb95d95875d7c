// SPDX-License-Identifier: MIT
/* See internal/node_channel.h. Layout of the shared area: a header, then per
 * rank two mailboxes used alternately by consecutive steps. A rank writes
 * step n into mailbox n % 2 and publishes n in its sequence word; it reads
 * every peer's mailbox n % 2 once that word says n. Reuse is safe without
 * acknowledgements: a rank writes step n + 2 only after finishing step
 * n + 1, which needed every peer to publish n + 1, which each peer does only
 * after it has read all of step n. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/internal/node_channel.h"
#include "mori/bootstrap.h"

enum { NAME_BYTES = 64, MAGIC = 0x6d6f72696e6f6465 /* "morinode" */ };

typedef struct mailbox {
  _Atomic uint64_t seq;
  uint64_t bytes;
  uint8_t data[MORI_NODE_CHANNEL_PAYLOAD];
  uint8_t pad[48]; /* a multiple of the cache line */
} mailbox_t;

struct area_header {
  uint64_t magic;
  uint64_t size;
  uint8_t pad[48];
};

struct mori_node_channel {
  struct area_header *area;
  mailbox_t *boxes; /* [rank][2] */
  size_t area_bytes;
  int rank, size;
  uint64_t step;
  int timeout_ms;
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
    snprintf(name, NAME_BYTES, "/mori-node-%d-%016llx", (int)getpid(), (unsigned long long)nonce);
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) rc = mori_error_errno("node channel: shm_open(%s)", name);
    if (!rc && ftruncate(fd, (off_t)bytes) != 0) rc = mori_error_errno("node channel: sizing %zu bytes", bytes);
    if (rc) name[0] = '\0';
  }
  int brc = mori_bootstrap_bcast(b, name, NAME_BYTES, 0);
  if (brc) {
    if (fd >= 0) close(fd);
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

int mori_node_channel_create(mori_bootstrap_t *b, int rank, int size, bool one_host, mori_node_channel_t **out) {
  *out = NULL;
  if (!one_host || size < 2 || !mori_env_bool_or("MORI_NODE_CHANNEL", true)) return 0;
  char name[NAME_BYTES] = "";
  void *base = NULL;
  int rc = open_area(b, rank, size, name, &base);
  /* Every rank learns whether every rank has the area mapped. */
  int32_t mine = rc ? 1 : 0, *all = calloc((size_t)size, sizeof(int32_t));
  int arc = all ? mori_bootstrap_allgather(b, &mine, all, sizeof(mine)) : MORI_ENOMEM;
  bool everyone = arc == 0;
  for (int r = 0; everyone && r < size; r++) everyone = all[r] == 0;
  free(all);
  if (rank == 0 && name[0]) shm_unlink(name); /* mapped everywhere (or abandoned): the name is done */
  if (!everyone) {
    if (base) munmap(base, area_bytes(size));
    if (arc) return arc; /* the bootstrap itself failed: the comm cannot go on */
    MORI_INFO("node channel: not available (%s); collective steps use the bootstrap", rc ? mori_last_error() : "a peer failed");
    return 0;
  }
  mori_node_channel_t *ch = calloc(1, sizeof(*ch));
  if (!ch) {
    munmap(base, area_bytes(size));
    return mori_error_set(MORI_ENOMEM, "node channel");
  }
  ch->area = base;
  ch->boxes = (mailbox_t *)((char *)base + sizeof(struct area_header));
  ch->area_bytes = area_bytes(size);
  ch->rank = rank;
  ch->size = size;
  ch->timeout_ms = mori_bootstrap_default_timeout_ms();
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
  free(ch);
}

/* Spins briefly, then yields, then sleeps: ranks usually arrive within
 * microseconds of each other, but a Python rank may be milliseconds late. */
static void back_off(uint64_t waited_ns, unsigned spins) {
  if (spins < 256) return;
  if (waited_ns < 1000000ull) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, waited_ns < 100000000ull ? 20000 : 1000000};
  nanosleep(&ts, NULL);
}

int mori_node_channel_allgather(mori_node_channel_t *ch, const void *send, void *recv, size_t bytes) {
  if (bytes > MORI_NODE_CHANNEL_PAYLOAD)
    return mori_error_set(MORI_EINVAL, "node channel: %zu bytes exceed a mailbox (%d)", bytes, MORI_NODE_CHANNEL_PAYLOAD);
  uint64_t step = ++ch->step;
  int parity = (int)(step & 1);
  mailbox_t *mine = &ch->boxes[ch->rank * 2 + parity];
  memcpy(mine->data, send, bytes);
  mine->bytes = bytes;
  atomic_store_explicit(&mine->seq, step, memory_order_release);
  uint64_t start = now_ns(), limit = (uint64_t)ch->timeout_ms * 1000000ull;
  for (int r = 0; r < ch->size; r++) {
    mailbox_t *box = &ch->boxes[r * 2 + parity];
    for (unsigned spins = 0;; spins++) {
      uint64_t seen = atomic_load_explicit(&box->seq, memory_order_acquire);
      if (seen == step) break;
      if (seen > step)
        return mori_error_set(MORI_EIO, "node channel: rank %d is at step %llu, rank %d at %llu (a collective was skipped)",
                              r, (unsigned long long)seen, ch->rank, (unsigned long long)step);
      uint64_t waited = now_ns() - start;
      if (waited > limit) {
        char missing[256];
        size_t used = 0;
        for (int q = r; q < ch->size && used + 12 < sizeof(missing); q++)
          if (atomic_load_explicit(&ch->boxes[q * 2 + parity].seq, memory_order_acquire) != step)
            used += (size_t)snprintf(missing + used, sizeof(missing) - used, "%s%d", used ? ", " : "", q);
        return mori_error_set(MORI_ERANK_TIMEOUT, "node channel: rank(s) %s did not arrive within %d ms (step %llu, rank %d waiting)",
                              missing, ch->timeout_ms, (unsigned long long)step, ch->rank);
      }
      back_off(waited, spins);
    }
    if (box->bytes != bytes)
      return mori_error_set(MORI_EMISMATCH, "node channel: rank %d sent %llu bytes, rank %d %zu at step %llu", r,
                            (unsigned long long)box->bytes, ch->rank, bytes, (unsigned long long)step);
    memcpy((char *)recv + (size_t)r * bytes, box->data, bytes);
  }
  return 0;
}
