/* Layouts of the collectives' device side: the context a kernel takes by
 * value and the per-call arguments. See mori/device/coll.h. */
#ifndef MORI_DEVICE_COLL_TYPES_H
#define MORI_DEVICE_COLL_TYPES_H

#include "mori/device/team.h"
#include "mori/device/window.h"

typedef enum mori_dtype {
  MORI_FLOAT32 = 0,
  MORI_BFLOAT16 = 1,
  MORI_FLOAT16 = 2,
} mori_dtype_t;

typedef enum mori_redop {
  MORI_REDOP_SUM = 0,
  MORI_REDOP_AVG = 1, /* the sum divided by the team size */
  MORI_REDOP_MAX = 2,
  MORI_REDOP_MIN = 3,
} mori_redop_t;

/* A collective context on the device: a workspace window and a team whose
 * members are all load/store reachable. Each rank's workspace holds
 *   [0, 64)                      epoch (u64) and arrived-blocks (u32): local only
 *   [flags_offset, +2*flag_slots*8)   flags, one set per parity, written by peers
 *   [data_offset, +data_bytes)        staging, two halves (parities)
 * A call takes the next epoch; parity = epoch & 1 picks the halves, so a
 * peer can run one call ahead without overwriting what this rank still
 * reads (it cannot run two ahead: every call needs every rank's data). */
typedef struct mori_coll_dev {
  mori_window_dev_t win;
  mori_team_t team;
  uint64_t *epoch;     /* this rank's count of calls (device memory) */
  uint32_t *arrived;   /* blocks that finished the current call */
  uint64_t flags_offset;
  uint64_t flag_slots; /* u64 flags per parity */
  uint64_t data_offset;
  uint64_t data_bytes; /* both halves */
  uint64_t timeout_ns; /* every wait; 0 waits forever (the abort flag still ends it) */
} mori_coll_dev_t;

/* all-to-all of `bytes` per team member: out[src] = src's in[me]. */
typedef struct mori_a2a_args {
  const char *in;
  char *out;
  uint64_t bytes;  /* per member */
  uint64_t slice;  /* bytes per slice, a multiple of 16 */
  uint32_t slices; /* per member */
  uint32_t items;  /* (2n - 1) * slices */
} mori_a2a_args_t;

enum mori_allreduce_algo {
  MORI_ALLREDUCE_LL = 0,    /* one shot; every 8 bytes travel with their arrival flag */
  MORI_ALLREDUCE_RS_AG = 1, /* reduce-scatter + all-gather in slices, each with a flag */
};

typedef struct mori_allreduce_args {
  const void *in;
  void *out;
  uint64_t count;      /* elements */
  uint32_t dtype;      /* mori_dtype_t */
  uint32_t op;         /* mori_redop_t */
  uint32_t algo;       /* mori_allreduce_algo */
  uint32_t items;
  /* LL: lines (8 bytes of data each) per item. */
  uint64_t lines_per_item;
  /* RS_AG: elements per part (a multiple of 8), per slice, slices per part. */
  uint64_t part_elems;
  uint64_t slice_elems;
  uint32_t slices;
  uint32_t reserved;
} mori_allreduce_args_t;

#endif
