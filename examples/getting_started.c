// SPDX-License-Identifier: MIT
/* getting_started: the program of docs/getting-started.md, step 1. Every
 * rank allocates a buffer of one slot per rank, makes it a window (one
 * collective call), writes a value into its own slot of every peer's buffer
 * through the window's peer pointers, meets the others, and checks what
 * every peer wrote into its buffer. CPU ranks (host platform): the peer
 * pointers are plain addresses the host writes; step 2
 * (getting_started_gpu.c) does the same from a GPU kernel.
 *
 *   $ mori_launch -n 2 getting_started
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "mori/comm.h"
#include "mori/handle_fabric.h"
#include "mori/handle_posix_fd.h"
#include "mori/mem.h"
#include "mori/transport_p2p.h"
#include "mori/version.h"
#include "mori/window.h"

static int fail(const char *what, int rc) {
  fprintf(stderr, "getting_started: %s: %s (%s)\n", what, mori_last_error(), mori_err_name(rc));
  return 1;
}

/* What rank `writer` leaves in rank `reader`'s buffer. */
static int64_t value(int writer, int reader) { return 1000 * (int64_t)writer + reader; }

int main(void) {
  /* The launcher (mori_launch, or a cluster launcher) sets these, and the
   * bootstrap's address and secret; the bootstrap reads them. */
  const char *rank_var = getenv("MORI_RANK"), *size_var = getenv("MORI_WORLD_SIZE"),
             *local_var = getenv("MORI_LOCAL_RANK");
  if (!rank_var || !size_var) {
    fprintf(stderr, "getting_started: MORI_RANK and MORI_WORLD_SIZE are not set: run it under mori_launch\n");
    return 2;
  }
  mori_bootstrap_t *bootstrap = NULL;
  int rc = mori_bootstrap_tcp_from_env(&bootstrap);
  if (rc) return fail("bootstrap", rc);

  /* The comm: which handle libraries move memory between processes and
   * which transports reach peers. The program lists what it links. */
  static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops};
  static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops};
  mori_comm_attr_t attr;
  mori_comm_attr_init(&attr);
  attr.bootstrap = bootstrap;
  attr.device = -1; /* the current device; CPU ranks have one, device 0 */
  attr.handles = handles;
  attr.num_handles = 2;
  attr.transports = transports;
  attr.num_transports = 1;
  mori_comm_t *comm = NULL;
  if ((rc = mori_comm_create(&attr, &comm)) != 0) return fail("comm", rc);
  int rank = mori_comm_rank(comm), size = mori_comm_size(comm);

  /* Local allocation, then the window: collective, every rank's buffer. */
  int64_t *buf = NULL;
  mori_window_t *win = NULL;
  if ((rc = mori_mem_alloc(sizeof(int64_t) * (size_t)size, NULL, (void **)&buf)) != 0) return fail("alloc", rc);
  if ((rc = mori_window_create(comm, buf, &win)) != 0) return fail("window", rc);

  for (int peer = 0; peer < size; peer++) {
    int64_t *theirs = mori_window_peer_ptr(win, peer); /* NULL: no load/store path to that peer */
    if (!theirs) return fail("peer pointer", MORI_EUNREACHABLE);
    theirs[rank] = value(rank, peer);
  }
  if ((rc = mori_bootstrap_barrier(bootstrap)) != 0) return fail("barrier", rc); /* every write is in */

  int wrong = 0;
  for (int writer = 0; writer < size; writer++) wrong += buf[writer] != value(writer, rank);
  printf("rank %d of %d (local rank %s, mori %s): %d values from %d ranks, %d wrong\n", rank, size,
         local_var ? local_var : "?", mori_version(), size - wrong, size, wrong);
  if ((rc = mori_bootstrap_barrier(bootstrap)) != 0) return fail("barrier", rc); /* nobody reads any more */

  mori_window_destroy(win);
  mori_mem_free(buf);
  mori_comm_destroy(comm);
  mori_bootstrap_destroy(bootstrap);
  return wrong ? 1 : 0;
}
