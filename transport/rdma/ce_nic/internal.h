// SPDX-License-Identifier: MIT
/* The copy-engine NIC's insides (ce_nic.h is what a program that asks for
 * it uses): a verbs provider of mori's own beside libibverbs
 * (transport/rdma/provider.h).
 * It serves peers that are declared on other nodes (MORI_HOST_ID) but share
 * this machine, so the proxy ring, its ordering and its completion signals
 * can be exercised on a GPU machine without a NIC. It behaves like a NIC
 * where the transport above could tell the difference:
 *   - every work request is checked against the registrations: the local
 *     SGE against this context's lkeys, the remote range and access rights
 *     against the owner's rkey (fetched from the owner's context, which
 *     refuses unknown keys); a failure is a remote/local access error that
 *     moves the QP to error, and later requests on it are flushed;
 *   - a key dies when its region is deregistered: the owner's key table
 *     (shared memory its peers map read-only) says which keys are live, and
 *     every request is checked against it right before its copy is queued,
 *     so a peer that cached the region is refused like any unknown key; a
 *     key is a slot and a generation, so a reused slot never revives an
 *     old key (see key_table.c for what stays in flight);
 *   - requests of one QP execute in order (one copy queue per QP's engine),
 *     and completions are handed out in a random order across everything
 *     that has finished, each by its QP's send CQ only;
 *   - faults on demand (MORI_RDMA_CE_FAULTS): `fail@N` fails the N-th work
 *     request of the context, `stall@N` holds the N-th and every later one
 *     forever (a peer node that died) until the QP is moved to error.
 * Data moves with the platform's copy queue (cuMemcpyAsync on CUDA, a worker
 * thread on the host platform); fenced inline writes and fetch-and-adds are
 * the queue's word operations. Not built on HIP (its copy queue keeps no
 * order). A fetch-and-add does not return the old value (the transport
 * never reads it). A context holds at most CE_KEY_SLOTS registrations (a
 * NIC has a limit too; reg_mr then fails with ENOMEM). Files: verbs.c (the
 * verbs table and the provider), keys.c (the key service: how a peer's
 * registration reaches this process), key_table.c (which keys are live). */
#ifndef MORI_TRANSPORT_RDMA_CE_NIC_INTERNAL_H
#define MORI_TRANSPORT_RDMA_CE_NIC_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/platform/platform.h"
#include "transport/rdma/ce_nic/ce_nic.h"
#include "transport/rdma/provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The provider's verbs table (mori_ce_nic_provider()->verbs). */
const struct mori_verbs *mori_ce_nic_verbs(void);
/* The GPU the next ibv_open_device of this thread puts its copy queues on
 * (verbs has no device argument; without this call, the thread's current
 * device — which need not be the comm's). */
void mori_ce_nic_use_device(int device);

enum { CE_ENGINES = 2 };
/* An rkey (= lkey) is a slot of its context's key table in the low
 * CE_KEY_SLOT_BITS and the slot's generation above them (never 0). */
enum { CE_KEY_SLOT_BITS = 12, CE_KEY_SLOTS = 1 << CE_KEY_SLOT_BITS };

/* A registration of this context. */
struct ce_mr {
  struct ibv_mr mr; /* first: what the caller holds */
  int access;
  /* The allocation holding the region, exported for peers (type NONE when
   * the memory cannot be shared, e.g. malloc'ed: local use only). */
  mori_shareable_t shared;
  mori_pmem_t retained;
  size_t alloc_size, offset; /* the allocation's size; the region's offset in it */
  struct ce_mr *next;
};

/* A peer context this one has asked for keys: its key table, mapped
 * read-only (the owner writes it). */
struct ce_owner {
  uint8_t gid[16];
  const uint32_t *keys; /* CE_KEY_SLOTS entries: the live key of each slot, or 0 */
  struct ce_owner *next;
};

/* A peer's registration, imported and mapped into this process. */
struct ce_remote {
  uint8_t owner[16]; /* the owner context's GID */
  const struct ce_owner *from; /* its key table says whether rkey still lives */
  uint32_t rkey;
  uint64_t used[CE_ENGINES]; /* the last operation on each engine that touched the mapping */
  uint64_t addr, length; /* the region as its owner registered it */
  int access;
  char *base; /* where the region's first byte is mapped here */
  void *va;
  size_t va_size;
  mori_pmem_t mem;
  struct ce_remote *next;
};

struct ce_qp {
  struct ibv_qp qp; /* first */
  enum ibv_qp_state state;
  uint8_t dgid[16];
  int engine;
};

/* Work posted and not yet handed to poll_cq. */
struct ce_work {
  uint64_t wr_id;
  struct ce_qp *qp;
  enum ibv_wc_opcode opcode;
  uint32_t byte_len;
  enum ibv_wc_status status; /* not SUCCESS: completes at once with it */
  bool held;                 /* stalled by a fault: never queued */
  uint64_t ticket;           /* finished once its engine has finished this many */
};

