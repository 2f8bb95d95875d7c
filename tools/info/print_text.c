// SPDX-License-Identifier: MIT
/* The report as text: one line per fact, each starting with what it is
 * ("device 0:", "transport rdma:", "warning:"), so that a line can be found
 * with grep (docs/troubleshooting.md names them). */
#include <string.h>

#include "core/base/size_text.h"
#include "mori/types.h"
#include "tools/info/heap_text.h"
#include "tools/info/report.h"

static void print_handles(FILE *out, const info_report_t *r) {
  if (r->handle_error[0] && r->preferred_handle < 0 && !r->handle_mask) {
    fprintf(out, "handle types: unknown: %s\n", r->handle_error);
    return;
  }
  static const int types[] = {MORI_HANDLE_FABRIC, MORI_HANDLE_POSIX_FD, MORI_HANDLE_LEGACY_IPC};
  fprintf(out, "handle types on device %d:", r->device);
  for (int i = 0; i < 3; i++)
    fprintf(out, "%s %s %s", i ? "," : "", mori_handle_type_name(types[i]), (r->handle_mask & (1u << types[i])) ? "yes" : "no");
  if (r->preferred_handle >= 0)
    fprintf(out, "; allocations use %s\n", mori_handle_type_name(r->preferred_handle));
  else
    fprintf(out, "; error: %s\n", r->handle_error);
}

static void print_heap(FILE *out, const info_report_t *r) {
  if (r->heap_error[0]) {
    fprintf(out, "heap: error: %s\n", r->heap_error);
    return;
  }
  const mori_heap_config_t *h = &r->heap;
  const char *memory = h->uncached ? "uncached (fine-grained) memory" : "normal memory";
  if (h->mode == MORI_HEAP_VMM)
    fprintf(out, "heap: vmm, grows to %s in chunks of %s, %s\n", MORI_SIZE_TEXT(h->heap_size), MORI_SIZE_TEXT(h->chunk_size), memory);
  else if (h->mode == MORI_HEAP_STATIC)
    fprintf(out, "heap: static, %s, %s\n", MORI_SIZE_TEXT(h->heap_size), memory);
  else
    fprintf(out, "heap: isolation (no heap: one mapping per allocation)\n");
}

static void print_env(FILE *out, const info_report_t *r) {
  if (!r->num_env) fprintf(out, "environment: no MORI_* variable set\n");
  for (int i = 0; i < r->num_env; i++) {
    const info_env_t *e = &r->env[i];
    if (!e->known)
      fprintf(out, "warning: %s=%s: %s\n", e->name, e->value, e->problem);
    else if (e->problem[0])
      fprintf(out, "error: %s=%s: %s\n", e->name, e->value, e->problem);
    else if (strcmp(e->parsed, e->value) != 0 && strcmp(e->value, "(hidden)") != 0)
      fprintf(out, "environment: %s=%s (read as %s)\n", e->name, e->value, e->parsed);
    else
      fprintf(out, "environment: %s=%s\n", e->name, e->value);
  }
}

static void print_peers(FILE *out, const info_report_t *r) {
  fprintf(out, "peers: rank -> peer | LSA team | transport | copy engine | caps | rail | NIC | why\n");
  for (int i = 0; i < r->size * r->size; i++) {
    const info_peer_t *p = &r->peers[i];
    char caps[64], rail[16];
    info_caps_text(p->caps, caps, sizeof(caps));
    if (p->rail >= 0)
      snprintf(rail, sizeof(rail), "%d", p->rail);
    else
      snprintf(rail, sizeof(rail), "-");
    fprintf(out, "peer %d -> %d | [%d, %d)%s | %s | %s | %s | %s | %s | %s\n", p->rank, p->peer, p->lsa_base,
            p->lsa_base + p->lsa_size, p->in_lsa ? "" : " (peer outside)", p->transport[0] ? p->transport : "none",
            p->copy_engine[0] ? p->copy_engine : "-", caps[0] ? caps : "-", rail, p->nic[0] ? p->nic : "-", p->why);
  }
}

void info_print_text(FILE *out, const info_report_t *r) {
  fprintf(out, "mori %s, platform %s\n", r->version, r->platform);
  if (r->device_error[0]) fprintf(out, "devices: none usable: %s\n", r->device_error);
  for (int d = 0; d < r->num_devices; d++)
    fprintf(out, "device %d: %s, %s%s\n", d, r->devices[d].name, r->devices[d].arch, d == r->device ? " (this rank's)" : "");
  if (r->device_count > r->num_devices) fprintf(out, "devices: %d more not shown\n", r->device_count - r->num_devices);
  print_handles(out, r);
  for (int i = 0; i < INFO_TRANSPORTS; i++)
    fprintf(out, "transport %s: %s: %s\n", r->transports[i].name, r->transports[i].available ? "available" : "unavailable",
            r->transports[i].detail);
  fprintf(out, "gpu posting: unavailable: %s\n", r->gpu_posting);
  print_heap(out, r);
  print_env(out, r);
  if (r->comm_made)
    fprintf(out, "comm: %d rank%s, windows exchange %s handles\n", r->size, r->size == 1 ? "" : "s", mori_handle_type_name(r->handle_type));
  else
    fprintf(out, "comm: error: %s\n", r->comm_error);
  if (r->with_peers) print_peers(out, r);
}
