// SPDX-License-Identifier: MIT
/* `mori_info`: what this build of mori finds on this machine and what it
 * would choose — version and platform, devices and their architecture, the
 * handle types the device can create and export, the transports and why an
 * unavailable one is, the heap's settings, every MORI_* variable set with
 * its parsed value (and a warning for a name mori does not know) — and,
 * under a launcher, how each rank reaches each peer. The mori_info program
 * and `python -m mori.info` both print it through this one function. */
#ifndef MORI_INFO_H
#define MORI_INFO_H

#include "mori/error.h"

MORI_EXTERN_C_BEGIN

enum {
  MORI_INFO_JSON = 1u << 0, /* one JSON document instead of text */
  /* Collective over the ranks the launcher's environment describes
   * (mori_bootstrap_tcp_from_env): makes a comm with every transport and
   * handle library of libmori.so and adds the per-peer table (LSA team,
   * transport and why, rail, NIC) of every rank. Rank 0 writes the whole
   * report; the other ranks write nothing (when the comm cannot be made,
   * each rank writes its own report, which says why). */
  MORI_INFO_COMM = 1u << 1,
};

/* Writes the report to `fd`. 0, or a negative MORI_E* when the report could
 * not be made or written (with --comm: the comm could not be made; the
 * report then still says what was found). Unknown or malformed MORI_*
 * variables are reported, not failed. */
MORI_API int mori_info_write(int fd, unsigned flags);

MORI_EXTERN_C_END

#endif
