// SPDX-License-Identifier: MIT
/* Comm creation: one allgather of who every rank is, the agreed handle
 * type, and for every peer what the transports provide — from which the LSA
 * team and the per-peer routes follow, by capability, whatever the order in
 * which the transports were listed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/pid_namespace.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/profile.h"
#include "core/base/log.h"
#include "core/base/trace.h"
#include "core/internal/agreement.h"
#include "core/internal/comm.h"
#include "core/internal/comm_live.h"
#include "core/internal/node_channel.h"
#include "core/internal/plugin_ops.h"
#include "core/internal/version_log.h"

static pthread_mutex_t comms_lock = PTHREAD_MUTEX_INITIALIZER;
static mori_comm_t *live_comms;

void mori_comm_attr_init(mori_comm_attr_t *attr) {
  memset(attr, 0, sizeof(*attr));
  attr->device = -1;
}

static uint64_t hash_string(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* MORI_HOST_ID simulates several nodes on one machine; otherwise the
 * hostname plus the boot id (two containers may share a hostname). */
static void host_identity(char *out, size_t len) {
  const char *forced = mori_env_string("MORI_HOST_ID");
  if (forced) {
    snprintf(out, len, "%s", forced);
    return;
  }
  char host[64] = "?", boot[40] = "";
  gethostname(host, sizeof(host) - 1);
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
    fclose(f);
    boot[strcspn(boot, "\n")] = '\0';
  }
  snprintf(out, len, "%.24s/%.36s", host, boot);
}

/* MORI_DISABLE_P2P (the Shmem Guide's variable): no peer is reached by
 * load/store, nor by copy engines (they need the peer mapped), so the LSA
 * team is this rank alone and RDMA carries everything it can. */
static bool p2p_disabled(void) {
  return mori_env_bool_or("MORI_DISABLE_P2P", false);
}

/* Per peer and transport, what the transport provides. */
static int gather_caps(mori_comm_t *c, uint32_t *caps /* [t * size + p] */) {
  bool no_p2p = p2p_disabled();
  if (no_p2p) MORI_INFO("comm: MORI_DISABLE_P2P is set: peers are not reached by load/store or copy engines");
  for (int t = 0; t < c->num_transports; t++)
    for (int p = 0; p < c->size; p++) {
      uint32_t v = 0;
      int rc = c->transports[t].peer_caps(c->transport_state[t], c, p, &v);
      if (rc) return mori_error_context(rc, "transport %s: peer_caps(%d)", c->transports[t].name, p);
      if (no_p2p && p != c->rank) v &= ~(uint32_t)(MORI_CAP_LOAD_STORE | MORI_CAP_COPY_ENGINE);
      caps[(size_t)t * c->size + p] = v;
    }
  return 0;
}

/* Among the transports that provide `cap` for peer p, the one whose name
 * sorts first: a choice that does not depend on the list's order. */
static int8_t provider(const mori_comm_t *c, const uint32_t *caps, int p, uint32_t cap) {
  int8_t best = -1;
  for (int t = 0; t < c->num_transports; t++)
    if ((caps[(size_t)t * c->size + p] & cap) && (best < 0 || strcmp(c->transports[t].name, c->transports[best].name) < 0))
      best = (int8_t)t;
  return best;
}

/* A transport that needs a capability for a peer it serves fails comm
 * creation when no other listed transport provides it for that peer; while
 * optional transports wait to be initialised (`unmet` given), such peers
 * are counted in *unmet instead (one of them may provide it), and checked
 * again once they are. */
