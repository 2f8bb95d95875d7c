// SPDX-License-Identifier: MIT
/* The bootstrap vtable wrapper: checks arguments, then calls the ops. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/bootstrap/internal/step_grace.h"
#include "core/bootstrap/internal/alloc.h"
#include "mori/bootstrap.h"

struct mori_bootstrap {
  mori_bootstrap_ops_t ops;
  void *state;
  int rank;
  int size;
  int timeout_ms; /* 0: the default */
};

/* What an implementation leaves out -- NULL, or beyond the end of the
 * smaller struct an older one was built with -- comes from here (the
 * plug-ins' rule, mori/plugin.h): the mandatory collectives have no
 * default. */
static int bootstrap_releases_nothing(void *state) {
  (void)state;
  return 0;
}

static const mori_bootstrap_ops_t bootstrap_defaults = {
    .size = sizeof(mori_bootstrap_ops_t),
    .abi_version = MORI_BOOTSTRAP_ABI_VERSION,
    .name = "?",
    .fini = bootstrap_releases_nothing,
};

/* Checks the header and the mandatory ops of `given` (naming the bootstrap
 * and the op), then copies the bytes it has over the defaults. */
static int adopt_ops(const mori_bootstrap_ops_t *given, mori_bootstrap_ops_t *out) {
  if (!given->name) return mori_error_set(MORI_EINVAL, "bootstrap ops without a name");
  if (given->abi_version < 1 || given->abi_version > MORI_BOOTSTRAP_ABI_VERSION)
    return mori_error_set(MORI_EINVAL, "bootstrap '%s': ABI version %u, this core supports 1 to %d", given->name,
                          given->abi_version, MORI_BOOTSTRAP_ABI_VERSION);
  /* allgather, barrier and bcast are mandatory: a struct must reach bcast. */
  size_t minimum = offsetof(mori_bootstrap_ops_t, bcast) + sizeof(given->bcast);
  if (given->size < minimum)
    return mori_error_set(MORI_EINVAL,
                          "bootstrap '%s': ops struct of %u bytes is smaller than the mandatory part (%zu bytes: "
                          "allgather, barrier, bcast)",
                          given->name, given->size, minimum);
  memcpy(out, &bootstrap_defaults, sizeof(*out));
  memcpy(out, given, given->size < sizeof(*out) ? given->size : sizeof(*out));
  const char *missing = !out->allgather ? "allgather" : !out->barrier ? "barrier" : !out->bcast ? "bcast" : NULL;
  if (missing) return mori_error_set(MORI_EINVAL, "bootstrap '%s' lacks the mandatory op %s", given->name, missing);
  if (!out->fini) out->fini = bootstrap_defaults.fini;
  out->size = sizeof(*out);
  return 0;
}

int mori_bootstrap_create(const mori_bootstrap_ops_t *ops, void *state, int rank, int size, mori_bootstrap_t **out) {
  if (!ops || !out) return mori_error_set(MORI_EINVAL, "bootstrap: ops and out are required");
  mori_bootstrap_ops_t adopted;
  int rc = adopt_ops(ops, &adopted);
  if (rc) return rc;
  if (size < 1 || rank < 0 || rank >= size)
    return mori_error_set(MORI_EINVAL, "bootstrap '%s': rank %d of size %d is out of range", ops->name, rank, size);
  mori_bootstrap_t *b = mori_bs_calloc(1, sizeof(*b));
  if (!b)
    return mori_error_set(MORI_ENOMEM, "bootstrap '%s': rank %d of %d has no memory for its handle (%zu bytes)",
                          ops->name, rank, size, sizeof(*b));
  *b = (mori_bootstrap_t){.ops = adopted, .state = state, .rank = rank, .size = size};
  *out = b;
  return 0;
}

int mori_bootstrap_destroy(mori_bootstrap_t *b) {
  if (!b) return 0;
  int rc = b->ops.fini(b->state);
  free(b);
  return rc;
}

int mori_bootstrap_rank(const mori_bootstrap_t *b) { return b->rank; }
int mori_bootstrap_size(const mori_bootstrap_t *b) { return b->size; }

int mori_bootstrap_allgather(mori_bootstrap_t *b, const void *send, void *recv, size_t bytes) {
  if (!b || (bytes && (!send || !recv))) return mori_error_set(MORI_EINVAL, "bootstrap allgather: NULL argument");
  /* One rank: nothing to exchange. (A bootstrap over torch's store would
   * otherwise pay a store round trip, ~100 us, for every step of a
   * single-rank job's rendezvous.) */
  if (b->size == 1) {
    if (bytes && recv != send) memmove(recv, send, bytes);
    return 0;
  }
  return b->ops.allgather(b->state, send, recv, bytes);
}

int mori_bootstrap_allgather_grace(mori_bootstrap_t *b, const void *send, void *recv, size_t bytes, int grace_ms) {
  if (!b || grace_ms <= 0 || !b->ops.allgather_grace || b->size == 1) return mori_bootstrap_allgather(b, send, recv, bytes);
  if (bytes && (!send || !recv)) return mori_error_set(MORI_EINVAL, "bootstrap allgather: NULL argument");
  return b->ops.allgather_grace(b->state, send, recv, bytes, grace_ms);
}

int mori_bootstrap_barrier(mori_bootstrap_t *b) {
  if (!b) return mori_error_set(MORI_EINVAL, "bootstrap barrier: NULL bootstrap");
  if (b->size == 1) return 0;
  return b->ops.barrier(b->state);
}

int mori_bootstrap_bcast(mori_bootstrap_t *b, void *buf, size_t bytes, int root) {
  if (!b || (bytes && !buf)) return mori_error_set(MORI_EINVAL, "bootstrap bcast: NULL argument");
  if (root < 0 || root >= b->size)
    return mori_error_set(MORI_EINVAL, "bootstrap bcast: root %d out of range (size %d)", root, b->size);
  if (b->size == 1) return 0;
  return b->ops.bcast(b->state, buf, bytes, root);
}

int mori_bootstrap_default_timeout_ms(void) {
  return mori_env_ms_or("MORI_BOOTSTRAP_TIMEOUT_MS", 60000); /* strict: core/base/env.h */
}

int mori_bootstrap_timeout_ms(const mori_bootstrap_t *b) {
  return b && b->timeout_ms > 0 ? b->timeout_ms : mori_bootstrap_default_timeout_ms();
}

int mori_bootstrap_set_timeout_ms(mori_bootstrap_t *b, int timeout_ms) {
  if (!b || timeout_ms <= 0)
    return mori_error_set(MORI_EINVAL, "bootstrap: a timeout of %d ms (it must be positive)", timeout_ms);
  b->timeout_ms = timeout_ms;
  return 0;
}
