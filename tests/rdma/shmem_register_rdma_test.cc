// SPDX-License-Identifier: MIT
// A buffer given to shmem_buffer_register is registered with every
// transport of shmem's comm, RDMA included (the Shmem Guide's promise for
// memory a program allocated itself): PEs on two simulated nodes
// (MORI_HOST_ID), the copy-engine NIC standing in for the NIC, each PE puts
// its row into its partner's registered buffer on the other node over RDMA
// and reads the partner's row back with a get; peers on the other node
// have no load/store pointer to it.
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "mori/handle_fabric.h"
#include "mori/shmem.h"
#include "mori/transport_p2p.h"
#include "mori/transport_rdma.h"
#include "mori/window.h"
#include "tests/rdma/rdma_test_support.h"
#include "tests/shmem/pe.h"
#include "tests/support/user_memory.h"

extern "C" bool mori_test_ce_nic_installed(void);

namespace {

constexpr size_t kRowWords = 512;  // 4 KiB per PE

uint64_t Word(int writer, size_t i) { return ((uint64_t)(writer + 1) << 40) ^ (i * 2654435761u); }

TEST(ShmemOverRdma, ARegisteredBufferIsReachedByAPeOfAnotherNode) {
  ASSERT_TRUE(mori_test_ce_nic_installed()) << mori_last_error();
  EXPECT_RANKS_PASS(mori_test::TestRanks(), [](int rank, int size) {
    if (size < 2) GTEST_SKIP() << "needs two PEs";
    mori_rdma_test::SetTwoNodeHostIds(rank, size);
    mori_shmem_test::UseSmallHeap();
    // The heap's memory and the buffer are shared with same-node peers
    // (from 4 PEs on) through the handle libraries; the other node's, over RDMA.
    static const mori_handle_ops_t *const handles[] = {&mori_handle_fabric_ops, &mori_handle_posix_fd_ops};
    static const mori_transport_ops_t *const transports[] = {&mori_transport_p2p_ops, &mori_transport_rdma_ops};
    MORI_ASSERT_OK(mori_shmem_use_plugins(handles, 2, transports, 2));
    mori_shmem_uniqueid_t id = mori_shmem_test::ShareId(rank, "register_rdma");
    MORI_ASSERT_OK(shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, rank, size, &id));

    // Rows [0, size): what each PE put here; row `size`: this PE's own words.
    size_t map_bytes = 1 << 20, bytes = (size_t)(size + 1) * kRowWords * 8;
    char *mapping = (char *)mori_test::SharedMapping(map_bytes);  // registered from an inner offset
    ASSERT_NE(mapping, nullptr);
    uint64_t *buf = (uint64_t *)(mapping + 8192);
    for (size_t i = 0; i < kRowWords; i++) buf[(size_t)size * kRowWords + i] = Word(rank, i);
    MORI_ASSERT_OK(shmem_buffer_register(buf, bytes));

    int partner = (rank + size / 2) % size;  // same local index, other node
    EXPECT_EQ(shmem_ptr_p2p(buf, rank, partner), nullptr) << "PE " << partner << " is on the other node";
    EXPECT_NE(shmem_ptr_p2p(buf, rank, rank), nullptr);
    mori_window_t *win = nullptr;
    MORI_ASSERT_OK(mori_shmem_window(buf, &win));
    size_t at = (size_t)((char *)buf - (char *)mori_window_local_ptr(win)), row = kRowWords * 8;
    MORI_ASSERT_OK(mori_rdma_put(win, partner, at + (size_t)rank * row, at + (size_t)size * row, row));
    mori_comm_t *comm = nullptr;
    MORI_ASSERT_OK(mori_shmem_comm(&comm));
    MORI_ASSERT_OK(mori_rdma_quiet(comm));
    MORI_ASSERT_OK(shmem_barrier_all());
    for (size_t i = 0; i < kRowWords; i++)
      ASSERT_EQ(buf[(size_t)partner * kRowWords + i], Word(partner, i)) << "word " << i << " of PE " << partner << "'s put";

    // A get of the partner's own row lands in this PE's row `rank` (its own
    // put's place here is unused: rows are per writer).
    MORI_ASSERT_OK(mori_rdma_get(win, partner, at + (size_t)rank * row, at + (size_t)size * row, row));
    MORI_ASSERT_OK(mori_rdma_quiet(comm));
    for (size_t i = 0; i < kRowWords; i++)
      ASSERT_EQ(buf[(size_t)rank * kRowWords + i], Word(partner, i)) << "word " << i << " of the get from PE " << partner;

    MORI_ASSERT_OK(shmem_barrier_all());
    MORI_ASSERT_OK(shmem_buffer_deregister(buf, bytes));
    MORI_EXPECT_OK(shmem_finalize());
    munmap(mapping, map_bytes);
  });
}

}  // namespace