static int check_requirements(const mori_comm_t *c, const uint32_t *caps, int32_t *unmet) {
  for (int t = 0; t < c->num_transports; t++) {
    uint32_t need = c->transports[t].requires;
    if (!need) continue;
    for (int p = 0; p < c->size; p++) {
      if (!caps[(size_t)t * c->size + p]) continue;
      uint32_t others = 0;
      for (int u = 0; u < c->num_transports; u++)
        if (u != t) others |= caps[(size_t)u * c->size + p];
      uint32_t missing = need & ~others;
      if (!missing) continue;
      if (unmet) {
        ++*unmet;
        continue;
      }
      static const struct {
        uint32_t cap;
        const char *name;
      } caps_named[] = {{MORI_CAP_LOAD_STORE, "load/store"},
                        {MORI_CAP_COPY_ENGINE, "copy-engine"},
                        {MORI_CAP_RDMA, "RDMA"},
                        {MORI_CAP_REMOTE_ATOMICS, "remote-atomics"}};
      char what[64] = "";
      for (size_t k = 0; k < sizeof(caps_named) / sizeof(caps_named[0]); k++)
        if (missing & caps_named[k].cap)
          snprintf(what + strlen(what), sizeof(what) - strlen(what), "%s%s", what[0] ? " and " : "", caps_named[k].name);
      bool p2p_listed = false;
      for (int u = 0; u < c->num_transports; u++) p2p_listed = p2p_listed || strcmp(c->transports[u].name, "p2p") == 0;
      const char *hint = !(missing & MORI_CAP_LOAD_STORE) ? ""
                         : p2p_listed ? " (p2p is listed but does not reach that rank: another host, or MORI_DISABLE_P2P)"
                                      : " (list p2p for load/store)";
      return mori_error_set(MORI_EINVAL,
                            "transport %s on rank %d needs %s for rank %d, and no other listed transport provides it%s",
                            c->transports[t].name, c->rank, what, p, hint);
    }
  }
  return 0;
}

struct host_rank {
  uint64_t host;
  int rank;
};

