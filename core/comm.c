/* Comm creation: one allgather of who every rank is, the agreed handle type,
 * and for every peer the transport that reaches it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal/core.h"
#include "core/internal/error.h"
#include "core/internal/log.h"

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
  const char *forced = getenv("MORI_HOST_ID");
  if (forced && *forced) {
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

static int check_plugin(const char *kind, const char *name, uint32_t size, uint32_t version, size_t expected,
                        const char *missing_op) {
  if (size < expected || version != MORI_PLUGIN_ABI_VERSION)
    return mori_error_set(MORI_EINVAL, "%s '%s': ops size %u / ABI %u, core expects %zu / %d", kind, name ? name : "?",
                          size, version, expected, MORI_PLUGIN_ABI_VERSION);
  if (missing_op) return mori_error_set(MORI_EINVAL, "%s '%s' lacks the mandatory op %s", kind, name, missing_op);
  return 0;
}

static int check_transport(const mori_transport_ops_t *t) {
  if (!t) return mori_error_set(MORI_EINVAL, "comm: transport list holds NULL");
  const char *missing = !t->init ? "init" : !t->can_reach ? "can_reach" : !t->window_register ? "window_register"
                      : !t->window_deregister ? "window_deregister" : !t->fini ? "fini" : NULL;
  return check_plugin("transport", t->name, t->size, t->abi_version, sizeof(*t), missing);
}

static int check_handle(const mori_handle_ops_t *h) {
  if (!h) return mori_error_set(MORI_EINVAL, "comm: handle list holds NULL");
  const char *missing = !h->init ? "init" : !h->share ? "share" : !h->fini ? "fini" : NULL;
  return check_plugin("handle library", h->name, h->size, h->abi_version, sizeof(*h), missing);
}

/* The LSA team: the contiguous run of load/store-reachable ranks around this
 * one. Kept only if every rank finds a run of the same size (else the flat
 * window arithmetic would differ per rank): then it collapses to self. */
