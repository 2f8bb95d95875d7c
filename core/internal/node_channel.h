// SPDX-License-Identifier: MIT
/* The node channel (node_channel.c): when every rank of a comm lives on one
 * host, a small shared-memory area with one mailbox per rank carries the
 * comm's own collective steps (agreeing on an outcome, a window's
 * rendezvous, the signal arenas' free maps) in microseconds instead of a
 * round trip through the bootstrap (TCP, or torch's Store). Plug-ins keep
 * using the bootstrap; each collective step goes wholly through one or the
 * other, the same on every rank. */
#ifndef MORI_CORE_INTERNAL_NODE_CHANNEL_H
#define MORI_CORE_INTERNAL_NODE_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>

#include "mori/bootstrap.h"

MORI_EXTERN_C_BEGIN

typedef struct mori_node_channel mori_node_channel_t;

/* Payloads up to this many bytes per rank go through the channel; larger
 * ones through the bootstrap. */
enum { MORI_NODE_CHANNEL_PAYLOAD = 8192 };

/* Collective over the bootstrap. *out stays NULL (and 0 is returned) when
 * the channel does not apply (ranks on several hosts, one rank,
 * MORI_NODE_CHANNEL=0) or could not be set up on some rank: the comm then
 * uses its bootstrap, which is slower but equivalent. */
int mori_node_channel_create(mori_bootstrap_t *bootstrap, int rank, int size, bool one_host, mori_node_channel_t **out);
void mori_node_channel_destroy(mori_node_channel_t *ch);
/* `bytes` (<= MORI_NODE_CHANNEL_PAYLOAD) from every rank into recv[rank];
 * `what` names the call, which every rank must make at the same step with
 * the same size. A rank that does not arrive within the bootstrap's timeout
 * (mori_bootstrap_timeout_ms) is named; so is, within a few milliseconds, a
 * rank whose process exited or crashed (when it is in this process's pid
 * namespace: others' pids cannot be judged here, and they are waited for
 * to the timeout). A timeout, a dead rank, a rank at another step
 * or in another call fails the channel on every rank for good: the ranks
 * can no longer tell which of their calls belong together, so every later
 * call fails, naming the rank that failed and the rank it waited for. */
int mori_node_channel_allgather(mori_node_channel_t *ch, const char *what, const void *send, void *recv, size_t bytes);

/* Fails the channel for good from outside a step, as a step that failed
 * does (every rank's later calls fail, naming this rank and `why`): a
 * step the comm took through the bootstrap instead (too large for a
 * mailbox) failed here. Returns `code` with the error set. */
int mori_node_channel_fail(mori_node_channel_t *ch, int code, const char *why);

/* A collective call's identity: a hash (FNV-1a) of its name, which every
 * step carries, through the channel and through the bootstrap alike. */
uint32_t mori_call_identity(const char *what);
/* The same step, waiting grace_ms beyond the timeout for ranks that may
 * come late for a reason the caller knows of (a wait of their own that
 * ends only at its timeout). A dead rank is still named at once. */
int mori_node_channel_allgather_grace(mori_node_channel_t *ch, const char *what, const void *send, void *recv,
                                      size_t bytes, int grace_ms);

MORI_EXTERN_C_END

#endif
