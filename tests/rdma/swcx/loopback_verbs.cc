// SPDX-License-Identifier: MIT
// The loopback provider (loopback_verbs.h).
#include "tests/rdma/swcx/loopback_verbs.h"

#include <errno.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

namespace loopback {
namespace {

std::mutex mu;
ibv_device the_device;
ibv_device *device_list[] = {&the_device, nullptr};
bool reverse = false, hold = false;
std::vector<Posted> posts;
uint32_t next_qpn = 0x200, next_key = 0x1000;

struct Mr {
  ibv_mr mr;
  int access;
};
std::map<uint32_t, Mr *> mrs;  // by key (lkey == rkey)

struct Cq {
  ibv_cq cq;
  std::deque<ibv_wc> done;
};

struct Qp {
  ibv_qp qp;
  ibv_qp_state state = IBV_QPS_RESET;
  uint32_t dest = 0;
};
std::map<uint32_t, Qp *> qps;

int post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad);
int poll_cq(ibv_cq *cq, int n, ibv_wc *wc);

ibv_device **get_device_list(int *n) {
  if (n) *n = 1;
  return device_list;
}
void free_device_list(ibv_device **) {}
const char *get_device_name(ibv_device *) { return "loop0"; }
ibv_context *open_device(ibv_device *dev) {
  auto *c = new ibv_context();
  c->device = dev;
  c->ops.post_send = post_send;
  c->ops.poll_cq = poll_cq;
  return c;
}
int close_device(ibv_context *c) {
  delete c;
  return 0;
}
ibv_pd *alloc_pd(ibv_context *ctx) {
  auto *pd = new ibv_pd();
  pd->context = ctx;
  return pd;
}
int dealloc_pd(ibv_pd *pd) {
  delete pd;
  return 0;
}
ibv_mr *reg_mr(ibv_pd *pd, void *addr, size_t length, int access) {
  std::lock_guard<std::mutex> g(mu);
  auto *m = new Mr();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = m->mr.rkey = next_key++;
  m->access = access;
  mrs[m->mr.lkey] = m;
  return &m->mr;
}
int dereg_mr(ibv_mr *mr) {
  std::lock_guard<std::mutex> g(mu);
  mrs.erase(mr->lkey);
  delete (Mr *)mr;
  return 0;
}
ibv_cq *create_cq(ibv_context *ctx, int cqe, void *, ibv_comp_channel *, int) {
  auto *c = new Cq();
  c->cq.context = ctx;
  c->cq.cqe = cqe;
  return &c->cq;
}
int destroy_cq(ibv_cq *cq) {
  delete (Cq *)cq;
  return 0;
}
ibv_qp *create_qp(ibv_pd *pd, ibv_qp_init_attr *attr) {
  std::lock_guard<std::mutex> g(mu);
  auto *q = new Qp();
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->qp.qp_type = attr->qp_type;
  q->qp.qp_num = next_qpn++;
  qps[q->qp.qp_num] = q;
  return &q->qp;
}
int destroy_qp(ibv_qp *qp) {
  std::lock_guard<std::mutex> g(mu);
  qps.erase(qp->qp_num);
  delete (Qp *)qp;
  return 0;
}
int modify_qp(ibv_qp *qp, ibv_qp_attr *attr, int mask) {
  std::lock_guard<std::mutex> g(mu);
  auto *q = (Qp *)qp;
  if (mask & IBV_QP_DEST_QPN) q->dest = attr->dest_qp_num;
  if (mask & IBV_QP_STATE) q->state = attr->qp_state;
  return 0;
}
int query_port(ibv_context *, uint8_t port, _compat_ibv_port_attr *compat) {
  auto *p = (ibv_port_attr *)compat;
  memset(p, 0, sizeof(*p));
  p->state = IBV_PORT_ACTIVE;
  p->max_mtu = p->active_mtu = IBV_MTU_4096;
  p->max_msg_sz = 1u << 30;
  p->gid_tbl_len = 1;
  return port == 1 ? 0 : EINVAL;
}
int query_gid(ibv_context *, uint8_t, int, ibv_gid *gid) {
  memset(gid, 0, sizeof(*gid));
  return 0;
}
const char *wc_status_str(ibv_wc_status s) { return s == IBV_WC_SUCCESS ? "success" : "error"; }

// The memory [addr, addr+len) of a region with key `key` and the rights `need`, or nullptr.
char *Reach(uint32_t key, uint64_t addr, uint64_t len, int need) {
  auto it = mrs.find(key);
  if (it == mrs.end()) return nullptr;
  Mr *m = it->second;
  uint64_t lo = (uint64_t)(uintptr_t)m->mr.addr;
  if (addr < lo || len > m->mr.length || addr - lo > m->mr.length - len || (m->access & need) != need) return nullptr;
  return (char *)(uintptr_t)addr;
}

ibv_wc_status Execute(Qp *q, const ibv_send_wr *wr, uint32_t *len) {
  if (q->state == IBV_QPS_ERR) return IBV_WC_WR_FLUSH_ERR;
  uint64_t total = 0;
  for (int i = 0; i < wr->num_sge; i++) total += wr->sg_list[i].length;
  *len = (uint32_t)total;
  switch (wr->opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: {
      char *dst = Reach(wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, total, IBV_ACCESS_REMOTE_WRITE);
      if (!dst && total) return IBV_WC_REM_ACCESS_ERR;
      for (int i = 0; i < wr->num_sge; i++) {
        const ibv_sge &s = wr->sg_list[i];
        char *src = Reach(s.lkey, s.addr, s.length, 0);
        if (!src) return IBV_WC_LOC_PROT_ERR;
        memcpy(dst, src, s.length);
        dst += s.length;
      }
      return IBV_WC_SUCCESS;
    }
    case IBV_WR_RDMA_READ: {
      const char *src = Reach(wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, total, IBV_ACCESS_REMOTE_READ);
      if (!src) return IBV_WC_REM_ACCESS_ERR;
      for (int i = 0; i < wr->num_sge; i++) {
        const ibv_sge &s = wr->sg_list[i];
        char *dst = Reach(s.lkey, s.addr, s.length, IBV_ACCESS_LOCAL_WRITE);
        if (!dst) return IBV_WC_LOC_PROT_ERR;
        memcpy(dst, src, s.length);
        src += s.length;
      }
      return IBV_WC_SUCCESS;
    }
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_ATOMIC_CMP_AND_SWP: {
      if (wr->num_sge != 1 || wr->sg_list[0].length != 8) return IBV_WC_LOC_LEN_ERR;
      auto *target = (uint64_t *)Reach(wr->wr.atomic.rkey, wr->wr.atomic.remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC);
      if (!target || wr->wr.atomic.remote_addr % 8) return IBV_WC_REM_ACCESS_ERR;
      char *local = Reach(wr->sg_list[0].lkey, wr->sg_list[0].addr, 8, IBV_ACCESS_LOCAL_WRITE);
      if (!local) return IBV_WC_LOC_PROT_ERR;
      uint64_t old = *target;
      if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) *target = old + wr->wr.atomic.compare_add;
      else if (old == wr->wr.atomic.compare_add) *target = wr->wr.atomic.swap;
      memcpy(local, &old, 8);
      *len = 8;
      return IBV_WC_SUCCESS;
    }
    default:
      return IBV_WC_LOC_QP_OP_ERR;
  }
}

