// SPDX-License-Identifier: MIT
/* Host platform: CPU ranks share memory through the same window layout.
 * Physical memory is a memfd (POSIX-fd handles) or a named shm object (the
 * fabric-style handle: its name is the blob); VA is reserved with
 * mmap(PROT_NONE) and memory is mapped over it with MAP_FIXED|MAP_SHARED. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/base/checked_math.h"
#include "core/base/error.h"
#include "core/base/pid_namespace.h"
#include "core/base/profile.h"
#include "core/base/size_text.h"
#include "core/platform/host_shm_sweep.h"
#include "core/platform/platform.h"

const char *mori_platform_name(void) { return "host"; }

int mori_platform_device_count(int *count) {
  *count = 1;
  return 0;
}

int mori_platform_device_names(int *count) {
  *count = MORI_MAX_DEVICES;
  return 0;
}

int mori_platform_current_device(int *device) {
  *device = 0;
  return 0;
}

int mori_platform_device_uuid(int device, uint8_t uuid[16]) {
  memset(uuid, 0, 16);
  return 0;
}

int mori_platform_device_pci_bus_id(int device, char *out, size_t len) {
  if (len) out[0] = '\0';
  return mori_error_set(MORI_ENOTSUP, "host: CPU ranks have no PCI device");
}

int mori_platform_device_describe(int device, char *name, size_t name_len, char *arch, size_t arch_len) {
  snprintf(name, name_len, "CPU");
  char line[256];
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f && fgets(line, sizeof(line), f)) {
    char *colon = strchr(line, ':');
    if (strncmp(line, "model name", 10) != 0 || !colon) continue;
    colon += 1 + strspn(colon + 1, " \t");
    colon[strcspn(colon, "\n")] = '\0';
    snprintf(name, name_len, "%s", colon);
    break;
  }
  if (f) fclose(f);
  struct utsname u;
  snprintf(arch, arch_len, "%s", uname(&u) == 0 ? u.machine : "unknown");
  return 0;
}

int mori_platform_module_set_global(int device, void *module, const char *name, const void *src, size_t size) {
  return mori_error_set(MORI_ENOTSUP, "host: there are no GPU modules on the host platform (global '%s')", name);
}

int mori_platform_granularity(int device, size_t *granularity) {
  *granularity = (size_t)sysconf(_SC_PAGESIZE);
  return 0;
}

static void sweep_once(void) { (void)mori_host_shm_sweep("/dev/shm"); }

static int make_shm_name(char *name, size_t len) {
  static pthread_once_t swept = PTHREAD_ONCE_INIT;
  pthread_once(&swept, sweep_once); /* what crashed or killed processes left (host_shm_sweep.h) */
  static atomic_uint counter;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  unsigned salt = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 12);
  /* The pid namespace rides along: a process of another namespace sharing
   * /dev/shm (a container) must not judge this pid by its own. Read each
   * time, as getpid() is: a forked child may have moved to another one. */
  snprintf(name, len, "/mori.%d.%u.%08x.p%llx", (int)getpid(), atomic_fetch_add(&counter, 1), salt,
           (unsigned long long)mori_pid_namespace());
  return 0;
}

/* The named objects this process made and has not released: unlinked at
 * exit, so a program that ends without mori_finalize leaves nothing in
 * /dev/shm (a crash or a kill still does; host_shm_sweep.c removes those
 * later). Each carries its creator's pid: a forked child, which inherits
 * the list, leaves its parent's objects alone. */
struct owned_name {
  char name[MORI_FABRIC_BLOB_SIZE];
  pid_t creator;
  struct owned_name *next;
};
static struct owned_name *owned_names;
static pthread_mutex_t owned_lock = PTHREAD_MUTEX_INITIALIZER;

static void unlink_owned_at_exit(void) {
  pthread_mutex_lock(&owned_lock);
  for (struct owned_name *o = owned_names; o; o = o->next)
    if (o->creator == getpid()) shm_unlink(o->name);
  pthread_mutex_unlock(&owned_lock);
}

static void register_at_exit(void) { atexit(unlink_owned_at_exit); }

