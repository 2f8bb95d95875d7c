// SPDX-License-Identifier: MIT
/* The hip platform's copy queue (what transport/sdma queues its bulk copies
 * on), built on hsa-runtime's SDMA copies rather than hipMemcpyAsync: HIP may
 * run a peer copy as a blit kernel on the compute units, which are the
 * application's, while the copy engines sit idle.
 *
 * libhsa-runtime64 is dlopen'ed when the first queue is created, so a program
 * that never creates one does not load it through mori, and a machine without
 * it gets MORI_ENO_GPU with a message. It is the library libamdhip64 itself
 * links (same soname), so the loader hands back the instance HIP already
 * initialised: agents, VMM mappings and pointer info are HIP's own. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hip/hip_runtime_api.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include "core/base/dynlib.h"
#include "core/base/env.h"
#include "core/base/error.h"
#include "core/platform/gpu_api.h"
#include "core/platform/hsa_compat.h"
#include "core/platform/platform.h"

/* Every HSA entry point mori calls, listed once.
 * REQUIRED(symbol): without it there is no copy queue.
 * OPTIONAL(symbol, type): ROCm 5.7 and later (types in hsa_compat.h); both or
 * neither are used. Without them copies go through hsa_amd_memory_async_copy
 * and the runtime picks the engine. */
#define HSA_SYMBOLS(REQUIRED, OPTIONAL)                                          \
  REQUIRED(hsa_init)                                                             \
  REQUIRED(hsa_status_string)                                                    \
  REQUIRED(hsa_system_get_info)                                                  \
  REQUIRED(hsa_iterate_agents)                                                   \
  REQUIRED(hsa_agent_get_info)                                                   \
  REQUIRED(hsa_signal_create)                                                    \
  REQUIRED(hsa_signal_destroy)                                                   \
  REQUIRED(hsa_signal_add_screlease)                                             \
  REQUIRED(hsa_signal_subtract_screlease)                                        \
  REQUIRED(hsa_signal_load_scacquire)                                            \
  REQUIRED(hsa_signal_wait_scacquire)                                            \
  REQUIRED(hsa_amd_pointer_info)                                                 \
  REQUIRED(hsa_amd_memory_async_copy)                                            \
  OPTIONAL(hsa_amd_memory_async_copy_on_engine, mori_hsa_async_copy_on_engine_fn) \
  OPTIONAL(hsa_amd_memory_copy_engine_status, mori_hsa_copy_engine_status_fn)

static struct {
#define HSA_REQUIRED_FIELD(symbol) __typeof__(&symbol) symbol;
#define HSA_OPTIONAL_FIELD(symbol, type) type symbol;
  HSA_SYMBOLS(HSA_REQUIRED_FIELD, HSA_OPTIONAL_FIELD)
#undef HSA_REQUIRED_FIELD
#undef HSA_OPTIONAL_FIELD
} hsa;

#define HSA_ENTRY(symbol) MORI_DYNLIB_ENTRY(hsa, symbol, #symbol)
#define HSA_ENTRY_TYPED(symbol, type) HSA_ENTRY(symbol)
#define HSA_SKIP(symbol)
#define HSA_SKIP_TYPED(symbol, type)
static const mori_dynlib_symbol_t hsa_required[] = {HSA_SYMBOLS(HSA_ENTRY, HSA_SKIP_TYPED)};
static const mori_dynlib_symbol_t hsa_optional[] = {HSA_SYMBOLS(HSA_SKIP, HSA_ENTRY_TYPED)};
#undef HSA_ENTRY
#undef HSA_ENTRY_TYPED
#undef HSA_SKIP
#undef HSA_SKIP_TYPED

enum {
  MAX_AGENTS = 256,
  /* A wait blocks in slices this long, so it notices its deadline. */
  WAIT_SLICE_MS = 100,
  DEFAULT_TIMEOUT_MS = 60000,
};

struct agent_entry {
  hsa_agent_t agent;
  hsa_device_type_t type;
  uint32_t domain; /* PCI domain (GPUs) */
  uint32_t bdf;    /* bus << 8 | device << 3 | function (GPUs) */
};

