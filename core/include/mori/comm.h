// SPDX-License-Identifier: MIT
/* A comm: the ranks of a job (from a bootstrap), what each rank is (host,
 * device, pid), and which transport reaches each peer. Created collectively,
 * destroyed locally. */
#ifndef MORI_COMM_H
#define MORI_COMM_H

#include <stdbool.h>

#include "mori/bootstrap.h"
#include "mori/types.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_comm mori_comm_t;
typedef struct mori_transport_ops mori_transport_ops_t;
typedef struct mori_handle_ops mori_handle_ops_t;

typedef struct mori_comm_attr {
  mori_bootstrap_t *bootstrap; /* borrowed: must outlive the comm */
  int device;                  /* -1: the current device */
  /* What the program links and wants: transports are chosen by capability,
   * handle types by what every rank's device supports. The same lists, in
   * the same order, on every rank (their inits take collective steps in
   * list order): a rank that lists others fails creation on every rank. */
  const mori_handle_ops_t *const *handles;
  int num_handles;
  const mori_transport_ops_t *const *transports;
  int num_transports;
  /* Bit i: transports[i] is optional. Creation routes the peers with the
   * other transports first and initialises the optional ones (in list
   * order, then routes again) only when some rank has a peer none of the
   * others reaches; every rank decides alike (one more collective step,
   * only when a bit is set). E.g. p2p plus rdma marked optional: a
   * one-node job never opens a NIC, a job across nodes is made in one
   * creation. 0: every listed transport is initialised. */
  uint32_t optional_transports;
} mori_comm_attr_t;

/* What every rank learns about every other rank at creation. */
typedef struct mori_peer_info {
  int32_t rank;
  int32_t pid;
  int32_t device;
  int32_t local_rank;   /* index among the ranks of the same host */
  int32_t local_size;
  uint32_t handle_mask; /* handle types the rank's device can create and export */
  uint64_t host_hash;
  char host_id[64];     /* MORI_HOST_ID, else hostname + boot id */
  uint8_t device_uuid[16];
  /* The pid namespace `pid` belongs to (an inode number; 0: unknown). Two
   * ranks on one host in different namespaces (containers sharing the
   * network and /dev/shm) cannot compare each other's pids. */
  uint64_t pid_namespace;
} mori_peer_info_t;

MORI_API void mori_comm_attr_init(mori_comm_attr_t *attr);
/* Collective over the bootstrap's ranks. */
MORI_API int mori_comm_create(const mori_comm_attr_t *attr, mori_comm_t **out);
/* Local. MORI_EBUSY while windows of the comm are alive. NULL is a no-op. */
MORI_API int mori_comm_destroy(mori_comm_t *comm);

MORI_API int mori_comm_rank(const mori_comm_t *comm);
MORI_API int mori_comm_size(const mori_comm_t *comm);
MORI_API int mori_comm_device(const mori_comm_t *comm);
MORI_API mori_bootstrap_t *mori_comm_bootstrap(const mori_comm_t *comm);
/* Collective: `bytes` from every rank into recv[rank * bytes]. Through the
 * comm's node channel (shared memory, microseconds) when every rank is on
 * one host and the payload is small, else through the bootstrap. */
MORI_API int mori_comm_allgather(mori_comm_t *comm, const void *send, void *recv, size_t bytes);
MORI_API const mori_peer_info_t *mori_comm_peer_info(const mori_comm_t *comm, int rank);
/* The handle type windows of this comm exchange (agreed by all ranks). */
MORI_API int mori_comm_handle_type(const mori_comm_t *comm);
/* The transport that reaches `peer` (NULL: none): the load/store transport
 * inside the LSA team, else the RDMA one. Chosen by capability, so the order
 * of the transport list does not matter. */
MORI_API const mori_transport_ops_t *mori_comm_transport_for(const mori_comm_t *comm, int peer);
/* The transport that moves bulk copies to `peer` on copy engines (NULL: none). */
MORI_API const mori_transport_ops_t *mori_comm_copy_engine_for(const mori_comm_t *comm, int peer);
/* What the comm's transports provide for `peer` (mori_cap bits of
 * mori/plugin.h; load/store only inside the LSA team). */
MORI_API uint32_t mori_comm_peer_caps(const mori_comm_t *comm, int peer);
/* The load/store-reachable team: contiguous world ranks [base, base + size),
 * equal-sized on every rank, else just this rank. */
MORI_API void mori_comm_lsa(const mori_comm_t *comm, int *base, int *size, int *lsa_rank);

MORI_EXTERN_C_END

#endif
