// SPDX-License-Identifier: MIT
/* One send WQE read from its bytes as the ConnectX PRM lays it out (and
 * mlx5dv.h's segment structs describe it), by offset, big-endian, with
 * nothing of mori's in between: an encoding mistake on the posting side
 * is read as the hardware would read it.
 *   control (16 B): be32 opmod<<24 | wqe_index<<8 | opcode; be32 qpn<<8 |
 *     ds; u8 signature; be16 (stream id); u8 fm_ce_se (fence mode 7:5,
 *     CE 3:2, SE 1); be32 immediate
 *   remote address (16 B): be64 address, be32 rkey, be32 reserved
 *   atomic (16 B): be64 swap or add, be64 compare
 *   data (16 B each): be32 byte_count (0 means 2^31), be32 lkey, be64 address
 *   inline: be32 byte_count | MLX5_INLINE_SEG, the bytes, padded to 16 */
#include <infiniband/mlx5dv.h>
#include <string.h>

#include "transport/rdma/swcx/internal.h"

static uint32_t be32_at(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint64_t be64_at(const uint8_t *p) { return (uint64_t)be32_at(p) << 32 | be32_at(p + 4); }

void swcx_parse_ctrl(const uint8_t *ctrl, struct swcx_wqe *out) {
  uint32_t opmod_idx_opcode = be32_at(ctrl), qpn_ds = be32_at(ctrl + 4);
  out->opcode = (uint8_t)(opmod_idx_opcode & 0xff);
  out->index = (uint16_t)(opmod_idx_opcode >> 8);
  out->opmod = (uint8_t)(opmod_idx_opcode >> 24);
  out->qpn = qpn_ds >> 8;
  out->ds = (uint8_t)(qpn_ds & 0x3f);
  uint8_t fm_ce_se = ctrl[11];
  out->fence = (uint8_t)(fm_ce_se >> 5);
  out->ce = (uint8_t)((fm_ce_se >> 2) & 3);
  out->solicited = (fm_ce_se >> 1) & 1;
  memcpy(&out->imm_be, ctrl + 12, 4);
}

/* The data or inline segments from `off` to the WQE's end. */
static int parse_data(const uint8_t *b, uint32_t off, uint32_t end, struct swcx_wqe *w, uint32_t inline_max, bool allow_inline,
                      const char **why) {
  while (off < end) {
    uint32_t count = be32_at(b + off);
    if (count & MLX5_INLINE_SEG) {
      uint32_t len = count & ~(uint32_t)MLX5_INLINE_SEG;
      if (!allow_inline) {
        *why = "inline data in a WQE whose opcode takes none";
        return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
      }
      if (w->n_sge) {
        *why = "inline data mixed with data segments";
        return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
      }
      if (len > end - off - 4) {
        *why = "inline byte_count runs past the WQE's ds";
        return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
      }
      if (w->inline_len + len > inline_max) {
        *why = "inline data longer than the QP's max_inline_data";
        return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
      }
      memcpy(w->inline_data + w->inline_len, b + off + 4, len);
      w->inline_len += len;
      w->has_inline = true;
      off += (4 + len + 15) & ~15u;
    } else {
      if (w->has_inline) {
        *why = "a data segment after inline data";
        return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
      }
      if (w->n_sge == SWCX_MAX_SGE) {
        *why = "more data segments than the QP takes";
        return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
      }
      struct swcx_sge *s = &w->sge[w->n_sge++];
      s->length = count ? count : 0x80000000u;
      s->lkey = be32_at(b + off + 4);
      s->addr = be64_at(b + off + 8);
      off += 16;
    }
  }
  return 0;
}

int swcx_parse_wqe(const uint8_t *b, struct swcx_wqe *w, uint32_t inline_max, const char **why) {
  uint32_t end = (uint32_t)w->ds * 16;
  w->n_sge = 0;
  w->has_inline = false;
  w->inline_len = 0;
  w->raddr = w->swap_add = w->compare = 0;
  w->rkey = 0;
  if (w->ds == 0) {
    *why = "ds is 0";
    return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
  }
  switch (w->opcode) {
    case MLX5_OPCODE_NOP:
      return 0;
    case MLX5_OPCODE_RDMA_WRITE:
    case MLX5_OPCODE_RDMA_WRITE_IMM:
    case MLX5_OPCODE_RDMA_READ: {
      if (end < 32) {
        *why = "ds leaves no room for the remote address segment";
        return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
      }
      w->raddr = be64_at(b + 16);
      w->rkey = be32_at(b + 24);
      int rc = parse_data(b, 32, end, w, inline_max, w->opcode != MLX5_OPCODE_RDMA_READ, why);
      if (rc) return rc;
      if (w->opcode == MLX5_OPCODE_RDMA_READ && w->n_sge == 0) {
        *why = "an RDMA read without a data segment to land in";
        return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
      }
      return 0;
    }
    case MLX5_OPCODE_ATOMIC_CS:
    case MLX5_OPCODE_ATOMIC_FA: {
      if (end != 64) {
        *why = "an atomic's ds is not 4 (control, remote address, atomic, data)";
        return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
      }
      w->raddr = be64_at(b + 16);
      w->rkey = be32_at(b + 24);
      w->swap_add = be64_at(b + 32);
      w->compare = be64_at(b + 40);
      int rc = parse_data(b, 48, end, w, 0, false, why);
      if (rc) return rc;
      if (w->sge[0].length != 8) {
        *why = "an atomic's data segment is not 8 bytes";
        return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
      }
      return 0;
    }
    default:
      *why = "an opcode the software ConnectX does not execute";
      return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
  }
}