/* Loaded once per process (load_hsa); read-only afterwards. */
static struct {
  int status; /* 0, or why there is no copy queue (message below) */
  char message[512];
  bool on_engine; /* both OPTIONAL entry points are there */
  uint64_t ticks_per_ms; /* the unit of hsa_signal_wait_scacquire's timeout */
  size_t n_agents;
  struct agent_entry agents[MAX_AGENTS];
} rt;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* Engines handed out so far, process-wide: consecutive (source, destination)
 * pairs take consecutive free engines, so copies to different peers run on
 * different engines instead of queueing behind one. */
static atomic_uint next_engine_pick;

/* A (source agent, destination agent) pair as presented to the runtime, and
 * the SDMA engine its copies go to (0: the runtime picks). */
struct route {
  uint64_t src, dst;
  uint32_t engine;
};

struct mori_platform_queue {
  int device;        /* HIP device index */
  hsa_agent_t agent; /* that device's GPU agent: it runs every copy */
  /* Copies queued and not yet finished: +1 before each copy, and the runtime
   * subtracts 1 when the copy completes. Zero means idle. */
  hsa_signal_t pending;
  /* Copies queued in all, and how many of them are known finished: the
   * engines do not keep queue order, so only a drained queue (pending at
   * zero) says which ones (mori_platform_queue_finished). */
  uint64_t submitted, finished;
  pthread_mutex_t lock; /* routes */
  struct route *routes;
  size_t n_routes, cap_routes;
};

static const char *status_text(hsa_status_t s) {
  const char *text = NULL;
  if (hsa.hsa_status_string && hsa.hsa_status_string(s, &text) == HSA_STATUS_SUCCESS && text) return text;
  return "unknown HSA status";
}

/* The one place hsa_status_t becomes a mori code. */
static int hsa_error(hsa_status_t s, const char *fmt, ...) MORI_PRINTF(2, 3);
static int hsa_error(hsa_status_t s, const char *fmt, ...) {
  char what[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  int code = s == HSA_STATUS_ERROR_INVALID_ARGUMENT ? MORI_EINVAL
           : s == HSA_STATUS_ERROR_OUT_OF_RESOURCES ? MORI_ENOMEM
           : s == HSA_STATUS_ERROR_INVALID_AGENT    ? MORI_ENODEV
                                                    : MORI_ERUNTIME;
  return mori_error_set(code, "hsa: %s: %s (0x%x)", what, status_text(s), (unsigned)s);
}

static hsa_status_t collect_agent(hsa_agent_t agent, void *data) {
  if (rt.n_agents == MAX_AGENTS) return HSA_STATUS_INFO_BREAK;
  struct agent_entry *e = &rt.agents[rt.n_agents];
  memset(e, 0, sizeof(*e));
  e->agent = agent;
  hsa_status_t s = hsa.hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &e->type);
  if (s != HSA_STATUS_SUCCESS) return s;
  if (e->type == HSA_DEVICE_TYPE_GPU) {
    s = hsa.hsa_agent_get_info(agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_BDFID, &e->bdf);
    if (s != HSA_STATUS_SUCCESS) return s;
    /* Older runtimes know no domain: everything is in domain 0 there. */
    if (hsa.hsa_agent_get_info(agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_DOMAIN, &e->domain) != HSA_STATUS_SUCCESS)
      e->domain = 0;
  }
  rt.n_agents++;
  return HSA_STATUS_SUCCESS;
}

/* Never paired with hsa_shut_down, at exit or in a destructor: HIP holds its
 * own reference to the same runtime and may still be tearing down or used by
 * other threads then; the process's exit releases everything anyway. */