static void own_name(const char *name) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_at_exit);
  struct owned_name *o = calloc(1, sizeof(*o));
  if (!o) return; /* only the exit-time cleanup is lost; the sweep still finds it */
  snprintf(o->name, sizeof(o->name), "%s", name);
  o->creator = getpid();
  pthread_mutex_lock(&owned_lock);
  o->next = owned_names;
  owned_names = o;
  pthread_mutex_unlock(&owned_lock);
}

/* Drops `name` from the list; returns whether this process made it (a
 * forked child releasing memory it inherited did not: the name stays, as
 * the parent still uses it). A name missing from the list (its entry could
 * not be made) is judged by the pid it carries. */
static bool disown_name(const char *name) {
  pid_t creator = 0;
  pthread_mutex_lock(&owned_lock);
  for (struct owned_name **p = &owned_names; *p; p = &(*p)->next) {
    if (strcmp((*p)->name, name) != 0) continue;
    struct owned_name *o = *p;
    creator = o->creator;
    *p = o->next;
    free(o);
    break;
  }
  pthread_mutex_unlock(&owned_lock);
  int in_name = 0;
  if (!creator && sscanf(name, "/mori.%d.", &in_name) == 1) creator = (pid_t)in_name;
  return creator == getpid();
}

/* Shared memory is a tmpfs file, and a file's pages are found at its first
 * touch: one created larger than the file system can hold kills the process
 * with SIGBUS there, long after the call that made it returned. So pages are
 * reserved (fallocate) when memory is handed out: all of it at creation, or,
 * for a heap chunk (MORI_PMEM_BACK_ON_DEMAND), each piece as the heap hands
 * it out (mori_platform_mem_back), so a 1 GiB chunk costs what it holds. */
static int no_room(int fd, size_t size, const char *what) {
  struct statvfs fs;
  if (fstatvfs(fd, &fs) == 0 && fs.f_blocks != 0)
    return mori_error_set(MORI_ENOMEM,
                          "host: %s of shared memory (%s) asked for, but only %s is free where it lives (/dev/shm for "
                          "named objects: df -h /dev/shm; a smaller MORI_SHMEM_VMM_CHUNK_SIZE or MORI_SHMEM_HEAP_SIZE "
                          "asks for less)",
                          MORI_SIZE_TEXT(size), what, MORI_SIZE_TEXT((size_t)fs.f_bavail * fs.f_frsize));
  return mori_error_set(MORI_ENOMEM, "host: %s of shared memory (%s) asked for, but the system has no memory for it",
                        MORI_SIZE_TEXT(size), what);
}

/* A file system without fallocate: judged by what it has free (several
 * such files that each fit can still add up to more; none is made here). */
static int check_space(int fd, size_t size, const char *what) {
  struct statvfs fs;
  if (fstatvfs(fd, &fs) != 0 || fs.f_blocks == 0) return 0; /* nothing to judge by */
  return size <= (unsigned long long)fs.f_bavail * fs.f_frsize ? 0 : no_room(fd, size, what);
}

/* tmpfs stops a fallocate at a pending signal and gives back what that call
 * had reserved, so under a timer signal faster than one reservation (a
 * sampling profiler's) retrying would never finish: signals are held back
 * for the call (a fatal one still ends the process) and delivered after it.
 * One call for the whole range: what /dev/shm cannot hold fails whole, at
 * once, instead of filling it piece by piece first. */
static int fallocate_unsignalled(int fd, size_t offset, size_t size) {
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &saved);
  int rc = fallocate(fd, 0, (off_t)offset, (off_t)size), err = errno;
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  errno = err;
  return rc;
}

static int back_pages(int fd, size_t offset, size_t size, const char *what) {
  if (size == 0) return 0;
  if (fallocate_unsignalled(fd, offset, size) == 0) return 0;
  if (errno == ENOSPC || errno == ENOMEM) return no_room(fd, size, what);
  if (errno == EOPNOTSUPP || errno == ENOSYS) return check_space(fd, size, what);
  return mori_error_errno("host: reserving %s of shared memory (%s) at offset %zu", MORI_SIZE_TEXT(size), what, offset);
}

