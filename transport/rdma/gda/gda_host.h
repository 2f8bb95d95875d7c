// SPDX-License-Identifier: MIT
/* GPU-initiated posting, the host side (for transport/rdma's own files):
 *   probe.c   per comm: can kernels drive this NIC's queues? (the provider's
 *             mlx5dv_init_obj, else libmlx5's for a ConnectX; the queues and
 *             the doorbell page mapped for the GPU); MORI_RDMA_GDA; the
 *             choice, agreed by every rank, and why
 *   queues.c  the comm's GPU-posting queue pairs (one CQ each), connected,
 *             described for kernels (mori_gda_qp_t), torn down
 *   map.c     host memory of the NIC's (queues, doorbell records, the
 *             doorbell page) mapped for the comm's device, each page once
 *   window.c  per registered segment: the window's table (keys, addresses)
 *             that mori_window_dev_t.gda points at */
#ifndef MORI_TRANSPORT_RDMA_GDA_HOST_H
#define MORI_TRANSPORT_RDMA_GDA_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mori/device/impl/gda__types.h"
#include "transport/rdma/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

enum rdma_gda_mode { RDMA_GDA_AUTO = 0, RDMA_GDA_ON = 1, RDMA_GDA_OFF = 2 };

/* map.c: ranges of host memory to map for the device, merged by page. */
struct rdma_gda_map {
  int device;
  size_t n, cap;
  struct rdma_gda_range {
    uintptr_t base, end; /* page-aligned */
    bool io;
    bool registered;     /* mapped by us (else its owner had pinned and mapped it) */
    char *dev;           /* the device's address of base, once mapped */
    bool in_device;      /* device memory (the provider's): exact bounds, not registered */
  } *r;
};
int rdma_gda_map_add(struct rdma_gda_map *m, const void *p, size_t size, bool io);
/* Maps every range added (merged where pages touch); names the first that fails. */
int rdma_gda_map_commit(struct rdma_gda_map *m);
/* The device's address of host `p` (added and committed before), or NULL. */
void *rdma_gda_map_dev(const struct rdma_gda_map *m, const void *p);
/* Whether `p` (added before) lies in device memory. */
bool rdma_gda_map_in_device(const struct rdma_gda_map *m, const void *p);
void rdma_gda_map_release(struct rdma_gda_map *m);

typedef int (*rdma_gda_init_obj_fn)(struct mlx5dv_obj *obj, uint64_t obj_type);

struct rdma_gda {
  int mode;
  bool enabled;
  char why[256];            /* why GPU posting or why the proxy */
  uint32_t depth;           /* work requests per QP */
  rdma_gda_init_obj_fn init_obj;
  const char *init_obj_from; /* "the provider's" or "libmlx5's" */
  struct ibv_qp **qp;       /* [peer * num_qp + i], NULL where none */
  struct ibv_cq **cq;
  mori_gda_qp_t *desc;      /* host copy of the descriptors */
  mori_gda_qp_t *desc_dev;  /* the kernels' (device memory) */
  uint64_t *sink;           /* per QP: a non-fetching atomic's old value lands here */
  struct ibv_mr *sink_mr;
  struct rdma_gda_map map;
  size_t queues_in_device;  /* QPs whose send ring and record are in device memory */
};

/* probe.c: rdma_gda_init, rdma_gda_fini (declared in ../internal.h, the
 * transport's own header, so the transport includes nothing of gda's). */

/* queues.c */
int rdma_gda_create_queues(struct rdma_state *s, struct rdma_gda *g, char *why, size_t why_len);
int rdma_gda_connect_queues(struct rdma_state *s, struct rdma_gda *g, const struct rdma_endpoint *me, const char *all,
                            size_t entry, const uint32_t *their_qpns, size_t their_stride);
void rdma_gda_destroy_queues(struct rdma_state *s, struct rdma_gda *g);

/* window.c: rdma_gda_window, rdma_gda_window_free (../internal.h). */

#ifdef __cplusplus
}
#endif

#endif