static void load_hsa_once(void) {
  static const char *const names[] = {"libhsa-runtime64.so.1", NULL};
  void *lib = NULL;
  int rc = mori_dynlib_load(names, hsa_required, sizeof(hsa_required) / sizeof(hsa_required[0]), MORI_ENO_GPU, &lib);
  if (rc) {
    rt.status = rc;
    snprintf(rt.message, sizeof(rt.message), "hsa: %s", mori_last_error());
    return;
  }
  bool all = true;
  for (size_t i = 0; i < sizeof(hsa_optional) / sizeof(hsa_optional[0]); i++) {
    *hsa_optional[i].slot = dlsym(lib, hsa_optional[i].name);
    all = all && *hsa_optional[i].slot;
  }
  if (!all)
    for (size_t i = 0; i < sizeof(hsa_optional) / sizeof(hsa_optional[0]); i++) *hsa_optional[i].slot = NULL;
  rt.on_engine = all;

  hsa_status_t s = hsa.hsa_init();
  if (s != HSA_STATUS_SUCCESS) {
    rt.status = MORI_ENO_GPU;
    snprintf(rt.message, sizeof(rt.message), "hsa: hsa_init failed: %s (0x%x): no usable AMD GPU (is /dev/kfd there?)",
             status_text(s), (unsigned)s);
    return;
  }
  uint64_t hz = 0;
  s = hsa.hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &hz);
  if (s != HSA_STATUS_SUCCESS || hz == 0) {
    rt.status = MORI_ERUNTIME;
    snprintf(rt.message, sizeof(rt.message), "hsa: reading the timestamp frequency: %s (0x%x)", status_text(s),
             (unsigned)s);
    return;
  }
  rt.ticks_per_ms = hz / 1000 ? hz / 1000 : 1;
  s = hsa.hsa_iterate_agents(collect_agent, NULL);
  if (s != HSA_STATUS_SUCCESS && s != HSA_STATUS_INFO_BREAK) {
    rt.status = MORI_ERUNTIME;
    snprintf(rt.message, sizeof(rt.message), "hsa: listing the agents: %s (0x%x)", status_text(s), (unsigned)s);
  }
}

static int load_hsa(void) {
  pthread_once(&load_once, load_hsa_once);
  return rt.status ? mori_error_set(rt.status, "%s", rt.message) : 0;
}

static const struct agent_entry *find_agent(hsa_agent_t agent) {
  for (size_t i = 0; i < rt.n_agents; i++)
    if (rt.agents[i].agent.handle == agent.handle) return &rt.agents[i];
  return NULL;
}

static int hip_pci_location(int device, int *domain, int *bus, int *slot) {
  hipError_t e;
  if ((e = gpu.deviceGetAttribute(domain, hipDeviceAttributePciDomainID, device)) != hipSuccess ||
      (e = gpu.deviceGetAttribute(bus, hipDeviceAttributePciBusId, device)) != hipSuccess ||
      (e = gpu.deviceGetAttribute(slot, hipDeviceAttributePciDeviceId, device)) != hipSuccess) {
    (void)gpu.getLastError();
    return mori_error_set(MORI_ERUNTIME, "hip: PCI location of device %d: %s", device, gpu.getErrorString(e));
  }
  return 0;
}

/* HIP numbers devices its own way (HIP_VISIBLE_DEVICES renumbers them), so
 * the agent is found by PCI location. A partitioned GPU (MI300X in CPX mode)
 * can show several devices at one location: the k-th HIP device there is the
 * k-th agent there, both listed in the driver's order. */
static int agent_of_device(int device, hsa_agent_t *out) {
  int count = 0;
  int rc = gpu_ready();
  if (rc) return rc;
  hipError_t e = gpu.getDeviceCount(&count);
  if (e != hipSuccess || count == 0) {
    (void)gpu.getLastError();
    return mori_error_set(MORI_ENO_GPU, "hip: no GPU present (%s)", gpu.getErrorString(e));
  }
  if (device < 0 || device >= count)
    return mori_error_set(MORI_EINVAL, "hip: device %d out of range (have %d)", device, count);
  int domain, bus, slot;
  rc = hip_pci_location(device, &domain, &bus, &slot);
  if (rc) return rc;
  int ordinal = 0;
  for (int d = 0; d < device; d++) {
    int dd, db, ds;
    if ((rc = hip_pci_location(d, &dd, &db, &ds)) != 0) return rc;
    if (dd == domain && db == bus && ds == slot) ordinal++;
  }
  for (size_t i = 0; i < rt.n_agents; i++) {
    const struct agent_entry *a = &rt.agents[i];
    if (a->type != HSA_DEVICE_TYPE_GPU || a->domain != (uint32_t)domain || (a->bdf >> 8) != (uint32_t)bus ||
        ((a->bdf >> 3) & 0x1f) != (uint32_t)slot)
      continue;
    if (ordinal-- == 0) {
      *out = a->agent;
      return 0;
    }
  }
  return mori_error_set(MORI_ENODEV,
                        "hsa: no GPU agent at PCI %04x:%02x:%02x for HIP device %d (hidden by ROCR_VISIBLE_DEVICES?)",
                        domain, bus, slot, device);
}