static int host_mem_create(int device, size_t size, int handle_type, unsigned flags, mori_pmem_t *out) {
  /* (MORI_PMEM_UNCACHED: shared memory is coherent, it changes nothing here) */
  memset(out, 0, sizeof(*out));
  int fd = -1;
  if (handle_type == MORI_HANDLE_FABRIC) {
    make_shm_name(out->name, sizeof(out->name));
    fd = shm_open(out->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return mori_error_errno("host: shm_open(%s)", out->name);
  } else if (handle_type == MORI_HANDLE_POSIX_FD) {
    fd = memfd_create("mori", MFD_CLOEXEC);
    if (fd < 0) return mori_error_errno("host: memfd_create(%zu bytes)", size);
  } else {
    return mori_error_set(MORI_EINVAL, "host: unknown handle type %d", handle_type);
  }
  const char *what = out->name[0] ? out->name : "memfd";
  int rc = size > (size_t)INT64_MAX ? mori_error_set(MORI_ERANGE, "host: %zu bytes of shared memory", size) : 0;
  if (!rc && ftruncate(fd, (off_t)size) != 0) rc = mori_error_errno("host: ftruncate to %s", MORI_SIZE_TEXT(size));
  if (!rc && !(flags & MORI_PMEM_BACK_ON_DEMAND)) rc = back_pages(fd, 0, size, what);
  if (rc) {
    close(fd);
    if (out->name[0]) shm_unlink(out->name);
    return rc;
  }
  if (out->name[0]) own_name(out->name);
  out->handle = (uint64_t)fd;
  out->size = size;
  out->device = device;
  out->handle_type = handle_type;
  out->owned = true;
  return 0;
}

int mori_platform_mem_back(const mori_pmem_t *mem, size_t offset, size_t size) {
  if (offset > mem->size || size > mem->size - offset)
    return mori_error_set(MORI_ERANGE, "host: backing [%zu, +%zu) of a %zu-byte allocation", offset, size, mem->size);
  return back_pages((int)mem->handle, offset, size, mem->name[0] ? mem->name : "memfd");
}

bool mori_platform_fresh_memory_reads_zero(void) { return true; }

int mori_platform_mem_release(mori_pmem_t *mem) {
  if (mem->handle_type == MORI_HANDLE_NONE) return 0;
  close((int)mem->handle);
  if (mem->owned && mem->name[0] && disown_name(mem->name)) shm_unlink(mem->name);
  mem->handle_type = MORI_HANDLE_NONE;
  return 0;
}

static int host_mem_export(const mori_pmem_t *mem, int handle_type, mori_shareable_t *out) {
  memset(out, 0, sizeof(*out));
  out->type = handle_type;
  out->fd = -1;
  if (handle_type == MORI_HANDLE_POSIX_FD) {
    out->fd = fcntl((int)mem->handle, F_DUPFD_CLOEXEC, 0);
    if (out->fd < 0) return mori_error_errno("host: dup of memfd");
    return 0;
  }
  if (handle_type == MORI_HANDLE_FABRIC && mem->name[0]) {
    memcpy(out->blob, mem->name, sizeof(mem->name));
    return 0;
  }
  return mori_error_set(MORI_ENOTSUP, "host: memory created as %s cannot be exported as %s",
                        mori_handle_type_name(mem->handle_type), mori_handle_type_name(handle_type));
}

static int host_mem_import(const mori_shareable_t *shared, size_t size, int device, mori_pmem_t *out) {
  memset(out, 0, sizeof(*out));
  int fd;
  if (shared->type == MORI_HANDLE_POSIX_FD) {
    fd = fcntl(shared->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return mori_error_errno("host: dup of imported fd %d", shared->fd);
  } else if (shared->type == MORI_HANDLE_FABRIC) {
    char name[MORI_FABRIC_BLOB_SIZE];
    memcpy(name, shared->blob, sizeof(name));
    name[sizeof(name) - 1] = '\0';
    if (name[0] != '/') return mori_error_set(MORI_EINVAL, "host: fabric blob is not a shm name");
    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return mori_error_errno("host: shm_open(%s) of a peer's memory", name);
  } else {
    return mori_error_set(MORI_EINVAL, "host: cannot import handle type %d", shared->type);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < size) {
    close(fd);
    return mori_error_set(MORI_EINVAL, "host: imported memory has %lld bytes, expected at least %zu",
                          (long long)st.st_size, size);
  }
  out->handle = (uint64_t)fd;
  out->size = size;
  out->device = device;
  out->handle_type = shared->type;
  out->owned = false;
  return 0;
}

int mori_platform_mem_retain(void *ptr, mori_pmem_t *out, void **base, size_t *size) {
  /* A shared mapping made elsewhere: find it in /proc/self/maps and open its
   * backing file through /proc/self/map_files. */
  FILE *maps = fopen("/proc/self/maps", "r");
  if (!maps) return mori_error_errno("host: open /proc/self/maps");
  char line[512];
  uintptr_t p = (uintptr_t)ptr;
  int rc = mori_error_set(MORI_ENOT_OWNED, "host: %p is not inside a shared file mapping", ptr);
  while (fgets(line, sizeof(line), maps)) {
    unsigned long lo, hi, off;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perms, &off) != 4) continue;
    if (p < lo || p >= hi) continue;
    if (perms[3] != 's' || off != 0) break;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", lo, hi);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      rc = mori_error_errno("host: open %s", path);
      break;
    }
    memset(out, 0, sizeof(*out));
    out->handle = (uint64_t)fd;
    out->size = hi - lo;
    out->handle_type = MORI_HANDLE_POSIX_FD;
    *base = (void *)lo;
    *size = hi - lo;
    rc = 0;
    break;
  }
  fclose(maps);
  return rc;
}

