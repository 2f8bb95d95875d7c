// SPDX-License-Identifier: MIT
/* The report as one JSON document (the same facts as print_text.c, with
 * sizes in bytes and a text next to them). */
#include "core/base/size_text.h"
#include "mori/types.h"
#include "tools/info/heap_text.h"
#include "tools/info/report.h"

/* The length of the well-formed UTF-8 sequence at s (1 to 4), or 0: the
 * table of RFC 3629, so no overlong form, surrogate or code point past
 * U+10FFFF passes. A sequence cut by the string's end stops at its NUL. */
static int utf8_length(const unsigned char *s) {
  unsigned char c = s[0], lo = 0x80, hi = 0xbf;
  int n;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) n = 3;
  else if (c >= 0xf0 && c <= 0xf4) n = 4;
  else return 0; /* a continuation byte, an overlong lead (C0, C1) or past U+10FFFF (F5-FF) */
  if (c == 0xe0) lo = 0xa0;      /* overlong three-byte forms */
  else if (c == 0xed) hi = 0x9f; /* surrogates */
  else if (c == 0xf0) lo = 0x90; /* overlong four-byte forms */
  else if (c == 0xf4) hi = 0x8f; /* past U+10FFFF */
  if (s[1] < lo || s[1] > hi) return 0;
  for (int i = 2; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  return n;
}

/* s as a JSON string: a byte that is not part of well-formed UTF-8 (an
 * environment value may hold any bytes) becomes U+FFFD, so the document
 * stays valid JSON. */
static void str(FILE *out, const char *s) {
  fputc('"', out);
  while (s && *s) {
    unsigned char c = (unsigned char)*s;
    int n = utf8_length((const unsigned char *)s);
    if (c == '"' || c == '\\')
      fprintf(out, "\\%c", c);
    else if (c < 0x20)
      fprintf(out, "\\u%04x", c);
    else if (n == 0)
      fputs("\\ufffd", out);
    else
      fwrite(s, 1, (size_t)n, out);
    s += n ? n : 1;
  }
  fputc('"', out);
}

/* s as a JSON string when `present`, else null. */
static void str_or_null(FILE *out, bool present, const char *s) {
  if (present)
    str(out, s);
  else
    fputs("null", out);
}

static void key(FILE *out, const char *k) {
  str(out, k);
  fputc(':', out);
}

static void print_devices(FILE *out, const info_report_t *r) {
  key(out, "devices");
  fputc('[', out);
  for (int d = 0; d < r->num_devices; d++) {
    fprintf(out, "%s{\"index\":%d,\"name\":", d ? "," : "", d);
    str(out, r->devices[d].name);
    fputs(",\"arch\":", out);
    str(out, r->devices[d].arch);
    fputc('}', out);
  }
  fprintf(out, "],\"device_count\":%d,\"device\":%d,\"device_error\":", r->device_count, r->device);
  str(out, r->device_error);
}

static void print_handles(FILE *out, const info_report_t *r) {
  static const int types[] = {MORI_HANDLE_FABRIC, MORI_HANDLE_POSIX_FD, MORI_HANDLE_LEGACY_IPC};
  fputs(",\"handle_types\":{\"probed\":{", out);
  for (int i = 0; i < 3; i++) {
    if (i) fputc(',', out);
    key(out, mori_handle_type_name(types[i]));
    fputs((r->handle_mask & (1u << types[i])) ? "true" : "false", out);
  }
  fputs("},\"preferred\":", out);
  str_or_null(out, r->preferred_handle >= 0, mori_handle_type_name(r->preferred_handle));
  fputs(",\"error\":", out);
  str(out, r->handle_error);
  fputc('}', out);
}

static void print_transports(FILE *out, const info_report_t *r) {
  fputs(",\"transports\":[", out);
  for (int i = 0; i < INFO_TRANSPORTS; i++) {
    fprintf(out, "%s{\"name\":", i ? "," : "");
    str(out, r->transports[i].name);
    fprintf(out, ",\"available\":%s,\"detail\":", r->transports[i].available ? "true" : "false");
    str(out, r->transports[i].detail);
    fputc('}', out);
  }
  fputs("],\"gpu_initiated_posting\":{\"available\":false,\"why\":", out);
  str(out, r->gpu_posting);
  fputc('}', out);
}