static bool is_vmm_mapping(const void *p) {
  hipMemGenericAllocationHandle_t h;
  if (gpu_ready() != 0 || gpu.memRetainAllocationHandle(&h, (void *)p) != hipSuccess) {
    (void)gpu.getLastError();
    return false;
  }
  (void)gpu.memRelease(h); /* drops only the reference just taken */
  return true;
}

/* The agent owning [p, p + size) and whether it is a GPU. */
static int owner_of(const mori_platform_queue_t *q, const void *p, size_t size, const char *role, hsa_agent_t *owner,
                    bool *gpu) {
  hsa_amd_pointer_info_t info;
  memset(&info, 0, sizeof(info));
  info.size = sizeof(info); /* newer runtimes fill only what this struct has */
  hsa_status_t s = hsa.hsa_amd_pointer_info(p, &info, NULL, NULL, NULL);
  if (s != HSA_STATUS_SUCCESS)
    return hsa_error(s, "hsa_amd_pointer_info of the %s %p of a %zu-byte copy on device %d", role, p, size, q->device);
  if (info.type == HSA_EXT_POINTER_TYPE_UNKNOWN && is_vmm_mapping(p)) {
    /* Runtimes before VMM support in pointer info do not know mappings made
     * with hipMemMap; mori maps them for the queue's device. */
    *owner = q->agent;
    *gpu = true;
    return 0;
  }
  if (info.type == HSA_EXT_POINTER_TYPE_UNKNOWN)
    return mori_error_set(MORI_EFAULT,
                          "hsa: the %s %p of a %zu-byte copy on device %d is memory the HSA runtime does not know: copy "
                          "engines need GPU memory, a VMM mapping or pinned host memory (hipHostMalloc, hipHostRegister)",
                          role, p, size, q->device);
  /* Some runtimes name no owner for imported VMM memory; mori maps it for
   * the queue's device, so that is the agent that reaches it. */
  *owner = info.agentOwner.handle ? info.agentOwner : q->agent;
  const struct agent_entry *a = find_agent(*owner);
  *gpu = !a || a->type == HSA_DEVICE_TYPE_GPU;
  return 0;
}

/* The k-th set bit of mask, counting from 0 (mask has more than k bits). */
static uint32_t nth_bit(uint32_t mask, unsigned k) {
  for (; mask; mask &= mask - 1)
    if (k-- == 0) return mask & -mask;
  return 0;
}

/* The engine for copies from `from` to `to` (0: let the runtime pick). A
 * pair keeps its engine once given one; a pair the runtime cannot rate
 * (same agent on some versions) keeps 0. Called with q->lock held. */
static uint32_t route_engine(mori_platform_queue_t *q, hsa_agent_t from, hsa_agent_t to) {
  for (size_t i = 0; i < q->n_routes; i++)
    if (q->routes[i].src == from.handle && q->routes[i].dst == to.handle) return q->routes[i].engine;
  uint32_t free_mask = 0;
  hsa_status_t s = hsa.hsa_amd_memory_copy_engine_status(to, from, &free_mask);
  /* Every engine busy right now: not a property of the pair, ask again. */
  if (s == HSA_STATUS_ERROR_OUT_OF_RESOURCES || (s == HSA_STATUS_SUCCESS && free_mask == 0)) return 0;
  uint32_t engine = 0;
  if (s == HSA_STATUS_SUCCESS) {
    unsigned n = (unsigned)__builtin_popcount(free_mask);
    engine = nth_bit(free_mask, atomic_fetch_add(&next_engine_pick, 1u) % n);
  }
  if (q->n_routes == q->cap_routes) {
    size_t cap = q->cap_routes ? 2 * q->cap_routes : 8;
    struct route *r = realloc(q->routes, cap * sizeof(*r));
    if (!r) return engine; /* only the cache is lost */
    q->routes = r;
    q->cap_routes = cap;
  }
  q->routes[q->n_routes++] = (struct route){from.handle, to.handle, engine};
  return engine;
}

