// SPDX-License-Identifier: MIT
/* Legacy IPC on the host platform (platform.h), standing in for the GPU
 * runtimes' IPC handles with the same behaviour where it matters: a handle
 * names a whole shared mapping that some other code made (a memfd or shm
 * file mapped MAP_SHARED), and a peer opens it at an address the kernel
 * chooses — so windows over such memory are reached through the pointer
 * table only, as on the GPUs. The handle is the owner's pid and a
 * descriptor of the backing file that the owner keeps open while the range
 * is registered; a peer opens it through /proc/<pid>/fd. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/pid_namespace.h"
#include "core/platform/ipc_cache.h"
#include "core/platform/platform.h"

static const char host_ipc_magic[8] = "mori-ipc";

struct host_ipc_handle {
  char magic[8];
  int32_t pid;
  int32_t fd;
  uint64_t dev, ino; /* the file's identity: a descriptor number reused for another file is refused */
  uint64_t pid_namespace; /* the owner's: its pid names nothing in another one */
};
_Static_assert(sizeof(struct host_ipc_handle) <= MORI_FABRIC_BLOB_SIZE, "the handle travels as a blob");

int mori_platform_ipc_describe(void *ptr, size_t size, int device, mori_pmem_t *out) {
  void *base = NULL;
  size_t bytes = 0;
  int rc = mori_platform_mem_retain(ptr, out, &base, &bytes);
  if (rc) return rc;
  uintptr_t b = (uintptr_t)base, p = (uintptr_t)ptr;
  if (size > bytes - (p - b)) {
    mori_platform_mem_release(out);
    return mori_error_set(MORI_ERANGE, "host: [%p, +%zu bytes) runs past the end of its mapping [%p, +%zu bytes)", ptr, size,
                          base, bytes);
  }
  struct stat st;
  if (fstat((int)out->handle, &st) != 0) {
    rc = mori_error_errno("host: fstat of the mapping behind %p", ptr);
    mori_platform_mem_release(out);
    return rc;
  }
  struct host_ipc_handle h = {.pid = (int32_t)getpid(), .fd = (int32_t)out->handle, .dev = (uint64_t)st.st_dev,
                              .ino = (uint64_t)st.st_ino, .pid_namespace = mori_pid_namespace()};
  memcpy(h.magic, host_ipc_magic, sizeof(h.magic));
  out->handle_type = MORI_HANDLE_LEGACY_IPC;
  out->device = device < 0 ? 0 : device;
  out->offset = (uint64_t)(p - b);
  memset(out->name, 0, sizeof(out->name));
  memcpy(out->name, &h, sizeof(h));
  return 0;
}

static int host_open(const mori_shareable_t *shared, void **base) {
  struct host_ipc_handle h;
  memcpy(&h, shared->blob, sizeof(h));
  if (memcmp(h.magic, host_ipc_magic, sizeof(h.magic)) != 0 || h.pid <= 0 || h.fd < 0)
    return mori_error_set(MORI_EINVAL, "host: a peer's legacy IPC handle is malformed");
  uint64_t my_ns = mori_pid_namespace();
  if (h.pid_namespace && my_ns && h.pid_namespace != my_ns)
    return mori_error_set(MORI_ENOTSUP, "host: a legacy IPC handle of pid %d in another pid namespace: it is opened through "
                          "/proc/<pid>/fd, which needs one shared pid namespace (posix_fd or fabric handles do not)", (int)h.pid);
  if (h.pid == getpid())
    return mori_error_set(MORI_EINVAL, "host: a legacy IPC handle of this process's own memory (pid %d) is not opened", (int)h.pid);
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return mori_error_errno("host: opening a peer's memory (%s; its owner exited or unregistered it?)", path);
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_dev != h.dev || (uint64_t)st.st_ino != h.ino) {
    close(fd);
    return mori_error_set(MORI_EINVAL, "host: opening a peer's memory (%s): that descriptor is another file now (the owner "
                          "unregistered the memory)", path);
  }
  if ((uint64_t)st.st_size < shared->size) {
    close(fd);
    return mori_error_set(MORI_EINVAL, "host: a peer's memory (%s) has %lld bytes, its handle says %llu", path,
                          (long long)st.st_size, (unsigned long long)shared->size);
  }
  void *p = mmap(NULL, (size_t)shared->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return mori_error_errno("host: mapping %llu bytes of a peer's memory", (unsigned long long)shared->size);
  *base = p;
  return 0;
}

int mori_platform_ipc_open(const mori_shareable_t *shared, int device, void **base) {
  if (shared->type != MORI_HANDLE_LEGACY_IPC)
    return mori_error_set(MORI_EINVAL, "host: a %s handle is not a legacy IPC handle", mori_handle_type_name(shared->type));
  mori_ipc_cache_lock();
  void *opened = mori_ipc_cache_acquire(shared->blob, device);
  int rc = 0;
  if (!opened) {
    rc = host_open(shared, &opened);
    if (!rc && (rc = mori_ipc_cache_insert(shared->blob, device, opened, (size_t)shared->size)) != 0)
      munmap(opened, (size_t)shared->size);
  }
  mori_ipc_cache_unlock();
  if (!rc) *base = opened;
  return rc;
}

int mori_platform_ipc_close(int device, void *base) {
  bool last = false;
  size_t size = 0;
  mori_ipc_cache_lock();
  int rc = mori_ipc_cache_release(device, base, &last, &size);
  if (!rc && last && munmap(base, size) != 0) rc = mori_error_errno("host: unmapping a peer's memory at %p", base);
  mori_ipc_cache_unlock();
  return rc;
}