/* Orders (host, rank) pairs: the ranks of one host together, by rank. */
static int by_host_then_rank(const void *a, const void *b) {
  const struct host_rank *x = a, *y = b;
  if (x->host != y->host) return x->host < y->host ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Each rank's place among the ranks of its host (local_rank) and their
 * number (local_size), from one sort of the peer table (a comparison of
 * every pair was 65k per rank at 256 ranks, in every rank). */
static int number_local_ranks(mori_comm_t *c) {
  struct host_rank *order = malloc(sizeof(*order) * (size_t)c->size);
  if (!order) return mori_error_set(MORI_ENOMEM, "comm_create: ordering %d ranks by host", c->size);
  for (int r = 0; r < c->size; r++) order[r] = (struct host_rank){c->peers[r].host_hash, r};
  qsort(order, (size_t)c->size, sizeof(*order), by_host_then_rank);
  for (int first = 0, next; first < c->size; first = next) {
    for (next = first; next < c->size && order[next].host == order[first].host; next++) {
    }
    for (int i = first; i < next; i++) {
      c->peers[order[i].rank].local_rank = i - first;
      c->peers[order[i].rank].local_size = next - first;
    }
  }
  free(order);
  return 0;
}

/* The LSA team: the contiguous run of load/store-reachable ranks around this
 * one. Kept only if every rank finds a run of the same size (else the flat
 * window arithmetic would differ per rank): then it collapses to self. */
/* Collective, and the routes' one step: it carries this rank's status of
 * what came before (local_rc), so a rank that failed there fails every
 * rank here, named, rather than skipping the step. */
static int compute_lsa(mori_comm_t *c, const bool *load_store, int local_rc) {
  int lo = c->rank, hi = c->rank;
  while (!local_rc && lo > 0 && load_store[lo - 1]) lo--;
  while (!local_rc && hi + 1 < c->size && load_store[hi + 1]) hi++;
  int32_t mine[2] = {lo, hi - lo + 1};
  int32_t *all = calloc((size_t)c->size * 2, sizeof(int32_t));
  if (!all && !local_rc) local_rc = mori_error_set(MORI_ENOMEM, "comm: LSA");
  int rc = mori_agree_gather(c, local_rc, "comm_create: the load/store team", mine, all, sizeof(mine));
  if (rc) {
    free(all);
    return rc;
  }
  bool uniform = true;
  for (int r = 0; r < c->size; r++) uniform &= all[2 * r + 1] == mine[1] && (r - all[2 * r]) < mine[1] && r >= all[2 * r];
  free(all);
  if (uniform) {
    c->lsa_base = lo;
    c->lsa_size = hi - lo + 1;
  } else {
    MORI_INFO("comm: load/store teams differ in size across ranks; LSA collapses to self");
    c->lsa_base = c->rank;
    c->lsa_size = 1;
  }
  c->lsa_rank = c->rank - c->lsa_base;
  return 0;
}

/* Collective (one step, in compute_lsa), carrying local_rc: this rank's
 * status of what came just before. unmet: see check_requirements. */
static int compute_routes(mori_comm_t *c, int local_rc, int32_t *unmet) {
  uint32_t *caps = calloc((size_t)(c->num_transports ? c->num_transports : 1) * c->size, sizeof(uint32_t));
  bool *load_store = calloc((size_t)c->size, sizeof(bool));
  int rc = local_rc;
  if (!rc && (!caps || !load_store)) rc = mori_error_set(MORI_ENOMEM, "comm: capability table");
  if (!rc) rc = gather_caps(c, caps);
  if (!rc) rc = check_requirements(c, caps, unmet);
  for (int p = 0; !rc && p < c->size; p++) load_store[p] = provider(c, caps, p, MORI_CAP_LOAD_STORE) >= 0;
  rc = compute_lsa(c, load_store, rc);
  for (int p = 0; !rc && p < c->size; p++) {
    bool in_lsa = p >= c->lsa_base && p < c->lsa_base + c->lsa_size;
    mori_route_t *r = &c->routes[p];
    r->caps = 0;
    for (int t = 0; t < c->num_transports; t++) r->caps |= caps[(size_t)t * c->size + p];
    if (!in_lsa) r->caps &= ~(uint32_t)(MORI_CAP_LOAD_STORE | MORI_CAP_COPY_ENGINE);
    r->reach = in_lsa ? provider(c, caps, p, MORI_CAP_LOAD_STORE) : provider(c, caps, p, MORI_CAP_RDMA);
    r->copy_engine = in_lsa ? provider(c, caps, p, MORI_CAP_COPY_ENGINE) : -1;
  }
  free(caps);
  free(load_store);
  return rc;
}

void mori_comm_release(mori_comm_t *c) {
  if (!c) return;
  pthread_mutex_lock(&comms_lock);
  for (mori_comm_t **p = &live_comms; *p; p = &(*p)->next_live)
    if (*p == c) {
      *p = c->next_live;
      break;
    }
  pthread_mutex_unlock(&comms_lock);
  for (int i = c->num_transports - 1; i >= 0; i--) c->transports[i].fini(c->transport_state[i]);
  for (int i = c->num_handles - 1; i >= 0; i--) c->handles[i].fini(c->handle_state[i]);
  mori_node_channel_destroy(c->channel);
  if (c->locality_dev) mori_platform_device_free(c->device, c->locality_dev);
  free(c->routes);
  free(c->peers);
  free(c);
}

int mori_comm_check_live(const mori_comm_t *comm, const char *call) {
  pthread_mutex_lock(&comms_lock);
  const mori_comm_t *c = live_comms;
  while (c && c != comm) c = c->next_live;
  pthread_mutex_unlock(&comms_lock);
  return c ? 0 : mori_error_set(MORI_EINVAL, "%s: %p is not a live comm (destroyed already?)", call, (const void *)comm);
}

void mori_comm_for_each(void (*fn)(mori_comm_t *comm, void *arg), void *arg) {
  pthread_mutex_lock(&comms_lock);
  for (mori_comm_t *c = live_comms; c; c = c->next_live) fn(c, arg);
  pthread_mutex_unlock(&comms_lock);
}

static int describe_self(mori_comm_t *c, mori_peer_info_t *me) {
  memset(me, 0, sizeof(*me));
  me->rank = c->rank;
  me->pid = (int32_t)getpid();
  me->pid_namespace = mori_pid_namespace();
  me->device = c->device;
  host_identity(me->host_id, sizeof(me->host_id));
  me->host_hash = hash_string(me->host_id);
  int rc = mori_platform_device_uuid(c->device, me->device_uuid);
  if (!rc) rc = mori_platform_probe_handle_types(c->device, &me->handle_mask);
  return rc;
}

/* The handle type new allocations use, the same on every rank: each
 * rank's preference (MORI_HANDLE_TYPE, else what its device does best)
 * that every rank supports. Ranks preferring two different such types
 * (MORI_HANDLE_TYPE set differently) fail together, named: each made its
 * heap with its own, and their first heap window waited in two different
 * handle exchanges until the timeout. */
static int agree_preferred_handle(mori_comm_t *c, int rc, unsigned common, int *preferred) {
  int32_t mine = rc ? -1 : *preferred, *all = calloc((size_t)c->size, sizeof(*all));
  if (!all && !rc) rc = mori_error_set(MORI_ENOMEM, "comm_create: rank %d's table of handle types", c->rank);
  rc = mori_agree_gather(c, rc, "comm_create: the handle type for new allocations", &mine, all, sizeof(mine));
  int chosen = -1, by = -1;
  for (int r = 0; !rc && r < c->size; r++) {
    int p = all[r];
    if (p < 0 || p >= 32 || !(common & (1u << p))) continue; /* not every rank's: not a choice */
    if (chosen < 0) {
      chosen = p;
      by = r;
    } else if (p != chosen) {
      rc = mori_error_set(MORI_EMISMATCH,
                          "comm_create: rank %d makes new allocations with %s handles, rank %d with %s (set "
                          "MORI_HANDLE_TYPE alike on every rank, or on none)",
                          by, mori_handle_type_name(chosen), r, mori_handle_type_name(p));
    }
  }
  free(all);
  if (!rc) *preferred = chosen;
  return rc;
}

/* Handle libraries: every given one whose type every rank's device can
 * create and export; the preferred type (fabric before posix_fd, or
 * MORI_HANDLE_TYPE) is what new allocations use. */
/* Each library's init may take collective steps; one that failed on one
 * rank (or a step before it) must not leave that rank skipping the next
 * library's steps while the others take them: after each library, a step
 * carrying every rank's status, so all go on or all stop there, named. */
static int init_handles(mori_comm_t *c, const mori_handle_ops_t *const *given, int n) {
  unsigned common = ~0u;
  for (int r = 0; r < c->size; r++) common &= c->peers[r].handle_mask;
  int preferred = -1;
  int rc = mori_platform_preferred_handle_type(c->device, &preferred);
  if ((rc = agree_preferred_handle(c, rc, common, &preferred)) != 0) return rc;
  c->handle_type = MORI_HANDLE_NONE;
  for (int i = 0; i < n; i++) {
    mori_handle_ops_t *h = &c->handles[c->num_handles];
    if (!rc) rc = mori_handle_ops_adopt(given[i], h);
    /* The common mask is every rank's, so every rank skips alike. */
    bool used = !rc && (common & (1u << h->handle_type));
    if (used && (rc = h->init(c, &c->handle_state[c->num_handles])) != 0)
      rc = mori_error_context(rc, "handle library %s: init", h->name);
    else if (used)
      c->num_handles++;
    if ((rc = mori_agree(c, rc, "comm_create: a handle library")) != 0) return rc;
    /* Legacy IPC only carries memory the runtime allocated: never new allocations. */
    if (!used || h->handle_type == MORI_HANDLE_LEGACY_IPC) continue;
    if (h->handle_type == preferred || c->handle_type == MORI_HANDLE_NONE) c->handle_type = h->handle_type;
  }
  if (c->num_handles > 0 && c->handle_type == MORI_HANDLE_NONE)
    return mori_error_set(MORI_ENOTSUP, "comm_create: the given handle libraries carry only memory made elsewhere (legacy IPC); "
                                        "list posix_fd or fabric too, for mori's own allocations");
  if (c->num_handles == 0)
    return mori_error_set(MORI_ENOTSUP,
                          "comm_create: no given handle library carries a type every rank supports (common mask 0x%x)",
                          common);
  return 0;
}

static int init_transport(mori_comm_t *c, const mori_transport_ops_t *given) {
  int i = c->num_transports;
  int rc = mori_transport_ops_adopt(given, &c->transports[i]);
  if (!rc) rc = c->transports[i].init(c, &c->transport_state[i]);
  if (rc) return mori_error_context(rc, "transport %s: init", given && given->name ? given->name : "?");
  c->transport_origin[i] = given;
  c->num_transports = i + 1;
  return 0;
}

/* Every listed transport but the optional ones, in list order. */
static int init_transports(mori_comm_t *c, const mori_transport_ops_t *const *given, int n, uint32_t optional) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++)
      if (given[j] == given[i])
        return mori_error_set(MORI_EINVAL, "comm_create: transport %s is listed twice", given[i] ? given[i]->name : "?");
  /* As the handle libraries (init_handles): after each transport's init a
   * step with every rank's status, so no rank skips the next one's steps. */
  int rc = 0;
  for (int i = 0; i < n; i++) {
    if (optional & (1u << i)) continue;
    rc = init_transport(c, given[i]);
    if ((rc = mori_agree(c, rc, "comm_create: a transport")) != 0) return rc;
  }
  return 0;
}

