// SPDX-License-Identifier: MIT
/* The copy-engine NIC's verbs table (see internal.h): one device, contexts
 * with a key service and two copy engines, memory regions backed by the
 * platform's shareable allocations, RC queue pairs whose work is checked
 * like a NIC checks it and executed by the engines, and completion queues
 * that each hand out what their QPs have finished in a random order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/base/env.h"
#include "core/base/error.h"
#include "core/base/log.h"
#include "transport/rdma/ce_nic/internal.h"

static const uint8_t GID_TAG[4] = {'m', 'C', 'E', '1'};
static struct ibv_device the_device;
static struct ibv_device *device_list[] = {&the_device, NULL};
static uint32_t context_serial;

static struct ce_context *context_of(struct ibv_context *ctx) { return (struct ce_context *)ctx; }

static uint64_t next_random(struct ce_context *c) { /* xorshift64 */
  c->rng ^= c->rng << 13;
  c->rng ^= c->rng >> 7;
  c->rng ^= c->rng << 17;
  return c->rng;
}

/* One item of MORI_RDMA_CE_FAULTS: `fail@N` or `stall@N` (N >= 1, counting
 * this context's work requests). */
static int take_fault(void *ctx, const char *value, const char *item) {
  struct ce_context *c = ctx;
  unsigned long long n = 0;
  char kind[8] = "", tail = 0;
  if (sscanf(item, "%7[a-z]@%llu%c", kind, &n, &tail) != 2 || n == 0 || (strcmp(kind, "fail") && strcmp(kind, "stall")))
    return mori_error_set(MORI_EINVAL, "MORI_RDMA_CE_FAULTS=\"%s\": \"%s\" is not fail@N or stall@N with N >= 1", value, item);
  if (!strcmp(kind, "fail")) c->fail_at = n;
  else c->stall_at = n;
  return 0;
}

static int parse_faults(struct ce_context *c) { return mori_env_each_item("MORI_RDMA_CE_FAULTS", take_fault, c); }

static struct ibv_device **get_device_list(int *n) {
  if (n) *n = 1;
  return device_list;
}
static void free_device_list(struct ibv_device **list) { (void)list; }
static const char *get_device_name(struct ibv_device *dev) { return "mori_ce0"; }

static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);

/* What a registration holds, given back (its key is already revoked). */
static void free_mr(struct ce_mr *m) {
  if (m->shared.type == MORI_HANDLE_POSIX_FD && m->shared.fd >= 0) close(m->shared.fd);
  mori_platform_mem_release(&m->retained);
  free(m);
}

static int close_device(struct ibv_context *ctx) {
  struct ce_context *c = context_of(ctx);
  if (!c) return 0;
  /* Peers' cached keys of regions never deregistered die first, as a
   * closed NIC context's do. */
  pthread_mutex_lock(&c->mr_lock);
  ce_key_revoke_all(c);
  pthread_mutex_unlock(&c->mr_lock);
  ce_keys_stop(c);
  for (int e = 0; e < CE_ENGINES; e++)
    if (c->engine[e]) mori_platform_queue_wait(c->engine[e]);
  ce_forget_remotes(c); /* the engines are idle */
  ce_owners_forget(c);
  for (int e = 0; e < CE_ENGINES; e++)
    if (c->engine[e]) mori_platform_queue_destroy(c->engine[e]);
  while (c->mrs) {
    struct ce_mr *m = c->mrs;
    c->mrs = m->next;
    free_mr(m);
  }
  ce_key_table_destroy(c);
  pthread_mutex_destroy(&c->lock);
  pthread_mutex_destroy(&c->mr_lock);
  free(c->work);
  free(c);
  return 0;
}

static _Thread_local int next_device = -1;

void mori_ce_nic_use_device(int device) { next_device = device; }

