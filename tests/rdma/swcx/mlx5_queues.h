// SPDX-License-Identifier: MIT
// A ConnectX's queues driven the way rdma-core's users drive them, for the
// software ConnectX's tests: WQEs written with mlx5dv.h's own helpers
// (mlx5dv_set_ctrl_seg, mlx5dv_set_data_seg) and segment structs
// (mlx5_wqe_raddr_seg, mlx5_wqe_atomic_seg; inline data as its
// MLX5_INLINE_SEG byte count, mlx5dv.h having no struct for it) into the
// ring mlx5dv_init_obj describes, the doorbell record bumped; CQE64s
// polled by owner bit and opcode and read through struct mlx5_cqe64 /
// mlx5_err_cqe, the CQ doorbell record's consumer index moved on.
#ifndef MORI_TESTS_RDMA_SWCX_MLX5_QUEUES_H
#define MORI_TESTS_RDMA_SWCX_MLX5_QUEUES_H

#include <endian.h>
#include <infiniband/mlx5dv.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace mlx5_queues {

struct SendQueue {
  mlx5dv_qp dq;
  uint32_t qpn = 0;
  uint16_t pi = 0;  // the producer position: the next WQE's first basic block
  uint16_t last = 0; // the last WQE written (its control segment starts the doorbell)

  // The 16 bytes at `off` into the WQE starting at basic block `at`: a
  // segment never straddles a basic block, whatever the ring's end does.
  void *Seg(uint16_t at, uint32_t off) {
    uint32_t bb = (uint16_t)(at + off / 64) & (dq.sq.wqe_cnt - 1);
    return (char *)dq.sq.buf + bb * dq.sq.stride + off % 64;
  }
  void Ctrl(uint16_t at, uint8_t opcode, uint8_t ds, uint8_t fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE, uint32_t other_qpn = 0) {
    last = at;
    mlx5dv_set_ctrl_seg((mlx5_wqe_ctrl_seg *)Seg(at, 0), at, opcode, 0, other_qpn ? other_qpn : qpn, fm_ce_se, ds, 0, 0);
  }
  void Raddr(uint16_t at, uint64_t raddr, uint32_t rkey) {
    auto *r = (mlx5_wqe_raddr_seg *)Seg(at, 16);
    r->raddr = htobe64(raddr);
    r->rkey = htobe32(rkey);
    r->reserved = 0;
  }
  void Data(uint16_t at, uint32_t off, uint32_t len, uint32_t lkey, const void *addr) {
    mlx5dv_set_data_seg((mlx5_wqe_data_seg *)Seg(at, off), len, lkey, (uintptr_t)addr);
  }
  // The doorbell, as libmlx5 rings it: the record after the WQEs, then the
  // register: the last WQE's first 8 bytes, or (BlueFlame, one WQE) its
  // whole first basic block.
  void Ring(uint16_t bbs, bool blueflame = false) {
    uint16_t first = pi;
    pi = (uint16_t)(pi + bbs);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&dq.dbrec[MLX5_SND_DBR], htobe32(pi), __ATOMIC_RELEASE);
    if (blueflame) {
      memcpy(dq.bf.reg, Seg(first, 0), 64);
    } else {
      uint64_t doorbell;
      memcpy(&doorbell, Seg(last, 0), sizeof(doorbell));
      __atomic_store_n((uint64_t *)dq.bf.reg, doorbell, __ATOMIC_RELEASE);
    }
  }
  // Each returns the WQE's index; `ring`: ring the doorbell for it now.
  uint16_t Write(const void *local, uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey,
                 uint8_t fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE, bool ring = true) {
    uint16_t at = pi;
    Ctrl(at, MLX5_OPCODE_RDMA_WRITE, 3, fm_ce_se);
    Raddr(at, raddr, rkey);
    Data(at, 32, len, lkey, local);
    ring ? Ring(1) : (void)(pi = (uint16_t)(pi + 1));
    return at;
  }
  uint16_t Read(void *local, uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey,
                uint8_t fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE) {
    uint16_t at = pi;
    Ctrl(at, MLX5_OPCODE_RDMA_READ, 3, fm_ce_se);
    Raddr(at, raddr, rkey);
    Data(at, 32, len, lkey, local);
    Ring(1);
    return at;
  }
  uint16_t Nop(uint8_t fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE) {
    uint16_t at = pi;
    Ctrl(at, MLX5_OPCODE_NOP, 1, fm_ce_se);
    Ring(1);
    return at;
  }
  uint16_t InlineWrite(const std::string &data, uint64_t raddr, uint32_t rkey, uint8_t fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE) {
    uint16_t at = pi;
    uint32_t seg = (4 + (uint32_t)data.size() + 15) & ~15u;
    uint8_t ds = (uint8_t)((32 + seg) / 16);
    Ctrl(at, MLX5_OPCODE_RDMA_WRITE, ds, fm_ce_se);
    Raddr(at, raddr, rkey);
    *(__be32 *)Seg(at, 32) = htobe32((uint32_t)data.size() | MLX5_INLINE_SEG);
    for (uint32_t i = 0; i < data.size(); i++) ((uint8_t *)Seg(at, (36 + i) & ~15u))[(36 + i) % 16] = (uint8_t)data[i];
    Ring((uint16_t)((ds * 16 + 63) / 64));
    return at;
  }
  uint16_t Atomic(uint8_t opcode, uint64_t raddr, uint32_t rkey, uint64_t swap_add, uint64_t compare, void *local,
                  uint32_t lkey, uint32_t len = 8, uint8_t fm_ce_se = MLX5_WQE_CTRL_CQ_UPDATE) {
    uint16_t at = pi;
    Ctrl(at, opcode, 4, fm_ce_se);
    Raddr(at, raddr, rkey);
    auto *a = (mlx5_wqe_atomic_seg *)Seg(at, 32);
    a->swap_add = htobe64(swap_add);
    a->compare = htobe64(compare);
    Data(at, 48, len, lkey, local);
    Ring(1);
    return at;
  }
};