static int host_va_reserve(int device, size_t size, size_t alignment, void **out) {
  size_t span;
  if (alignment == 0 || (alignment & (alignment - 1)) || mori_add_overflows(size, alignment, &span))
    return mori_error_set(MORI_ERANGE, "host: reserve %zu bytes of VA aligned to %zu: not a range", size, alignment);
  char *raw = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return mori_error_errno("host: reserve %s of VA", MORI_SIZE_TEXT(size));
  uintptr_t aligned = ((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1);
  /* Trim the slack on both sides so the reservation is exactly [aligned, +size). */
  if (aligned > (uintptr_t)raw) munmap(raw, aligned - (uintptr_t)raw);
  size_t tail = (uintptr_t)raw + span - (aligned + size);
  if (tail) munmap((void *)(aligned + size), tail);
  *out = (void *)aligned;
  return 0;
}

int mori_platform_va_release(int device, void *va, size_t size) {
  if (munmap(va, size) != 0) return mori_error_errno("host: release VA %p (%zu bytes)", va, size);
  return 0;
}

static int host_mem_map(void *va, size_t size, const mori_pmem_t *mem) {
  void *p = mmap(va, size, PROT_NONE, MAP_SHARED | MAP_FIXED, (int)mem->handle, 0);
  if (p == MAP_FAILED) return mori_error_errno("host: map %zu bytes at %p", size, va);
  return 0;
}

int mori_platform_mem_unmap(int device, void *va, size_t size) {
  /* Back to a PROT_NONE reservation, so the VA stays ours until released. */
  void *p = mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return mori_error_errno("host: unmap %zu bytes at %p", size, va);
  return 0;
}

int mori_platform_span_release(int device, void *va, int slots, size_t stride, const bool *mapped) {
  (void)mapped; /* munmap takes the mapped slots with the reservation */
  return mori_platform_va_release(device, va, (size_t)slots * stride);
}

static int host_set_access(void *va, size_t size, int device) {
  if (mprotect(va, size, PROT_READ | PROT_WRITE) != 0)
    return mori_error_errno("host: set access on %p (%zu bytes)", va, size);
  return 0;
}

/* Written, not handed back to the file (MADV_REMOVE): pages handed back
 * would lose the reservation made when the memory was created, and a later
 * touch could die of SIGBUS again. Fresh memory needs no zeroing here
 * (mori_platform_fresh_memory_reads_zero), which was what made large
 * ranges worth handing back. */
int mori_platform_memset_zero(int device, void *ptr, size_t size) {
  (void)device;
  memset(ptr, 0, size);
  return 0;
}

int mori_platform_memcpy(int device, void *dst, const void *src, size_t size) {
  uint64_t t = mori_profile_now();
  memmove(dst, src, size);
  return mori_profile_done(MORI_PROF_BLOCKING_COPY, t, 0);
}

static int host_upload(int device, void *dst, const void *src, size_t size) {
  memmove(dst, src, size);
  return 0;
}

bool mori_platform_device_is_async(void) { return false; }

static void host_queues_wait(int device);

/* As a device synchronisation: every copy queued on the device's copy
 * queues before the call has finished (memory is unmapped after one, and a
 * copy still queued would write into what was unmapped). */
static int host_synchronize(int device) {
  host_queues_wait(device);
  atomic_thread_fence(memory_order_seq_cst);
  return 0;
}

int mori_platform_can_access_peer(int device, int peer_device, bool *yes) {
  *yes = true; /* same node: shared memory reaches every local process */
  return 0;
}

static int host_alloc(size_t size, void **out) {
  *out = calloc(1, size ? size : 1);
  if (!*out) return mori_error_set(MORI_ENOMEM, "host: allocating %zu bytes", size);
  return 0;
}

int mori_platform_device_alloc(int device, size_t size, void **out) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_DEVICE_ALLOC, t, host_alloc(size, out));
}

