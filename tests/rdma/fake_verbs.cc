// SPDX-License-Identifier: MIT
// See fake_verbs.h.
#include "tests/rdma/fake_verbs.h"

#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "transport/rdma/provider.h"

namespace fake_verbs {
namespace {

struct HeldRequest {
  ibv_qp *qp;
  uint64_t wr_id;
};

std::mutex mu;
bool stalled = false, flush_on_error = true;
uint32_t port_max_msg = 1u << 30;
uint32_t next_qp_num = 100, next_key = 1;
std::deque<HeldRequest> held;
std::deque<ibv_wc> cq_entries;
std::vector<Posted> log;
std::map<uint32_t, ibv_qp_state> qp_states;
std::map<uint32_t, Path> paths;
std::vector<std::string> device_names = {"fake0"};
std::string opened;

ibv_wc Completion(ibv_qp *qp, uint64_t wr_id, ibv_wc_status status) {
  ibv_wc wc;
  memset(&wc, 0, sizeof(wc));
  wc.wr_id = wr_id;
  wc.status = status;
  wc.qp_num = qp->qp_num;
  wc.vendor_err = status == IBV_WC_SUCCESS ? 0 : 0x42;
  return wc;
}

int PostSend(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) {
  std::lock_guard<std::mutex> lock(mu);
  for (; wr; wr = wr->next) {
    uint64_t remote = wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
    log.push_back({qp->qp_num, wr->wr_id, wr->opcode, wr->num_sge ? wr->sg_list[0].length : 0, remote, wr->send_flags});
    // A QP in the error state takes requests and flushes them.
    if (qp_states[qp->qp_num] == IBV_QPS_ERR) cq_entries.push_back(Completion(qp, wr->wr_id, IBV_WC_WR_FLUSH_ERR));
    else if (stalled) held.push_back({qp, wr->wr_id});
    else cq_entries.push_back(Completion(qp, wr->wr_id, IBV_WC_SUCCESS));
  }
  *bad = nullptr;
  return 0;
}

int PollCq(ibv_cq *, int n, ibv_wc *wc) {
  std::lock_guard<std::mutex> lock(mu);
  int got = 0;
  while (got < n && !cq_entries.empty()) {
    wc[got++] = cq_entries.front();
    cq_entries.pop_front();
  }
  return got;
}

// The devices: ibv_device's name field carries the name.
std::vector<ibv_device> devices;
std::vector<ibv_device *> device_list;

ibv_device **GetDeviceList(int *n) {
  std::lock_guard<std::mutex> lock(mu);
  devices.assign(device_names.size(), ibv_device());
  device_list.clear();
  for (size_t i = 0; i < device_names.size(); i++) {
    snprintf(devices[i].name, sizeof(devices[i].name), "%s", device_names[i].c_str());
    device_list.push_back(&devices[i]);
  }
  device_list.push_back(nullptr);
  *n = (int)device_names.size();
  return device_list.data();
}
void FreeDeviceList(ibv_device **) {}
const char *GetDeviceName(ibv_device *dev) { return dev->name; }
ibv_context *OpenDevice(ibv_device *dev) {
  {
    std::lock_guard<std::mutex> lock(mu);
    opened = dev->name;
  }
  ibv_context *ctx = new ibv_context();
  ctx->device = dev;
  ctx->ops.poll_cq = PollCq;
  ctx->ops.post_send = PostSend;
  return ctx;
}
int CloseDevice(ibv_context *ctx) {
  delete ctx;
  return 0;
}
ibv_pd *AllocPd(ibv_context *ctx) {
  ibv_pd *pd = new ibv_pd();
  pd->context = ctx;
  return pd;
}
int DeallocPd(ibv_pd *pd) {
  delete pd;
  return 0;
}
size_t plain_regs = 0;
int dmabuf_errno = 0;
std::vector<DmabufReg> dmabuf_regs;

ibv_mr *RegMr(ibv_pd *pd, void *addr, size_t length, int) {
  std::lock_guard<std::mutex> lock(mu);
  plain_regs++;
  ibv_mr *mr = new ibv_mr();
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->lkey = mr->rkey = next_key++;
  return mr;
}
ibv_mr *RegDmabufMr(ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int) {
  std::lock_guard<std::mutex> lock(mu);
  dmabuf_regs.push_back({fd, offset, length, iova, fcntl(fd, F_GETFD) != -1});
  if (dmabuf_errno) {
    errno = dmabuf_errno;
    return nullptr;
  }
  ibv_mr *mr = new ibv_mr();
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = (void *)(uintptr_t)iova;
  mr->length = length;
  mr->lkey = mr->rkey = next_key++;
  return mr;
}
int DeregMr(ibv_mr *mr) {
  delete mr;
  return 0;
}
ibv_cq *CreateCq(ibv_context *ctx, int, void *, ibv_comp_channel *, int) {
  ibv_cq *cq = new ibv_cq();
  cq->context = ctx;
  return cq;
}
int DestroyCq(ibv_cq *cq) {
  delete cq;
  return 0;
}
ibv_qp *CreateQp(ibv_pd *pd, ibv_qp_init_attr *attr) {
  std::lock_guard<std::mutex> lock(mu);
  ibv_qp *qp = new ibv_qp();
  qp->context = pd->context;
  qp->pd = pd;
  qp->send_cq = attr->send_cq;
  qp->recv_cq = attr->recv_cq;
  qp->qp_num = next_qp_num++;
  qp->qp_type = attr->qp_type;
  qp_states[qp->qp_num] = IBV_QPS_RESET;
  return qp;
}
int DestroyQp(ibv_qp *qp) {
  std::lock_guard<std::mutex> lock(mu);
  // A destroyed QP completes nothing more.
  for (auto it = held.begin(); it != held.end();) it = it->qp == qp ? held.erase(it) : it + 1;
  for (auto it = cq_entries.begin(); it != cq_entries.end();) it = it->qp_num == qp->qp_num ? cq_entries.erase(it) : it + 1;
  qp_states.erase(qp->qp_num);
  delete qp;
  return 0;
}
int ModifyQp(ibv_qp *qp, ibv_qp_attr *attr, int mask) {
  std::lock_guard<std::mutex> lock(mu);
  if (!(mask & IBV_QP_STATE)) return 0;
  qp_states[qp->qp_num] = attr->qp_state;
  if (attr->qp_state == IBV_QPS_RTR && (mask & IBV_QP_AV))
    paths[qp->qp_num] = {attr->dest_qp_num, attr->ah_attr.grh.sgid_index, attr->ah_attr.sl, attr->ah_attr.grh.traffic_class};
  if (attr->qp_state == IBV_QPS_ERR && flush_on_error)
    for (auto it = held.begin(); it != held.end();) {
      if (it->qp != qp) {
        ++it;
        continue;
      }
      cq_entries.push_back(Completion(qp, it->wr_id, IBV_WC_WR_FLUSH_ERR));
      it = held.erase(it);
    }
  return 0;
}
int QueryPort(ibv_context *, uint8_t, _compat_ibv_port_attr *compat) {
  // The transport passes a whole ibv_port_attr (the compat struct is its prefix).
  ibv_port_attr *port = reinterpret_cast<ibv_port_attr *>(compat);
  memset(port, 0, sizeof(*port));
  port->state = IBV_PORT_ACTIVE;
  port->active_mtu = IBV_MTU_1024;
  port->max_mtu = IBV_MTU_1024;
  port->max_msg_sz = port_max_msg;
  port->gid_tbl_len = 2;
  return 0;
}
int QueryGid(ibv_context *, uint8_t, int index, ibv_gid *gid) {
  memset(gid, 0, sizeof(*gid));
  gid->raw[15] = (uint8_t)index;
  return 0;
}
const char *WcStatusStr(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    default: return "other error";
  }
}

const mori_verbs table = {
    GetDeviceList, FreeDeviceList, GetDeviceName, OpenDevice, CloseDevice, AllocPd, DeallocPd, RegMr, DeregMr,
    CreateCq,      DestroyCq,      CreateQp,      DestroyQp,  ModifyQp,    QueryPort, QueryGid, WcStatusStr,
};

const mori_rdma_provider_t provider = {sizeof(mori_rdma_provider_t), "fake verbs", &table, nullptr};

mori_rdma_provider_t WithDmabuf() {
  mori_rdma_provider_t p = provider;
  p.name = "fake verbs with dma-buf";
  p.ibv_reg_dmabuf_mr = RegDmabufMr;
  return p;
}
const mori_rdma_provider_t provider_dmabuf = WithDmabuf();

}  // namespace

