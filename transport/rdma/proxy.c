/* The rdma transport's proxy: kernels (and CPU ranks) that need a peer
 * outside the LSA team write requests into their segment's ring; this
 * thread takes them in ticket order, posts them, and counts completions in
 * the ring so mori_proxy_quiet can wait for them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/base/error.h"
#include "core/base/log.h"
#include "transport/rdma/internal.h"

/* Takes every ready request from every ring and posts it. A request that
 * cannot be posted (bad peer, out of bounds) counts as done and failed.
 * Caller holds s->lock. */
int rdma_serve_rings(struct rdma_state *s, bool *worked) {
  *worked = false;
  for (struct rdma_segment *w = s->proxied; w; w = w->next_proxied) {
    for (;;) {
      mori_proxy_request_t *r = &w->ring->slot[w->next % MORI_PROXY_SLOTS];
      if (__atomic_load_n(&r->ready, __ATOMIC_ACQUIRE) != w->next + 1) break;
      mori_proxy_request_t q = *r;
      uint64_t id = (uint64_t)(uintptr_t)w | 1;
      int rc;
      bool in_bounds = q.peer >= 0 && q.peer < s->size && q.peer != s->rank;
      uint64_t span = (q.op == MORI_PROXY_PUT || q.op == MORI_PROXY_GET) ? q.bytes_or_value : 8;
      in_bounds = in_bounds && q.dst_offset <= w->size && span <= w->size - q.dst_offset;
      if (q.op == MORI_PROXY_PUT || q.op == MORI_PROXY_GET) in_bounds = in_bounds && q.src_offset <= w->size && span <= w->size - q.src_offset;
      if (!in_bounds) rc = MORI_EINVAL;
      else if (q.op == MORI_PROXY_PUT) rc = rdma_post_put(s, w, q.peer, q.dst_offset, q.src_offset, q.bytes_or_value, id);
      else if (q.op == MORI_PROXY_GET) rc = rdma_post_get(s, w, q.peer, q.dst_offset, q.src_offset, q.bytes_or_value, id);
      else if (q.op == MORI_PROXY_ATOMIC_ADD) rc = rdma_post_add(s, w, q.peer, q.dst_offset, q.bytes_or_value, id);
      else if (q.op == MORI_PROXY_SIGNAL_SET) rc = rdma_post_set(s, w, q.peer, q.dst_offset, q.bytes_or_value, id);
      else rc = MORI_EINVAL;
      if (rc) {
        MORI_WARN("rdma proxy: request %u to rank %d (dst %llu, %llu bytes) refused: %s", q.op, q.peer,
                  (unsigned long long)q.dst_offset, (unsigned long long)q.bytes_or_value,
                  rc == MORI_EINVAL ? "bad peer or out of the window" : mori_last_error());
        __atomic_add_fetch(&w->ring->failed, 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&w->ring->done, 1, __ATOMIC_RELEASE);
      }
      w->next++;
      __atomic_store_n(&w->ring->consumed, w->next, __ATOMIC_RELEASE);
      *worked = true;
    }
  }
  int n = rdma_reap_some(s);
  if (n > 0) *worked = true;
  return n < 0 ? n : 0;
}

static void *proxy_main(void *arg) {
  struct rdma_state *s = arg;
  pthread_mutex_lock(&s->lock);
  while (!s->stopping) {
    bool worked = false;
    if (rdma_serve_rings(s, &worked) != 0) MORI_WARN("rdma proxy: %s", mori_last_error());
    if (!worked) {
      pthread_mutex_unlock(&s->lock);
      struct timespec pause = {0, 20 * 1000}; /* idle: 20 us */
      nanosleep(&pause, NULL);
      pthread_mutex_lock(&s->lock);
    }
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

int rdma_start_proxy(struct rdma_state *s) {
  int err = pthread_create(&s->proxy, NULL, proxy_main, s);
  if (err) return mori_error_set(-err, "rdma: starting the proxy thread: %s", strerror(err));
  s->proxy_running = true;
  return 0;
}

void rdma_stop_proxy(struct rdma_state *s) {
  if (!s->proxy_running) return;
  pthread_mutex_lock(&s->lock);
  s->stopping = true;
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->proxy, NULL);
  s->proxy_running = false;
}
