// SPDX-License-Identifier: MIT
/* Where the job's secret comes from. The local file lives in a directory
 * that only this user can enter ($XDG_RUNTIME_DIR when it is private, else
 * /dev/shm/mori-<uid>, else /tmp/mori-<uid>, created 0700 and checked, never
 * trusted because of its name), is created 0600 under a temporary name and
 * renamed into place, and is read only when it belongs to this user and
 * nobody else may read it. Other users therefore cannot read it, plant one,
 * or swap it.
 *
 * A rank 0 that is killed while its file is published cannot withdraw it.
 * So the publisher holds a lock on the file (flock) for as long as it is
 * published; the kernel drops the lock with the process, and the next rank
 * 0 of this user removes every secret file older than ten minutes that it
 * can lock. The directory's own
 * lock keeps that sweep and a publisher's rename apart, so a sweep never
 * removes a file renamed into place after it looked. */
#include "core/bootstrap/internal/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/base/sha256.h"

enum {
  SECRET_MIN = 16,
  /* How long a publisher or a sweep waits for the directory's lock (each
   * holds it for a rename or a scan), and the age a file must have before
   * a sweep may take it for one a crash left. */
  DIR_LOCK_WAIT_MS = 1000,
  STALE_S = 600,
};

static const char LOCAL_PREFIX[] = "mori-bootstrap-";

static int read_secret_file(const char *name, const char *path, uint8_t *buf, size_t cap, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return mori_error_set(MORI_EACCES, "bootstrap: %s=%s cannot be read: %s", name, path, strerror(errno));
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    rc = mori_error_set(MORI_EACCES, "bootstrap: %s=%s is not a regular file", name, path);
  else if (st.st_uid != getuid())
    rc = mori_error_set(MORI_EACCES, "bootstrap: %s=%s belongs to uid %u, not to this user (uid %u)", name, path,
                        (unsigned)st.st_uid, (unsigned)getuid());
  else if (st.st_mode & 077)
    rc = mori_error_set(MORI_EACCES, "bootstrap: %s=%s may be read by other users (mode %03o): chmod 600 it", name,
                        path, (unsigned)(st.st_mode & 0777));
  size_t used = 0;
  while (!rc && used < cap) {
    ssize_t n = read(fd, buf + used, cap - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) rc = mori_error_set(MORI_EACCES, "bootstrap: %s=%s: %s", name, path, strerror(errno));
    if (n <= 0) break;
    used += (size_t)n;
  }
  if (!rc && used == cap) {
    char extra;
    if (read(fd, &extra, 1) == 1)
      rc = mori_error_set(MORI_EINVAL, "bootstrap: %s=%s is longer than %zu bytes", name, path, cap);
  }
  close(fd);
  if (rc) return rc;
  if (used && buf[used - 1] == '\n') used--;
  if (used && buf[used - 1] == '\r') used--;
  *len = used;
  return 0;
}

int mori_secret_from_env(uint8_t *buf, size_t cap, size_t *len) {
  *len = 0;
  const char *value = getenv("MORI_BOOTSTRAP_SECRET");
  const char *file = getenv("MORI_BOOTSTRAP_SECRET_FILE");
  const char *name = "MORI_BOOTSTRAP_SECRET";
  if (value && *value) {
    size_t n = strlen(value);
    if (n > cap) return mori_error_set(MORI_EINVAL, "bootstrap: %s is longer than %zu characters", name, cap);
    memcpy(buf, value, n);
    *len = n;
  } else if (file && *file) {
    name = "MORI_BOOTSTRAP_SECRET_FILE";
    int rc = read_secret_file(name, file, buf, cap, len);
    if (rc) return rc;
  } else {
    return 0;
  }
  if (*len < SECRET_MIN)
    return mori_error_set(MORI_EINVAL,
                          "bootstrap: the secret in %s is %zu bytes; at least %d are needed (for instance the output "
                          "of 'openssl rand -hex 32')",
                          name, *len, SECRET_MIN);
  return 0;
}

/* This user's private directory for local secrets, created if need be. */
static int private_dir(char *dir, size_t len) {
  uid_t uid = getuid();
  struct stat st;
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  if (xdg && xdg[0] == '/' && strlen(xdg) + 64 < len && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) &&
      st.st_uid == uid && !(st.st_mode & 077)) {
    snprintf(dir, len, "%s", xdg);
    return 0;
  }
  snprintf(dir, len, "%s/mori-%u", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (unsigned)uid);
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return mori_error_set(MORI_EACCES, "bootstrap: cannot create the private directory %s: %s", dir, strerror(errno));
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077))
    return mori_error_set(MORI_EACCES,
                          "bootstrap: %s is not a private directory of this user (it must be a directory of uid %u "
                          "with mode 700); remove it, or give the job a secret in MORI_BOOTSTRAP_SECRET",
                          dir, (unsigned)uid);
  return 0;
}

/* <private dir>/mori-bootstrap-<first 16 bytes of SHA-256(address), hex>;
 * dir gets the private directory. */
static int local_path(const char *address, char dir[MORI_SECRET_PATH_MAX - 64], char *path, size_t len) {
  int rc = private_dir(dir, MORI_SECRET_PATH_MAX - 64);
  if (rc) return rc;
  uint8_t digest[MORI_SHA256_BYTES];
  mori_sha256(address, strlen(address), digest);
  int used = snprintf(path, len, "%s/%s", dir, LOCAL_PREFIX);
  for (int i = 0; i < 16 && used > 0 && (size_t)used + 3 <= len; i++)
    used += snprintf(path + used, len - (size_t)used, "%02x", digest[i]);
  return 0;
}

/* The directory's lock, taken within DIR_LOCK_WAIT_MS (a holder keeps it
 * for a scan at most). -1 when it cannot be had: a publisher then renames
 * without it, and a sweep is skipped. */
