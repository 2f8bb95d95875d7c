// SPDX-License-Identifier: MIT
/* getting_started_gpu: docs/getting-started.md, step 2. The program of step
 * 1 with the writes done by a GPU kernel over the device API: each rank
 * picks its GPU from MORI_LOCAL_RANK, allocates on it, makes the window,
 * and hands the window's device view to a kernel that writes every peer
 * and meets them at the device barrier. The same source runs on CPU ranks
 * (host platform), where the "kernel" is the calling thread.
 *
 *   $ mori_launch -n 2 getting_started_gpu
 *
 * On a machine with GPUs, build it with --config=cuda or --config=rocm and
 * start one rank per GPU (mori_launch -n <GPUs> getting_started_gpu).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "examples/getting_started_exchange.h"
#include "examples/getting_started_kernel.h"
#include "mori/comm.h"
#include "mori/handle_fabric.h"
#include "mori/handle_posix_fd.h"
#include "mori/mem.h"
#include "mori/runtime.h"
#include "mori/transport_p2p.h"
#include "mori/window.h"

enum { MAX_RANKS = 1024 };

static int fail(const char *what, int rc) {
  fprintf(stderr, "getting_started_gpu: %s: %s (%s)\n", what, mori_last_error(), mori_err_name(rc));
  return 1;
}

int main(void) {
  const char *local_var = getenv("MORI_LOCAL_RANK");
  if (!getenv("MORI_RANK") || !getenv("MORI_WORLD_SIZE") || !local_var) {
    fprintf(stderr, "getting_started_gpu: MORI_RANK, MORI_WORLD_SIZE and MORI_LOCAL_RANK are not set: run it under "
                    "mori_launch\n");
    return 2;
  }
  /* One GPU per rank on a node: the local rank chooses it, before mori
   * touches any device. */
  int device = gs_select_device(atoi(local_var));
  if (device < 0) {
    fprintf(stderr, "getting_started_gpu: %s\n", gs_last_error());
    return 1;
  }
  mori_bootstrap_t *bootstrap = NULL;
  int rc = mori_bootstrap_tcp_from_env(&bootstrap);
  if (rc) return fail("bootstrap", rc);

  static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops};
  static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops};
  mori_comm_attr_t attr;
  mori_comm_attr_init(&attr);
  attr.bootstrap = bootstrap;
  attr.device = device;
  attr.handles = handles;
  attr.num_handles = 2;
  attr.transports = transports;
  attr.num_transports = 1;
  mori_comm_t *comm = NULL;
  if ((rc = mori_comm_create(&attr, &comm)) != 0) return fail("comm", rc);
  int rank = mori_comm_rank(comm), size = mori_comm_size(comm);
  if (size > MAX_RANKS) return fail("size", MORI_ERANGE);

  mori_mem_attr_t mem_attr;
  mori_mem_attr_init(&mem_attr);
  mem_attr.device = device;
  void *buf = NULL;
  mori_window_t *win = NULL;
  if ((rc = mori_mem_alloc(sizeof(int64_t) * (size_t)size, &mem_attr, &buf)) != 0) return fail("alloc", rc);
  if ((rc = mori_window_create(comm, buf, &win)) != 0) return fail("window", rc);

  /* The device view: what a kernel needs to address every peer. */
  mori_window_dev_t view = mori_window_device_view(win);
  if ((rc = gs_run_exchange(view)) != 0) {
    mori_window_check(win); /* names what the kernel reported */
    fprintf(stderr, "getting_started_gpu: rank %d: the kernel failed: %s\n", rank, gs_last_error());
    return fail("exchange", rc);
  }

  static int64_t got[MAX_RANKS];
  if ((rc = mori_device_copy(device, got, buf, sizeof(int64_t) * (size_t)size)) != 0) return fail("copy back", rc);
  int wrong = 0;
  for (int writer = 0; writer < size; writer++) wrong += got[writer] != gs_value(writer, rank);
  printf("rank %d of %d on %s device %d: %d values from %d ranks, %d wrong\n", rank, size, mori_runtime_platform(),
         device, size - wrong, size, wrong);
  if ((rc = mori_bootstrap_barrier(bootstrap)) != 0) return fail("barrier", rc);

  mori_window_destroy(win);
  mori_mem_free(buf);
  mori_comm_destroy(comm);
  mori_bootstrap_destroy(bootstrap);
  return wrong ? 1 : 0;
}
