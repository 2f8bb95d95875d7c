// SPDX-License-Identifier: MIT
/* The job's secret, from which every rank derives the job key (handshake.h).
 * Either the user gives it (MORI_BOOTSTRAP_SECRET, a file named by
 * MORI_BOOTSTRAP_SECRET_FILE, or mori_bootstrap_tcp_attr_t.secret), which a
 * job across machines must do; or, when none is given, rank 0 draws one and
 * leaves it for the ranks of its own machine in a file only this user can
 * read, named after rank 0's address, for the length of the start-up. */
#ifndef MORI_CORE_BOOTSTRAP_SECRET_H
#define MORI_CORE_BOOTSTRAP_SECRET_H

#include <stddef.h>
#include <stdint.h>

#include "mori/api.h"

MORI_EXTERN_C_BEGIN

enum {
  MORI_SECRET_MAX = 4096,  /* longest secret read from the environment or a file */
  MORI_SECRET_LOCAL = 32,  /* bytes rank 0 draws for a job on one machine */
  MORI_SECRET_PATH_MAX = 512,
};

/* The user's secret from MORI_BOOTSTRAP_SECRET or MORI_BOOTSTRAP_SECRET_FILE
 * (a regular file of this user that nobody else may read; one trailing
 * newline is dropped). *len = 0 when neither is set. MORI_EINVAL or
 * MORI_EACCES naming the variable when the secret is too short or the file
 * is unsafe. */
int mori_secret_from_env(uint8_t *buf, size_t cap, size_t *len);

/* A published secret file: its name, which file it is (another rank 0 of
 * this user may later publish one under the same name), and the open file
 * whose lock says its publisher is alive. */
typedef struct mori_secret_file {
  char path[MORI_SECRET_PATH_MAX];
  uint64_t dev, ino;
  int fd;
} mori_secret_file_t;

/* Rank 0, once it listens at address: draws a secret for address and
 * publishes it in this user's private directory (replacing a stale one:
 * whoever published it no longer listens there), first removing the files
 * that rank 0s of this user killed while theirs were published left. */
int mori_secret_local_create(const char *address, uint8_t secret[MORI_SECRET_LOCAL], mori_secret_file_t *file);

/* Any other rank on rank 0's machine: reads the secret rank 0 published for
 * address. MORI_EACCES saying why when there is none or it is unsafe. */
int mori_secret_local_read(const char *address, uint8_t secret[MORI_SECRET_LOCAL]);

/* Withdraws the file if it is still the one this process published (never
 * another job's under the same name); NULL or an empty path: nothing. */
void mori_secret_local_remove(const mori_secret_file_t *file);

MORI_EXTERN_C_END

#endif