static int lock_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  for (int waited_ms = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; waited_ms++) {
    if ((errno != EWOULDBLOCK && errno != EINTR) || waited_ms >= DIR_LOCK_WAIT_MS) {
      close(fd);
      return -1;
    }
    struct timespec ms = {0, 1000 * 1000};
    nanosleep(&ms, NULL);
  }
  return fd;
}

/* Names a secret file's: LOCAL_PREFIX and 32 hex digits; *tmp is set for
 * the temporary name ("<that>.XXXXXX") a publisher writes first. */
static bool secret_name(const char *name, bool *tmp) {
  size_t n = sizeof(LOCAL_PREFIX) - 1;
  if (strncmp(name, LOCAL_PREFIX, n) != 0) return false;
  for (size_t i = n; i < n + 32; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return false;
  *tmp = name[n + 32] == '.' && strlen(name + n + 32) == 7;
  return name[n + 32] == '\0' || *tmp;
}

/* Removes dir/name when it is this user's, older than any start-up takes
 * (a publisher of a release before the lock held none), and, for a secret
 * file, nobody holds its lock (its publisher is gone). A temporary name is
 * held for one write only. The caller holds the directory's lock. */
static void sweep_one(int dir_fd, const char *name, bool tmp) {
  int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  bool stale = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() &&
               st.st_mtime < time(NULL) - STALE_S;
  if (stale && !tmp) stale = flock(fd, LOCK_EX | LOCK_NB) == 0;
  if (stale) unlinkat(dir_fd, name, 0);
  close(fd);
}

/* Withdraws what rank 0s of this user that were killed left published. */
static void sweep_dir(const char *dir) {
  int dir_fd = lock_dir(dir);
  if (dir_fd < 0) return;
  int scan_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = scan_fd >= 0 ? fdopendir(scan_fd) : NULL;
  if (!d && scan_fd >= 0) close(scan_fd);
  for (struct dirent *e; d && (e = readdir(d));) {
    bool tmp = false;
    if (secret_name(e->d_name, &tmp)) sweep_one(dir_fd, e->d_name, tmp);
  }
  if (d) closedir(d);
  close(dir_fd); /* drops the lock */
}

int mori_secret_local_create(const char *address, uint8_t secret[MORI_SECRET_LOCAL], mori_secret_file_t *file) {
  memset(file, 0, sizeof(*file));
  char dir[MORI_SECRET_PATH_MAX - 64], path[MORI_SECRET_PATH_MAX];
  int rc = local_path(address, dir, path, sizeof(path));
  if (rc) return rc;
  sweep_dir(dir);
  if (getrandom(secret, MORI_SECRET_LOCAL, 0) != MORI_SECRET_LOCAL)
    return mori_error_set(MORI_EIO, "bootstrap: cannot draw a secret: %s", strerror(errno));
  char tmp[MORI_SECRET_PATH_MAX + 16];
  snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
  int fd = mkostemp(tmp, O_CLOEXEC); /* mode 0600, never an existing file */
  if (fd < 0) return mori_error_set(MORI_EACCES, "bootstrap: cannot create %s: %s", tmp, strerror(errno));
  /* Locked before it has its name, and for as long as it is published:
   * a sweep never takes it for a dead rank 0's. */
  struct stat st;
  bool ok = flock(fd, LOCK_EX | LOCK_NB) == 0 && write(fd, secret, MORI_SECRET_LOCAL) == MORI_SECRET_LOCAL &&
            fstat(fd, &st) == 0;
  int dir_fd = ok ? lock_dir(dir) : -1;
  ok = ok && rename(tmp, path) == 0;
  int saved = errno;
  if (dir_fd >= 0) close(dir_fd);
  if (!ok) {
    rc = mori_error_set(MORI_EIO, "bootstrap: cannot publish the job's secret at %s: %s", path, strerror(saved));
    close(fd);
    unlink(tmp);
    return rc;
  }
  snprintf(file->path, sizeof(file->path), "%s", path);
  file->dev = (uint64_t)st.st_dev;
  file->ino = (uint64_t)st.st_ino;
  file->fd = fd;
  return 0;
}

int mori_secret_local_read(const char *address, uint8_t secret[MORI_SECRET_LOCAL]) {
  char dir[MORI_SECRET_PATH_MAX - 64], path[MORI_SECRET_PATH_MAX];
  int rc = local_path(address, dir, path, sizeof(path));
  if (rc) return rc;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return mori_error_set(MORI_EACCES,
                          "bootstrap: this machine holds no secret for the job at %s (%s: %s): rank 0 runs on another "
                          "machine, so every rank needs the job's secret in MORI_BOOTSTRAP_SECRET",
                          address, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) ||
      st.st_size != MORI_SECRET_LOCAL) {
    close(fd);
    return mori_error_set(MORI_EACCES,
                          "bootstrap: %s is not a secret rank 0 left for this user (it must be a %d-byte file of uid "
                          "%u with mode 600)",
                          path, MORI_SECRET_LOCAL, (unsigned)getuid());
  }
  ssize_t n = read(fd, secret, MORI_SECRET_LOCAL);
  close(fd);
  if (n != MORI_SECRET_LOCAL) return mori_error_set(MORI_EACCES, "bootstrap: cannot read %s", path);
  return 0;
}

void mori_secret_local_remove(const mori_secret_file_t *file) {
  if (!file || !file->path[0]) return;
  struct stat st;
  /* Only processes of this user can reach the private directory, so the
   * file checked is the file removed. */
  if (lstat(file->path, &st) == 0 && (uint64_t)st.st_dev == file->dev && (uint64_t)st.st_ino == file->ino)
    unlink(file->path);
  close(file->fd); /* drops the lock */
}
