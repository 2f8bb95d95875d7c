// SPDX-License-Identifier: MIT
/* One PE of the MPI test, started by mpirun. The program loads Open MPI
 * itself (as an MPI program would link it), initialises MPI, then shmem
 * over MPI_COMM_WORLD:
 *   mpi_pe ok        every call works; prints "PE r of n: ok"
 *   mpi_pe mismatch  the last rank passes npes + 1: every rank must fail
 *                    with MORI_EMISMATCH naming it; prints "PE r: refused: ..."
 * Exits non-zero on any unexpected result. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mori/shmem.h"
#include "mori/shmem_local_plugins.h"

typedef void *mpi_comm_t;

static int failures;

#define CHECK(cond, ...)                                       \
  do {                                                         \
    if (!(cond)) {                                             \
      failures++;                                              \
      printf("FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                     \
      printf("\n");                                            \
    }                                                          \
  } while (0)

static int run_ok(int rank, int size, mpi_comm_t world) {
  int rc = shmem_init_attr(MORI_SHMEM_INIT_WITH_MPI_COMM, rank, size, &world);
  CHECK(rc == 0, "%s", mori_last_error());
  if (rc) return 1;
  CHECK(shmem_mype() == rank && shmem_npes() == size, "mype %d npes %d", shmem_mype(), shmem_npes());
  uint64_t *buf = NULL;
  rc = shmem_malloc(sizeof(uint64_t) * (size_t)size, (void **)&buf);
  CHECK(rc == 0, "%s", mori_last_error());
  for (int pe = 0; buf && pe < size; pe++) {
    uint64_t *peer = shmem_ptr_p2p(buf, rank, pe);
    CHECK(peer != NULL, "PE %d: %s", pe, mori_last_error());
    if (peer) peer[rank] = 1000u * (uint64_t)rank + (uint64_t)pe;
  }
  CHECK(shmem_barrier_all() == 0, "%s", mori_last_error());
  for (int w = 0; buf && w < size; w++) CHECK(buf[w] == 1000u * (uint64_t)w + (uint64_t)rank, "from PE %d: %llu", w, (unsigned long long)buf[w]);
  CHECK(shmem_barrier_all() == 0, "%s", mori_last_error());
  CHECK(shmem_free(buf) == 0, "%s", mori_last_error());
  CHECK(shmem_finalize() == 0, "%s", mori_last_error());
  printf("PE %d of %d: ok\n", rank, size);
  return 0;
}

static int run_mismatch(int rank, int size, mpi_comm_t world) {
  int odd = size - 1;
  int rc = shmem_init_attr(MORI_SHMEM_INIT_WITH_MPI_COMM, rank, rank == odd ? size + 1 : size, &world);
  char want[128];
  snprintf(want, sizeof(want), "MPI rank %d passed npes %d, its communicator has %d ranks", odd, size + 1, size);
  CHECK(rc == MORI_EMISMATCH, "%s: %s", mori_err_name(rc), mori_last_error());
  CHECK(strstr(mori_last_error(), want) != NULL, "%s", mori_last_error());
  printf("PE %d: refused: %s\n", rank, mori_last_error());
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "ok";
  void *lib = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    printf("cannot load libmpi.so.40: %s\n", dlerror());
    return 2;
  }
  int (*mpi_init)(int *, char ***) = (int (*)(int *, char ***))dlsym(lib, "MPI_Init");
  int (*mpi_finalize)(void) = (int (*)(void))dlsym(lib, "MPI_Finalize");
  int (*comm_rank)(mpi_comm_t, int *) = (int (*)(mpi_comm_t, int *))dlsym(lib, "MPI_Comm_rank");
  int (*comm_size)(mpi_comm_t, int *) = (int (*)(mpi_comm_t, int *))dlsym(lib, "MPI_Comm_size");
  mpi_comm_t world = dlsym(lib, "ompi_mpi_comm_world"); /* MPI_COMM_WORLD in Open MPI */
  if (!mpi_init || !mpi_finalize || !comm_rank || !comm_size || !world) {
    printf("libmpi.so.40 is not Open MPI\n");
    return 2;
  }
  mpi_init(&argc, &argv);
  int rank = -1, size = 0;
  comm_rank(world, &rank);
  comm_size(world, &size);
  setenv("MORI_SHMEM_MODE", "vmm", 1);
  setenv("MORI_SHMEM_VMM_CHUNK_SIZE", "4M", 1);
  setenv("MORI_SHMEM_HEAP_SIZE", "64M", 1);
  setenv("MORI_BOOTSTRAP_TIMEOUT_MS", "20000", 1);
  CHECK(mori_shmem_use_local_plugins() == 0, "%s", mori_last_error());
  if (!strcmp(mode, "mismatch")) run_mismatch(rank, size, world);
  else run_ok(rank, size, world);
  fflush(stdout);
  mpi_finalize();
  return failures ? 1 : 0;
}
