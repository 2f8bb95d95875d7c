// SPDX-License-Identifier: MIT
/* The ConnectX (mlx5) part of GPU-initiated posting: WQE segments and the
 * CQE64 as the ConnectX programmer's reference manual lays them out (the
 * layouts rdma-core's mlx5dv.h publishes: mlx5_wqe_ctrl_seg,
 * mlx5_wqe_raddr_seg, mlx5_wqe_data_seg, mlx5_wqe_atomic_seg,
 * mlx5_wqe_inl_data_seg, mlx5_cqe64, mlx5_err_cqe), every multi-byte field
 * big-endian; the doorbell (the doorbell record, then an 8-byte write of the
 * control segment to the BlueFlame register); the CQ's owner bit and its
 * consumer-index record. Plain C over bytes: no mlx5dv.h here (kernels do
 * not include rdma-core); tests/gda checks every byte against mlx5dv.h's own
 * helpers. Another NIC family gets a file like this one (gda__funcs.h's
 * table says which functions). */
#ifndef MORI_DEVICE_IMPL_GDA_MLX5_FUNCS_H
#define MORI_DEVICE_IMPL_GDA_MLX5_FUNCS_H

#include "mori/device/impl/gda__types.h"

/* Opcodes and flags (PRM; the same values as mlx5dv.h's enums). */
#define MORI_MLX5_OPCODE_RDMA_WRITE 0x08u
#define MORI_MLX5_OPCODE_RDMA_READ 0x10u
#define MORI_MLX5_OPCODE_ATOMIC_FA 0x12u
#define MORI_MLX5_CTRL_CQ_UPDATE 0x08u /* fm_ce_se: a completion for this WQE */
#define MORI_MLX5_CTRL_FENCE 0x80u     /* fm_ce_se: after earlier reads and atomics of the QP */
#define MORI_MLX5_INLINE_SEG 0x80000000u
#define MORI_MLX5_CQE_REQ 0u
#define MORI_MLX5_CQE_REQ_ERR 13u
#define MORI_MLX5_CQE_RESP_ERR 14u
#define MORI_MLX5_CQE_INVALID 15u
/* Syndrome of a request flushed because its QP had already failed. */
#define MORI_MLX5_SYNDROME_WR_FLUSH_ERR 0x05u

/* Byte order. The devices mori runs on (and x86/arm64 hosts) are
 * little-endian; the NIC's structures are big-endian. Shifts, not
 * builtins: every compiler reading this turns them into one byte swap. */