/* The optional transports (attr->optional_transports), once the others are
 * routed: initialised in list order, and the routes made again, only when
 * some rank has a peer no other transport reaches. One agreement step (each
 * rank's count of unreached peers) makes the decision the same on every
 * rank, as the transports' collective inits need. */
static int init_optional_transports(mori_comm_t *c, const mori_transport_ops_t *const *given, int n, uint32_t optional,
                                    int32_t unmet) {
  if (!optional) return 0;
  int32_t unreached = 0, *all = calloc((size_t)c->size, sizeof(int32_t));
  /* Peers no transport reaches, and peers a transport serves without what
   * it requires (`unmet`, from check_requirements) */
  for (int p = 0; p < c->size; p++) unreached += p != c->rank && c->routes[p].reach < 0;
  unreached += unmet;
  int status = all ? 0 : mori_error_set(MORI_ENOMEM, "comm_create: rank %d's table", c->rank);
  int rc = mori_agree_gather(c, status, "comm_create: optional transports", &unreached, all, sizeof(unreached));
  int needy = -1;
  for (int r = 0; !rc && r < c->size && needy < 0; r++)
    if (all[r]) needy = r;
  int count = needy >= 0 ? all[needy] : 0;
  free(all);
  if (rc || needy < 0) return rc;
  for (int i = 0; i < n; i++) {
    if (!(optional & (1u << i))) continue;
    MORI_INFO("comm: optional transport %s initialised: rank %d has %d peer(s) the others do not reach or serve fully",
              given[i]->name, needy, count);
    if ((rc = init_transport(c, given[i])) != 0) {
      rc = mori_error_context(rc,
                              "comm_create: optional transport (needed: rank %d has %d peer(s) the others do not reach or "
                              "serve fully)",
                              needy, count);
      break;
    }
  }
  return compute_routes(c, rc, NULL); /* its step carries a failed init to every rank; every requirement checked */
}

