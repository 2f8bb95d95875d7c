// SPDX-License-Identifier: MIT
/* Initialisation and teardown of the process's PE, the plug-in list, and
 * the queries. shmem_init_attr, in order: check the arguments; obtain the
 * unique ID (given, or over MPI); pin the thread near its GPU; start the
 * TCP bootstrap at the ID's address with its secret (rank 0 takes over
 * the socket shmem_get_unique_id opened, when it was made here); create
 * the comm with the listed plug-ins; create the device state (shmem's own
 * symmetric allocation and the chunk table). Any failure undoes the steps
 * before it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "core/internal/finalize.h"
#include "core/platform/platform.h"
#include "mori/heap.h"
#include "mori/mem.h"
#include "mori/plugin.h"
#include "shmem/internal/cpu_affinity.h"
#include "shmem/internal/mpi.h"
#include "shmem/internal/state.h"
#include "shmem/internal/unique_id.h"

mori_shmem_state_t mori_shmem = {.lock = PTHREAD_MUTEX_INITIALIZER, .rank = -1};

int mori_shmem_use_plugins(const mori_handle_ops_t *const *handles, int num_handles,
                           const mori_transport_ops_t *const *transports, int num_transports) {
  return mori_shmem_use_plugins_optional(handles, num_handles, transports, num_transports, 0);
}

int mori_shmem_use_plugins_optional(const mori_handle_ops_t *const *handles, int num_handles,
                                    const mori_transport_ops_t *const *transports, int num_transports,
                                    uint32_t optional_transports) {
  if (num_handles < 1 || num_handles > MORI_SHMEM_MAX_PLUGINS || !handles || num_transports < 0 ||
      num_transports > MORI_SHMEM_MAX_PLUGINS || (num_transports && !transports))
    return mori_error_set(MORI_EINVAL, "mori_shmem_use_plugins: 1..%d handle libraries and 0..%d transports (got %d, %d)",
                          MORI_SHMEM_MAX_PLUGINS, MORI_SHMEM_MAX_PLUGINS, num_handles, num_transports);
  pthread_mutex_lock(&mori_shmem.lock);
  int rc = 0;
  if (mori_shmem.initialized) {
    rc = mori_error_set(MORI_EBUSY, "mori_shmem_use_plugins: shmem is initialised; call it before shmem_init_attr");
  } else {
    for (int i = 0; i < num_handles; i++) mori_shmem.handles[i] = handles[i];
    for (int i = 0; i < num_transports; i++) mori_shmem.transports[i] = transports[i];
    mori_shmem.num_handles = num_handles;
    mori_shmem.num_transports = num_transports;
    mori_shmem.optional_transports = optional_transports;
  }
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}

static void release_all(void) {
  mori_shmem_device_state_destroy();
  for (mori_shmem_block_t *b = mori_shmem.blocks, *next; b; b = next) {
    next = b->next;
    if (mori_window_destroy(b->win) != 0) MORI_WARN("shmem_finalize: %s", mori_last_error());
    void *mem = b->registered ? b->adopted : b->base;
    bool shared = false; /* a mapping adopted whole goes with the last buffer registered in it */
    for (const mori_shmem_block_t *o = next; b->registered && o && !shared; o = o->next)
      shared = o->registered && o->adopted == mem;
    if (mem && !shared && mori_mem_free(mem) != 0) MORI_WARN("shmem_finalize: %s", mori_last_error());
    free(b);
  }
  mori_shmem.blocks = NULL;
  /* A comm with windows still alive (an EP context's, say) is kept, and so
   * is its bootstrap, which its collective steps across hosts still use:
   * they go when those windows do not need them, at exit. */
  if (mori_comm_destroy(mori_shmem.comm) != 0)
    MORI_WARN("shmem_finalize: %s; the comm and its bootstrap are kept for them (destroy them first)", mori_last_error());
  else
    mori_bootstrap_destroy(mori_shmem.bootstrap);
  mori_shmem.comm = NULL;
  mori_shmem.bootstrap = NULL;
  mori_shmem.initialized = false;
  mori_shmem.rank = -1;
  mori_shmem.npes = 0;
}

/* Every PE's heap made, and of the same kind: the mode and chunk size (a
 * symmetric allocation sits at the same chunk and offset everywhere) and
 * the memory type (MORI_SHMEM_HEAP_TYPE: on AMD, fine- and coarse-grained
 * memory mixed in one symmetric allocation). Every PE fails alike, naming
 * the first that differs from PE 0 and the variable. */