static int compute_lsa(mori_comm_t *c) {
  int lo = c->rank, hi = c->rank;
  while (lo > 0 && c->reach[lo - 1] >= 0 && (c->transports[c->reach[lo - 1]]->caps & MORI_TRANSPORT_LOAD_STORE)) lo--;
  while (hi + 1 < c->size && c->reach[hi + 1] >= 0 && (c->transports[c->reach[hi + 1]]->caps & MORI_TRANSPORT_LOAD_STORE))
    hi++;
  int32_t mine[2] = {lo, hi - lo + 1};
  int32_t *all = calloc((size_t)c->size * 2, sizeof(int32_t));
  if (!all) return mori_error_set(MORI_ENOMEM, "comm: LSA");
  int rc = mori_bootstrap_allgather(c->bootstrap, mine, all, sizeof(mine));
  if (rc) {
    free(all);
    return mori_error_context(rc, "comm: agreeing on the LSA team");
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

static void comm_free(mori_comm_t *c) {
  for (int i = c->num_transports - 1; i >= 0; i--)
    if (c->transports[i]) c->transports[i]->fini(c->transport_state[i]);
  for (int i = c->num_handles - 1; i >= 0; i--) c->handles[i]->fini(c->handle_state[i]);
  free(c->reach);
  free(c->peers);
  free(c);
}

int mori_comm_create(const mori_comm_attr_t *attr, mori_comm_t **out) {
  if (!attr || !out || !attr->bootstrap) return mori_error_set(MORI_EINVAL, "comm_create: attr, bootstrap and out are required");
  if (attr->num_transports > MORI_MAX_PLUGINS || attr->num_handles > MORI_MAX_PLUGINS)
    return mori_error_set(MORI_EINVAL, "comm_create: at most %d transports and %d handle libraries", MORI_MAX_PLUGINS,
                          MORI_MAX_PLUGINS);
  if (attr->num_handles < 1) return mori_error_set(MORI_EINVAL, "comm_create: no handle library given");
  for (int i = 0; i < attr->num_handles; i++) {
    int rc = check_handle(attr->handles[i]);
    if (rc) return rc;
  }
  for (int i = 0; i < attr->num_transports; i++) {
    int rc = check_transport(attr->transports[i]);
    if (rc) return rc;
  }
  mori_comm_t *c = calloc(1, sizeof(*c));
  if (!c) return mori_error_set(MORI_ENOMEM, "comm_create");
  c->bootstrap = attr->bootstrap;
  c->rank = mori_bootstrap_rank(attr->bootstrap);
  c->size = mori_bootstrap_size(attr->bootstrap);
  mori_log_set_rank(c->rank);
  int rc = 0;
  c->device = attr->device;
  if (c->device < 0 && (rc = mori_platform_current_device(&c->device)) != 0) goto fail;

  mori_peer_info_t me;
  memset(&me, 0, sizeof(me));
  me.rank = c->rank;
  me.pid = (int32_t)getpid();
  me.device = c->device;
  host_identity(me.host_id, sizeof(me.host_id));
  me.host_hash = hash_string(me.host_id);
  if ((rc = mori_platform_device_uuid(c->device, me.device_uuid)) != 0) goto fail;
  if ((rc = mori_platform_probe_handle_types(c->device, &me.handle_mask)) != 0) goto fail;
  c->peers = calloc((size_t)c->size, sizeof(*c->peers));
  c->reach = malloc((size_t)c->size);
  if (!c->peers || !c->reach) {
    rc = mori_error_set(MORI_ENOMEM, "comm_create: peer table");
    goto fail;
  }
  if ((rc = mori_bootstrap_allgather(c->bootstrap, &me, c->peers, sizeof(me))) != 0) goto fail;
  /* Local ranks: order among the ranks of the same host. */
  for (int r = 0; r < c->size; r++) {
    for (int q = 0; q < c->size; q++) {
      if (c->peers[q].host_hash != c->peers[r].host_hash) continue;
      if (q < r) c->peers[r].local_rank++;
      c->peers[r].local_size++;
    }
  }

  /* Handle libraries: every given one whose type every rank's device can
   * create and export; the preferred type (fabric before posix_fd, or
   * MORI_HANDLE_TYPE) is what new allocations use. */
  unsigned common = ~0u;
  for (int r = 0; r < c->size; r++) common &= c->peers[r].handle_mask;
  int preferred = -1;
  rc = mori_platform_preferred_handle_type(c->device, &preferred);
  if (rc) goto fail;
  c->handle_type = MORI_HANDLE_NONE;
  for (int i = 0; i < attr->num_handles; i++) {
    const mori_handle_ops_t *h = attr->handles[i];
    if (!(common & (1u << h->handle_type))) continue;
    if ((rc = h->init(c, &c->handle_state[c->num_handles])) != 0) {
      mori_error_context(rc, "handle library %s: init", h->name);
      goto fail;
    }
    c->handles[c->num_handles++] = h;
    if (h->handle_type == preferred || c->handle_type == MORI_HANDLE_NONE) c->handle_type = h->handle_type;
  }
  if (c->num_handles == 0) {
    rc = mori_error_set(MORI_ENOTSUP, "comm_create: no given handle library carries a type every rank supports (common mask 0x%x)",
                        common);
    goto fail;
  }

  for (int i = 0; i < attr->num_transports; i++) {
    c->transports[i] = attr->transports[i];
    if ((rc = c->transports[i]->init(c, &c->transport_state[i])) != 0) {
      mori_error_context(rc, "transport %s: init", c->transports[i]->name);
      c->transports[i] = NULL;
      goto fail;
    }
    c->num_transports = i + 1;
  }
  for (int p = 0; p < c->size; p++) {
    c->reach[p] = -1;
    for (int i = 0; i < c->num_transports && c->reach[p] < 0; i++) {
      bool yes = false;
      if ((rc = c->transports[i]->can_reach(c->transport_state[i], c, p, &yes)) != 0) {
        mori_error_context(rc, "transport %s: can_reach(%d)", c->transports[i]->name, p);
        goto fail;
      }
      if (yes) c->reach[p] = (int8_t)i;
    }
  }
  if ((rc = compute_lsa(c)) != 0) goto fail;
  MORI_INFO("comm: rank %d of %d on device %d, handle %s, LSA team [%d, %d)", c->rank, c->size, c->device,
            mori_handle_type_name(c->handle_type), c->lsa_base, c->lsa_base + c->lsa_size);
  *out = c;
  return 0;
fail:
  comm_free(c);
  return mori_error_context(rc, "comm_create (rank %d)", mori_bootstrap_rank(attr->bootstrap));
}

int mori_comm_destroy(mori_comm_t *comm) {
  if (!comm) return 0;
  if (comm->live_windows > 0)
    return mori_error_set(MORI_EBUSY, "comm_destroy: %d window(s) of this comm are still alive", comm->live_windows);
  mori_pad_arenas_destroy(comm);
  comm_free(comm);
  return 0;
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
  if (peer < 0 || peer >= c->size || c->reach[peer] < 0) return NULL;
  return c->transports[c->reach[peer]];
}

void mori_comm_lsa(const mori_comm_t *c, int *base, int *size, int *lsa_rank) {
  if (base) *base = c->lsa_base;
  if (size) *size = c->lsa_size;
  if (lsa_rank) *lsa_rank = c->lsa_rank;
}

int mori_comm_peer_mappable(mori_comm_t *c, int peer, bool *yes) {
  *yes = false;
  if (peer < 0 || peer >= c->size) return mori_error_set(MORI_EINVAL, "peer %d outside the comm of %d", peer, c->size);
  const mori_peer_info_t *me = &c->peers[c->rank], *p = &c->peers[peer];
  if (p->host_hash != me->host_hash) return 0;
  return mori_platform_can_access_peer(me->device, p->device, yes);
}
