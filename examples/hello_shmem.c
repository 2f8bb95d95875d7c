// SPDX-License-Identifier: MIT
/* hello_shmem: the smallest complete MORI Shmem program. Rank 0 makes the
 * unique ID and hands it to the others through a file (the Shmem Guide's
 * single-machine recipe); every PE allocates one symmetric buffer, writes
 * a greeting into its slot of every peer's buffer through shmem_ptr_p2p,
 * meets the others at shmem_barrier_all, and reads what every peer wrote.
 *
 * Run it on 4 CPU PEs (host platform; the line below is run by CI as
 * written, tests/docs):
 *
 *   $ mori_launch -n 4 hello_shmem
 *
 * An optional argument names the ID file (default /tmp/mori_shmem_uid_<the
 * launcher's pid>). Rank and size come from MORI_RANK / MORI_WORLD_SIZE (or
 * RANK / WORLD_SIZE). The heap is 64 MiB unless MORI_SHMEM_HEAP_SIZE says
 * otherwise. It links shmem, the two handle libraries and the p2p
 * transport, nothing else (no libibverbs, no hsa-runtime, no libmpi). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mori/shmem.h"
#include "mori/shmem_local_plugins.h"

enum { SLOT = 64 };

static int fail(const char *what, int rc) {
  fprintf(stderr, "hello_shmem: %s: %s (%s)\n", what, mori_last_error(), mori_err_name(rc));
  return 1;
}

static int env_int(const char *a, const char *b) {
  const char *v = getenv(a);
  if (!v) v = getenv(b);
  return v ? atoi(v) : -1;
}

/* Rank 0 writes the ID whole and renames it into place; the others wait
 * for it (at most 60 s). */
static int share_id(int rank, const char *path, mori_shmem_uniqueid_t *id) {
  if (rank == 0) {
    int rc = shmem_get_unique_id(id);
    if (rc) return rc;
    char part[512];
    snprintf(part, sizeof(part), "%s.part", path);
    FILE *f = fopen(part, "wb");
    if (!f || fwrite(id->bytes, 1, sizeof(id->bytes), f) != sizeof(id->bytes) || fclose(f) != 0 || rename(part, path) != 0)
      return mori_error_report(MORI_EIO, "cannot write %s", path);
    return 0;
  }
  struct timespec pause = {0, 10 * 1000 * 1000};
  for (int i = 0; i < 6000 && access(path, R_OK) != 0; i++) nanosleep(&pause, NULL);
  unsigned char bytes[256];
  FILE *f = fopen(path, "rb");
  if (!f) return mori_error_report(MORI_ETIMEDOUT, "no unique ID at %s", path);
  size_t n = fread(bytes, 1, sizeof(bytes), f);
  fclose(f);
  return mori_shmem_uniqueid_from_bytes(bytes, n, id);
}

int main(int argc, char **argv) {
  int rank = env_int("MORI_RANK", "RANK"), size = env_int("MORI_WORLD_SIZE", "WORLD_SIZE");
  if (rank < 0 || size < 1) {
    fprintf(stderr, "hello_shmem: set MORI_RANK and MORI_WORLD_SIZE (mori_launch does)\n");
    return 2;
  }
  char path[256];
  if (argc > 1) snprintf(path, sizeof(path), "%s", argv[1]);
  else snprintf(path, sizeof(path), "/tmp/mori_shmem_uid_%d", (int)getppid());

  /* The Shmem Guide's static heap needs its size before init; this program
   * needs little. A size in the environment wins. */
  setenv("MORI_SHMEM_HEAP_SIZE", "64M", 0);
  int rc = mori_shmem_use_local_plugins();
  mori_shmem_uniqueid_t id;
  if (!rc) rc = share_id(rank, path, &id);
  if (rc) return fail("unique ID", rc);
  if ((rc = shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, rank, size, &id)) != 0) return fail("init", rc);
  int me = shmem_mype(), n = shmem_npes();

  char *buf = NULL;
  if ((rc = shmem_malloc((size_t)n * SLOT, (void **)&buf)) != 0) return fail("malloc", rc);
  for (int pe = 0; pe < n; pe++) {
    char *peer = shmem_ptr_p2p(buf, me, pe);
    if (!peer) return fail("ptr_p2p", MORI_EUNREACHABLE);
    snprintf(peer + me * SLOT, SLOT, "hello from %d to %d", me, pe);
  }
  if ((rc = shmem_barrier_all()) != 0) return fail("barrier", rc);
  int wrong = 0;
  for (int pe = 0; pe < n; pe++) {
    char want[SLOT];
    snprintf(want, sizeof(want), "hello from %d to %d", pe, me);
    wrong += strcmp(buf + pe * SLOT, want) != 0;
  }
  printf("PE %d of %d: %d greetings, %d wrong\n", me, n, n, wrong);
  if ((rc = shmem_barrier_all()) != 0) return fail("barrier", rc);
  if ((rc = shmem_free(buf)) != 0) return fail("free", rc);
  shmem_finalize();
  if (rank == 0) unlink(path);
  return wrong ? 1 : 0;
}
