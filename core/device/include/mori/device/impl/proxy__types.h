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

typedef struct mori_proxy_request {
  uint32_t op;
  int32_t peer;
  uint64_t dst_offset;
  uint64_t src_offset;
  uint64_t bytes_or_value;
  uint64_t ready; /* ticket + 1 once the fields above are written (release) */
} mori_proxy_request_t;

typedef struct mori_proxy_ring {
  uint64_t consumed; /* requests the proxy has taken (slots free again) */
  uint64_t done;     /* requests completed by the transport */
  uint64_t failed;   /* requests that failed (the host reports them) */
  uint64_t reserved[5];
  mori_proxy_request_t slot[MORI_PROXY_SLOTS];
} mori_proxy_ring_t;

#endif
