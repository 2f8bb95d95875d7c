// SPDX-License-Identifier: MIT
/* sdma transport: one copy queue per comm; puts and gets go through the
 * peer addresses the load/store transport published in the window. */
#include <stdio.h>
#include <stdlib.h>

#include "core/base/error.h"
#include "core/platform/platform.h"
#include "mori/transport_sdma.h"

struct sdma_state {
  mori_platform_queue_t *queue;
};

static int sdma_init(mori_comm_t *comm, void **state) {
  struct sdma_state *s = calloc(1, sizeof(*s));
  if (!s) return mori_error_set(MORI_ENOMEM, "sdma");
  int rc = mori_platform_queue_create(mori_comm_device(comm), &s->queue);
  if (rc) {
    free(s);
    return mori_error_context(rc, "sdma: creating the copy queue");
  }
  *state = s;
  return 0;
}

/* The copy engines reach what load/store reaches (same host, peer access);
 * they move bytes through the peer mappings a load/store transport makes,
 * hence `requires`. */
static int sdma_peer_caps(void *state, mori_comm_t *comm, int peer, uint32_t *caps) {
  bool yes = false;
  int rc = mori_comm_peer_mappable(comm, peer, &yes);
  *caps = yes ? MORI_CAP_COPY_ENGINE : 0;
  return rc;
}

static int sdma_segment_deregister(void *state, mori_segment_t *seg, void *seg_state) {
  /* Copies in flight read or write the segment: finish them first. */
  return mori_platform_queue_wait(((struct sdma_state *)state)->queue);
}

static int sdma_fini(void *state) {
  struct sdma_state *s = state;
  if (!s) return 0;
  mori_platform_queue_wait(s->queue);
  mori_platform_queue_destroy(s->queue);
  free(s);
  return 0;
}

const mori_transport_ops_t mori_transport_sdma_ops = {
    .size = sizeof(mori_transport_ops_t),
    .abi_version = MORI_PLUGIN_ABI_VERSION,
    .name = "sdma",
    .requires = MORI_CAP_LOAD_STORE,
    .init = sdma_init,
    .peer_caps = sdma_peer_caps,
    .segment_deregister = sdma_segment_deregister,
    .fini = sdma_fini,
};

/* The peer's address for [offset, offset + bytes), checked, and the local
 * buffer (`local`, of `bytes`) it is copied to or from. */
static int peer_range(mori_window_t *win, int peer, size_t offset, size_t bytes, const void *local, const char *op,
                      char **out, struct sdma_state **state) {
  const char *dir = op[0] == 'g' ? "from" : "to"; /* "get from rank 1", "put to rank 1" */
  char call[16];
  snprintf(call, sizeof(call), "sdma %s", op);
  if (!win) return mori_error_set(MORI_EINVAL, "%s: NULL window", call);
  int rc = mori_window_check_live(win, call);
  if (rc) return rc;
  mori_comm_t *comm = mori_window_comm(win);
  *state = mori_comm_transport_state(comm, &mori_transport_sdma_ops);
  if (!*state)
    return mori_error_set(MORI_EINVAL, "%s: the window's comm was created without the sdma transport", call);
  int me = mori_comm_rank(comm);
  if (peer < 0 || peer >= mori_comm_size(comm))
    return mori_error_set(MORI_EINVAL, "%s on rank %d: peer %d outside the comm of %d ranks", call, me, peer,
                          mori_comm_size(comm));
  size_t size = mori_window_size(win);
  if (offset > size || bytes > size - offset)
    return mori_error_set(MORI_ERANGE, "%s %s rank %d on rank %d: %zu bytes at offset %zu leave the window's %zu bytes",
                          call, dir, peer, me, bytes, offset, size);
  if (!local && bytes)
    return mori_error_set(MORI_EINVAL, "%s %s rank %d on rank %d: the local buffer of %zu bytes is NULL", call, dir, peer,
                          me, bytes);
  char *base = mori_window_peer_ptr(win, peer);
  if (!base || mori_comm_copy_engine_for(comm, peer) != &mori_transport_sdma_ops)
    return mori_error_set(MORI_EUNREACHABLE, "%s: rank %d is not mapped into this process for its copy engines (another node, or no p2p)",
                          call, peer);
  *out = base + offset;
  return 0;
}

int mori_sdma_put(mori_window_t *win, int peer, size_t dst_offset, const void *src, size_t bytes) {
  char *dst;
  struct sdma_state *s;
  int rc = peer_range(win, peer, dst_offset, bytes, src, "put", &dst, &s);
  if (rc) return rc;
  return bytes ? mori_platform_queue_copy(s->queue, dst, src, bytes) : 0;
}

int mori_sdma_get(mori_window_t *win, int peer, void *dst, size_t src_offset, size_t bytes) {
  char *src;
  struct sdma_state *s;
  int rc = peer_range(win, peer, src_offset, bytes, dst, "get", &src, &s);
  if (rc) return rc;
  return bytes ? mori_platform_queue_copy(s->queue, dst, src, bytes) : 0;
}

int mori_sdma_quiet(mori_comm_t *comm) {
  if (!comm) return mori_error_set(MORI_EINVAL, "sdma quiet: NULL comm");
  int rc = mori_comm_check_live(comm, "sdma quiet");
  if (rc) return rc;
  struct sdma_state *s = mori_comm_transport_state(comm, &mori_transport_sdma_ops);
  if (!s) return mori_error_set(MORI_EINVAL, "sdma quiet: the comm was created without the sdma transport");
  return mori_platform_queue_wait(s->queue);
}