int mori_platform_device_free(int device, void *ptr) {
  if (!ptr) return 0;
  uint64_t t = mori_profile_now();
  free(ptr);
  return mori_profile_done(MORI_PROF_DEVICE_ALLOC, t, 0);
}

int mori_platform_host_alloc_mapped(int device, size_t size, void **host, void **dev) {
  uint64_t t = mori_profile_now();
  int rc = host_alloc(size, host);
  if (!rc) *dev = *host;
  return mori_profile_done(MORI_PROF_PINNED_ALLOC, t, rc);
}

int mori_platform_host_free_mapped(void *host) {
  if (!host) return 0;
  uint64_t t = mori_profile_now();
  free(host);
  return mori_profile_done(MORI_PROF_PINNED_ALLOC, t, 0);
}

int mori_platform_host_register(int device, void *ptr, size_t size, bool io, void **dev, bool *registered) {
  *dev = ptr; /* CPU ranks reach it as it is */
  *registered = false;
  return 0;
}

int mori_platform_host_unregister(int device, void *ptr) { return 0; }

int mori_platform_is_device_memory(int device, const void *p, bool *yes) {
  (void)device, (void)p;
  *yes = false; /* one memory: nothing to tell apart */
  return 0;
}

int mori_platform_dmabuf_export(int device, void *ptr, size_t size, int *fd, uint64_t *offset) {
  *fd = -1;
  *offset = 0;
  return mori_error_set(MORI_ENOTSUP, "host: the host platform's memory is plain host memory, with no dma-buf");
}

int mori_platform_dmabuf_close(int fd) { return fd >= 0 && close(fd) != 0 ? mori_error_set(MORI_EIO, "host: closing fd %d", fd) : 0; }

/* The host copy engine: one worker thread per queue, operations in FIFO
 * order (copies, and the word stores and adds of mori_platform_queue_word). */
enum { HOST_QUEUE_DEPTH = 256 };
enum host_op { HOST_COPY, HOST_WORD_SET, HOST_WORD_ADD };
struct host_copy {
  enum host_op op;
  void *dst;
  const void *src;
  size_t size;
  uint64_t value;
};
struct mori_platform_queue {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  pthread_t worker;
  struct host_copy ring[HOST_QUEUE_DEPTH];
  uint64_t head, tail; /* submitted, completed */
  bool stopping;
  int device;
  struct mori_platform_queue *next; /* the live queues (host_synchronize waits for them) */
};
static pthread_mutex_t host_queues_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mori_platform_queue *host_queues;

