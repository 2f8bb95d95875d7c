// SPDX-License-Identifier: MIT
/* The copy-engine NIC's key service: how a peer's registration reaches this
 * process. A real NIC carries the rkey in every request and its responder
 * checks it against its memory regions; here the requester asks the owner's
 * context once per rkey over a local socket ("which memory is rkey K"),
 * gets the region's bounds, access rights and the allocation's handle, maps
 * the allocation, and checks every later request against those bounds and
 * rights itself. At the first contact the owner also sends its key table
 * (key_table.c), which the requester reads before every request on
 * a region it cached: a key the owner deregistered since is refused. The
 * owner answers only for keys it registered as remotely accessible, and
 * only to processes of its own user. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "transport/rdma/ce_nic/internal.h"
#include "transport/rdma/warn_limit.h"

enum { KEY_MAGIC = 0x6b45434du /* "MCEk" */, REPLY_TIMEOUT_S = 10 };
enum { WANT_TABLE = 1 };

struct key_request {
  uint32_t magic;
  uint32_t rkey;
  uint32_t flags; /* WANT_TABLE: the requester has not mapped our key table yet */
};

/* Sent with up to two fds, in this order: the region's allocation
 * (has_fd), the key table (has_table). */
struct key_reply {
  int32_t status; /* enum ibv_wc_status */
  int32_t access;
  int32_t handle_type;
  int32_t has_fd;
  int32_t has_table;
  int32_t pad;
  uint64_t addr, length;      /* the region */
  uint64_t alloc_size, offset; /* the allocation holding it, the region's place in it */
  uint8_t blob[MORI_FABRIC_BLOB_SIZE];
};

/* A peer that died fails every request to it, each with a warning: a few
 * lines a second, with a count of the rest. */
static rdma_warn_limit_t key_warns = RDMA_WARN_LIMIT_INIT("copy-engine NIC key warnings");

uint32_t ce_machine_hash(void) {
  char text[256] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(text, 64, f)) text[0] = '\0';
    fclose(f);
  }
  size_t used = strlen(text);
  gethostname(text + used, sizeof(text) - used - 1);
  uint32_t h = 2166136261u; /* FNV-1a */
  for (const char *p = text; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
  return h;
}

/* The socket of the context with this GID: abstract, named by the machine,
 * the process and the context (bytes 4..15 of the GID). */
static socklen_t socket_name(const uint8_t gid[16], struct sockaddr_un *addr) {
  uint32_t machine, pid, serial;
  memcpy(&machine, gid + 4, 4);
  memcpy(&pid, gid + 8, 4);
  memcpy(&serial, gid + 12, 4);
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  int n = snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "mori-ce-nic-%08x-%u-%u", machine, pid, serial);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static bool same_user(int fd) {
  struct ucred cred;
  socklen_t len = sizeof(cred);
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == getuid();
}

/* Answers one request. The MR list is read under mr_lock, never under the
 * work lock a requester of this process may hold while it waits on a peer. */
static void answer(struct ce_context *c, int fd) {
  struct key_request req;
  struct timeval tv = {REPLY_TIMEOUT_S, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (!same_user(fd) || recv(fd, &req, sizeof(req), MSG_WAITALL) != (ssize_t)sizeof(req) || req.magic != KEY_MAGIC) return;
  struct key_reply rep;
  memset(&rep, 0, sizeof(rep));
  rep.status = IBV_WC_REM_ACCESS_ERR;
  int send_fd = -1;
  pthread_mutex_lock(&c->mr_lock);
  for (struct ce_mr *m = c->mrs; m; m = m->next) {
    if (m->mr.rkey != req.rkey) continue;
    bool remote = m->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    if (!remote || m->shared.type == MORI_HANDLE_NONE) break;
    rep.status = IBV_WC_SUCCESS;
    rep.access = m->access;
    rep.handle_type = m->shared.type;
    rep.addr = (uint64_t)(uintptr_t)m->mr.addr;
    rep.length = m->mr.length;
    rep.alloc_size = m->alloc_size;
    rep.offset = m->offset;
    memcpy(rep.blob, m->shared.blob, sizeof(rep.blob));
    if (m->shared.type == MORI_HANDLE_POSIX_FD) send_fd = m->shared.fd;
    break;
  }
  /* Sent before the lock is dropped: a deregistration cannot close the fd
   * in between. */
  int fds[2], n_fds = 0;
  rep.has_fd = send_fd >= 0;
  if (rep.has_fd) fds[n_fds++] = send_fd;
  rep.has_table = (req.flags & WANT_TABLE) != 0;
  if (rep.has_table) fds[n_fds++] = c->keys_fd;
  struct iovec iov = {&rep, sizeof(rep)};
  char control[CMSG_SPACE(sizeof(fds))];
  memset(control, 0, sizeof(control));
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (n_fds) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, n_fds * sizeof(int));
  }
  if (sendmsg(fd, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof(rep)) MORI_WARN("copy-engine NIC: answering a key request: %s", strerror(errno));
  pthread_mutex_unlock(&c->mr_lock);
}

