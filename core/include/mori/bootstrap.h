// SPDX-License-Identifier: MIT
/* Bootstrap: the out-of-band collectives mori needs to set things up
 * (allgather, barrier, broadcast). A vtable, so that torch's Store, MPI or
 * anything else can carry them; mori ships a TCP implementation that reads
 * the usual launcher environment. Every blocking step has a timeout, and its
 * error names the rank(s) it waited for. */
#ifndef MORI_BOOTSTRAP_H
#define MORI_BOOTSTRAP_H

#include "mori/error.h"

MORI_EXTERN_C_BEGIN

enum { MORI_BOOTSTRAP_ABI_VERSION = 1 };

/* The plug-ins' rules (mori/plugin.h): the struct opens with {size,
 * abi_version, name}; mori_bootstrap_create accepts ABI versions 1 to
 * MORI_BOOTSTRAP_ABI_VERSION and a struct smaller than this one (an
 * implementation built against an older mori), and every op left out --
 * NULL, or beyond the end of the given struct -- takes its default. The
 * mandatory ops (allgather, barrier, bcast) have none: a struct without
 * them is refused with an error naming the bootstrap and the op. New ops
 * are only ever appended. */
typedef struct mori_bootstrap_ops {
  uint32_t size;        /* sizeof(mori_bootstrap_ops_t) the implementation was built with */
  uint32_t abi_version; /* MORI_BOOTSTRAP_ABI_VERSION */
  const char *name;     /* required: errors name the bootstrap */
  /* Mandatory. recv holds size * bytes: rank r's contribution at r * bytes. */
  int (*allgather)(void *state, const void *send, void *recv, size_t bytes);
  /* Mandatory. */
  int (*barrier)(void *state);
  /* Mandatory. */
  int (*bcast)(void *state, void *buf, size_t bytes, int root);
  /* Releases state; called once, from mori_bootstrap_destroy. Default:
   * nothing to release. */
  int (*fini)(void *state);
  /* Optional. allgather, every rank waiting up to grace_ms (> 0) beyond the
   * bootstrap's own limit for late ranks. mori asks for it where ranks may
   * come late for a reason it knows of (tearing a context down after a
   * call of it timed out on some ranks, which then come that much later).
   * Default: allgather, within the bootstrap's own limit. */
  int (*allgather_grace)(void *state, const void *send, void *recv, size_t bytes, int grace_ms);
} mori_bootstrap_ops_t;

typedef struct mori_bootstrap mori_bootstrap_t;

/* Wraps a user implementation (state is passed back to every op). */
MORI_API int mori_bootstrap_create(const mori_bootstrap_ops_t *ops, void *state, int rank, int size,
                                   mori_bootstrap_t **out);
MORI_API int mori_bootstrap_destroy(mori_bootstrap_t *bootstrap);
MORI_API int mori_bootstrap_rank(const mori_bootstrap_t *bootstrap);
MORI_API int mori_bootstrap_size(const mori_bootstrap_t *bootstrap);

MORI_API int mori_bootstrap_allgather(mori_bootstrap_t *bootstrap, const void *send, void *recv, size_t bytes);
MORI_API int mori_bootstrap_barrier(mori_bootstrap_t *bootstrap);
MORI_API int mori_bootstrap_bcast(mori_bootstrap_t *bootstrap, void *buf, size_t bytes, int root);

/* TCP bootstrap: rank 0 listens at `address` ("host:port" or
 * "[IPv6]:port", and only there); the others connect to it. Only processes
 * that hold the job's secret are admitted, and rank 0 must prove it holds it
 * too (HMAC-SHA256 challenge/response); every later frame carries a MAC. With
 * no secret given, rank 0 makes one for the ranks of its own machine, so a
 * job across machines must give every rank the same secret (see
 * docs/security.md). */
typedef struct mori_bootstrap_tcp_attr {
  int rank;
  int size;
  const char *address;  /* "host:port" of rank 0 */
  int listen_fd;        /* rank 0 only: an already-listening socket, or -1;
                         * once attr is valid, the call closes it (whether it
                         * succeeds or fails) */
  int timeout_ms;       /* every blocking step; <= 0: the default */
  const void *secret;   /* the job's secret, the same on every rank, or NULL */
  size_t secret_len;    /* at least 16 bytes */
} mori_bootstrap_tcp_attr_t;

MORI_API void mori_bootstrap_tcp_attr_init(mori_bootstrap_tcp_attr_t *attr);
MORI_API int mori_bootstrap_tcp_create(const mori_bootstrap_tcp_attr_t *attr, mori_bootstrap_t **out);

/* Reads rank, size and rank 0's address from the environment:
 *   rank: MORI_RANK, RANK (torchrun), OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID
 *   size: MORI_WORLD_SIZE, WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS
 *   address: MORI_BOOTSTRAP_ADDR ("host:port"); else MASTER_ADDR with port
 *     MORI_BOOTSTRAP_PORT or MASTER_PORT + 1 (torchrun's store owns
 *     MASTER_PORT); else SLURM_LAUNCH_NODE_IPADDR; else 127.0.0.1, port
 *     MORI_BOOTSTRAP_PORT or one derived from the job id.
 *   secret: MORI_BOOTSTRAP_SECRET, else the contents of the file named by
 *     MORI_BOOTSTRAP_SECRET_FILE (this user's, mode 600); else none (one
 *     machine only).
 *   rank 0's socket: MORI_BOOTSTRAP_LISTEN_FD, a listening socket a launcher
 *     opened (mori_launch does).
 *   timeout: MORI_BOOTSTRAP_TIMEOUT_MS (default 60000).
 * A value that is not what it should be is an error naming the variable. */
MORI_API int mori_bootstrap_tcp_from_env(mori_bootstrap_t **out);

/* The bootstrap timeout in force: MORI_BOOTSTRAP_TIMEOUT_MS or 60 s. */
MORI_API int mori_bootstrap_default_timeout_ms(void);

/* This bootstrap's timeout, which every wait of a comm over it also keeps
 * (its node channel, its fd channel): the TCP bootstrap's timeout_ms (or
 * MORI_BOOTSTRAP_TIMEOUT_MS), or what mori_bootstrap_set_timeout_ms gave a
 * bootstrap of your own, else mori_bootstrap_default_timeout_ms(). */
MORI_API int mori_bootstrap_timeout_ms(const mori_bootstrap_t *bootstrap);
/* Sets it (timeout_ms > 0) before a comm is created over the bootstrap. */
MORI_API int mori_bootstrap_set_timeout_ms(mori_bootstrap_t *bootstrap, int timeout_ms);

MORI_EXTERN_C_END

#endif