static struct ibv_context *open_device(struct ibv_device *dev) {
  struct ce_context *c = calloc(1, sizeof(*c));
  if (!c) {
    errno = ENOMEM;
    return NULL;
  }
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_init(&c->mr_lock, NULL);
  c->listen_fd = -1;
  c->keys_fd = -1;
  c->ctx.device = dev;
  c->ctx.ops.post_send = post_send;
  c->ctx.ops.poll_cq = poll_cq;
  if (getrandom(&c->rng, sizeof(c->rng), 0) != sizeof(c->rng) || !c->rng) c->rng = 0x9e3779b97f4a7c15ull;
  c->next_qpn = 0x100 + (uint32_t)(next_random(c) & 0xffff);
  c->first_generation = (uint32_t)next_random(c);
  uint32_t machine = ce_machine_hash(), pid = (uint32_t)getpid();
  /* The low half counts this process's contexts; the high half is random,
   * so a later process that gets the same pid does not get the same GID
   * (a peer still holding the dead one's key table would refuse its keys). */
  uint32_t serial = (__atomic_add_fetch(&context_serial, 1, __ATOMIC_RELAXED) & 0xffffu) |
                    (uint32_t)(next_random(c) & 0xffff0000u);
  memcpy(c->gid, GID_TAG, 4);
  memcpy(c->gid + 4, &machine, 4);
  memcpy(c->gid + 8, &pid, 4);
  memcpy(c->gid + 12, &serial, 4);
  int rc = parse_faults(c);
  if (!rc && next_device >= 0) c->device = next_device;
  else if (!rc) rc = mori_platform_current_device(&c->device);
  next_device = -1;
  for (int e = 0; !rc && e < CE_ENGINES; e++) rc = mori_platform_queue_create(c->device, &c->engine[e]);
  if (!rc) rc = ce_key_table_create(c);
  if (!rc) rc = ce_keys_start(c);
  if (rc) {
    MORI_WARN("copy-engine NIC: %s", mori_last_error());
    close_device(&c->ctx);
    errno = ENODEV;
    return NULL;
  }
  return &c->ctx;
}

static struct ibv_pd *alloc_pd(struct ibv_context *ctx) {
  struct ibv_pd *pd = calloc(1, sizeof(*pd));
  if (pd) pd->context = ctx;
  else errno = ENOMEM;
  return pd;
}
static int dealloc_pd(struct ibv_pd *pd) {
  free(pd);
  return 0;
}

/* Memory the platform can share (a mori allocation) is exported for peers;
 * other memory (malloc'ed) is registered for local use only, and a peer's
 * request naming its rkey is refused. Either takes a slot of the key table. */
static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access) {
  struct ce_context *c = context_of(pd->context);
  struct ce_mr *m = calloc(1, sizeof(*m));
  if (!m) {
    errno = ENOMEM;
    return NULL;
  }
  m->shared.type = MORI_HANDLE_NONE;
  m->shared.fd = -1;
  m->retained.handle_type = MORI_HANDLE_NONE;
  void *base = NULL;
  size_t size = 0;
  if (mori_platform_mem_retain(addr, &m->retained, &base, &size) == 0) {
    m->alloc_size = size;
    m->offset = (size_t)((char *)addr - (char *)base);
    if (m->offset > size || length > size - m->offset) {
      mori_platform_mem_release(&m->retained);
      free(m);
      errno = EINVAL; /* the region runs past the allocation it starts in */
      return NULL;
    }
    if (mori_platform_mem_export(&m->retained, m->retained.handle_type, &m->shared) != 0) {
      MORI_WARN("copy-engine NIC: %zu bytes at %p are registered for local use only: %s", length, addr, mori_last_error());
      m->shared.type = MORI_HANDLE_NONE;
      m->shared.fd = -1;
    }
  }
  m->access = access;
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  pthread_mutex_lock(&c->mr_lock);
  uint32_t key = 0;
  int rc = ce_key_take(c, &key);
  if (!rc) {
    m->mr.lkey = m->mr.rkey = key;
    m->next = c->mrs;
    c->mrs = m;
  }
  pthread_mutex_unlock(&c->mr_lock);
  if (rc) {
    MORI_WARN("%s (registering %zu bytes at %p)", mori_last_error(), length, addr);
    free_mr(m);
    errno = ENOMEM;
    return NULL;
  }
  return &m->mr;
}

