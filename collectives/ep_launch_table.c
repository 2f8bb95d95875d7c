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
    /* Measured on one H200 (sm_90), world size 1, bf16, 4096 tokens x 7168
     * (bench_ep with MORI_BENCH_EP_TUNE=1; docs/perf/h200x1_ep.jsonl):
     * dispatch + combine 120.6 us at 132 x 16, against 121 at 264 x 16 or
     * 32 warps, 141 at every resident block with 4 warps, 453 at 16 x 16. */
    {"sm_90", 1, 1, 4096, 7168, 132, 16},
    /* Defaults where nothing was measured: small calls on fewer blocks
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