/* What a rank asks of the comm: its handle libraries and transports (by
 * name, in list order, and which are optional). The plug-ins' collective
 * init steps pair up only when every rank asks the same, in the same order;
 * a rank that left one out would otherwise wait in a step the others never
 * take, or make a comm that reaches fewer peers than theirs.
 * (MORI_DISABLE_P2P may differ: the load/store team's agreement already
 * makes such ranks' teams themselves alone.) */
static uint64_t hash_mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull; }

static uint64_t asked_of_the_comm(const mori_comm_attr_t *attr) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < attr->num_handles; i++)
    h = hash_mix(h, attr->handles[i] && attr->handles[i]->name ? hash_string(attr->handles[i]->name) : 0);
  h = hash_mix(h, 0x7a5b); /* between the lists: [a][b] is not [a, b][] */
  for (int i = 0; i < attr->num_transports; i++)
    h = hash_mix(h, attr->transports[i] && attr->transports[i]->name ? hash_string(attr->transports[i]->name) : 0);
  return hash_mix(h, attr->optional_transports);
}

/* "p2p, rdma (optional)" for this rank's own message. */
static void describe_asked(const mori_comm_attr_t *attr, char *out, size_t len) {
  size_t used = (size_t)snprintf(out, len, "handle libraries");
  for (int i = 0; i < attr->num_handles && used < len; i++)
    used += (size_t)snprintf(out + used, len - used, "%s%s", i ? ", " : " ",
                             attr->handles[i] && attr->handles[i]->name ? attr->handles[i]->name : "?");
  if (used < len) used += (size_t)snprintf(out + used, len - used, "; transports");
  for (int i = 0; i < attr->num_transports && used < len; i++)
    used += (size_t)snprintf(out + used, len - used, "%s%s%s", i ? ", " : " ",
                             attr->transports[i] && attr->transports[i]->name ? attr->transports[i]->name : "?",
                             (attr->optional_transports >> i) & 1 ? " (optional)" : "");
  if (attr->num_transports == 0 && used < len) snprintf(out + used, len - used, " none");
}

/* Step 1 of creation: every rank's description, what it asks of the comm,
 * and its status, so that a rank that failed before (its arguments, its
 * environment, its device) fails every rank at once, named with its
 * message, instead of leaving them waiting in a later step. */
typedef struct mori_comm_record {
  mori_peer_info_t info;
  uint64_t asked;
} mori_comm_record_t;

