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

/* The creator's pid of a name made by make_shm_name ("mori.<pid>.<serial>.<salt>"), or -1. */
static long creator_of(const char *name) {
  long pid = -1;
  unsigned serial = 0, salt = 0;
  int end = 0;
  if (sscanf(name, "mori.%ld.%u.%x%n", &pid, &serial, &salt, &end) != 3 || name[end] != '\0' || pid <= 0) return -1;
  return pid;
}

int mori_host_shm_sweep(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int fd = dirfd(d), removed = 0;
  uid_t me = geteuid();
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    long pid = creator_of(e->d_name);
    if (pid < 0 || pid == (long)getpid()) continue;
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
