// SPDX-License-Identifier: MIT
/* The 128-byte unique ID (unique_id.c): rank 0's bootstrap address, a
 * random job token, a version and a checksum; and the listening sockets
 * shmem_get_unique_id opened, kept for rank 0's shmem_init_attr. Internal;
 * the tests compose IDs of "another job" with it. */
#ifndef MORI_SHMEM_INTERNAL_UNIQUE_ID_H
#define MORI_SHMEM_INTERNAL_UNIQUE_ID_H

#include <stdbool.h>
#include <stdint.h>

#include "mori/shmem.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_shmem_uid_info {
  char address[80]; /* "host:port" for the TCP bootstrap */
  char ifname[16];  /* the interface rank 0 chose, for messages */
  uint64_t token;        /* names rank 0's listening socket in the process that made the ID */
  uint8_t secret[32];    /* the job's bootstrap secret */
} mori_shmem_uid_info_t;

/* The ID is a serialisation of this: parse and compose are inverses. */
int mori_shmem_uid_compose(const mori_shmem_uid_info_t *info, mori_shmem_uniqueid_t *out);
/* Checks magic, version and checksum; MORI_EINVAL says what is wrong. */
int mori_shmem_uid_parse(const mori_shmem_uniqueid_t *id, mori_shmem_uid_info_t *out);
/* The listening socket made with the ID of `token` in this process
 * (removed from the list: the caller owns it), or -1; *used_before is set
 * when an earlier call of this process took it already (an ID used twice:
 * its socket belongs to the job that used it first). */
int mori_shmem_uid_take_listener(uint64_t token, bool *used_before);

MORI_EXTERN_C_END

#endif