static int dereg_mr(struct ibv_mr *mr) {
  struct ce_context *c = context_of(mr->context);
  struct ce_mr *m = (struct ce_mr *)mr;
  /* The key dies before the memory can go: a peer checks the table right
   * before each copy, so no request that starts after this store reaches
   * the memory (key_table.c). */
  pthread_mutex_lock(&c->mr_lock);
  for (struct ce_mr **p = &c->mrs; *p; p = &(*p)->next)
    if (*p == m) {
      *p = m->next;
      break;
    }
  ce_key_revoke(c, m->mr.rkey);
  pthread_mutex_unlock(&c->mr_lock);
  free_mr(m);
  return 0;
}

static struct ibv_cq *create_cq(struct ibv_context *ctx, int cqe, void *user, struct ibv_comp_channel *channel, int vector) {
  struct ibv_cq *cq = calloc(1, sizeof(*cq));
  if (!cq) {
    errno = ENOMEM;
    return NULL;
  }
  cq->context = ctx;
  cq->cqe = cqe;
  return cq;
}
static int destroy_cq(struct ibv_cq *cq) {
  free(cq);
  return 0;
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr) {
  if (attr->qp_type != IBV_QPT_RC) {
    errno = EINVAL;
    return NULL;
  }
  struct ce_context *c = context_of(pd->context);
  struct ce_qp *q = calloc(1, sizeof(*q));
  if (!q) {
    errno = ENOMEM;
    return NULL;
  }
  pthread_mutex_lock(&c->lock);
  q->qp.qp_num = c->next_qpn++;
  pthread_mutex_unlock(&c->lock);
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->qp.qp_type = IBV_QPT_RC;
  q->state = IBV_QPS_RESET;
  q->engine = (int)(q->qp.qp_num % CE_ENGINES);
  return &q->qp;
}

/* Moves the QP to error: work it holds (stalled) completes flushed; work
 * already on an engine finishes as it would on a NIC. Caller holds c->lock. */
static void fail_qp(struct ce_context *c, struct ce_qp *q) {
  q->state = IBV_QPS_ERR;
  for (size_t i = 0; i < c->n_work; i++)
    if (c->work[i].qp == q && c->work[i].held) {
      c->work[i].held = false;
      c->work[i].status = IBV_WC_WR_FLUSH_ERR;
    }
}

static int destroy_qp(struct ibv_qp *qp) {
  struct ce_context *c = context_of(qp->context);
  struct ce_qp *q = (struct ce_qp *)qp;
  pthread_mutex_lock(&c->lock);
  /* Nothing completes for a destroyed QP; what its engine still runs may
   * touch memory the caller frees next: wait for it. */
  bool running = false;
  for (size_t i = 0; i < c->n_work;) {
    if (c->work[i].qp != q) {
      i++;
      continue;
    }
    running |= !c->work[i].held && c->work[i].status == IBV_WC_SUCCESS;
    c->work[i] = c->work[--c->n_work];
  }
  if (running) mori_platform_queue_wait(c->engine[q->engine]);
  pthread_mutex_unlock(&c->lock);
  free(q);
  return 0;
}

static int modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
  struct ce_context *c = context_of(qp->context);
  struct ce_qp *q = (struct ce_qp *)qp;
  if (!(mask & IBV_QP_STATE)) return 0;
  pthread_mutex_lock(&c->lock);
  int err = 0;
  if (attr->qp_state == IBV_QPS_RTR) {
    const uint8_t *dgid = attr->ah_attr.grh.dgid.raw;
    if (!(mask & IBV_QP_AV) || memcmp(dgid, GID_TAG, 4) != 0) {
      MORI_WARN("copy-engine NIC: QP 0x%x: the remote GID is not a copy-engine NIC's", qp->qp_num);
      err = EINVAL;
    } else if (memcmp(dgid + 4, c->gid + 4, 4) != 0) {
      MORI_WARN("copy-engine NIC: QP 0x%x: the remote end is on another machine; copy engines reach only this one",
                qp->qp_num);
      err = EHOSTUNREACH;
    } else {
      memcpy(q->dgid, dgid, 16);
    }
  }
  if (!err) {
    if (attr->qp_state == IBV_QPS_ERR) fail_qp(c, q);
    else q->state = attr->qp_state;
  }
  pthread_mutex_unlock(&c->lock);
  return err;
}