static void print_heap(FILE *out, const info_report_t *r) {
  const mori_heap_config_t *h = &r->heap;
  fputs(",\"heap\":{\"mode\":", out);
  str(out, r->heap_error[0] ? NULL : info_heap_mode_name(h->mode));
  fprintf(out, ",\"size\":%zu,\"size_text\":", h->heap_size);
  str(out, MORI_SIZE_TEXT(h->heap_size));
  fprintf(out, ",\"chunk_size\":%zu,\"chunk_size_text\":", h->chunk_size);
  str(out, MORI_SIZE_TEXT(h->chunk_size));
  fprintf(out, ",\"memory\":\"%s\",\"error\":", h->uncached ? "uncached" : "normal");
  str(out, r->heap_error);
  fputc('}', out);
}

static void print_env(FILE *out, const info_report_t *r) {
  fputs(",\"environment\":[", out);
  for (int i = 0; i < r->num_env; i++) {
    const info_env_t *e = &r->env[i];
    fprintf(out, "%s{\"name\":", i ? "," : "");
    str(out, e->name);
    fputs(",\"value\":", out);
    str(out, e->value);
    fprintf(out, ",\"known\":%s,\"parsed\":", e->known ? "true" : "false");
    str(out, e->parsed);
    fputs(",\"problem\":", out);
    str(out, e->problem);
    fputc('}', out);
  }
  /* The unknown names again, as the warnings the text prints. */
  fputs("],\"warnings\":[", out);
  int n = 0;
  for (int i = 0; i < r->num_env; i++)
    if (!r->env[i].known) {
      char line[512];
      snprintf(line, sizeof(line), "%s: %s", r->env[i].name, r->env[i].problem);
      if (n++) fputc(',', out);
      str(out, line);
    }
  fputc(']', out);
}

static void print_peers(FILE *out, const info_report_t *r) {
  fputs(",\"peers\":[", out);
  for (int i = 0; r->with_peers && i < r->size * r->size; i++) {
    const info_peer_t *p = &r->peers[i];
    char caps[64];
    info_caps_text(p->caps, caps, sizeof(caps));
    fprintf(out, "%s{\"rank\":%d,\"peer\":%d,\"lsa_team\":{\"base\":%d,\"size\":%d},\"in_lsa_team\":%s,\"transport\":", i ? "," : "",
            p->rank, p->peer, p->lsa_base, p->lsa_size, p->in_lsa ? "true" : "false");
    str_or_null(out, p->transport[0], p->transport);
    fputs(",\"copy_engine\":", out);
    str_or_null(out, p->copy_engine[0], p->copy_engine);
    fputs(",\"caps\":", out);
    str(out, caps);
    fprintf(out, ",\"rail\":%d,\"nic\":", p->rail);
    str(out, p->nic);
    fputs(",\"host\":", out);
    str(out, p->host);
    fputs(",\"why\":", out);
    str(out, p->why);
    fputc('}', out);
  }
  fputc(']', out);
}

void info_print_json(FILE *out, const info_report_t *r) {
  fputc('{', out);
  key(out, "version");
  str(out, r->version);
  fputc(',', out);
  key(out, "platform");
  str(out, r->platform);
  fputc(',', out);
  print_devices(out, r);
  print_handles(out, r);
  print_transports(out, r);
  print_heap(out, r);
  print_env(out, r);
  fprintf(out, ",\"comm\":{\"made\":%s,\"size\":%d,\"handle_type\":", r->comm_made ? "true" : "false", r->size);
  str_or_null(out, r->comm_made, mori_handle_type_name(r->handle_type));
  fputs(",\"error\":", out);
  str(out, r->comm_error);
  fputc('}', out);
  print_peers(out, r);
  fputs("}\n", out);
}