static int agree_heap(int rc) {
  mori_heap_stats_t st;
  memset(&st, 0, sizeof(st));
  if (!rc) rc = mori_heap_stats(mori_shmem.device, &st);
  uint64_t mine[3] = {(uint64_t)st.mode, (uint64_t)st.uncached, (uint64_t)st.chunk_size};
  int n = mori_comm_size(mori_shmem.comm);
  uint64_t *all = calloc((size_t)n, sizeof(mine));
  if (!all && !rc) rc = mori_error_set(MORI_ENOMEM, "shmem_init_attr: PE %d's heap table", mori_comm_rank(mori_shmem.comm));
  rc = mori_agree_gather(mori_shmem.comm, rc, "making the symmetric heap", mine, all, sizeof(mine));
  for (int pe = 1; !rc && pe < n; pe++) {
    const uint64_t *them = all + 3 * pe;
    if (them[0] != all[0] || them[2] != all[2])
      rc = mori_error_set(MORI_EMISMATCH,
                          "making the symmetric heap: PE %d's heap is %s with chunks of %llu bytes, PE 0's %s with %llu "
                          "(MORI_SHMEM_MODE, MORI_SHMEM_HEAP_SIZE, MORI_SHMEM_VMM_CHUNK_SIZE must be the same on every PE)",
                          pe, them[0] == MORI_HEAP_STATIC ? "static" : "vmm", (unsigned long long)them[2],
                          all[0] == MORI_HEAP_STATIC ? "static" : "vmm", (unsigned long long)all[2]);
    else if (them[1] != all[1])
      rc = mori_error_set(MORI_EMISMATCH,
                          "making the symmetric heap: PE %d's heap memory is %s, PE 0's %s (MORI_SHMEM_HEAP_TYPE must be "
                          "the same on every PE)",
                          pe, them[1] ? "uncached" : "normal", all[1] ? "uncached" : "normal");
  }
  free(all);
  return rc;
}

/* PEs no listed transport reaches are usable only through the host (their
 * shmem_ptr_p2p is NULL, device puts to them fail): said once at init, as
 * it usually means a transport was not listed or found no device. */
static void warn_unreached(int rank, int npes) {
  char list[256] = "";
  size_t used = 0;
  int n = 0;
  for (int pe = 0; pe < npes; pe++) {
    if (pe == rank || mori_comm_transport_for(mori_shmem.comm, pe)) continue;
    if (used + 16 < sizeof(list)) used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d", n ? ", " : "", pe);
    n++;
  }
  if (n)
    MORI_WARN("shmem: PE %d reaches %d PE(s) by no transport (%s%s): list the rdma transport for PEs on other nodes, "
              "or see its INFO lines (MORI_GLOBAL_LOG_LEVEL=INFO) for why it has no device",
              rank, n, list, used + 16 >= sizeof(list) ? ", ..." : "");
}

static int start(unsigned int flags, int rank, int npes, const void *arg) {
  mori_shmem_uniqueid_t id;
  int rc = 0;
  if (flags == MORI_SHMEM_INIT_WITH_UNIQUEID) memcpy(&id, arg, sizeof(id));
  else rc = mori_shmem_mpi_unique_id(arg, rank, npes, &id);
  mori_shmem_uid_info_t info;
  if (!rc) rc = mori_shmem_uid_parse(&id, &info);
  if (rc) return rc;
  mori_log_set_rank(rank);
  int device = -1;
  if (mori_platform_current_device(&device) == 0) mori_cpu_affinity_bind_thread(device);
  mori_clear_error();
  mori_bootstrap_tcp_attr_t boot;
  mori_bootstrap_tcp_attr_init(&boot);
  boot.rank = rank;
  boot.size = npes;
  boot.address = info.address;
  boot.secret = info.secret;
  boot.secret_len = sizeof(info.secret);
  bool used_before = false;
  boot.listen_fd = rank == 0 ? mori_shmem_uid_take_listener(info.token, &used_before) : -1;
  /* The address of an ID used before is the first job's (or closed): rank
   * 0 would report another process holding it, while the fault is here. */
  if (used_before)
    return mori_error_set(MORI_EINVAL,
                          "PE 0: this unique ID was used by an earlier shmem_init_attr of this process, or given up (by "
                          "the IDs made after it, or mori_finalize): every init needs a new ID from shmem_get_unique_id");
  rc = mori_bootstrap_tcp_create(&boot, &mori_shmem.bootstrap);
  if (rc) return mori_error_context(rc, "bootstrap at %s (%s)", info.address, info.ifname);
  mori_comm_attr_t attr;
  mori_comm_attr_init(&attr);
  attr.bootstrap = mori_shmem.bootstrap;
  attr.handles = mori_shmem.handles;
  attr.num_handles = mori_shmem.num_handles;
  attr.transports = mori_shmem.transports;
  attr.num_transports = mori_shmem.num_transports;
  attr.optional_transports = mori_shmem.optional_transports;
  if ((rc = mori_comm_create(&attr, &mori_shmem.comm)) != 0) return rc;
  warn_unreached(rank, npes);
  mori_shmem.rank = rank;
  mori_shmem.npes = npes;
  mori_shmem.device = mori_comm_device(mori_shmem.comm);
  /* The guide's defaults for the heap (static, uncached; its size then
   * required), unless the environment says otherwise or the device has a
   * heap already (made by mori_mem_alloc or the torch backend). Agreed, so
   * that a PE without a heap size fails with the others, not alone. */
  rc = mori_heap_init_defaults(mori_shmem.device, MORI_HEAP_STATIC, 1, "the shmem API's");
  if ((rc = agree_heap(rc)) != 0) return rc;
  return mori_shmem_device_state_create();
}