static int query_port(struct ibv_context *ctx, uint8_t port_num, struct _compat_ibv_port_attr *compat) {
  if (port_num != 1) return EINVAL;
  /* The transport passes a whole ibv_port_attr (the compat struct is its prefix). */
  struct ibv_port_attr *port = (struct ibv_port_attr *)compat;
  memset(port, 0, sizeof(*port));
  port->state = IBV_PORT_ACTIVE;
  port->max_mtu = port->active_mtu = IBV_MTU_4096;
  port->max_msg_sz = 1u << 30;
  port->gid_tbl_len = 2; /* like a RoCE port: index 0 and 1 (the same GID here) */
  port->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}

static int query_gid(struct ibv_context *ctx, uint8_t port_num, int index, union ibv_gid *gid) {
  if (port_num != 1 || index < 0 || index > 1) return EINVAL;
  memcpy(gid->raw, context_of(ctx)->gid, 16);
  return 0;
}

static const char *wc_status_str(enum ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_BAD_RESP_ERR: return "bad response error";
    case IBV_WC_REM_INV_REQ_ERR: return "invalid request error";
    case IBV_WC_GENERAL_ERR: return "general error";
    default: return "other error";
  }
}

/* ---- posting ---- */

static struct ce_mr *local_region(struct ce_context *c, uint32_t lkey, uint64_t addr, uint64_t len, int need) {
  struct ce_mr *found = NULL;
  pthread_mutex_lock(&c->mr_lock);
  for (struct ce_mr *m = c->mrs; m; m = m->next) {
    if (m->mr.lkey != lkey) continue;
    uint64_t lo = (uint64_t)(uintptr_t)m->mr.addr;
    if (addr >= lo && len <= m->mr.length && addr - lo <= m->mr.length - len && (m->access & need) == need) found = m;
    break;
  }
  pthread_mutex_unlock(&c->mr_lock);
  return found;
}

/* Checks one work request and queues it on the QP's engine. Returns the
 * completion status it gets now (SUCCESS: it runs), or -1 when the request
 * itself is malformed (ibv_post_send fails, as a NIC's would). */
