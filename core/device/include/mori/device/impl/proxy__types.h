// SPDX-License-Identifier: MIT
/* The request ring between kernels (or CPU ranks) and a host proxy thread
 * that posts their operations to a transport the device cannot drive itself
 * (RDMA without GPU-initiated posting). One ring per window, in host memory
 * the device can reach; tickets are taken from a counter in device memory. */
#ifndef MORI_DEVICE_IMPL_PROXY_TYPES_H
#define MORI_DEVICE_IMPL_PROXY_TYPES_H

#include "mori/device/portability.h"

#define MORI_PROXY_SLOTS 1024

enum mori_proxy_op {
  MORI_PROXY_PUT = 1,        /* local window [src_offset] -> peer window [dst_offset] */
  MORI_PROXY_GET = 2,        /* peer window [src_offset] -> local window [dst_offset] */
  MORI_PROXY_ATOMIC_ADD = 3, /* peer window [dst_offset] += value (uint64) */
  MORI_PROXY_SIGNAL_SET = 4, /* peer window [dst_offset] = value (uint64), after earlier puts */
};

/* Offsets are into the registered segment (the window's offset in it
 * added); window_offset and window_size say which part of the segment is the
 * window, so the proxy refuses a request that leaves it, as the host API
 * does (a heap chunk holds other windows behind it). */
typedef struct mori_proxy_request {
  uint32_t op;
  int32_t peer;
  uint64_t dst_offset;
  uint64_t src_offset;
  uint64_t bytes_or_value;
  uint64_t window_offset;
  uint64_t window_size;
  uint64_t ready; /* ticket + 1 once the fields above are written (release) */
} mori_proxy_request_t;

/* A request the proxy refused because it left its window. The proxy
 * writes the fields only while count == reported (the last one was taken),
 * then bumps count; mori_proxy_quiet takes it into the window's mailbox
 * and sets reported = count. */
typedef struct mori_proxy_refusal {
  uint32_t op;
  int32_t peer;
  uint64_t offset; /* into the window (the side that left it) */
  uint64_t bytes;
  uint64_t window_size;
  uint32_t count;    /* refusals so far */
  uint32_t reported; /* count when the last one was taken into the mailbox */
} mori_proxy_refusal_t;

typedef struct mori_proxy_ring {
  uint64_t consumed; /* requests the proxy has taken (slots free again) */
  uint64_t done;     /* every ticket below it has completed (the first not yet complete) */
  uint64_t failed;   /* requests that failed (the host reports them) */
  mori_proxy_refusal_t refused;
  mori_proxy_request_t slot[MORI_PROXY_SLOTS];
} mori_proxy_ring_t;

/* The mailbox record of a refusal (code MORI_DEVICE_ERANGE): channel
 * MORI_PROXY_REFUSED_CHANNEL + op, expected = offset, seen = bytes,
 * waited_ns = the window's size. */
#define MORI_PROXY_REFUSED_CHANNEL 0x70000000u

#endif