struct ce_context {
  struct ibv_context ctx; /* first */
  pthread_mutex_t lock;    /* the work, the QPs, the remote regions */
  pthread_mutex_t mr_lock; /* this context's regions: the key service reads them */
  int device;
  uint8_t gid[16];
  /* The key service. */
  int listen_fd;
  pthread_t server;
  bool serving;
  struct ce_mr *mrs;
  struct ce_remote *remotes;
  /* Regions whose key died, unlinked from `remotes`: unmapped once every
   * engine has finished the last copy that used them (ce_reap_remotes). */
  struct ce_remote *dead;
  struct ce_owner *owners;
  /* The key table: keys[slot] is the slot's live key or 0, read by peers
   * (keys_fd is what the key service hands them); slot_key[slot] is the
   * last key the slot had, for the next generation. Written under mr_lock. */
  int keys_fd;
  uint32_t *keys;
  uint32_t slot_key[CE_KEY_SLOTS];
  uint32_t next_slot;
  mori_platform_queue_t *engine[CE_ENGINES];
  uint64_t queued[CE_ENGINES]; /* operations queued on each engine */
  struct ce_work *work;
  size_t n_work, cap_work;
  uint64_t posted; /* work requests so far (fault positions count these) */
  uint64_t fail_at, stall_at;
  uint64_t rng;
  uint32_t next_qpn, first_generation;
};

/* keys.c. The service answers "which memory is rkey K" for this
 * context's registrations and hands out the key table; ce_find_remote asks
 * a peer's and maps the answer, cached (a miss also sweeps out regions
 * whose keys died unnoticed); the caller checks the owner's key table with
 * ce_remote_live right before each copy (a dead key: the cached region is
 * dropped, unmapped once the engines are done with it, and the request
 * gets IBV_WC_REM_ACCESS_ERR). Callers hold c->lock for
 * ce_find_remote; the service takes only mr_lock, never c->lock, so two
 * processes asking each other at once cannot deadlock. */
int ce_keys_start(struct ce_context *c);
void ce_keys_stop(struct ce_context *c);
/* The region `rkey` of the context whose GID is `owner` (its key not yet
 * checked: ce_remote_live), or NULL with *status saying why
 * (IBV_WC_REM_ACCESS_ERR: no such key there, or its table has it dead;
 * IBV_WC_RETRY_EXC_ERR: the owner cannot be reached). */
struct ce_remote *ce_find_remote(struct ce_context *c, const uint8_t owner[16], uint32_t rkey,
                                 enum ibv_wc_status *status);
/* Whether r's key still lives in its owner's table; when it does not, r is
 * unlinked (unmapped once the engines are done with it: ce_reap_remotes)
 * and must not be used. The check to make right before a copy on r is
 * queued. Caller holds c->lock. */
bool ce_remote_live(struct ce_context *c, struct ce_remote *r);
/* Every cached region, live or dead, unmapped (closing the context, its
 * engines idle). */
void ce_forget_remotes(struct ce_context *c);
/* Unmaps the dead regions no engine uses any more (`finished`: each
 * engine's count of finished operations, or NULL to ask the engines). */
void ce_reap_remotes(struct ce_context *c, const uint64_t *finished);

/* key_table.c. This context's table: created with the context, a
 * slot taken and its key published by reg_mr, cleared by dereg_mr before
 * the memory goes (take/revoke: caller holds mr_lock). */
int ce_key_table_create(struct ce_context *c);
void ce_key_table_destroy(struct ce_context *c);
/* A new live key, or MORI_ENOMEM (every slot in use; the error names the
 * limit and the context). */
int ce_key_take(struct ce_context *c, uint32_t *key);
void ce_key_revoke(struct ce_context *c, uint32_t key);
/* Clears every slot (closing the context: peers' cached keys die with it). */
void ce_key_revoke_all(struct ce_context *c);
/* A peer's table: the one mapped from `owner`, or NULL before the first
 * answer from it; ce_owner_add maps the table fd its service sent. */
struct ce_owner *ce_owner_find(struct ce_context *c, const uint8_t gid[16]);
int ce_owner_add(struct ce_context *c, const uint8_t gid[16], int fd, struct ce_owner **out);
void ce_owners_forget(struct ce_context *c);
/* Whether `key` is live in the owner's table now (an acquire load: what
 * the owner wrote before publishing is visible). */
bool ce_key_live(const struct ce_owner *o, uint32_t key);

/* This machine's identity as 4 bytes (boot id and host name), for GIDs. */
uint32_t ce_machine_hash(void);

#ifdef __cplusplus
}
#endif

#endif