void Install(uint32_t max_msg) {
  {
    std::lock_guard<std::mutex> lock(mu);
    port_max_msg = max_msg;
  }
  mori_rdma_use_provider(&provider);
}

void Uninstall() { mori_rdma_use_provider(nullptr); }

void InstallWithDmabuf(int fail_errno, uint32_t max_msg) {
  {
    std::lock_guard<std::mutex> lock(mu);
    port_max_msg = max_msg;
    dmabuf_errno = fail_errno;
  }
  mori_rdma_use_provider(&provider_dmabuf);
}

const mori_rdma_provider_t *Provider(bool dmabuf) { return dmabuf ? &provider_dmabuf : &provider; }

std::vector<DmabufReg> DmabufRegs() {
  std::lock_guard<std::mutex> lock(mu);
  return dmabuf_regs;
}

size_t PlainRegs() {
  std::lock_guard<std::mutex> lock(mu);
  return plain_regs;
}

void SetDevices(const std::vector<std::string> &names) {
  std::lock_guard<std::mutex> lock(mu);
  device_names = names;
}

std::string Opened() {
  std::lock_guard<std::mutex> lock(mu);
  return opened;
}

size_t LiveQps() {
  std::lock_guard<std::mutex> lock(mu);
  return qp_states.size();
}

Path PathOf(uint32_t qp_num) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = paths.find(qp_num);
  return it == paths.end() ? Path() : it->second;
}

void Stall(bool s) {
  std::lock_guard<std::mutex> lock(mu);
  stalled = s;
}

size_t Release(const std::vector<ibv_wc_status> &statuses) {
  std::lock_guard<std::mutex> lock(mu);
  size_t n = 0;
  for (ibv_wc_status status : statuses) {
    if (held.empty()) break;
    cq_entries.push_back(Completion(held.front().qp, held.front().wr_id, status));
    held.pop_front();
    n++;
  }
  return n;
}

size_t ReleaseAll() {
  std::vector<ibv_wc_status> all(Held(), IBV_WC_SUCCESS);
  return Release(all);
}

void FlushOnError(bool flush) {
  std::lock_guard<std::mutex> lock(mu);
  flush_on_error = flush;
}

size_t Held() {
  std::lock_guard<std::mutex> lock(mu);
  return held.size();
}

std::vector<Posted> Posts() {
  std::lock_guard<std::mutex> lock(mu);
  return log;
}

ibv_qp_state QpState(uint32_t qp_num) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = qp_states.find(qp_num);
  return it == qp_states.end() ? IBV_QPS_UNKNOWN : it->second;
}

}  // namespace fake_verbs
