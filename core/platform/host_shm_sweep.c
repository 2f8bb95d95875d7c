// SPDX-License-Identifier: MIT
/* See host_shm_sweep.h. */
#include "core/platform/host_shm_sweep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/base/log.h"
#include "core/base/pid_namespace.h"

/* The creator of a name made by make_shm_name: its pid (or -1 when the
 * name is not one) and its pid namespace ("mori.<pid>.<serial>.<salt>.p<ns>";
 * names of earlier versions, without ".p<ns>", are taken as this one's). */
static long creator_of(const char *name, uint64_t mine, uint64_t *ns) {
  long pid = -1;
  unsigned serial = 0, salt = 0;
  int end = 0, end_ns = 0;
  unsigned long in_name = 0;
  *ns = mine;
  if (sscanf(name, "mori.%ld.%u.%x%n.p%lx%n", &pid, &serial, &salt, &end, &in_name, &end_ns) < 3 || pid <= 0) return -1;
  if (end_ns > end) *ns = in_name;
  if (name[end] == '\0') return pid;
  return end_ns > end && name[end_ns] == '\0' ? pid : -1;
}

/* The creator of a node channel's area (core/node_channel.c), named while
 * its comm is being created: "mori-node.<pid>.<nonce>.p<ns>". A rank 0
 * killed before unlinking it left it for good. Earlier versions named it
 * "mori-node-<pid>-<nonce>", without the namespace: taken as this one's,
 * as above (removing a live creator's area only sends that comm's steps
 * through its bootstrap: a rank that cannot open it says so, and the
 * channel is not used). */
static long channel_creator_of(const char *name, uint64_t mine, uint64_t *ns) {
  long pid = -1;
  unsigned long long nonce = 0;
  unsigned long in_name = 0;
  int end = 0;
  *ns = mine;
  if (sscanf(name, "mori-node.%ld.%llx.p%lx%n", &pid, &nonce, &in_name, &end) == 3 && end > 0 && name[end] == '\0') {
    *ns = in_name;
    return pid > 0 ? pid : -1;
  }
  end = 0;
  if (sscanf(name, "mori-node-%ld-%llx%n", &pid, &nonce, &end) == 2 && end > 0 && name[end] == '\0') return pid > 0 ? pid : -1;
  return -1;
}

int mori_host_shm_sweep(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int fd = dirfd(d), removed = 0;
  uid_t me = geteuid();
  uint64_t my_ns = mori_pid_namespace();
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    uint64_t ns = 0;
    long pid = creator_of(e->d_name, my_ns, &ns);
    if (pid < 0) pid = channel_creator_of(e->d_name, my_ns, &ns);
    /* Another pid namespace's pid (a container sharing /dev/shm) says
     * nothing here: a live process there may have no pid here at all. */
    if (pid < 0 || ns != my_ns || pid == (long)getpid()) continue;
    /* kill(pid, 0) fails with ESRCH only when no such process exists; a
     * process of another user (EPERM) or a live one keeps its objects. */
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st;
    if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != me || !S_ISREG(st.st_mode)) continue;
    if (unlinkat(fd, e->d_name, 0) == 0) removed++;
  }
  closedir(d);
  if (removed) MORI_DEBUG("host: removed %d shared-memory object(s) of exited processes from %s", removed, dir);
  return removed;
}
