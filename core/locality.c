// SPDX-License-Identifier: MIT
/* Locality words of a comm's peers: the class from the peers' host identity
 * and the LSA team, the flags from the routes the comm chose (so what the
 * words say is what mori's own paths will use). The device table is made
 * once per comm, on first use, and released with the comm: nothing is
 * allocated per call. */
#include "mori/locality.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/base/error.h"
#include "core/internal/comm.h"
#include "core/internal/comm_live.h"

/* Guards the lazy creation of every comm's device table. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t word_of(const mori_comm_t *c, int p) {
  uint32_t caps = c->routes[p].caps, w;
  if (p == c->rank) {
    /* A rank's own memory is always directly reachable, whatever the
     * transports say (MORI_DISABLE_P2P leaves self alone too). */
    w = MORI_PEER_SELF | MORI_LOCALITY_DIRECT | MORI_LOCALITY_SYSTEM_ATOMICS;
  } else {
    bool lsa = p >= c->lsa_base && p < c->lsa_base + c->lsa_size;
    bool same_node = c->peers[p].host_hash == c->peers[c->rank].host_hash;
    w = lsa ? MORI_PEER_LSA : same_node ? MORI_PEER_NODE : MORI_PEER_REMOTE;
    if (caps & MORI_CAP_LOAD_STORE) {
      w |= MORI_LOCALITY_DIRECT;
      /* Remote atomics over a load/store mapping are the device's own
       * atomics at system scope; over RDMA they are NIC atomics, which a
       * kernel cannot issue on a plain pointer. */
      if (caps & MORI_CAP_REMOTE_ATOMICS) w |= MORI_LOCALITY_SYSTEM_ATOMICS;
    }
  }
  if (caps & MORI_CAP_RDMA) w |= MORI_LOCALITY_RDMA;
  if (caps & MORI_CAP_COPY_ENGINE) w |= MORI_LOCALITY_COPY_ENGINE;
  return w;
}

int mori_comm_locality(const mori_comm_t *comm, uint32_t *words, int count) {
  if (!comm || !words) return mori_error_set(MORI_EINVAL, "comm_locality: comm and words are required");
  int live = mori_comm_check_live(comm, "comm_locality");
  if (live) return live;
  if (count < comm->size)
    return mori_error_set(MORI_EINVAL, "comm_locality: room for %d words on rank %d, the comm has %d ranks", count,
                          comm->rank, comm->size);
  for (int p = 0; p < comm->size; p++) words[p] = word_of(comm, p);
  return 0;
}

int mori_comm_locality_dev(mori_comm_t *comm, const uint32_t **out) {
  if (!comm || !out) return mori_error_set(MORI_EINVAL, "comm_locality_dev: comm and out are required");
  *out = NULL;
  int live = mori_comm_check_live(comm, "comm_locality_dev");
  if (live) return live;
  pthread_mutex_lock(&table_lock);
  int rc = 0;
  if (!comm->locality_dev) {
    size_t bytes = sizeof(uint32_t) * (size_t)comm->size;
    uint32_t *words = malloc(bytes);
    void *dev = NULL;
    rc = words ? mori_comm_locality(comm, words, comm->size) : mori_error_set(MORI_ENOMEM, "comm_locality_dev");
    if (!rc) rc = mori_platform_device_alloc(comm->device, bytes, &dev);
    if (!rc) rc = mori_platform_memcpy(comm->device, dev, words, bytes);
    if (rc && dev) mori_platform_device_free(comm->device, dev);
    else if (!rc) comm->locality_dev = dev;
    free(words);
    if (rc) mori_error_context(rc, "comm_locality_dev: the table of %d words on rank %d", comm->size, comm->rank);
  }
  *out = comm->locality_dev;
  pthread_mutex_unlock(&table_lock);
  return rc;
}
