// SPDX-License-Identifier: MIT
/* Step 2 of docs/getting-started.md for CPU ranks (host platform): the same
 * kernel body, run by the calling thread as a block of one. */
#include "examples/getting_started_exchange.h"
#include "examples/getting_started_kernel.h"

const char *gs_last_error(void) { return ""; }

int gs_select_device(int local_rank) {
  (void)local_rank;
  return 0; /* CPU ranks share one device, 0 */
}

int gs_run_exchange(mori_window_dev_t view) { return gs_exchange(view); }