static void *serve(void *arg) {
  struct ce_context *c = arg;
  while (__atomic_load_n(&c->serving, __ATOMIC_ACQUIRE)) {
    struct pollfd p = {c->listen_fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    answer(c, fd);
    close(fd);
  }
  return NULL;
}

int ce_keys_start(struct ce_context *c) {
  struct sockaddr_un addr;
  socklen_t len = socket_name(c->gid, &addr);
  c->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->listen_fd < 0) return mori_error_errno("copy-engine NIC: key service socket");
  if (bind(c->listen_fd, (struct sockaddr *)&addr, len) != 0 || listen(c->listen_fd, 64) != 0) {
    int rc = mori_error_errno("copy-engine NIC: key service socket @%s", addr.sun_path + 1);
    close(c->listen_fd);
    c->listen_fd = -1;
    return rc;
  }
  c->serving = true;
  int err = pthread_create(&c->server, NULL, serve, c);
  if (err) {
    c->serving = false;
    close(c->listen_fd);
    c->listen_fd = -1;
    return mori_error_set(-err, "copy-engine NIC: starting the key service: %s", strerror(err));
  }
  return 0;
}

void ce_keys_stop(struct ce_context *c) {
  if (c->serving) {
    __atomic_store_n(&c->serving, false, __ATOMIC_RELEASE);
    pthread_join(c->server, NULL);
  }
  if (c->listen_fd >= 0) close(c->listen_fd);
  c->listen_fd = -1;
}

/* Asks the owner (for its key table too when want_table); *fd gets the
 * handle's fd and *table_fd the table's when they came (else -1). */
