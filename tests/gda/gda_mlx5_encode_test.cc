// SPDX-License-Identifier: MIT
// The ConnectX encoders and decoders of GPU-initiated posting, byte for
// byte against rdma-core's own definitions: mlx5dv.h's inline helpers
// (mlx5dv_set_ctrl_seg, mlx5dv_set_data_seg, mlx5dv_set_cqe_owner) and its
// struct layouts (mlx5_wqe_raddr_seg, mlx5_wqe_atomic_seg,
// mlx5_wqe_inl_data_seg, mlx5_cqe64, mlx5_err_cqe), filled with htobe*.
#include <endian.h>
#include <gtest/gtest.h>
#include <infiniband/mlx5dv.h>

#include <cstddef>
#include <cstring>

#include "mori/device/gda.h"

namespace {

struct alignas(64) Block {
  uint8_t b[64];
};

void ExpectSame(const void *mine, const void *theirs, size_t n, const char *what) {
  const uint8_t *a = static_cast<const uint8_t *>(mine), *b = static_cast<const uint8_t *>(theirs);
  for (size_t i = 0; i < n; i++) ASSERT_EQ(a[i], b[i]) << what << ": byte " << i << " differs";
}

TEST(GdaMlx5, ConstantsAreThePrms) {
  EXPECT_EQ(MORI_MLX5_OPCODE_RDMA_WRITE, (unsigned)MLX5_OPCODE_RDMA_WRITE);
  EXPECT_EQ(MORI_MLX5_OPCODE_RDMA_READ, (unsigned)MLX5_OPCODE_RDMA_READ);
  EXPECT_EQ(MORI_MLX5_OPCODE_ATOMIC_FA, (unsigned)MLX5_OPCODE_ATOMIC_FA);
  EXPECT_EQ(MORI_MLX5_CTRL_CQ_UPDATE, (unsigned)MLX5_WQE_CTRL_CQ_UPDATE);
  EXPECT_EQ(MORI_MLX5_CTRL_FENCE, (unsigned)MLX5_WQE_CTRL_FENCE);
  EXPECT_EQ(MORI_MLX5_INLINE_SEG, (unsigned)MLX5_INLINE_SEG);
  EXPECT_EQ(MORI_MLX5_CQE_REQ, (unsigned)MLX5_CQE_REQ);
  EXPECT_EQ(MORI_MLX5_CQE_REQ_ERR, (unsigned)MLX5_CQE_REQ_ERR);
  EXPECT_EQ(MORI_MLX5_CQE_RESP_ERR, (unsigned)MLX5_CQE_RESP_ERR);
  EXPECT_EQ(MORI_MLX5_CQE_INVALID, (unsigned)MLX5_CQE_INVALID);
  EXPECT_EQ(MORI_GDA_WQE_BYTES, (int)MLX5_SEND_WQE_BB);
  EXPECT_EQ(MORI_GDA_CQE_BYTES, (int)sizeof(struct mlx5_cqe64));
  EXPECT_EQ(sizeof(struct mlx5_err_cqe), sizeof(struct mlx5_cqe64));
}

TEST(GdaMlx5, ControlSegmentMatchesMlx5dvSetCtrlSeg) {
  const uint16_t pis[] = {0, 1, 0x00ff, 0x0100, 0x7fff, 0x8000, 0xfffe, 0xffff};
  const uint8_t opcodes[] = {MLX5_OPCODE_RDMA_WRITE, MLX5_OPCODE_RDMA_READ, MLX5_OPCODE_ATOMIC_FA};
  const uint32_t qpns[] = {0, 1, 0x123456, 0xffffff};
  const uint8_t flags[] = {0, MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_FENCE, MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE};
  for (uint16_t pi : pis)
    for (uint8_t op : opcodes)
      for (uint32_t qpn : qpns)
        for (uint8_t f : flags)
          for (uint8_t ds : {1, 3, 4}) {
            Block mine, theirs;
            memset(&mine, 0xa5, sizeof(mine));
            // mlx5dv_set_ctrl_seg leaves the DCI stream id (reserved for RC)
            // as it was: a zeroed WQE, as a fresh send queue holds.
            memset(&theirs, 0, sizeof(theirs));
            uint64_t db = mori_mlx5_ctrl_seg(mine.b, pi, op, 0, qpn, f, ds, 0x12345678u);
            mlx5dv_set_ctrl_seg(reinterpret_cast<struct mlx5_wqe_ctrl_seg *>(theirs.b), pi, op, 0, qpn, f, ds, 0,
                                0x12345678u);
            ASSERT_NO_FATAL_FAILURE(ExpectSame(mine.b, theirs.b, sizeof(struct mlx5_wqe_ctrl_seg), "ctrl"));
            // The doorbell value: the segment's first 8 bytes (libmlx5's BlueFlame write).
            ASSERT_NO_FATAL_FAILURE(ExpectSame(&db, theirs.b, 8, "doorbell value"));
            // Nothing written past the segment.
            ASSERT_EQ(mine.b[16], 0xa5);
          }
  // opmod lands in the top byte.
  Block mine, theirs;
  memset(&theirs, 0, sizeof(theirs));
  mori_mlx5_ctrl_seg(mine.b, 7, 8, 0x5a, 9, 0, 3, 0);
  mlx5dv_set_ctrl_seg(reinterpret_cast<struct mlx5_wqe_ctrl_seg *>(theirs.b), 7, 8, 0x5a, 9, 0, 3, 0, 0);
  ExpectSame(mine.b, theirs.b, 16, "ctrl opmod");
}

TEST(GdaMlx5, DataSegmentMatchesMlx5dvSetDataSeg) {
  const uint32_t lens[] = {0, 1, 8, 4096, 0x40000000u, 0xffffffffu};
  const uint64_t addrs[] = {0, 0x1000, 0x7f0012345678ull, 0xfedcba9876543210ull};
  for (uint32_t len : lens)
    for (uint64_t addr : addrs) {
      Block mine, theirs;
      mori_mlx5_data_seg(mine.b, len, 0xabcdef01u, addr);
      mlx5dv_set_data_seg(reinterpret_cast<struct mlx5_wqe_data_seg *>(theirs.b), len, 0xabcdef01u, (uintptr_t)addr);
      ASSERT_NO_FATAL_FAILURE(ExpectSame(mine.b, theirs.b, sizeof(struct mlx5_wqe_data_seg), "data"));
    }
}

TEST(GdaMlx5, RemoteAddressSegmentMatchesTheStruct) {
  for (uint64_t raddr : {0ull, 0x10ull, 0x00007f1122334455ull, 0x8000000000000008ull}) {
    Block mine, theirs;
    memset(&theirs, 0, sizeof(theirs));
    memset(&mine, 0xff, sizeof(mine));
    auto *r = reinterpret_cast<struct mlx5_wqe_raddr_seg *>(theirs.b);
    r->raddr = htobe64(raddr);
    r->rkey = htobe32(0x00c0ffeeu);
    r->reserved = 0;
    mori_mlx5_raddr_seg(mine.b, raddr, 0x00c0ffeeu);
    ASSERT_NO_FATAL_FAILURE(ExpectSame(mine.b, theirs.b, sizeof(*r), "raddr"));
  }
}

TEST(GdaMlx5, AtomicSegmentMatchesTheStruct) {
  for (uint64_t add : {0ull, 1ull, 0xffffffffffffffffull, 0x0102030405060708ull}) {
    Block mine, theirs;
    auto *a = reinterpret_cast<struct mlx5_wqe_atomic_seg *>(theirs.b);
    a->swap_add = htobe64(add);
    a->compare = htobe64(0);
    mori_mlx5_atomic_seg(mine.b, add, 0);
    ASSERT_NO_FATAL_FAILURE(ExpectSame(mine.b, theirs.b, sizeof(*a), "atomic"));
  }
}

TEST(GdaMlx5, InlineSegmentMatchesTheStruct) {
  uint8_t data[MORI_GDA_MAX_INLINE];
  for (size_t i = 0; i < sizeof(data); i++) data[i] = (uint8_t)(0x30 + i);
  for (uint32_t len = 0; len <= MORI_GDA_MAX_INLINE; len++) {
    Block mine, theirs;
    memset(&mine, 0, sizeof(mine));
    memset(&theirs, 0, sizeof(theirs));
    auto *h = reinterpret_cast<struct mlx5_wqe_inl_data_seg *>(theirs.b);
    h->byte_count = htobe32(len | MLX5_INLINE_SEG);
    memcpy(theirs.b + sizeof(*h), data, len);
    uint32_t ds = mori_mlx5_inline_seg(mine.b, data, len);
    EXPECT_EQ(ds, (sizeof(*h) + len + 15) / 16) << "len " << len;
    ASSERT_NO_FATAL_FAILURE(ExpectSame(mine.b, theirs.b, sizeof(*h) + len, "inline"));
  }
}

// A whole WQE as libmlx5 composes one from the same helpers and structs.
void TheirsRdma(uint8_t *b, uint16_t pi, uint32_t qpn, uint8_t op, uint8_t f, uint64_t raddr, uint32_t rkey, uint64_t laddr,
                uint32_t lkey, uint32_t len) {
  memset(b, 0, 64);
  mlx5dv_set_ctrl_seg(reinterpret_cast<struct mlx5_wqe_ctrl_seg *>(b), pi, op, 0, qpn, f, 3, 0, 0);
  auto *r = reinterpret_cast<struct mlx5_wqe_raddr_seg *>(b + sizeof(struct mlx5_wqe_ctrl_seg));
  r->raddr = htobe64(raddr);
  r->rkey = htobe32(rkey);
  r->reserved = 0;
  mlx5dv_set_data_seg(reinterpret_cast<struct mlx5_wqe_data_seg *>(b + 32), len, lkey, (uintptr_t)laddr);
}

TEST(GdaMlx5, WholeRdmaWqes) {
  for (uint8_t op : {(uint8_t)MLX5_OPCODE_RDMA_WRITE, (uint8_t)MLX5_OPCODE_RDMA_READ}) {
    Block mine, theirs;
    mori_mlx5_wqe_rdma(mine.b, 0xbeef, 0x4242, op, MLX5_WQE_CTRL_CQ_UPDATE, 0x7f00aa00bb00ull, 0x11223344u, 0x7f00cc00dd00ull,
                       0x55667788u, 123456);
    TheirsRdma(theirs.b, 0xbeef, 0x4242, op, MLX5_WQE_CTRL_CQ_UPDATE, 0x7f00aa00bb00ull, 0x11223344u, 0x7f00cc00dd00ull,
               0x55667788u, 123456);
    ExpectSame(mine.b, theirs.b, 48, op == MLX5_OPCODE_RDMA_WRITE ? "write" : "read");
  }
}

// Zero bytes: no data segment at all (ds 2), as libmlx5 leaves out a
// zero-length one; a data segment's byte_count of 0 means 2^31 bytes to a
// ConnectX. The third 16 bytes are zero (a warp stores whole WQEs).
TEST(GdaMlx5, ZeroByteRdmaWqeHasNoDataSegment) {
  Block mine, theirs;
  memset(&mine, 0xa5, sizeof(mine));
  memset(&theirs, 0, sizeof(theirs));
  mori_mlx5_wqe_rdma(mine.b, 0x1234, 0x4242, MLX5_OPCODE_RDMA_WRITE, 0, 0x7f00aa00bb00ull, 0x11223344u, 0x7f00cc00dd00ull,
                     0x55667788u, 0);
  mlx5dv_set_ctrl_seg(reinterpret_cast<struct mlx5_wqe_ctrl_seg *>(theirs.b), 0x1234, MLX5_OPCODE_RDMA_WRITE, 0, 0x4242, 0, 2, 0,
                      0);
  auto *r = reinterpret_cast<struct mlx5_wqe_raddr_seg *>(theirs.b + 16);
  r->raddr = htobe64(0x7f00aa00bb00ull);
  r->rkey = htobe32(0x11223344u);
  ExpectSame(mine.b, theirs.b, 48, "zero-byte write");
}

TEST(GdaMlx5, WholeInlineWriteWqe) {
  uint64_t value = 0x0123456789abcdefull;
  Block mine, theirs;
  memset(&mine, 0, sizeof(mine));
  memset(&theirs, 0, sizeof(theirs));
  mori_mlx5_wqe_write_inline(mine.b, 3, 0x77, MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE, 0x1000, 9, &value, 8);
  // ds: ctrl (1) + raddr (1) + inline header and 8 bytes (1).
  mlx5dv_set_ctrl_seg(reinterpret_cast<struct mlx5_wqe_ctrl_seg *>(theirs.b), 3, MLX5_OPCODE_RDMA_WRITE, 0, 0x77,
                      MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE, 3, 0, 0);
  auto *r = reinterpret_cast<struct mlx5_wqe_raddr_seg *>(theirs.b + 16);
  r->raddr = htobe64(0x1000);
  r->rkey = htobe32(9);
  auto *h = reinterpret_cast<struct mlx5_wqe_inl_data_seg *>(theirs.b + 32);
  h->byte_count = htobe32(8 | MLX5_INLINE_SEG);
  memcpy(theirs.b + 36, &value, 8);
  ExpectSame(mine.b, theirs.b, 48, "inline write");
  // The longest inline write still fits one basic block (4 units).
  uint8_t big[MORI_GDA_MAX_INLINE] = {};
  mori_mlx5_wqe_write_inline(mine.b, 3, 0x77, 0, 0x1000, 9, big, sizeof(big));
  EXPECT_EQ(mine.b[7], 4) << "ds of a " << sizeof(big) << "-byte inline write";
}

TEST(GdaMlx5, WholeFetchAddWqe) {
  Block mine, theirs;
  memset(&theirs, 0, sizeof(theirs));
  mori_mlx5_wqe_fetch_add(mine.b, 0xffff, 0xabcdef, MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE, 0x2008, 0x99, 5,
                          0x3000, 0x88);
  mlx5dv_set_ctrl_seg(reinterpret_cast<struct mlx5_wqe_ctrl_seg *>(theirs.b), 0xffff, MLX5_OPCODE_ATOMIC_FA, 0, 0xabcdef,
                      MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_FENCE, 4, 0, 0);
  auto *r = reinterpret_cast<struct mlx5_wqe_raddr_seg *>(theirs.b + 16);
  r->raddr = htobe64(0x2008);
  r->rkey = htobe32(0x99);
  r->reserved = 0;
  auto *a = reinterpret_cast<struct mlx5_wqe_atomic_seg *>(theirs.b + 32);
  a->swap_add = htobe64(5);
  a->compare = 0;
  mlx5dv_set_data_seg(reinterpret_cast<struct mlx5_wqe_data_seg *>(theirs.b + 48), 8, 0x88, 0x3000);
  ExpectSame(mine.b, theirs.b, 64, "fetch-add");
}

TEST(GdaMlx5, CompletionDecode) {
  for (uint16_t counter : {(uint16_t)0, (uint16_t)1, (uint16_t)0x1234, (uint16_t)0xffff}) {
    Block c;
    memset(&c, 0, sizeof(c));
    auto *cqe = reinterpret_cast<struct mlx5_cqe64 *>(c.b);
    cqe->wqe_counter = htobe16(counter);
    cqe->sop_drop_qpn = htobe32(0xab123456u);  // top byte: not the QPN
    cqe->op_own = (uint8_t)(MLX5_CQE_REQ << 4);
    mori_gda_cqe_t d;
    mori_mlx5_cqe_decode(c.b, &d);
    EXPECT_EQ(d.wqe_counter, counter);
    EXPECT_EQ(d.qpn, 0x123456u);
    EXPECT_EQ(d.opcode, (uint32_t)mlx5dv_get_cqe_opcode(cqe));
    EXPECT_EQ(d.error, 0u);
  }
}

TEST(GdaMlx5, ErrorCompletionDecode) {
  for (uint8_t op : {(uint8_t)MLX5_CQE_REQ_ERR, (uint8_t)MLX5_CQE_RESP_ERR}) {
    Block c;
    memset(&c, 0, sizeof(c));
    auto *e = reinterpret_cast<struct mlx5_err_cqe *>(c.b);
    e->syndrome = 0x13;  // remote access error
    e->vendor_err_synd = 0x88;
    e->s_wqe_opcode_qpn = htobe32(0x08000042u);
    e->wqe_counter = htobe16(0x0102);
    e->op_own = (uint8_t)(op << 4) | 1;
    mori_gda_cqe_t d;
    mori_mlx5_cqe_decode(c.b, &d);
    EXPECT_EQ(d.error, 1u);
    EXPECT_EQ(d.syndrome, 0x13u);
    EXPECT_EQ(d.vendor_syndrome, 0x88u);
    EXPECT_EQ(d.qpn, 0x42u);
    EXPECT_EQ(d.wqe_counter, 0x0102);
    EXPECT_EQ(d.opcode, (uint32_t)op);
  }
}

// The owner bit alternates with each pass over the ring: CQE ci is ready
// when the NIC wrote it with owner == (ci / cqe_cnt) & 1, never when the
// slot still holds the previous pass's entry or the invalid opcode.
TEST(GdaMlx5, OwnerBitAcrossWrapAround) {
  const uint32_t cnt = 8;
  Block c;
  auto *cqe = reinterpret_cast<struct mlx5_cqe64 *>(c.b);
  for (uint64_t ci = 0; ci < 5 * cnt; ci++) {
    uint8_t pass = (uint8_t)((ci / cnt) & 1);
    memset(&c, 0, sizeof(c));
    cqe->op_own = (uint8_t)(MLX5_CQE_INVALID << 4);
    mlx5dv_set_cqe_owner(cqe, pass);
    EXPECT_FALSE(mori_mlx5_cqe_ready(c.b, ci, cnt)) << "invalid opcode at ci " << ci;
    cqe->op_own = (uint8_t)(MLX5_CQE_REQ << 4);
    mlx5dv_set_cqe_owner(cqe, pass);
    EXPECT_TRUE(mori_mlx5_cqe_ready(c.b, ci, cnt)) << "ci " << ci;
    mlx5dv_set_cqe_owner(cqe, (uint8_t)!pass);
    EXPECT_FALSE(mori_mlx5_cqe_ready(c.b, ci, cnt)) << "the previous pass's entry at ci " << ci;
  }
}

// The doorbell: the record holds the producer index's low 16 bits
// big-endian (as libmlx5 writes db[MLX5_SND_DBR]), the BlueFlame register
// the last WQE's first 8 bytes; indices wrap the ring.
TEST(GdaMlx5, DoorbellAndWrapAround) {
  const uint32_t cnt = 4;
  alignas(64) uint8_t ring[cnt * 64];
  uint32_t dbrec[2] = {0, 0};
  uint64_t bf = 0;
  mori_gda_qp_t qp;
  memset(&qp, 0, sizeof(qp));
  qp.sq_buf = ring;
  qp.sq_dbrec = &dbrec[MLX5_SND_DBR];
  qp.bf_reg = &bf;
  qp.wqe_cnt = cnt;
  qp.qpn = 0x31;
  qp.family = MORI_GDA_FAMILY_MLX5;
  for (uint64_t index : {0ull, 3ull, 4ull, 65535ull, 65536ull, 65539ull, (1ull << 40) + 2}) {
    uint64_t db = mori_gda_write_rdma(&qp, index, 0, MORI_GDA_SIGNALED, 0x10, 1, 0x20, 2, 8);
    uint8_t *w = ring + (index % cnt) * 64;
    EXPECT_EQ(memcmp(&db, w, 8), 0) << "the writer returns the control segment's first 8 bytes";
    Block theirs;
    TheirsRdma(theirs.b, (uint16_t)index, 0x31, MLX5_OPCODE_RDMA_WRITE, MLX5_WQE_CTRL_CQ_UPDATE, 0x10, 1, 0x20, 2, 8);
    ExpectSame(w, theirs.b, 48, "wrapped WQE");
    mori_mlx5_ring(&qp, index + 1, db);
    EXPECT_EQ(be32toh(dbrec[MLX5_SND_DBR]), (uint32_t)((index + 1) & 0xffff)) << "index " << index;
    EXPECT_EQ(memcmp(&bf, w, 8), 0) << "the BlueFlame write is the control segment's first 8 bytes";
    EXPECT_EQ(dbrec[MLX5_RCV_DBR], 0u) << "the receive record is left alone";
  }
  uint32_t cq_dbrec = 0;
  qp.cq_dbrec = &cq_dbrec;
  mori_mlx5_cq_consumed(&qp, (1ull << 24) + 5);
  EXPECT_EQ(be32toh(cq_dbrec), 5u) << "the consumer index's low 24 bits";
}

}  // namespace