static int exchange_records(mori_comm_t *c, const mori_comm_attr_t *attr, int local_rc) {
  mori_comm_record_t mine, *all = calloc((size_t)c->size, sizeof(*all));
  memset(&mine, 0, sizeof(mine));
  if (!local_rc && !all) local_rc = mori_error_set(MORI_ENOMEM, "comm_create: rank %d's table", c->rank);
  if (!local_rc) local_rc = describe_self(c, &mine.info);
  if (!local_rc) mine.asked = asked_of_the_comm(attr);
  int rc = mori_agree_gather(c, local_rc, "comm_create", &mine, all, sizeof(mine));
  for (int r = 0; !rc && r < c->size; r++) {
    if (all[r].info.rank != r)
      rc = mori_error_set(MORI_EPROTO, "comm_create: rank %d published the record of rank %d", r, all[r].info.rank);
    else if (all[r].asked != all[0].asked) {
      char asked[512];
      describe_asked(attr, asked, sizeof(asked));
      rc = mori_error_set(MORI_EMISMATCH,
                          "comm_create: rank %d lists other handle libraries or transports than rank 0 (every rank "
                          "lists the same, in the same order; this rank, %d: %s)",
                          r, c->rank, asked);
    }
  }
  for (int r = 0; !rc && r < c->size; r++) c->peers[r] = all[r].info;
  free(all);
  return rc;
}

/* The caller's arguments, checked as this rank's status of step 1. */
static int check_attr(const mori_comm_attr_t *attr) {
  if (attr->num_transports < 0 || attr->num_transports > MORI_MAX_PLUGINS || attr->num_handles > MORI_MAX_PLUGINS)
    return mori_error_set(MORI_EINVAL, "comm_create: at most %d transports and %d handle libraries (given %d and %d)",
                          MORI_MAX_PLUGINS, MORI_MAX_PLUGINS, attr->num_transports, attr->num_handles);
  if (attr->num_handles < 1 || !attr->handles) return mori_error_set(MORI_EINVAL, "comm_create: no handle library given");
  if (attr->num_transports > 0 && !attr->transports)
    return mori_error_set(MORI_EINVAL, "comm_create: %d transports given, and no list", attr->num_transports);
  if (attr->num_transports < 32 && attr->optional_transports >> attr->num_transports)
    return mori_error_set(MORI_EINVAL, "comm_create: optional_transports 0x%x names transports beyond the %d listed",
                          attr->optional_transports, attr->num_transports);
  return 0;
}

int mori_comm_create(const mori_comm_attr_t *attr, mori_comm_t **out) {
  if (!attr || !out || !attr->bootstrap) return mori_error_set(MORI_EINVAL, "comm_create: attr, bootstrap and out are required");
  *out = NULL;
  (void)mori_trace_setup(mori_bootstrap_rank(attr->bootstrap)); /* before the first event; its error comes below */
  MORI_TRACE_SCOPE("comm_create", MORI_TA("ranks", mori_bootstrap_size(attr->bootstrap)));
  mori_comm_t *c = calloc(1, sizeof(*c));
  if (!c) return mori_error_set(MORI_ENOMEM, "comm_create");
  c->bootstrap = attr->bootstrap;
  c->creator_pid = (long)getpid();
  c->rank = mori_bootstrap_rank(attr->bootstrap);
  c->size = mori_bootstrap_size(attr->bootstrap);
  mori_log_set_rank(c->rank);
  mori_version_log_once();
  c->device = attr->device;
  int rc = check_attr(attr);
  c->peers = calloc((size_t)c->size, sizeof(*c->peers));
  c->routes = calloc((size_t)c->size, sizeof(*c->routes));
  if (!rc && (!c->peers || !c->routes)) rc = mori_error_set(MORI_ENOMEM, "comm_create: peer table");
  if (!rc && c->device < 0) rc = mori_platform_current_device(&c->device);
  /* Every MORI_* variable set: one that does not parse fails here, on every
   * rank (the exchange below), before anything reads it. */
  if (!rc) rc = mori_env_check();
  if (!rc) rc = mori_trace_setup(c->rank);
  /* A rank that failed locally still takes part in the exchange, so that
   * every rank learns it (and no rank waits for it). */
  if ((rc = exchange_records(c, attr, rc)) != 0) goto fail;
  if ((rc = number_local_ranks(c)) != 0) goto fail;
  bool one_host = true;
  for (int r = 1; r < c->size; r++) one_host = one_host && c->peers[r].host_hash == c->peers[0].host_hash;
  if ((rc = mori_node_channel_create(c->bootstrap, c->rank, c->size, one_host, &c->channel)) != 0) goto fail;
  /* Each plug-in's init ends in a step with every rank's status (in
   * init_handles and init_transports), so a plug-in failing on one rank
   * stops every rank there, named; a failure inside a plug-in before its
   * own collective steps is that plug-in's to carry (posix_fd does). */
  if ((rc = init_handles(c, attr->handles, attr->num_handles)) != 0) goto fail;
  /* A failure there is every rank's already (its agreements): no further step. */
  if ((rc = init_transports(c, attr->transports, attr->num_transports, attr->optional_transports)) != 0) goto fail;
  int32_t unmet = 0; /* requirements left to the optional transports (none listed: refused at once) */
  if ((rc = compute_routes(c, 0, attr->optional_transports ? &unmet : NULL)) != 0) goto fail;
  if ((rc = init_optional_transports(c, attr->transports, attr->num_transports, attr->optional_transports, unmet)) != 0)
    goto fail;
  MORI_INFO("comm: rank %d of %d on device %d, handle %s, LSA team [%d, %d)", c->rank, c->size, c->device,
            mori_handle_type_name(c->handle_type), c->lsa_base, c->lsa_base + c->lsa_size);
  pthread_mutex_lock(&comms_lock);
  c->next_live = live_comms;
  live_comms = c;
  pthread_mutex_unlock(&comms_lock);
  *out = c;
  return 0;
fail:
  mori_comm_release(c);
  return mori_error_context(rc, "comm_create (rank %d)", mori_bootstrap_rank(attr->bootstrap));
}

