// SPDX-License-Identifier: MIT
/* Layouts of GPU-initiated RDMA (mori/device/gda.h): what a kernel needs to
 * drive a NIC's queues itself. The host side (the .c files of transport/rdma/gda) fills
 * them from the provider's description of each queue pair (for a ConnectX,
 * mlx5dv_init_obj) and places them in device memory; kernels read the
 * descriptors and move the counters with device-memory atomics.
 *
 * Counters are 64-bit and never wrap in practice; the NIC sees their low
 * bits (16 for the send queue's producer index, 24 for the CQ's consumer
 * index), which is why a queue holds at most 2^15 work requests. */
#ifndef MORI_DEVICE_IMPL_GDA_TYPES_H
#define MORI_DEVICE_IMPL_GDA_TYPES_H

#include "mori/device/portability.h"

/* The NIC families whose queues the device layer can write: one file of
 * encoders per family (impl/gda_<family>__funcs.h), chosen by this tag.
 * Only ConnectX (mlx5) is built; docs/multinode.md says what a port takes. */
enum mori_gda_family {
  MORI_GDA_FAMILY_NONE = 0,
  MORI_GDA_FAMILY_MLX5 = 1,
};

/* Every WQE the device layer writes fits one 64-byte basic block (control +
 * remote address + data, atomic or up to MORI_GDA_MAX_INLINE inline bytes):
 * a WQE's index is its basic block's. */
#define MORI_GDA_WQE_BYTES 64
#define MORI_GDA_MAX_INLINE 28
#define MORI_GDA_CQE_BYTES 64
/* The deepest send queue the 16-bit WQE counter of a completion still names
 * without doubt (half its range). */
#define MORI_GDA_MAX_WQE_CNT 32768u

/* One queue pair as a kernel drives it: the send queue it writes and the
 * completion queue it polls (one CQ per QP, at least as deep as the send
 * queue, so it never overflows), and the counters claimants share. Lives in
 * device memory; the host never touches the counters after setup. */
typedef struct mori_gda_qp {
  /* Send queue (from the provider). */
  uint8_t *sq_buf;   /* wqe_cnt * MORI_GDA_WQE_BYTES */
  uint32_t *sq_dbrec; /* the send doorbell record (big-endian producer index) */
  uint64_t *bf_reg;  /* the doorbell (BlueFlame) register, 8-byte writes */
  uint32_t wqe_cnt;  /* power of two, <= MORI_GDA_MAX_WQE_CNT */
  uint32_t qpn;
  /* Completion queue (from the provider). */
  uint8_t *cq_buf;    /* cqe_cnt * MORI_GDA_CQE_BYTES */
  uint32_t *cq_dbrec; /* the CQ's consumer-index record (big-endian) */
  uint32_t cqe_cnt;   /* power of two, >= wqe_cnt */
  uint32_t family;    /* enum mori_gda_family */
  /* 1: the send queue's ring and doorbell record are in this GPU's memory
   * (the NIC reads them through the GPU's L2), so GPU-scope releases order
   * them; 0: host memory, system-scope releases (a PCIe round trip each). */
  uint32_t sq_in_device;
  /* Keys: the segment's local key (for local buffers) is per window; a
   * per-QP 8-byte sink for the result of a non-fetching atomic. */
  uint64_t sink_addr;
  uint32_t sink_lkey;
  int32_t peer;       /* world rank at the other end */
  /* Shared counters (device memory; atomics). */
  uint64_t reserved;  /* WQEs claimed: a claimant owns [old, old + n) */
  uint64_t rung;      /* WQEs whose doorbell has been rung, in claim order */
  uint64_t completed; /* WQEs known complete (a completion of WQE k completes every earlier one) */
  uint64_t cq_claimed;  /* CQEs claimed by pollers */
  uint64_t cq_consumed; /* CQEs whose consumption the CQ's record shows, in order */
  uint32_t failed;    /* 0, or 0x100 | the syndrome of the first error completion (the QP is in error),
                       * | MORI_GDA_QP_ABANDONED once a claimant gave up its turn (mori_gda_wait_turn) */
  uint32_t reserved0;
  /* 0, or the first error completion (MORI_GDA_ERROR_DETAIL), written
   * before `failed` marks it: a call that finds the QP failed leaves its
   * record in the caller's window (the QPs are every window's). */
  uint64_t error_detail;
} mori_gda_qp_t;

/* mori_gda_qp_t.error_detail: the completed WQE's counter, the syndrome and
 * the vendor syndrome, never 0. */
#define MORI_GDA_ERROR_DETAIL(wqe_counter, syndrome, vendor_syndrome)                                          \
  ((1ull << 63) | ((uint64_t)((syndrome) & 0xffu) << 48) | ((uint64_t)((wqe_counter) & 0xffffu) << 32) | \
   (uint64_t)(uint32_t)(vendor_syndrome))

/* In mori_gda_qp_t.failed: a claimant timed out waiting for its turn after
 * its claim, so the QP's counters can no longer move. */
#define MORI_GDA_QP_ABANDONED 0x200u

/* Per window (device memory): everything a kernel needs to reach a peer's
 * part of the window over RDMA. The QPs are the comm's (every window of the
 * comm shares them and their counters); the keys are this window's
 * segment's. peer_qp[peer * num_qp + i]; a peer without QPs has wqe_cnt 0. */
typedef struct mori_gda_window {
  mori_gda_qp_t *qp;
  uint64_t *remote_base; /* per world rank: the segment's address on that rank */
  uint32_t *rkey;        /* per world rank: the segment's remote key there */
  uint32_t *next_qp;     /* per world rank: round robin over its QPs (device memory) */
  uint64_t local_base;   /* this rank's segment, as registered */
  uint64_t local_size;
  uint32_t lkey;
  int32_t num_qp;
  int32_t world_size;
  int32_t reserved0;
} mori_gda_window_t;

/* A decoded completion (any family). */
typedef struct mori_gda_cqe {
  uint32_t opcode;     /* the family's completion opcode */
  uint32_t error;      /* non-zero: an error completion */
  uint32_t syndrome;   /* error completions: the NIC's status */
  uint32_t vendor_syndrome;
  uint32_t qpn;
  uint16_t wqe_counter; /* the completed WQE's index, low 16 bits */
} mori_gda_cqe_t;

/* The error code and mailbox channels of GPU posting (MORI_DEVICE_EIO,
 * MORI_GDA_*_CHANNEL) are the mailbox's: mori/device/impl/report__funcs.h. */

#endif
