// SPDX-License-Identifier: MIT
// A verbs provider of the software ConnectX's tests, inside one process:
// RC QPs connected to each other (by QP number), memory regions checked
// like a NIC checks them (key, range, access), and every operation the
// software ConnectX posts executed at once: writes, reads, fetch-and-add
// (the old value lands locally) and compare-and-swap. It records each
// work request it was given, and can hand completions out in reverse
// order of a poll's batch (a NIC's CQ shared by several QPs does not keep
// one order across them; per QP the software ConnectX must keep it).
#ifndef MORI_TESTS_RDMA_SWCX_LOOPBACK_VERBS_H
#define MORI_TESTS_RDMA_SWCX_LOOPBACK_VERBS_H

#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

#include "transport/rdma/provider.h"

namespace loopback {

struct Posted {
  uint32_t qp_num;
  int opcode;  // enum ibv_wr_opcode
  unsigned send_flags;
  int num_sge;
  uint64_t length;  // all SGEs together
  uint32_t imm_data;
};

const mori_rdma_provider_t *Provider();
// Completions of one poll handed out last first.
void ReverseCompletions(bool reverse);
// While held, completions stay in the CQ (the work is done); Release hands them out.
void HoldCompletions(bool hold);
std::vector<Posted> Posts();
void ClearPosts();

}  // namespace loopback

#endif