int post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) {
  std::lock_guard<std::mutex> g(mu);
  auto *q = (Qp *)qp;
  for (; wr; wr = wr->next) {
    if (q->state != IBV_QPS_RTS && q->state != IBV_QPS_ERR) {
      *bad = wr;
      return EINVAL;
    }
    uint64_t total = 0;
    for (int i = 0; i < wr->num_sge; i++) total += wr->sg_list[i].length;
    posts.push_back({qp->qp_num, (int)wr->opcode, wr->send_flags, wr->num_sge, total, wr->imm_data});
    ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = wr->wr_id;
    wc.qp_num = qp->qp_num;
    uint32_t len = 0;
    wc.status = Execute(q, wr, &len);
    wc.byte_len = len;
    wc.vendor_err = wc.status == IBV_WC_SUCCESS ? 0 : 0x42;
    if (wc.status != IBV_WC_SUCCESS) q->state = IBV_QPS_ERR;
    if (wr->send_flags & IBV_SEND_SIGNALED || wc.status != IBV_WC_SUCCESS) ((Cq *)qp->send_cq)->done.push_back(wc);
  }
  return 0;
}

int poll_cq(ibv_cq *cq, int n, ibv_wc *wc) {
  std::lock_guard<std::mutex> g(mu);
  auto *c = (Cq *)cq;
  if (hold) return 0;
  int got = 0;
  while (got < n && !c->done.empty()) {
    wc[got++] = c->done.front();
    c->done.pop_front();
  }
  if (reverse) std::reverse(wc, wc + got);
  return got;
}

const mori_verbs table = {
    get_device_list, free_device_list, get_device_name, open_device, close_device, alloc_pd,  dealloc_pd,
    reg_mr,          dereg_mr,         create_cq,       destroy_cq,  create_qp,    destroy_qp, modify_qp,
    query_port,      query_gid,        wc_status_str,
};

const mori_rdma_provider_t provider = {sizeof(mori_rdma_provider_t), "loopback", &table, nullptr, nullptr};

}  // namespace

const mori_rdma_provider_t *Provider() { return &provider; }
void ReverseCompletions(bool r) {
  std::lock_guard<std::mutex> g(mu);
  reverse = r;
}
void HoldCompletions(bool h) {
  std::lock_guard<std::mutex> g(mu);
  hold = h;
}
std::vector<Posted> Posts() {
  std::lock_guard<std::mutex> g(mu);
  return posts;
}
void ClearPosts() {
  std::lock_guard<std::mutex> g(mu);
  posts.clear();
}

}  // namespace loopback