MORI_STATIC_ASSERT(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the mlx5 encoders assume a little-endian device");
MORI_HOST_DEVICE uint32_t mori_mlx5_be32(uint32_t x) {
  return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}
MORI_HOST_DEVICE uint16_t mori_mlx5_be16(uint16_t x) { return (uint16_t)((x >> 8) | (x << 8)); }
MORI_HOST_DEVICE uint64_t mori_mlx5_be64(uint64_t x) {
  return ((uint64_t)mori_mlx5_be32((uint32_t)x) << 32) | mori_mlx5_be32((uint32_t)(x >> 32));
}

/* Segments, each written with aligned 4- or 8-byte stores (a WQE is 64-byte
 * aligned, every segment 16). */

/* Control segment (16 bytes): opmod | WQE index (16 bits) | opcode; QPN |
 * size in 16-byte units (ds); signature 0; fm_ce_se (fence, completion,
 * solicited); immediate. As mlx5dv_set_ctrl_seg with signature 0. Returns
 * its first 8 bytes as they lie in memory: what the doorbell register gets
 * (mori_mlx5_ring), so the doorbell never reads the WQE back. */
MORI_HOST_DEVICE uint64_t mori_mlx5_ctrl_seg(void *seg, uint16_t pi, uint8_t opcode, uint8_t opmod, uint32_t qpn,
                                             uint8_t fm_ce_se, uint8_t ds, uint32_t imm) {
  uint32_t *w = (uint32_t *)seg;
  uint32_t w0 = mori_mlx5_be32(((uint32_t)opmod << 24) | ((uint32_t)pi << 8) | opcode);
  uint32_t w1 = mori_mlx5_be32((qpn << 8) | ds);
  w[0] = w0;
  w[1] = w1;
  w[2] = (uint32_t)fm_ce_se << 24; /* bytes: signature, dci stream (2), fm_ce_se */
  w[3] = imm;                      /* as given (the caller's byte order, as mlx5dv's) */
  return ((uint64_t)w1 << 32) | w0; /* little-endian: w0's bytes first */
}

/* Remote address segment (16 bytes): address, key, reserved. */
MORI_HOST_DEVICE void mori_mlx5_raddr_seg(void *seg, uint64_t raddr, uint32_t rkey) {
  uint32_t *w = (uint32_t *)seg;
  *(uint64_t *)seg = mori_mlx5_be64(raddr);
  w[2] = mori_mlx5_be32(rkey);
  w[3] = 0;
}

/* Data (scatter/gather) segment (16 bytes): length, local key, address. */
MORI_HOST_DEVICE void mori_mlx5_data_seg(void *seg, uint32_t length, uint32_t lkey, uint64_t addr) {
  uint32_t *w = (uint32_t *)seg;
  w[0] = mori_mlx5_be32(length);
  w[1] = mori_mlx5_be32(lkey);
  *(uint64_t *)(w + 2) = mori_mlx5_be64(addr);
}

/* Atomic segment (16 bytes): the addend (or swap value), the compare value. */
MORI_HOST_DEVICE void mori_mlx5_atomic_seg(void *seg, uint64_t swap_add, uint64_t compare) {
  uint64_t *w = (uint64_t *)seg;
  w[0] = mori_mlx5_be64(swap_add);
  w[1] = mori_mlx5_be64(compare);
}

/* Inline data segment: a 4-byte header (length | MORI_MLX5_INLINE_SEG),
 * then the bytes. Returns the segment's size in 16-byte units. */
MORI_HOST_DEVICE uint32_t mori_mlx5_inline_seg(void *seg, const void *data, uint32_t len) {
  *(uint32_t *)seg = mori_mlx5_be32(len | MORI_MLX5_INLINE_SEG);
  uint8_t *d = (uint8_t *)seg + 4;
  const uint8_t *s = (const uint8_t *)data;
  for (uint32_t i = 0; i < len; i++) d[i] = s[i];
  return (4 + len + 15) / 16;
}

/* Whole WQEs (one 64-byte basic block each). `pi`: the WQE's index (its
 * low 16 bits go into the control segment); fm_ce_se: MORI_MLX5_CTRL_*.
 * Each returns the doorbell value of the WQE (mori_mlx5_ctrl_seg's). */

/* RDMA write or read of `len` bytes: control, remote address, data (3 x
 * 16). Zero bytes: no data segment (ds 2), as libmlx5 leaves out a
 * zero-length one; a ConnectX reads a byte_count of 0 as 2^31 bytes. The
 * third 16 bytes are zeroed then, so a warp storing whole WQEs stores no
 * stale bytes. */
MORI_HOST_DEVICE uint64_t mori_mlx5_wqe_rdma(void *wqe, uint16_t pi, uint32_t qpn, uint8_t opcode, uint8_t fm_ce_se,
                                             uint64_t raddr, uint32_t rkey, uint64_t laddr, uint32_t lkey, uint32_t len) {
  uint8_t *b = (uint8_t *)wqe;
  mori_mlx5_raddr_seg(b + 16, raddr, rkey);
  if (len) {
    mori_mlx5_data_seg(b + 32, len, lkey, laddr);
  } else {
    uint64_t *z = (uint64_t *)(b + 32);
    z[0] = 0;
    z[1] = 0;
  }
  return mori_mlx5_ctrl_seg(b, pi, opcode, 0, qpn, fm_ce_se, len ? 3 : 2, 0);
}

/* RDMA write of up to MORI_GDA_MAX_INLINE bytes carried in the WQE. */
MORI_HOST_DEVICE uint64_t mori_mlx5_wqe_write_inline(void *wqe, uint16_t pi, uint32_t qpn, uint8_t fm_ce_se, uint64_t raddr,
                                                     uint32_t rkey, const void *data, uint32_t len) {
  uint8_t *b = (uint8_t *)wqe;
  mori_mlx5_raddr_seg(b + 16, raddr, rkey);
  uint32_t ds = 2 + mori_mlx5_inline_seg(b + 32, data, len);
  return mori_mlx5_ctrl_seg(b, pi, MORI_MLX5_OPCODE_RDMA_WRITE, 0, qpn, fm_ce_se, (uint8_t)ds, 0);
}

/* 64-bit fetch-and-add: control, remote address, atomic, data (the 8 bytes
 * the old value lands in) (4 x 16). */
MORI_HOST_DEVICE uint64_t mori_mlx5_wqe_fetch_add(void *wqe, uint16_t pi, uint32_t qpn, uint8_t fm_ce_se, uint64_t raddr,
                                                  uint32_t rkey, uint64_t add, uint64_t laddr, uint32_t lkey) {
  uint8_t *b = (uint8_t *)wqe;
  mori_mlx5_raddr_seg(b + 16, raddr, rkey);
  mori_mlx5_atomic_seg(b + 32, add, 0);
  mori_mlx5_data_seg(b + 48, 8, lkey, laddr);
  return mori_mlx5_ctrl_seg(b, pi, MORI_MLX5_OPCODE_ATOMIC_FA, 0, qpn, fm_ce_se, 4, 0);
}

/* The doorbell for WQEs up to (not including) `next`: the WQEs reach memory
 * before the doorbell record says `next`, and the record before the
 * BlueFlame register gets the last WQE's first 8 bytes, `last_ctrl` (how
 * the NIC learns there is work; it fetches the WQEs from the ring). No
 * lock, no system call, nothing read back from the ring. Each ordering is
 * the release of the store that needs it, not a full system fence; its
 * scope follows where the queue lives (qp->sq_in_device): a system-scope
 * release costs about 0.6 us on an H200 wherever the earlier stores went,
 * a GPU-scope one about 0.35 us (bench_gda's "ordering" figures). What follows the
 * doorbell (the next claimant's) is ordered by mori_gda_ring's release of
 * `rung`. */
MORI_DEVICE_INLINE void mori_mlx5_ring(const mori_gda_qp_t *qp, uint64_t next, uint64_t last_ctrl) {
  uint32_t rec = mori_mlx5_be32((uint32_t)(next & 0xffffu));
#if defined(MORI_DEVICE_COMPILER_HIP)
  /* Not on ROCm: there an agent-scope release does not write the L2 back
   * (only a system-scope one does), and a peer device's reads of device
   * memory need not go through this GPU's L2. */
  int device_scope = 0;
#else
  int device_scope = qp->sq_in_device;
#endif
  if (device_scope) {
    /* Ring and record in this GPU's memory: performed at GPU scope they are
     * in its L2, where the NIC's reads of them (issued once the register
     * is written) are served. The register's reader (a NIC, the software
     * ConnectX's thread) is outside GPU scope, so this rests on the GPU's
     * release waiting for L2's acknowledgement of the earlier stores
     * before the register's store leaves, as GPU-posting libraries that
     * keep a NIC's queues in GPU memory rely on; the PTX memory model
     * alone would ask for system scope (about 0.55 us more per ordering). */
    mori_atomic_store_release_device_u32(qp->sq_dbrec, rec);
    mori_atomic_store_release_device_u64(qp->bf_reg, last_ctrl);
  } else {
    mori_atomic_store_release_u32(qp->sq_dbrec, rec);
    mori_atomic_store_release_u64(qp->bf_reg, last_ctrl);
  }
}

/* CQE `ci` (a running count) is the software's once the NIC wrote it in
 * this pass over the ring: opcode not invalid and the owner bit equal to
 * the pass's parity. */
MORI_DEVICE_INLINE int mori_mlx5_cqe_ready(const uint8_t *cqe, uint64_t ci, uint32_t cqe_cnt) {
  uint8_t op_own = *(const volatile uint8_t *)(cqe + 63);
  return (op_own >> 4) != MORI_MLX5_CQE_INVALID && (op_own & 1u) == (uint8_t)((ci & cqe_cnt) != 0);
}

/* Decodes a CQE64 (mlx5_cqe64; an error completion as mlx5_err_cqe). */
MORI_HOST_DEVICE void mori_mlx5_cqe_decode(const uint8_t *cqe, mori_gda_cqe_t *out) {
  const volatile uint8_t *c = (const volatile uint8_t *)cqe;
  uint8_t op_own = c[63];
  out->opcode = op_own >> 4;
  out->error = out->opcode == MORI_MLX5_CQE_REQ_ERR || out->opcode == MORI_MLX5_CQE_RESP_ERR;
  out->vendor_syndrome = out->error ? c[54] : 0;
  out->syndrome = out->error ? c[55] : 0;
  out->qpn = ((uint32_t)c[57] << 16) | ((uint32_t)c[58] << 8) | c[59];
  out->wqe_counter = (uint16_t)(((uint32_t)c[60] << 8) | c[61]);
}

/* The CQ's consumer index (its low 24 bits), telling the NIC the entries
 * before `ci` may be written again. */
MORI_DEVICE_INLINE void mori_mlx5_cq_consumed(const mori_gda_qp_t *qp, uint64_t ci) {
  mori_fence_system();
  *(volatile uint32_t *)qp->cq_dbrec = mori_mlx5_be32((uint32_t)(ci & 0xffffffu));
}

#endif
