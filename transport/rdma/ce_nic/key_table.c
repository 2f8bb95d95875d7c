// SPDX-License-Identifier: MIT
/* The copy-engine NIC's key table: which keys of a context are live, in
 * memory its peers read. A NIC refuses a key once its region is
 * deregistered; here the requester executes the copy itself, through a
 * mapping it cached, so it must ask the owner every time, and a socket
 * round trip per request would cost more than the copy. The owner keeps a
 * memfd of CE_KEY_SLOTS words (sealed: it can neither grow nor shrink, so a
 * peer's read-only mapping never faults); word `slot` holds the slot's live
 * key or 0. reg_mr publishes a key with a release store, dereg_mr clears it
 * with a release store before the memory is released, and the requester
 * compares the word with the request's rkey (an acquire load) right before
 * it queues the copy.
 *
 * What stays in flight: every request checked before the owner clears its
 * key (the engines' whole backlog, not only the copy running now) may land
 * after dereg_mr returns, in memory the owner no longer registers (the
 * requester's own mapping keeps the pages alive, so nothing faults). A NIC
 * is stricter: once dereg_mr returns, nothing more lands. So an owner must
 * not reuse deregistered memory while peers may still have requests on it
 * (as with any RDMA memory, a window is destroyed once the application's
 * own synchronisation says its peers are done with it); what this table
 * guarantees is that a request that starts after the deregistration is
 * refused.
 *
 * A context that closes clears its whole table first, so the keys of
 * regions it never deregistered die with it. A process that dies without
 * closing leaves its table's last contents: peers keep reaching its
 * mappings (their own mapping keeps the pages) until they close.
 *
 * A key's generation (the bits above the slot) is bumped each time its slot
 * is taken, so a reused slot never revives an old key; generations wrap
 * after 2^20 registrations of one slot (mlx5 keys wrap after 2^8). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "transport/rdma/ce_nic/internal.h"

enum { TABLE_BYTES = CE_KEY_SLOTS * sizeof(uint32_t), GENERATIONS = 1u << (32 - CE_KEY_SLOT_BITS) };
static const uint32_t SLOT_MASK = CE_KEY_SLOTS - 1;
static const int SEALS = F_SEAL_GROW | F_SEAL_SHRINK;

/* The context as its messages name it: its process and serial (the GID's
 * bytes 8..15, also the name of its key service). */
static void context_name(const struct ce_context *c, char *out, size_t size) {
  uint32_t pid, serial;
  memcpy(&pid, c->gid + 8, 4);
  memcpy(&serial, c->gid + 12, 4);
  snprintf(out, size, "context %u of process %u", serial, pid);
}

