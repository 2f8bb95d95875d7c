// SPDX-License-Identifier: MIT
/* hello_window: the smallest complete mori program. Every rank allocates a
 * buffer, rendezvouses it into a window, writes a greeting into its slot of
 * every peer (through the flat-window arithmetic of the device API, here
 * running in CPU ranks), meets the others at a device-API barrier, and
 * reads what every peer wrote into its own buffer.
 *
 * Run it on 4 CPU ranks (host platform; the line below is run by CI as
 * written, tests/docs):
 *
 *   $ mori_launch -n 4 hello_window
 *
 * It links core, the posix_fd and fabric handle libraries and the p2p
 * transport, nothing else (no libibverbs, no hsa-runtime). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mori/comm.h"
#include "mori/device.h"
#include "mori/handle_fabric.h"
#include "mori/handle_posix_fd.h"
#include "mori/mem.h"
#include "mori/transport_p2p.h"
#include "mori/window.h"

enum { SLOT = 64 };

static int fail(const char *what, int rc) {
  fprintf(stderr, "hello_window: %s: %s (%s)\n", what, mori_last_error(), mori_err_name(rc));
  return 1;
}

int main(void) {
  mori_bootstrap_t *bootstrap = NULL;
  int rc = mori_bootstrap_tcp_from_env(&bootstrap);
  if (rc) return fail("bootstrap", rc);

  static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops};
  static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops};
  mori_comm_attr_t attr;
  mori_comm_attr_init(&attr);
  attr.bootstrap = bootstrap;
  attr.handles = handles;
  attr.num_handles = 2;
  attr.transports = transports;
  attr.num_transports = 1;
  mori_comm_t *comm = NULL;
  if ((rc = mori_comm_create(&attr, &comm)) != 0) return fail("comm", rc);
  int rank = mori_comm_rank(comm), size = mori_comm_size(comm);

  void *buf = NULL;
  mori_window_t *win = NULL;
  if ((rc = mori_mem_alloc((size_t)SLOT * size, NULL, &buf)) != 0) return fail("alloc", rc);
  if ((rc = mori_window_create(comm, buf, &win)) != 0) return fail("window", rc);
  mori_window_dev_t view = mori_window_device_view(win);

  char greeting[SLOT];
  for (int peer = 0; peer < size; peer++) {
    snprintf(greeting, sizeof(greeting), "hello from rank %d to rank %d", rank, peer);
    if ((rc = mori_put_thread(view, peer, (uint64_t)rank * SLOT, greeting, sizeof(greeting))) != 0)
      return fail("put", rc);
  }
  mori_quiet();
  if ((rc = mori_barrier_block(view, 0, 10ull * 1000 * 1000 * 1000)) != 0) {
    mori_window_check(win);
    return fail("barrier", rc);
  }
  int wrong = 0;
  for (int writer = 0; writer < size; writer++) {
    snprintf(greeting, sizeof(greeting), "hello from rank %d to rank %d", writer, rank);
    wrong += strcmp((const char *)buf + (size_t)writer * SLOT, greeting) != 0;
  }
  printf("rank %d of %d (%s handles, LSA team of %d): %d greetings received, %d wrong\n", rank, size,
         mori_handle_type_name(mori_comm_handle_type(comm)), view.lsa_size, size - wrong, wrong);
  mori_bootstrap_barrier(bootstrap);

  mori_window_destroy(win);
  mori_mem_free(buf);
  mori_comm_destroy(comm);
  mori_bootstrap_destroy(bootstrap);
  return wrong ? 1 : 0;
}