/* Until every queue of `device` has finished what was queued on it before
 * the call (not what is queued while it waits). */
static void host_queues_wait(int device) {
  pthread_mutex_lock(&host_queues_lock);
  for (struct mori_platform_queue *q = host_queues; q; q = q->next) {
    if (q->device != device) continue;
    pthread_mutex_lock(&q->lock);
    for (uint64_t until = q->head; q->tail < until;) pthread_cond_wait(&q->changed, &q->lock);
    pthread_mutex_unlock(&q->lock);
  }
  pthread_mutex_unlock(&host_queues_lock);
}

/* An aligned 8-byte copy is one store, as a DMA engine's is: it carries
 * signals (the software ConnectX's inline writes arrive here from its
 * bounce buffer), and a reader polling the word must never see half of
 * it. memmove promises no such thing: ASan's copies byte by byte, from the
 * last byte down when the destination lies above the source, and a signal
 * going from 0x17bff to 0x17c00 was read as 0x17cff (its high bytes new,
 * its low byte old) by gda_swcx_test's checker. */
static void host_run(const struct host_copy *c) {
  if (c->op == HOST_COPY && c->size == 8 && (uintptr_t)c->dst % 8 == 0 && (uintptr_t)c->src % 8 == 0)
    __atomic_store_n((uint64_t *)c->dst, __atomic_load_n((const uint64_t *)c->src, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
  else if (c->op == HOST_COPY) memmove(c->dst, c->src, c->size);
  else if (c->op == HOST_WORD_SET) __atomic_store_n((uint64_t *)c->dst, c->value, __ATOMIC_RELEASE);
  else __atomic_fetch_add((uint64_t *)c->dst, c->value, __ATOMIC_ACQ_REL);
}

static void *host_queue_worker(void *arg) {
  struct mori_platform_queue *q = arg;
  pthread_mutex_lock(&q->lock);
  for (;;) {
    while (q->tail == q->head && !q->stopping) pthread_cond_wait(&q->changed, &q->lock);
    if (q->tail == q->head && q->stopping) break;
    struct host_copy c = q->ring[q->tail % HOST_QUEUE_DEPTH];
    pthread_mutex_unlock(&q->lock);
    host_run(&c);
    atomic_thread_fence(memory_order_release);
    pthread_mutex_lock(&q->lock);
    q->tail++;
    pthread_cond_broadcast(&q->changed);
  }
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

int mori_platform_queue_create(int device, mori_platform_queue_t **out) {
  struct mori_platform_queue *q = calloc(1, sizeof(*q));
  if (!q) return mori_error_set(MORI_ENOMEM, "host: copy queue");
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->changed, NULL);
  q->device = device;
  int rc = pthread_create(&q->worker, NULL, host_queue_worker, q);
  if (rc != 0) {
    free(q);
    return mori_error_set(-rc, "host: starting the copy worker: %s", strerror(rc));
  }
  pthread_mutex_lock(&host_queues_lock);
  q->next = host_queues;
  host_queues = q;
  pthread_mutex_unlock(&host_queues_lock);
  *out = q;
  return 0;
}

static int host_enqueue(mori_platform_queue_t *q, struct host_copy c) {
  pthread_mutex_lock(&q->lock);
  while (q->head - q->tail >= HOST_QUEUE_DEPTH) pthread_cond_wait(&q->changed, &q->lock);
  q->ring[q->head % HOST_QUEUE_DEPTH] = c;
  q->head++;
  pthread_cond_broadcast(&q->changed);
  pthread_mutex_unlock(&q->lock);
  return 0;
}

int mori_platform_queue_copy(mori_platform_queue_t *q, void *dst, const void *src, size_t size) {
  return host_enqueue(q, (struct host_copy){HOST_COPY, dst, src, size, 0});
}

int mori_platform_queue_word(mori_platform_queue_t *q, uint64_t *dst, uint64_t value, bool add) {
  if ((uintptr_t)dst % 8) return mori_error_set(MORI_EINVAL, "host: word at %p is not 8-byte aligned", (void *)dst);
  return host_enqueue(q, (struct host_copy){add ? HOST_WORD_ADD : HOST_WORD_SET, dst, NULL, 8, value});
}

int mori_platform_queue_finished(mori_platform_queue_t *q, uint64_t *count) {
  pthread_mutex_lock(&q->lock);
  *count = q->tail;
  pthread_mutex_unlock(&q->lock);
  atomic_thread_fence(memory_order_acquire);
  return 0;
}

int mori_platform_queue_wait(mori_platform_queue_t *q) {
  pthread_mutex_lock(&q->lock);
  while (q->tail != q->head) pthread_cond_wait(&q->changed, &q->lock);
  pthread_mutex_unlock(&q->lock);
  atomic_thread_fence(memory_order_acquire);
  return 0;
}

int mori_platform_queue_destroy(mori_platform_queue_t *q) {
  if (!q) return 0;
  pthread_mutex_lock(&host_queues_lock);
  for (struct mori_platform_queue **at = &host_queues; *at; at = &(*at)->next)
    if (*at == q) {
      *at = q->next;
      break;
    }
  pthread_mutex_unlock(&host_queues_lock);
  pthread_mutex_lock(&q->lock);
  q->stopping = true;
  pthread_cond_broadcast(&q->changed);
  pthread_mutex_unlock(&q->lock);
  pthread_join(q->worker, NULL);
  pthread_mutex_destroy(&q->lock);
  pthread_cond_destroy(&q->changed);
  free(q);
  return 0;
}

int mori_platform_stream_signal_wait(void *stream, void *const *writes, int n_writes, void *const *waits, int n_waits,
                                     uint64_t value) {
  for (int i = 0; i < n_writes; i++) __atomic_store_n((uint64_t *)writes[i], value, __ATOMIC_RELEASE);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n_waits; i++) {
    while (__atomic_load_n((uint64_t *)waits[i], __ATOMIC_ACQUIRE) < value) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - t0.tv_sec > 60)
        return mori_error_set(MORI_ETIMEDOUT, "host: waited 60 s for slot %d of %d to reach %llu", i, n_waits,
                              (unsigned long long)value);
      sched_yield();
    }
  }
  return 0;
}