struct Cqe {
  bool got = false;
  mlx5_cqe64 cqe;
  uint8_t opcode() { return mlx5dv_get_cqe_opcode(&cqe); }
  uint16_t counter() { return be16toh(cqe.wqe_counter); }
  uint32_t qpn() { return be32toh(cqe.sop_drop_qpn) & 0xffffff; }
  uint8_t wqe_opcode() { return be32toh(cqe.sop_drop_qpn) >> 24; }
  uint8_t syndrome() { return ((mlx5_err_cqe *)&cqe)->syndrome; }
  uint8_t vendor() { return ((mlx5_err_cqe *)&cqe)->vendor_err_synd; }
};

struct CompletionQueue {
  mlx5dv_cq dcq;
  uint32_t ci = 0;

  // The next CQE once it is software's (its opcode valid and its owner
  // bit the pass's), consumed; got == false after `timeout_ms`.
  Cqe Next(int timeout_ms = 10000) {
    Cqe out;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    auto *slot = (mlx5_cqe64 *)((char *)dcq.buf + (size_t)(ci & (dcq.cqe_cnt - 1)) * dcq.cqe_size);
    for (;;) {
      uint8_t op_own = __atomic_load_n(&slot->op_own, __ATOMIC_ACQUIRE);
      if ((op_own >> 4) != MLX5_CQE_INVALID && (op_own & MLX5_CQE_OWNER_MASK) == ((ci & dcq.cqe_cnt) ? 1 : 0)) break;
      if (std::chrono::steady_clock::now() > deadline) return out;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    memcpy(&out.cqe, slot, sizeof(out.cqe));
    out.got = true;
    ci++;
    __atomic_store_n(&dcq.dbrec[0], htobe32(ci & 0xffffff), __ATOMIC_RELEASE);
    return out;
  }
  bool Quiet(int ms = 100) { return !Next(ms).got; }
};

}  // namespace mlx5_queues

#endif