/* mori_finalize releases every window and allocation: shmem's go first,
 * through shmem_finalize, so that no shmem call goes on using them. */
static void finalize_hook(void) { (void)shmem_finalize(); }

int shmem_init_attr(unsigned int flags, int rank, int npes, const void *arg) {
  pthread_mutex_lock(&mori_shmem.lock);
  int rc = 0;
  if (mori_shmem.initialized)
    rc = mori_error_set(MORI_EEXIST, "shmem_init_attr: already initialised as PE %d of %d (call shmem_finalize first)",
                        mori_shmem.rank, mori_shmem.npes);
  else if (flags != MORI_SHMEM_INIT_WITH_UNIQUEID && flags != MORI_SHMEM_INIT_WITH_MPI_COMM)
    rc = mori_error_set(MORI_EINVAL,
                        "shmem_init_attr: flags %u; expected MORI_SHMEM_INIT_WITH_UNIQUEID (1) or "
                        "MORI_SHMEM_INIT_WITH_MPI_COMM (0)",
                        flags);
  else if (npes < 1 || rank < 0 || rank >= npes)
    rc = mori_error_set(MORI_EINVAL, "shmem_init_attr: rank %d of %d PEs is out of range", rank, npes);
  else if (!arg)
    rc = mori_error_set(MORI_EINVAL, "shmem_init_attr: %s is NULL",
                        flags == MORI_SHMEM_INIT_WITH_UNIQUEID ? "the unique ID" : "the MPI communicator");
  else if (mori_shmem.num_handles == 0)
    rc = mori_error_set(MORI_EINVAL,
                        "shmem_init_attr: no plug-ins listed: call mori_shmem_use_local_plugins() (link "
                        "//shmem:local_plugins) or mori_shmem_use_plugins() first");
  if (!rc) {
    rc = start(flags, rank, npes, arg);
    if (rc) {
      char msg[1024];
      snprintf(msg, sizeof(msg), "%s", mori_last_error());
      release_all();
      rc = mori_error_set(rc, "shmem_init_attr (rank %d of %d): %s", rank, npes, msg);
    } else if ((rc = mori_finalize_hook_add(finalize_hook)) != 0) {
      release_all();
    } else {
      mori_shmem.initialized = true;
      MORI_INFO("shmem: PE %d of %d on device %d", rank, npes, mori_shmem.device);
    }
  }
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}

int shmem_finalize(void) {
  pthread_mutex_lock(&mori_shmem.lock);
  if (mori_shmem.initialized) release_all();
  pthread_mutex_unlock(&mori_shmem.lock);
  return 0;
}

/* The value of an int field, or MORI_ENOT_INITIALIZED. */
static int query(const char *call, const int *field) {
  pthread_mutex_lock(&mori_shmem.lock);
  int v = mori_shmem.initialized ? *field : mori_shmem_not_initialized(call);
  pthread_mutex_unlock(&mori_shmem.lock);
  return v;
}

int shmem_mype(void) { return query("shmem_mype", &mori_shmem.rank); }
int shmem_npes(void) { return query("shmem_npes", &mori_shmem.npes); }

/* The queue pairs per PE the RDMA transport opened (the most any peer
 * has: rail-only peers have none). With no peer over RDMA (one node, no
 * device, no rdma transport listed), MORI_NUM_QP_PER_PE as the transport
 * reads it: what it would open. */
int shmem_num_qp_per_pe(void) {
  pthread_mutex_lock(&mori_shmem.lock);
  int n = mori_shmem.initialized ? 0 : mori_shmem_not_initialized("shmem_num_qp_per_pe");
  for (int p = 0; mori_shmem.initialized && p < mori_shmem.npes; p++) {
    int q = mori_comm_queue_pairs(mori_shmem.comm, p);
    if (q > n) n = q;
  }
  if (mori_shmem.initialized && n == 0) {
    n = (int)mori_env_int_or("MORI_NUM_QP_PER_PE", 1);
  }
  pthread_mutex_unlock(&mori_shmem.lock);
  return n;
}

int mori_shmem_comm(mori_comm_t **out) {
  if (!out) return mori_error_set(MORI_EINVAL, "mori_shmem_comm: out is NULL");
  pthread_mutex_lock(&mori_shmem.lock);
  int rc = mori_shmem.initialized ? 0 : mori_shmem_not_initialized("mori_shmem_comm");
  *out = rc ? NULL : mori_shmem.comm;
  pthread_mutex_unlock(&mori_shmem.lock);
  return rc;
}
