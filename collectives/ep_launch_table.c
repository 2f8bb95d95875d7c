// SPDX-License-Identifier: MIT
/* The launch shapes MORI_EP_LAUNCH_CONFIG_MODE=AUTO picks, by (architecture,
 * world size, dispatch dtype, tokens, hidden). A row matches when its arch
 * is the device's (or "*"), its world size and dtype are the call's (or -1)
 * and tokens and hidden are at most its bounds (0: any); the first match
 * wins. `tests/gpu/bench_ep --tune` measures shapes on a device and prints
 * rows in this form. blocks 0: every block the device keeps resident. */
#include <string.h>

#include "collectives/ep_internal.h"

typedef struct ep_table_row {
  const char *arch;
  int world_size, dtype;
  uint32_t max_tokens, max_hidden;
  uint32_t blocks, warps;
} ep_table_row_t;

static const ep_table_row_t rows[] = {
    /* Defaults until measured rows are added: small calls on fewer blocks
     * (less time in the grid-wide arrival), large ones on every block. */
    {"*", -1, -1, 256, 0, 32, 8},
    {"*", -1, -1, 0, 0, 0, 16},
};

int mori_ep_table_shape(const char *arch, int world_size, int dtype, uint32_t tokens, uint32_t hidden, mori_ep_shape_t *out) {
  for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
    const ep_table_row_t *r = &rows[i];
    if (strcmp(r->arch, "*") && strcmp(r->arch, arch)) continue;
    if ((r->world_size >= 0 && r->world_size != world_size) || (r->dtype >= 0 && r->dtype != dtype)) continue;
    if ((r->max_tokens && tokens > r->max_tokens) || (r->max_hidden && hidden > r->max_hidden)) continue;
    out->blocks = r->blocks;
    out->warps = r->warps;
    return 1;
  }
  return 0;
}