static void forget_engine(mori_platform_queue_t *q, hsa_agent_t from, hsa_agent_t to) {
  pthread_mutex_lock(&q->lock);
  for (size_t i = 0; i < q->n_routes; i++)
    if (q->routes[i].src == from.handle && q->routes[i].dst == to.handle) q->routes[i].engine = 0;
  pthread_mutex_unlock(&q->lock);
}

static int timeout_ms(void) {
  return mori_env_ms_or("MORI_BOOTSTRAP_TIMEOUT_MS", DEFAULT_TIMEOUT_MS);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int mori_platform_queue_create(int device, mori_platform_queue_t **out) {
  if (!out) return mori_error_set(MORI_EINVAL, "hsa: copy queue: NULL out");
  *out = NULL;
  int rc = load_hsa();
  if (rc) return rc;
  hsa_agent_t agent = {0};
  if ((rc = agent_of_device(device, &agent)) != 0) return rc;
  struct mori_platform_queue *q = calloc(1, sizeof(*q));
  if (!q) return mori_error_set(MORI_ENOMEM, "hsa: copy queue for device %d", device);
  q->device = device;
  q->agent = agent;
  hsa_status_t s = hsa.hsa_signal_create(0, 0, NULL, &q->pending);
  if (s != HSA_STATUS_SUCCESS) {
    free(q);
    return hsa_error(s, "creating the completion signal of device %d's copy queue", device);
  }
  pthread_mutex_init(&q->lock, NULL);
  *out = q;
  return 0;
}

/* The runtime runs a copy on the source's agent when that is a GPU, else on
 * the destination's. mori grants a VMM mapping (its own memory and its
 * peers') to its own device only, so every copy must run on the queue's
 * device: the pair is presented with that device on the side the runtime
 * picks, and with the agent at the other end of the link (a peer GPU, or the
 * CPU for host memory) on the other side, which is what the engine choice
 * needs. */
int mori_platform_queue_copy(mori_platform_queue_t *q, void *dst, const void *src, size_t size) {
  if (!q || !dst || !src)
    return mori_error_set(MORI_EINVAL, "hsa: copy of %zu bytes %p -> %p: NULL queue or pointer", size, src, dst);
  if (size == 0) return 0;
  hsa_agent_t src_owner, dst_owner;
  bool src_gpu, dst_gpu;
  int rc = owner_of(q, src, size, "source", &src_owner, &src_gpu);
  if (rc) return rc;
  if ((rc = owner_of(q, dst, size, "destination", &dst_owner, &dst_gpu)) != 0) return rc;

  hsa_agent_t from = q->agent, to = q->agent;
  if (!src_gpu)
    from = src_owner; /* host memory: the runtime then runs it on `to` */
  else if (!dst_gpu || dst_owner.handle != q->agent.handle)
    to = dst_owner; /* to host memory, or a put to a peer */
  else if (src_owner.handle != q->agent.handle)
    to = src_owner; /* a get from a peer: the peer is the link's far end */

  uint32_t engine = 0;
  if (rt.on_engine) {
    pthread_mutex_lock(&q->lock);
    engine = route_engine(q, from, to);
    pthread_mutex_unlock(&q->lock);
  }

  /* Counted before it is queued: the runtime may finish it (and subtract)
   * before the call returns. */
  hsa.hsa_signal_add_screlease(q->pending, 1);
  q->submitted++;
  hsa_status_t s = HSA_STATUS_ERROR;
  hsa_status_t on_engine_status = HSA_STATUS_SUCCESS;
  if (engine) {
    /* force_copy_on_sdma: a same-device copy stays on the engine instead of
     * becoming a blit kernel, which is what this queue is for. */
    s = hsa.hsa_amd_memory_async_copy_on_engine(dst, to, src, from, size, 0, NULL, q->pending, engine, true);
    if (s != HSA_STATUS_SUCCESS) {
      /* Not queued (nothing will subtract): the runtime picks instead, and
       * this pair stops asking for that engine. */
      on_engine_status = s;
      forget_engine(q, from, to);
    }
  }
  if (!engine || on_engine_status != HSA_STATUS_SUCCESS)
    s = hsa.hsa_amd_memory_async_copy(dst, to, src, from, size, 0, NULL, q->pending);
  if (s != HSA_STATUS_SUCCESS) {
    hsa.hsa_signal_subtract_screlease(q->pending, 1);
    q->submitted--;
    if (on_engine_status != HSA_STATUS_SUCCESS)
      return hsa_error(s,
                       "queueing a %zu-byte copy %p -> %p on device %d (agents 0x%llx -> 0x%llx; on SDMA engine 0x%x it "
                       "failed first with %s)",
                       size, src, dst, q->device, (unsigned long long)from.handle, (unsigned long long)to.handle, engine,
                       status_text(on_engine_status));
    return hsa_error(s, "queueing a %zu-byte copy %p -> %p on device %d (agents 0x%llx -> 0x%llx)", size, src, dst,
                     q->device, (unsigned long long)from.handle, (unsigned long long)to.handle);
  }
  return 0;
}

int mori_platform_queue_wait(mori_platform_queue_t *q) {
  if (!q) return mori_error_set(MORI_EINVAL, "hsa: waiting on a NULL copy queue");
  int limit = timeout_ms();
  int64_t deadline = now_ms() + limit;
  for (;;) {
    int64_t slice = deadline - now_ms();
    slice = slice > WAIT_SLICE_MS ? WAIT_SLICE_MS : slice < 1 ? 1 : slice;
    /* Blocked, not spinning: the runtime spins briefly before it sleeps. */
    hsa_signal_value_t left = hsa.hsa_signal_wait_scacquire(q->pending, HSA_SIGNAL_CONDITION_LT, 1,
                                                            rt.ticks_per_ms * (uint64_t)slice, HSA_WAIT_STATE_BLOCKED);
    if (left == 0) {
      q->finished = q->submitted;
      return 0;
    }
    if (left < 0)
      return mori_error_set(MORI_EIO,
                            "hsa: device %d's copy queue counts %lld copies in flight: more completions than copies "
                            "queued (a copy engine or the runtime failed)",
                            q->device, (long long)left);
    if (now_ms() >= deadline)
      return mori_error_set(MORI_ETIMEDOUT,
                            "hsa: %lld copies on device %d's copy queue still unfinished after %d ms "
                            "(MORI_BOOTSTRAP_TIMEOUT_MS)",
                            (long long)left, q->device, limit);
  }
}

/* The engines finish copies in any order and cannot store or add a word
 * after them; the copy-engine executor of transport/rdma needs both. */
int mori_platform_queue_word(mori_platform_queue_t *q, uint64_t *dst, uint64_t value, bool add) {
  (void)value;
  return mori_error_set(MORI_ENOTSUP, "hsa: a word %s at %p after the copies of device %d's queue is not built",
                        add ? "add" : "store", (void *)dst, q ? q->device : -1);
}

int mori_platform_queue_finished(mori_platform_queue_t *q, uint64_t *count) {
  if (!q) return mori_error_set(MORI_EINVAL, "hsa: NULL copy queue");
  if (hsa.hsa_signal_load_scacquire(q->pending) == 0) q->finished = q->submitted;
  *count = q->finished;
  return 0;
}

int mori_platform_queue_destroy(mori_platform_queue_t *q) {
  if (!q) return 0;
  int device = q->device;
  int rc = 0;
  if (hsa.hsa_signal_load_scacquire(q->pending) != 0) rc = mori_platform_queue_wait(q);
  /* A copy still running would decrement a destroyed signal: keep it. */
  if (rc == 0) hsa.hsa_signal_destroy(q->pending);
  pthread_mutex_destroy(&q->lock);
  free(q->routes);
  free(q);
  if (rc) return mori_error_context(rc, "hsa: destroying device %d's copy queue (its signal is left allocated)", device);
  return 0;
}
