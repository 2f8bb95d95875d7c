// SPDX-License-Identifier: MIT
// A fake verbs provider for host tests of the rdma transport (set with
// mori_rdma_use_provider, transport/rdma/provider.h), with a context whose
// post_send / poll_cq ops queue work requests and hand out completions the
// test decides. Nothing moves data; what is checked is what the transport
// posts and how it treats completions (late, failed, in one batch).
// Per process: install it in every rank before the comm is created.
#ifndef MORI_TESTS_RDMA_FAKE_VERBS_H
#define MORI_TESTS_RDMA_FAKE_VERBS_H

#include <infiniband/verbs.h>

#include "transport/rdma/provider.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fake_verbs {

struct Posted {
  uint32_t qp_num;
  uint64_t wr_id;
  int opcode;       // enum ibv_wr_opcode
  uint64_t length;  // the SGE's length as the NIC sees it (32 bits)
  uint64_t remote;  // remote address
  unsigned send_flags;
};

// What a QP was connected with (the RTR transition's address vector).
struct Path {
  uint32_t dest_qp = 0;
  int sgid_index = -1;
  int sl = -1;
  int traffic_class = -1;
};

// Replaces libibverbs for this process; `max_msg` is the port's largest
// message; one device, "fake0", until SetDevices.
void Install(uint32_t max_msg = 1u << 30);
// The devices ibv_get_device_list returns, in this order.
void SetDevices(const std::vector<std::string> &names);
// The device the transport opened last ("" before any).
std::string Opened();
// QPs created and not destroyed, in this process.
size_t LiveQps();
// How the QP with this number was connected (defaults before RTR).
Path PathOf(uint32_t qp_num);
void Uninstall();

// dma-buf registration (ibv_reg_dmabuf_mr): the same fake with it, failing
// every call with `fail_errno` when that is nonzero. What each call got:
struct DmabufReg {
  int fd;
  uint64_t offset, length, iova;
  bool fd_open;  // the fd was open during the call
};
void InstallWithDmabuf(int fail_errno = 0, uint32_t max_msg = 1u << 30);
// The two providers themselves (without, with ibv_reg_dmabuf_mr).
const mori_rdma_provider_t *Provider(bool dmabuf);
std::vector<DmabufReg> DmabufRegs();
// ibv_reg_mr calls so far in this process.
size_t PlainRegs();

// While stalled, posted work requests are held: no completion until Release.
void Stall(bool stalled);
// Completes the oldest held requests with these statuses, in one batch (a
// single poll may return all of them). Returns how many were released.
size_t Release(const std::vector<ibv_wc_status> &statuses);
// Completes every held request successfully; returns how many.
size_t ReleaseAll();
// Whether moving a QP to the error state flushes its held requests (a real
// NIC does; false models one that is slow to).
void FlushOnError(bool flush);

size_t Held();
std::vector<Posted> Posts();
// The state of the QP with this number (IBV_QPS_RTS after connecting).
ibv_qp_state QpState(uint32_t qp_num);

}  // namespace fake_verbs

#endif