static enum ibv_wc_status ask(const uint8_t owner[16], uint32_t rkey, bool want_table, struct key_reply *rep, int *fd,
                              int *table_fd) {
  *fd = *table_fd = -1;
  struct sockaddr_un addr;
  socklen_t len = socket_name(owner, &addr);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return IBV_WC_RETRY_EXC_ERR;
  struct timeval tv = {REPLY_TIMEOUT_S, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  struct key_request req = {KEY_MAGIC, rkey, want_table ? WANT_TABLE : 0};
  if (connect(s, (struct sockaddr *)&addr, len) != 0 || !same_user(s) ||
      send(s, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
    rdma_warn_limited(&key_warns, "copy-engine NIC: the owner of rkey 0x%x (@%s) cannot be reached: %s", rkey, addr.sun_path + 1,
              strerror(errno));
    close(s);
    return IBV_WC_RETRY_EXC_ERR;
  }
  /* Zeroed: a failed recvmsg writes no control data back, and stale bytes
   * read as descriptors would close someone else's. */
  char control[CMSG_SPACE(2 * sizeof(int))];
  memset(control, 0, sizeof(control));
  memset(rep, 0, sizeof(*rep));
  struct iovec iov = {rep, sizeof(*rep)};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof(control)};
  ssize_t got = recvmsg(s, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
  int recv_errno = errno;
  int fds[2] = {-1, -1}, n_fds = 0;
  for (struct cmsghdr *cm = got >= 0 ? CMSG_FIRSTHDR(&msg) : NULL; cm; cm = CMSG_NXTHDR(&msg, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
      for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
        int f;
        memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        if (n_fds < 2) fds[n_fds++] = f;
        else close(f); /* more than any reply carries: not ours to keep */
      }
  close(s);
  int want_fds = (rep->has_fd ? 1 : 0) + (rep->has_table ? 1 : 0);
  /* A table comes only when asked for (else a second copy of one already
   * mapped); a reply without one, when asked, is as bad. */
  bool whole = got == (ssize_t)sizeof(*rep) && !(msg.msg_flags & MSG_CTRUNC) && n_fds == want_fds &&
               (bool)rep->has_table == want_table;
  if (!whole) {
    for (int i = 0; i < n_fds; i++) close(fds[i]);
    rdma_warn_limited(&key_warns, "copy-engine NIC: the owner of rkey 0x%x (@%s) sent no whole reply: %zd of %zu bytes%s%s, %d of %d "
              "descriptors%s, key table %s when %s",
              rkey, addr.sun_path + 1, got, sizeof(*rep), got < 0 ? " — " : "", got < 0 ? strerror(recv_errno) : "",
              n_fds, want_fds, (msg.msg_flags & MSG_CTRUNC) ? " (truncated)" : "", rep->has_table ? "sent" : "not sent",
              want_table ? "asked for" : "not asked for");
    return IBV_WC_RETRY_EXC_ERR;
  }
  int i = 0;
  if (rep->has_fd) *fd = fds[i++];
  if (rep->has_table) *table_fd = fds[i++];
  /* The owner answers found or refused; anything else is a bad response,
   * not a status of ours to pass on. */
  switch (rep->status) {
    case IBV_WC_SUCCESS:
    case IBV_WC_REM_ACCESS_ERR:
      return (enum ibv_wc_status)rep->status;
    default:
      rdma_warn_limited(&key_warns, "copy-engine NIC: the owner of rkey 0x%x (@%s) answered with status %d", rkey, addr.sun_path + 1,
                (int)rep->status);
      if (*fd >= 0) close(*fd);
      if (*table_fd >= 0) close(*table_fd);
      *fd = *table_fd = -1;
      return IBV_WC_BAD_RESP_ERR;
  }
}

/* Maps the allocation the reply describes. */
static int map_remote(struct ce_context *c, const struct key_reply *rep, int fd, struct ce_remote *r) {
  mori_shareable_t shared;
  memset(&shared, 0, sizeof(shared));
  shared.type = rep->handle_type;
  shared.fd = fd;
  memcpy(shared.blob, rep->blob, sizeof(shared.blob));
  size_t granularity = 0;
  int rc = mori_platform_mem_import(&shared, rep->alloc_size, c->device, &r->mem);
  if (rc) return rc;
  rc = mori_platform_granularity(c->device, &granularity);
  if (!rc) rc = mori_platform_va_reserve(c->device, rep->alloc_size, granularity, &r->va);
  if (rc) {
    mori_platform_mem_release(&r->mem);
    return rc;
  }
  r->va_size = rep->alloc_size;
  rc = mori_platform_mem_map(r->va, rep->alloc_size, &r->mem);
  if (!rc) {
    rc = mori_platform_set_access(r->va, rep->alloc_size, c->device);
    if (rc) mori_platform_mem_unmap(c->device, r->va, rep->alloc_size);
  }
  if (rc) {
    mori_platform_va_release(c->device, r->va, rep->alloc_size);
    mori_platform_mem_release(&r->mem);
    return rc;
  }
  r->base = (char *)r->va + rep->offset;
  return 0;
}

/* Gives r's mapping back (no engine may still copy through it). */
static void unmap_remote(struct ce_context *c, struct ce_remote *r) {
  mori_platform_mem_unmap(c->device, r->va, r->va_size);
  mori_platform_va_release(c->device, r->va, r->va_size);
  mori_platform_mem_release(&r->mem);
  free(r);
}

/* Whether every engine has finished the last copy that used r. */
static bool engines_done_with(const struct ce_remote *r, const uint64_t *finished) {
  for (int e = 0; e < CE_ENGINES; e++)
    if (r->used[e] && finished[e] < r->used[e]) return false;
  return true;
}

void ce_reap_remotes(struct ce_context *c, const uint64_t *finished) {
  if (!c->dead) return;
  uint64_t asked[CE_ENGINES];
  if (!finished) {
    for (int e = 0; e < CE_ENGINES; e++)
      if (!c->engine[e]) asked[e] = UINT64_MAX; /* never queued anything */
      else if (mori_platform_queue_finished(c->engine[e], &asked[e]) != 0) return; /* the next poll tries again */
    finished = asked;
  }
  for (struct ce_remote **p = &c->dead; *p;) {
    struct ce_remote *r = *p;
    if (!engines_done_with(r, finished)) {
      p = &r->next;
      continue;
    }
    *p = r->next;
    unmap_remote(c, r);
  }
}

/* r leaves the cache for the dead list; unmapped as soon as the engines
 * are done with it (now, or at a later poll). */
static void bury_remote(struct ce_context *c, struct ce_remote *r) {
  for (struct ce_remote **p = &c->remotes; *p; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      break;
    }
  r->next = c->dead;
  c->dead = r;
}

bool ce_remote_live(struct ce_context *c, struct ce_remote *r) {
  if (ce_key_live(r->from, r->rkey)) return true;
  struct sockaddr_un addr;
  socket_name(r->owner, &addr);
  rdma_warn_limited(&key_warns, "copy-engine NIC: rkey 0x%x (slot %u) was deregistered by its owner (@%s): requests on it fail with a "
            "remote access error, and its mapping here goes once the engines are done with it",
            r->rkey, r->rkey & (CE_KEY_SLOTS - 1), addr.sun_path + 1);
  bury_remote(c, r);
  ce_reap_remotes(c, NULL);
  return false;
}

/* Regions whose keys died without a request noticing (their owner freed
 * them): buried on the next miss, so a peer's freed memory is not held
 * here until this context closes. */
static void sweep_remotes(struct ce_context *c) {
  for (struct ce_remote *r = c->remotes, *next; r; r = next) {
    next = r->next;
    if (!ce_key_live(r->from, r->rkey)) bury_remote(c, r);
  }
  ce_reap_remotes(c, NULL);
}

struct ce_remote *ce_find_remote(struct ce_context *c, const uint8_t owner[16], uint32_t rkey,
                                 enum ibv_wc_status *status) {
  for (struct ce_remote *r = c->remotes; r; r = r->next)
    if (r->rkey == rkey && !memcmp(r->owner, owner, 16)) return r; /* its key is checked before the copy */
  sweep_remotes(c);
  struct ce_owner *from = ce_owner_find(c, owner);
  /* A key the owner's table does not hold is dead: no need to ask. */
  if (from && !ce_key_live(from, rkey)) {
    *status = IBV_WC_REM_ACCESS_ERR;
    return NULL;
  }
  struct key_reply rep;
  int fd = -1, table_fd = -1;
  *status = ask(owner, rkey, !from, &rep, &fd, &table_fd);
  if (table_fd >= 0) {
    if (ce_owner_add(c, owner, table_fd, &from) != 0) {
      MORI_WARN("%s (the owner of rkey 0x%x)", mori_last_error(), rkey);
      if (*status == IBV_WC_SUCCESS) *status = IBV_WC_REM_ACCESS_ERR;
    }
    close(table_fd);
  }
  if (*status != IBV_WC_SUCCESS) {
    if (fd >= 0) close(fd);
    return NULL;
  }
  struct ce_remote *r = calloc(1, sizeof(*r));
  bool sane = rep.offset <= rep.alloc_size && rep.length <= rep.alloc_size - rep.offset &&
              (rep.handle_type != MORI_HANDLE_POSIX_FD || fd >= 0);
  int rc = !r ? mori_error_set(MORI_ENOMEM, "copy-engine NIC: remote region")
         : !sane ? mori_error_set(MORI_EPROTO, "copy-engine NIC: the owner of rkey 0x%x answered with a region outside its allocation", rkey)
                 : map_remote(c, &rep, fd, r);
  if (fd >= 0) close(fd);
  if (rc) {
    MORI_WARN("copy-engine NIC: mapping the region of rkey 0x%x: %s", rkey, mori_last_error());
    free(r);
    *status = IBV_WC_REM_ACCESS_ERR;
    return NULL;
  }
  memcpy(r->owner, owner, 16);
  r->from = from;
  r->rkey = rkey;
  r->addr = rep.addr;
  r->length = rep.length;
  r->access = rep.access;
  r->next = c->remotes;
  c->remotes = r;
  return r;
}

void ce_forget_remotes(struct ce_context *c) {
  while (c->remotes) bury_remote(c, c->remotes);
  uint64_t all[CE_ENGINES];
  for (int e = 0; e < CE_ENGINES; e++) all[e] = UINT64_MAX;
  ce_reap_remotes(c, all); /* the engines are idle: every mapping goes */
}