int mori_comm_rank(const mori_comm_t *c) { return c->rank; }
int mori_comm_size(const mori_comm_t *c) { return c->size; }
int mori_comm_device(const mori_comm_t *c) { return c->device; }
mori_bootstrap_t *mori_comm_bootstrap(const mori_comm_t *c) { return c->bootstrap; }
int mori_comm_handle_type(const mori_comm_t *c) { return c->handle_type; }

const mori_peer_info_t *mori_comm_peer_info(const mori_comm_t *c, int rank) {
  return (rank >= 0 && rank < c->size) ? &c->peers[rank] : NULL;
}

const mori_transport_ops_t *mori_comm_transport_for(const mori_comm_t *c, int peer) {
  if (peer < 0 || peer >= c->size || c->routes[peer].reach < 0) return NULL;
  return c->transport_origin[c->routes[peer].reach];
}

const mori_transport_ops_t *mori_comm_copy_engine_for(const mori_comm_t *c, int peer) {
  if (peer < 0 || peer >= c->size || c->routes[peer].copy_engine < 0) return NULL;
  return c->transport_origin[c->routes[peer].copy_engine];
}

uint32_t mori_comm_peer_caps(const mori_comm_t *c, int peer) {
  return (peer < 0 || peer >= c->size) ? 0 : c->routes[peer].caps;
}

int mori_comm_queue_pairs(const mori_comm_t *c, int peer) {
  if (peer < 0 || peer >= c->size) return 0;
  int n = 0;
  for (int t = 0; t < c->num_transports; t++) n += c->transports[t].queue_pairs(c->transport_state[t], peer);
  return n;
}

void mori_comm_lsa(const mori_comm_t *c, int *base, int *size, int *lsa_rank) {
  if (base) *base = c->lsa_base;
  if (size) *size = c->lsa_size;
  if (lsa_rank) *lsa_rank = c->lsa_rank;
}

void *mori_comm_transport_state(const mori_comm_t *c, const mori_transport_ops_t *ops) {
  for (int i = 0; i < c->num_transports; i++)
    if (c->transport_origin[i] == ops) return c->transport_state[i];
  return NULL;
}

int mori_comm_peer_mappable(mori_comm_t *c, int peer, bool *yes) {
  *yes = false;
  if (peer < 0 || peer >= c->size) return mori_error_set(MORI_EINVAL, "peer %d outside the comm of %d", peer, c->size);
  const mori_peer_info_t *me = &c->peers[c->rank], *p = &c->peers[peer];
  if (p->host_hash != me->host_hash) return 0;
  return mori_platform_can_access_peer(me->device, p->device, yes);
}
