// SPDX-License-Identifier: MIT
/* See internal/mpi.h. Open MPI's ABI: handles are pointers, MPI_BYTE is the
 * address of the exported object ompi_mpi_byte (what mpi.h's macro names).
 * MPICH's integer handles are a different ABI and are not supported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/dynlib.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "shmem/internal/mpi.h"

typedef void *mpi_handle_t; /* MPI_Comm, MPI_Datatype */

/* X(field, symbol) */
#define MPI_SYMBOLS(X)                  \
  X(initialized, "MPI_Initialized")     \
  X(finalized, "MPI_Finalized")         \
  X(comm_rank, "MPI_Comm_rank")         \
  X(comm_size, "MPI_Comm_size")         \
  X(allgather, "MPI_Allgather")         \
  X(bcast, "MPI_Bcast")                 \
  X(byte, "ompi_mpi_byte")

static struct {
  int (*initialized)(int *flag);
  int (*finalized)(int *flag);
  int (*comm_rank)(mpi_handle_t comm, int *rank);
  int (*comm_size)(mpi_handle_t comm, int *size);
  int (*allgather)(const void *send, int send_count, mpi_handle_t send_type, void *recv, int recv_count,
                   mpi_handle_t recv_type, mpi_handle_t comm);
  int (*bcast)(void *buf, int count, mpi_handle_t type, int root, mpi_handle_t comm);
  void *byte; /* MPI_BYTE */
} mpi;

static int load_mpi(void) {
  if (mpi.bcast) return 0;
  const char *forced = mori_env_string("MORI_MPI_LIBRARY");
  const char *names[] = {forced && *forced ? forced : "libmpi.so.40", "libmpi.so.40", "libmpi.so", NULL};
  static const mori_dynlib_symbol_t symbols[] = {
#define MPI_ENTRY(field, symbol) MORI_DYNLIB_ENTRY(mpi, field, symbol)
      MPI_SYMBOLS(MPI_ENTRY)
#undef MPI_ENTRY
  };
  int rc = mori_dynlib_load(names, symbols, sizeof(symbols) / sizeof(symbols[0]), MORI_ENOTSUP, NULL);
  if (rc)
    return mori_error_context(rc, "MORI_SHMEM_INIT_WITH_MPI_COMM needs Open MPI's libmpi (Debian: libopenmpi3; "
                                  "MORI_MPI_LIBRARY names another)");
  return 0;
}

struct mpi_claim {
  int32_t rank, npes;         /* what the caller passed */
  int32_t mpi_rank, mpi_size; /* what the communicator says */
};

struct mpi_id {
  int32_t rc;
  char why[220];
  mori_shmem_uniqueid_t id;
};

/* Same verdict on every rank: the first rank whose claim is wrong. */
static int check_claims(const struct mpi_claim *all, int size) {
  for (int r = 0; r < size; r++) {
    if (all[r].npes != all[r].mpi_size)
      return mori_error_set(MORI_EMISMATCH, "MPI rank %d passed npes %d, its communicator has %d ranks", all[r].mpi_rank,
                            all[r].npes, all[r].mpi_size);
    if (all[r].rank != all[r].mpi_rank)
      return mori_error_set(MORI_EMISMATCH, "MPI rank %d passed rank %d (shmem ranks are the communicator's ranks)",
                            all[r].mpi_rank, all[r].rank);
  }
  return 0;
}

int mori_shmem_mpi_unique_id(const void *comm_ptr, int rank, int npes, mori_shmem_uniqueid_t *out) {
  int rc = load_mpi();
  if (rc) return rc;
  int up = 0, down = 0;
  mpi.initialized(&up);
  mpi.finalized(&down);
  if (!up || down)
    return mori_error_set(MORI_EINVAL, "MORI_SHMEM_INIT_WITH_MPI_COMM: MPI is %s in this process",
                          down ? "already finalised" : "not initialised (call MPI_Init first)");
  mpi_handle_t comm = *(const mpi_handle_t *)comm_ptr;
  struct mpi_claim me = {rank, npes, -1, -1};
  if (mpi.comm_rank(comm, &me.mpi_rank) != 0 || mpi.comm_size(comm, &me.mpi_size) != 0 || me.mpi_size < 1)
    return mori_error_set(MORI_EINVAL, "MORI_SHMEM_INIT_WITH_MPI_COMM: the argument is not a valid MPI communicator");
  struct mpi_claim *all = calloc((size_t)me.mpi_size, sizeof(*all));
  if (!all) return mori_error_set(MORI_ENOMEM, "MPI claims");
  if (mpi.allgather(&me, (int)sizeof(me), mpi.byte, all, (int)sizeof(me), mpi.byte, comm) != 0)
    rc = mori_error_set(MORI_EIO, "MORI_SHMEM_INIT_WITH_MPI_COMM: MPI_Allgather failed");
  if (!rc) rc = check_claims(all, me.mpi_size);
  free(all);
  if (rc) return rc;
  struct mpi_id msg;
  memset(&msg, 0, sizeof(msg));
  if (me.mpi_rank == 0) {
    msg.rc = shmem_get_unique_id(&msg.id);
    if (msg.rc) snprintf(msg.why, sizeof(msg.why), "%s", mori_last_error());
  }
  if (mpi.bcast(&msg, (int)sizeof(msg), mpi.byte, 0, comm) != 0)
    return mori_error_set(MORI_EIO, "MORI_SHMEM_INIT_WITH_MPI_COMM: MPI_Bcast of the unique ID failed");
  if (msg.rc) return mori_error_set(msg.rc, "MPI rank 0 could not make the unique ID: %.*s", (int)sizeof(msg.why), msg.why);
  *out = msg.id;
  return 0;
}
