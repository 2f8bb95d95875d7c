// SPDX-License-Identifier: MIT
/* MORI_SHMEM_INIT_WITH_MPI_COMM (mpi.c): the unique ID travels over the
 * program's MPI communicator. Open MPI is loaded at run time (dlopen), so
 * programs that do not use MPI neither link nor need libmpi. */
#ifndef MORI_SHMEM_INTERNAL_MPI_H
#define MORI_SHMEM_INTERNAL_MPI_H

#include "mori/shmem.h"

MORI_EXTERN_C_BEGIN

/* Collective over the communicator `*(MPI_Comm *)comm`, one MPI_Allgather
 * (core's agreement, core/internal/agreement.h): each rank checks that its
 * (rank, npes) are its MPI rank and the communicator's size, rank 0 makes
 * the ID; a rank whose check failed (or rank 0 when it could not make the
 * ID) is named on every rank with its message. MORI_ENOTSUP when Open
 * MPI cannot be loaded (MORI_MPI_LIBRARY names another libmpi), MORI_EINVAL
 * when MPI is not initialised. */
int mori_shmem_mpi_unique_id(const void *comm, int rank, int npes, mori_shmem_uniqueid_t *out);

MORI_EXTERN_C_END

#endif
