// SPDX-License-Identifier: MIT
/* What `mori_info` reports, gathered first (gather.c, peers.c) and then
 * printed as text (print_text.c) or JSON (print_json.c). */
#ifndef MORI_TOOLS_INFO_REPORT_H
#define MORI_TOOLS_INFO_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/base/env.h"
#include "core/internal/heap_config.h"
#include "mori/comm.h"

enum { INFO_MAX_DEVICES = 16, INFO_TRANSPORTS = 3, INFO_TEXT = 256 };

typedef struct info_device {
  char name[96];
  char arch[32];
} info_device_t;

typedef struct info_transport {
  const char *name;
  bool available;
  char detail[2 * INFO_TEXT]; /* available: what it reaches through (rdma: and how memory is registered); else why not */
} info_transport_t;

/* One row of the per-peer table: how `rank` reaches `peer`. Plain bytes, so
 * that rank 0 gathers every rank's rows in one allgather. */
typedef struct info_peer {
  int32_t rank, peer;
  int32_t lsa_base, lsa_size; /* `rank`'s LSA team */
  int32_t in_lsa;
  int32_t rail; /* -1: no rail (not rail-only, or no rdma) */
  uint32_t caps;
  char transport[16];   /* "" : none reaches it */
  char copy_engine[16]; /* the copy-engine transport, "" none */
  char host[64];        /* the peer's host identity */
  char nic[32];
  char why[200];
} info_peer_t;

/* A MORI_* variable set (mori_env_list's setting, its strings copied). */
typedef struct info_env {
  char name[128];
  char value[256];
  bool known;
  char parsed[96];
  char problem[256];
} info_env_t;

typedef struct info_report {
  const char *version, *platform;
  int num_devices; /* shown: at most INFO_MAX_DEVICES */
  int device_count;
  info_device_t devices[INFO_MAX_DEVICES];
  char device_error[INFO_TEXT];
  int device; /* the one the probes and the comm use */
  unsigned handle_mask;
  int preferred_handle; /* -1: none (handle_error says why) */
  char handle_error[INFO_TEXT];
  info_transport_t transports[INFO_TRANSPORTS];
  const char *gpu_posting; /* why GPU-initiated posting is unavailable */
  mori_heap_config_t heap;
  char heap_error[INFO_TEXT];
  info_env_t *env;
  int num_env, env_problems;
  /* The comm of this report (one rank alone without MORI_INFO_COMM). */
  bool comm_made;
  char comm_error[INFO_TEXT];
  int rank, size, handle_type;
  bool with_peers;
  info_peer_t *peers; /* size * size rows (rank-major) when with_peers */
} info_report_t;

/* gather.c: what this process finds (no comm needed); 0 or MORI_ENOMEM. */
int info_gather_local(info_report_t *r);
void info_report_free(info_report_t *r);
/* peers.c: makes the comm (a one-rank one unless `collective`), fills the
 * transports and, when `collective`, the per-peer table at rank 0. */
int info_gather_comm(info_report_t *r, bool collective);
/* The name of the transport that reaches peers, as the table shows it. */
void info_caps_text(uint32_t caps, char *out, size_t len);

void info_print_text(FILE *out, const info_report_t *r);
void info_print_json(FILE *out, const info_report_t *r);

#endif
