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
#include "core/internal/agreement.h"
#include "shmem/internal/mpi.h"

typedef void *mpi_handle_t; /* MPI_Comm, MPI_Datatype */

/* X(field, symbol) */
#define MPI_SYMBOLS(X)                  \
  X(initialized, "MPI_Initialized")     \
  X(finalized, "MPI_Finalized")         \
  X(comm_rank, "MPI_Comm_rank")         \
  X(comm_size, "MPI_Comm_size")         \
  X(allgather, "MPI_Allgather")         \
  X(byte, "ompi_mpi_byte")

static struct {
  int (*initialized)(int *flag);
  int (*finalized)(int *flag);
  int (*comm_rank)(mpi_handle_t comm, int *rank);
  int (*comm_size)(mpi_handle_t comm, int *size);
  int (*allgather)(const void *send, int send_count, mpi_handle_t send_type, void *recv, int recv_count,
                   mpi_handle_t recv_type, mpi_handle_t comm);
  void *byte; /* MPI_BYTE */
} mpi;

static int load_mpi(void) {
  if (mpi.allgather) return 0;
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

/* What every MPI rank sends in the one exchange: its status (its claim
 * checked against its communicator; on rank 0, making the unique ID too)
 * and, from rank 0, the ID. */
struct mpi_start {
  mori_agreement_note_t note;
  mori_shmem_uniqueid_t id;
};

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
  int mpi_rank = -1, mpi_size = -1;
  if (mpi.comm_rank(comm, &mpi_rank) != 0 || mpi.comm_size(comm, &mpi_size) != 0 || mpi_size < 1)
    return mori_error_set(MORI_EINVAL, "MORI_SHMEM_INIT_WITH_MPI_COMM: the argument is not a valid MPI communicator");
  struct mpi_start me;
  memset(&me, 0, sizeof(me));
  int status = 0;
  if (npes != mpi_size)
    status = mori_error_set(MORI_EMISMATCH, "MPI rank %d passed npes %d, its communicator has %d ranks", mpi_rank, npes,
                            mpi_size);
  else if (rank != mpi_rank)
    status = mori_error_set(MORI_EMISMATCH, "MPI rank %d passed rank %d (shmem ranks are the communicator's ranks)",
                            mpi_rank, rank);
  else if (mpi_rank == 0)
    status = shmem_get_unique_id(&me.id);
  char own[1024];
  snprintf(own, sizeof(own), "%s", status ? mori_last_error() : "");
  mori_agreement_note_fill(&me.note, status);
  struct mpi_start *all = calloc((size_t)mpi_size, sizeof(*all));
  if (!all) return mori_error_set(MORI_ENOMEM, "MORI_SHMEM_INIT_WITH_MPI_COMM: MPI rank %d's table", mpi_rank);
  if (mpi.allgather(&me, (int)sizeof(me), mpi.byte, all, (int)sizeof(me), mpi.byte, comm) != 0)
    rc = mori_error_set(MORI_EIO, "MORI_SHMEM_INIT_WITH_MPI_COMM: MPI_Allgather failed");
  if (!rc)
    rc = mori_agreement_verdict(&all[0].note, sizeof(all[0]), mpi_size, mpi_rank, own, "MORI_SHMEM_INIT_WITH_MPI_COMM",
                                "MPI rank");
  if (!rc) *out = all[0].id;
  free(all);
  return rc;
}