static int execute(struct ce_context *c, struct ce_qp *q, const struct ibv_send_wr *wr, uint32_t *len) {
  bool inline_data = wr->send_flags & IBV_SEND_INLINE;
  /* No scatter entry: zero bytes, as verbs allow (a zero-length write). */
  static const struct ibv_sge no_data = {0, 0, 0};
  if (wr->num_sge > 1 || (wr->num_sge == 0 && inline_data)) return -1;
  const struct ibv_sge *sge = wr->num_sge ? &wr->sg_list[0] : &no_data;
  *len = sge->length;
  uint64_t remote_addr;
  uint32_t rkey;
  int need_remote, need_local;
  switch (wr->opcode) {
    case IBV_WR_RDMA_WRITE:
      remote_addr = wr->wr.rdma.remote_addr, rkey = wr->wr.rdma.rkey;
      need_remote = IBV_ACCESS_REMOTE_WRITE, need_local = 0;
      break;
    case IBV_WR_RDMA_READ:
      if (inline_data) return -1;
      remote_addr = wr->wr.rdma.remote_addr, rkey = wr->wr.rdma.rkey;
      need_remote = IBV_ACCESS_REMOTE_READ, need_local = IBV_ACCESS_LOCAL_WRITE;
      break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      remote_addr = wr->wr.atomic.remote_addr, rkey = wr->wr.atomic.rkey;
      need_remote = IBV_ACCESS_REMOTE_ATOMIC, need_local = IBV_ACCESS_LOCAL_WRITE;
      if (sge->length != 8) return IBV_WC_LOC_LEN_ERR;
      if (remote_addr % 8) return IBV_WC_REM_INV_REQ_ERR;
      break;
    default:
      return -1;
  }
  /* An inline write of one word is what the transport sends as a signal;
   * longer inline data is not carried. */
  if (inline_data && sge->length != 8) return IBV_WC_LOC_LEN_ERR;
  if (!inline_data && wr->num_sge && !local_region(c, sge->lkey, sge->addr, sge->length, need_local)) return IBV_WC_LOC_PROT_ERR;
  enum ibv_wc_status status = IBV_WC_SUCCESS;
  struct ce_remote *r = ce_find_remote(c, q->dgid, rkey, &status);
  if (!r) return status;
  uint64_t length = wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : sge->length;
  if (remote_addr < r->addr || length > r->length || remote_addr - r->addr > r->length - length ||
      (r->access & need_remote) != need_remote)
    return IBV_WC_REM_ACCESS_ERR;
  char *remote = r->base + (remote_addr - r->addr);
  void *local = (void *)(uintptr_t)sge->addr;
  mori_platform_queue_t *engine = c->engine[q->engine];
  if (inline_data && wr->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD && (uintptr_t)remote % 8) return IBV_WC_REM_INV_REQ_ERR;
  /* The owner may have deregistered the key since this region was cached
   * (or while its answer was on the way): the one check, as close to the
   * copy as it can be (what can still race with it: key_table.c). */
  if (!ce_remote_live(c, r)) return IBV_WC_REM_ACCESS_ERR;
  int rc;
  if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    rc = mori_platform_queue_word(engine, (uint64_t *)remote, wr->wr.atomic.compare_add, true);
  } else if (inline_data) {
    /* The value is taken now (inline: the caller's buffer may go when
     * post_send returns); a word store needs an aligned word (checked
     * above). */
    uint64_t value;
    memcpy(&value, local, 8);
    rc = mori_platform_queue_word(engine, (uint64_t *)remote, value, false);
  } else if (wr->opcode == IBV_WR_RDMA_WRITE) {
    rc = length ? mori_platform_queue_copy(engine, remote, local, length) : 0;
  } else {
    rc = length ? mori_platform_queue_copy(engine, local, remote, length) : 0;
  }
  if (rc) {
    MORI_WARN("copy-engine NIC: QP 0x%x: %s", q->qp.qp_num, mori_last_error());
    return IBV_WC_GENERAL_ERR;
  }
  if (length) {
    c->queued[q->engine]++; /* a zero-length write queues nothing */
    r->used[q->engine] = c->queued[q->engine];
  }
  MORI_DEBUG("copy-engine NIC: QP 0x%x: opcode %d, %llu bytes, engine %d, operation %llu", q->qp.qp_num, (int)wr->opcode,
             (unsigned long long)length, q->engine, (unsigned long long)c->queued[q->engine]);
  return IBV_WC_SUCCESS;
}

static enum ibv_wc_opcode completion_opcode(enum ibv_wr_opcode op) {
  return op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : op == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD : IBV_WC_RDMA_WRITE;
}

static int post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  struct ce_context *c = context_of(qp->context);
  struct ce_qp *q = (struct ce_qp *)qp;
  pthread_mutex_lock(&c->lock);
  int err = 0;
  for (; wr; wr = wr->next) {
    if (q->state != IBV_QPS_RTS && q->state != IBV_QPS_ERR) {
      err = EINVAL;
      break;
    }
    if (c->n_work == c->cap_work) {
      size_t cap = c->cap_work ? 2 * c->cap_work : 256;
      struct ce_work *grown = realloc(c->work, cap * sizeof(*grown));
      if (!grown) {
        err = ENOMEM;
        break;
      }
      c->work = grown;
      c->cap_work = cap;
    }
    struct ce_work w = {.wr_id = wr->wr_id, .qp = q, .opcode = completion_opcode(wr->opcode), .status = IBV_WC_SUCCESS};
    uint64_t n = ++c->posted;
    uint32_t len = 0;
    if (q->state == IBV_QPS_ERR) {
      w.status = IBV_WC_WR_FLUSH_ERR;
    } else if (c->fail_at && n == c->fail_at) {
      w.status = IBV_WC_REM_OP_ERR;
      MORI_WARN("copy-engine NIC: work request %llu fails (MORI_RDMA_CE_FAULTS)", (unsigned long long)n);
    } else if (c->stall_at && n >= c->stall_at) {
      w.held = true;
      if (n == c->stall_at)
        MORI_WARN("copy-engine NIC: work request %llu and every later one stall (MORI_RDMA_CE_FAULTS)", (unsigned long long)n);
    } else {
      int status = execute(c, q, wr, &len);
      if (status < 0) {
        c->posted--;
        err = EINVAL;
        break;
      }
      w.status = (enum ibv_wc_status)status;
      w.ticket = c->queued[q->engine];
    }
    w.byte_len = len;
    if (w.status != IBV_WC_SUCCESS && w.status != IBV_WC_WR_FLUSH_ERR) fail_qp(c, q);
    c->work[c->n_work++] = w;
  }
  pthread_mutex_unlock(&c->lock);
  if (err) *bad = wr;
  return err;
}