int mori_platform_stream_memops_supported(int device, bool *yes) {
  *yes = true;
  return 0;
}

/* Host "streams" complete every operation before it returns. */
int mori_platform_stream_synchronize(int device, void *stream) { return 0; }

int mori_platform_stream_capturing(int device, void *stream, bool *yes) {
  *yes = false;
  return 0;
}

/* The public entry points of the operations mori/profile.h times. */

int mori_platform_mem_create(int device, size_t size, int handle_type, unsigned flags, mori_pmem_t *out) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_MEM_CREATE, t, host_mem_create(device, size, handle_type, flags, out));
}

int mori_platform_mem_export(const mori_pmem_t *mem, int handle_type, mori_shareable_t *out) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_MEM_EXPORT, t, host_mem_export(mem, handle_type, out));
}

int mori_platform_mem_import(const mori_shareable_t *shared, size_t size, int device, mori_pmem_t *out) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_MEM_IMPORT, t, host_mem_import(shared, size, device, out));
}

int mori_platform_va_reserve(int device, size_t size, size_t alignment, void **out) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_VA_RESERVE, t, host_va_reserve(device, size, alignment, out));
}

int mori_platform_mem_map(void *va, size_t size, const mori_pmem_t *mem) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_MEM_MAP, t, host_mem_map(va, size, mem));
}

int mori_platform_set_access(void *va, size_t size, int device) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_SET_ACCESS, t, host_set_access(va, size, device));
}

int mori_platform_upload(int device, void *dst, const void *src, size_t size) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_TABLE_UPLOAD, t, host_upload(device, dst, src, size));
}

void *mori_platform_upload_stream(int device) { return NULL; }

int mori_platform_synchronize(int device) {
  uint64_t t = mori_profile_now();
  return mori_profile_done(MORI_PROF_DEVICE_WAIT, t, host_synchronize(device));
}