int ce_key_table_create(struct ce_context *c) {
  c->keys_fd = memfd_create("mori-ce-nic-keys", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (c->keys_fd < 0) return mori_error_errno("copy-engine NIC: key table (memfd_create)");
  int rc = 0;
  if (ftruncate(c->keys_fd, TABLE_BYTES) != 0 || fcntl(c->keys_fd, F_ADD_SEALS, SEALS | F_SEAL_SEAL) != 0)
    rc = mori_error_errno("copy-engine NIC: key table (%d bytes, sealed)", (int)TABLE_BYTES);
  void *p = rc ? MAP_FAILED : mmap(NULL, TABLE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, c->keys_fd, 0);
  if (!rc && p == MAP_FAILED) rc = mori_error_errno("copy-engine NIC: mapping the key table");
  if (rc) {
    close(c->keys_fd);
    c->keys_fd = -1;
    return rc;
  }
  c->keys = p;
  /* Every slot starts at a generation of its own context's choosing, so
   * keys of two contexts rarely coincide (a key sent to the wrong peer is
   * refused, as a NIC's would be). */
  c->first_generation = 1 + c->first_generation % (GENERATIONS - 1);
  return 0;
}

void ce_key_table_destroy(struct ce_context *c) {
  if (c->keys) munmap(c->keys, TABLE_BYTES);
  if (c->keys_fd >= 0) close(c->keys_fd);
  c->keys = NULL;
  c->keys_fd = -1;
}

int ce_key_take(struct ce_context *c, uint32_t *key) {
  /* From the slot after the last one taken: a freed slot is reused as late
   * as possible. */
  for (uint32_t i = 0; i < CE_KEY_SLOTS; i++) {
    uint32_t slot = (c->next_slot + i) & SLOT_MASK;
    if (__atomic_load_n(&c->keys[slot], __ATOMIC_RELAXED) != 0) continue;
    uint32_t last = c->slot_key[slot];
    uint32_t generation = last ? (last >> CE_KEY_SLOT_BITS) + 1 : c->first_generation;
    if (generation >= GENERATIONS) generation = 1;
    *key = generation << CE_KEY_SLOT_BITS | slot;
    c->slot_key[slot] = *key;
    c->next_slot = slot + 1;
    __atomic_store_n(&c->keys[slot], *key, __ATOMIC_RELEASE);
    return 0;
  }
  char name[64];
  context_name(c, name, sizeof(name));
  return mori_error_set(MORI_ENOMEM, "copy-engine NIC: %s has all %d memory-region keys in use; deregister one first",
                        name, CE_KEY_SLOTS);
}

void ce_key_revoke(struct ce_context *c, uint32_t key) {
  uint32_t slot = key & SLOT_MASK;
  if (__atomic_load_n(&c->keys[slot], __ATOMIC_RELAXED) == key) __atomic_store_n(&c->keys[slot], 0, __ATOMIC_RELEASE);
}

void ce_key_revoke_all(struct ce_context *c) {
  for (uint32_t slot = 0; c->keys && slot < CE_KEY_SLOTS; slot++)
    if (__atomic_load_n(&c->keys[slot], __ATOMIC_RELAXED) != 0) __atomic_store_n(&c->keys[slot], 0, __ATOMIC_RELEASE);
}

bool ce_key_live(const struct ce_owner *o, uint32_t key) {
  return key != 0 && __atomic_load_n(&o->keys[key & SLOT_MASK], __ATOMIC_ACQUIRE) == key;
}

struct ce_owner *ce_owner_find(struct ce_context *c, const uint8_t gid[16]) {
  for (struct ce_owner *o = c->owners; o; o = o->next)
    if (!memcmp(o->gid, gid, 16)) return o;
  return NULL;
}

int ce_owner_add(struct ce_context *c, const uint8_t gid[16], int fd, struct ce_owner **out) {
  /* A table that could shrink under the mapping would fault on a read: take
   * only a sealed one of the full size. */
  struct stat st;
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || fstat(fd, &st) != 0)
    return mori_error_errno("copy-engine NIC: reading the seals and size of a peer's key table");
  if ((seals & SEALS) != SEALS || st.st_size != TABLE_BYTES)
    return mori_error_set(MORI_EPROTO,
                          "copy-engine NIC: a peer's key table is not a sealed table of %d keys (seals 0x%x, %lld bytes; "
                          "expected seals 0x%x and %d bytes)",
                          CE_KEY_SLOTS, seals, (long long)st.st_size, SEALS, (int)TABLE_BYTES);
  struct ce_owner *o = calloc(1, sizeof(*o));
  if (!o) return mori_error_set(MORI_ENOMEM, "copy-engine NIC: a peer's key table");
  void *p = mmap(NULL, TABLE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    free(o);
    return mori_error_errno("copy-engine NIC: mapping a peer's key table");
  }
  memcpy(o->gid, gid, 16);
  o->keys = p;
  o->next = c->owners;
  c->owners = o;
  *out = o;
  return 0;
}

void ce_owners_forget(struct ce_context *c) {
  while (c->owners) {
    struct ce_owner *o = c->owners;
    c->owners = o->next;
    munmap((void *)o->keys, TABLE_BYTES);
    free(o);
  }
}