/* ---- completions ---- */

static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  struct ce_context *c = context_of(cq->context);
  pthread_mutex_lock(&c->lock);
  uint64_t finished[CE_ENGINES];
  for (int e = 0; e < CE_ENGINES; e++) {
    if (mori_platform_queue_finished(c->engine[e], &finished[e]) != 0) {
      MORI_WARN("copy-engine NIC: %s", mori_last_error());
      pthread_mutex_unlock(&c->lock);
      return -1;
    }
  }
  ce_reap_remotes(c, finished); /* dead regions the engines are done with */
  /* Gather what is ready to the front, then hand it out in random order:
   * only this CQ's (its QPs' send completions), as a NIC does; the work of
   * the context's other CQs waits for them to be polled. */
  size_t ready = 0;
  for (size_t i = 0; i < c->n_work; i++) {
    const struct ce_work *w = &c->work[i];
    bool done = w->qp->qp.send_cq == cq && !w->held &&
                (w->status != IBV_WC_SUCCESS || finished[w->qp->engine] >= w->ticket);
    if (!done) continue;
    struct ce_work t = c->work[ready];
    c->work[ready] = c->work[i];
    c->work[i] = t;
    ready++;
  }
  if (ready || c->n_work)
    MORI_DEBUG("copy-engine NIC: engines finished %llu/%llu and %llu/%llu; %zu of %zu requests ready",
               (unsigned long long)finished[0], (unsigned long long)c->queued[0], (unsigned long long)finished[1],
               (unsigned long long)c->queued[1], ready, c->n_work);
  int got = 0;
  while (got < n && ready > 0) {
    size_t pick = (size_t)(next_random(c) % ready);
    struct ce_work w = c->work[pick];
    c->work[pick] = c->work[ready - 1];
    c->work[ready - 1] = c->work[--c->n_work];
    ready--;
    struct ibv_wc *out = &wc[got++];
    memset(out, 0, sizeof(*out));
    out->wr_id = w.wr_id;
    out->status = w.status;
    out->opcode = w.opcode;
    out->qp_num = w.qp->qp.qp_num;
    out->byte_len = w.byte_len;
    out->vendor_err = w.status == IBV_WC_SUCCESS ? 0 : 0xce;
  }
  pthread_mutex_unlock(&c->lock);
  return got;
}

static const struct mori_verbs table = {
    .ibv_get_device_list = get_device_list,
    .ibv_free_device_list = free_device_list,
    .ibv_get_device_name = get_device_name,
    .ibv_open_device = open_device,
    .ibv_close_device = close_device,
    .ibv_alloc_pd = alloc_pd,
    .ibv_dealloc_pd = dealloc_pd,
    .ibv_reg_mr = reg_mr,
    .ibv_dereg_mr = dereg_mr,
    .ibv_create_cq = create_cq,
    .ibv_destroy_cq = destroy_cq,
    .ibv_create_qp = create_qp,
    .ibv_destroy_qp = destroy_qp,
    .ibv_modify_qp = modify_qp,
    .ibv_query_port = query_port,
    .ibv_query_gid = query_gid,
    .ibv_wc_status_str = wc_status_str,
};

const struct mori_verbs *mori_ce_nic_verbs(void) { return &table; }

static const mori_rdma_provider_t provider = {
    .size = sizeof(mori_rdma_provider_t),
    .name = "copy-engine NIC",
    .verbs = &table,
    .use_device = mori_ce_nic_use_device,
};

const mori_rdma_provider_t *mori_ce_nic_provider(void) { return &provider; }

int mori_ce_nic_install(void) { return mori_rdma_use_provider(&provider); }
