// SPDX-License-Identifier: MIT
/* See env.h: strict parsing of the table's variables, the check made when
 * a comm is created, and the list `mori info` prints. */
#include "core/base/env.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/base/log.h"
#include "core/base/size_text.h"

extern char **environ;

const mori_env_var_t *mori_env_find(const char *name) {
  size_t n = 0;
  const mori_env_var_t *t = mori_env_table(&n);
  for (size_t i = 0; name && i < n; i++)
    if (!strcmp(t[i].name, name)) return &t[i];
  return NULL;
}

static const char *skip_space(const char *p) {
  while (isspace((unsigned char)*p)) p++;
  return p;
}

/* Digits only (no sign, no base prefix), whole, not past ULLONG_MAX. */
static bool parse_digits(const char *p, unsigned long long *out, const char **end) {
  if (!isdigit((unsigned char)*p)) return false;
  char *e = NULL;
  errno = 0;
  unsigned long long v = strtoull(p, &e, 10);
  if (errno == ERANGE) return false;
  *out = v;
  *end = e;
  return true;
}

static int bad(const mori_env_var_t *var, const char *text, int code, const char *accepted) {
  return mori_error_set(code, "%s=\"%.80s\" %s", var->name, text, accepted);
}

static int out_of_range(const mori_env_var_t *var, const char *text) {
  char what[160];
  if (var->type == MORI_ENV_SIZE) {
    char lo[MORI_SIZE_TEXT_MAX], hi[MORI_SIZE_TEXT_MAX];
    snprintf(what, sizeof(what), "is out of range: a size from %s to %s", mori_size_text((size_t)var->min, lo),
             mori_size_text((size_t)var->max, hi));
  } else {
    snprintf(what, sizeof(what), "is out of range: %s from %llu to %llu", var->type == MORI_ENV_MS ? "milliseconds" : "a whole number",
             var->min, var->max);
  }
  return bad(var, text, MORI_ERANGE, what);
}

static int parse_size(const mori_env_var_t *var, const char *text, unsigned long long *out) {
  static const char accepted[] = "is not a size (examples: \"6G\", \"512M\", \"64K\", \"1048576\")";
  const char *p = skip_space(text), *end = NULL;
  unsigned long long value = 0;
  if (!isdigit((unsigned char)*p)) return bad(var, text, MORI_EINVAL, accepted);
  if (!parse_digits(p, &value, &end)) return out_of_range(var, text);
  int shift = 0;
  switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    case 'P': shift = 50; end++; break;
    default: break;
  }
  if (shift && (*end == 'i' || *end == 'I')) end++;
  /* A lowercase b is bits (64Mb, 10Gb are link rates): refused, not read as bytes. */
  if (*end == 'b')
    return bad(var, text, MORI_EINVAL, "ends in b, which means bits: write B for bytes (examples: \"64MB\", \"64MiB\", \"64M\")");
  if (*end == 'B') end++;
  end = skip_space(end);
  if (*end != '\0') return bad(var, text, MORI_EINVAL, accepted);
  if (shift && value > (ULLONG_MAX >> shift)) return out_of_range(var, text);
  value <<= shift;
  if (value > SIZE_MAX || value < var->min || value > var->max) return out_of_range(var, text);
  *out = value;
  return 0;
}

static int parse_ms(const mori_env_var_t *var, const char *text, unsigned long long *out) {
  static const char accepted[] = "is not a duration (milliseconds: \"1500\", \"1500ms\", or seconds: \"2s\")";
  const char *p = skip_space(text), *end = NULL;
  unsigned long long value = 0;
  if (!isdigit((unsigned char)*p)) return bad(var, text, MORI_EINVAL, accepted);
  if (!parse_digits(p, &value, &end)) return out_of_range(var, text);
  unsigned long long scale = 1;
  if (!strncasecmp(end, "ms", 2)) end += 2;
  else if (*end == 's' || *end == 'S') scale = 1000, end++;
  end = skip_space(end);
  if (*end != '\0') return bad(var, text, MORI_EINVAL, accepted);
  if (value > ULLONG_MAX / scale) return out_of_range(var, text);
  value *= scale;
  if (value < var->min || value > var->max) return out_of_range(var, text);
  *out = value;
  return 0;
}

static int parse_int(const mori_env_var_t *var, const char *text, unsigned long long *out) {
  const char *p = skip_space(text), *end = NULL;
  unsigned long long value = 0;
  char accepted[96];
  snprintf(accepted, sizeof(accepted), "is not a whole number from %llu to %llu", var->min, var->max);
  if (!isdigit((unsigned char)*p)) return bad(var, text, MORI_EINVAL, accepted);
  if (!parse_digits(p, &value, &end)) return out_of_range(var, text);
  if (*skip_space(end) != '\0') return bad(var, text, MORI_EINVAL, accepted);
  if (value < var->min || value > var->max) return out_of_range(var, text);
  *out = value;
  return 0;
}

static int parse_bool(const mori_env_var_t *var, const char *text, bool *out) {
  static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
  for (int i = 0; i < 4; i++) {
    if (!strcasecmp(text, yes[i])) return *out = true, 0;
    if (!strcasecmp(text, no[i])) return *out = false, 0;
  }
  return bad(var, text, MORI_EINVAL, "is not a switch (1, true, yes, on or 0, false, no, off)");
}

static int parse_enum(const mori_env_var_t *var, const char *text, int *out) {
  const char *c = var->choices;
  size_t len = strlen(text);
  for (int i = 0; c && *c; i++) {
    size_t n = strcspn(c, "|");
    if (n == len && !strncasecmp(c, text, n)) return *out = i, 0;
    c += n + (c[n] == '|');
  }
  char accepted[160];
  snprintf(accepted, sizeof(accepted), "is not one of %s", var->choices ? var->choices : "(none)");
  return bad(var, text, MORI_EINVAL, accepted);
}

int mori_env_parse(const mori_env_var_t *var, const char *text, mori_env_value_t *out) {
  memset(out, 0, sizeof(*out));
  out->text = text;
  switch (var->type) {
    case MORI_ENV_STRING: return 0;
    case MORI_ENV_BOOL: return parse_bool(var, text, &out->on);
    case MORI_ENV_INT: return parse_int(var, text, &out->num);
    case MORI_ENV_SIZE: return parse_size(var, text, &out->num);
    case MORI_ENV_MS: return parse_ms(var, text, &out->num);
    case MORI_ENV_ENUM: return parse_enum(var, text, &out->index);
    case MORI_ENV_LOG_LEVEL:
      out->index = mori_log_parse_level(text);
      return out->index >= 0 ? 0 : bad(var, text, MORI_EINVAL, "is not one of ERROR, WARN, INFO, DEBUG, TRACE (or 0-4)");
  }
  return bad(var, text, MORI_EINVAL, "has a type mori does not know");
}

/* The variable's entry and text when set; 1 when unset (or empty), < 0 on error. */
static int lookup(const char *name, mori_env_type_t type, const mori_env_var_t **var, mori_env_value_t *value) {
  *var = mori_env_find(name);
  if (!*var) return mori_error_set(MORI_EINVAL, "environment: %s is not in mori's table of variables (core/base/env_table.c)", name);
  if ((*var)->type != type)
    return mori_error_set(MORI_EINVAL, "environment: %s is read as another type than its table entry says", name);
  const char *text = getenv(name);
  if (!text || !*text) return 1;
  int rc = mori_env_parse(*var, text, value);
  return rc ? rc : 0;
}

int mori_env_size(const char *name, size_t *value) {
  const mori_env_var_t *var;
  mori_env_value_t v;
  int rc = lookup(name, MORI_ENV_SIZE, &var, &v);
  if (rc == 0) *value = (size_t)v.num;
  return rc > 0 ? 0 : rc;
}

int mori_env_ms(const char *name, int *value) {
  const mori_env_var_t *var;
  mori_env_value_t v;
  int rc = lookup(name, MORI_ENV_MS, &var, &v);
  if (rc == 0) {
    if (v.num > INT_MAX) return out_of_range(var, v.text);
    *value = (int)v.num;
  }
  return rc > 0 ? 0 : rc;
}

int mori_env_int(const char *name, long long *value) {
  const mori_env_var_t *var;
  mori_env_value_t v;
  int rc = lookup(name, MORI_ENV_INT, &var, &v);
  if (rc == 0) {
    if (v.num > LLONG_MAX) return out_of_range(var, v.text);
    *value = (long long)v.num;
  }
  return rc > 0 ? 0 : rc;
}

int mori_env_bool(const char *name, bool *value) {
  const mori_env_var_t *var;
  mori_env_value_t v;
  int rc = lookup(name, MORI_ENV_BOOL, &var, &v);
  if (rc == 0) *value = v.on;
  return rc > 0 ? 0 : rc;
}

int mori_env_enum(const char *name, int *value) {
  const mori_env_var_t *var;
  mori_env_value_t v;
  int rc = lookup(name, MORI_ENV_ENUM, &var, &v);
  if (rc == 0) *value = v.index;
  return rc > 0 ? 0 : rc;
}

const char *mori_env_string(const char *name) {
  const mori_env_var_t *var = mori_env_find(name);
  if (!var) {
    MORI_WARN("environment: %s is not in mori's table of variables (core/base/env_table.c)", name);
    return NULL;
  }
  const char *text = getenv(name);
  return text && *text ? text : NULL;
}

int mori_env_each_item(const char *name, int (*each)(void *ctx, const char *value, const char *item), void *ctx) {
  const char *value = mori_env_string(name);
  if (!value) return 0;
  char copy[256];
  snprintf(copy, sizeof(copy), "%s", value);
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    int rc = each(ctx, value, item);
    if (rc) return rc;
  }
  return 0;
}

/* The variables whose bad values were logged already (a bit per table
 * entry), so a reader that runs per call says it once. */
static atomic_uint_fast64_t said_bad[4];

static void log_bad_once(const char *name) {
  size_t n = 0;
  const mori_env_var_t *t = mori_env_table(&n), *var = mori_env_find(name);
  size_t i = var ? (size_t)(var - t) : 0;
  if (var && i < 64 * 4) {
    uint_fast64_t bit = (uint_fast64_t)1 << (i % 64);
    if (atomic_fetch_or(&said_bad[i / 64], bit) & bit) return;
  }
  MORI_WARN("environment: %s; using the default", mori_last_error());
}

/* reader##_or: the variable as reader reads it, or fallback when it is
 * unset or bad (a bad value logged once); this thread's error is left as it
 * was. One shape for every type. */
#define MORI_ENV_OR(T, reader)                    \
  T reader##_or(const char *name, T fallback) {   \
    T v = fallback;                               \
    mori_error_saved_t saved;                     \
    mori_error_save(&saved);                      \
    if (reader(name, &v) != 0) {                  \
      log_bad_once(name);                         \
      v = fallback;                               \
    }                                             \
    mori_error_restore(&saved);                   \
    return v;                                     \
  }
MORI_ENV_OR(bool, mori_env_bool)
MORI_ENV_OR(long long, mori_env_int)
MORI_ENV_OR(int, mori_env_ms)
MORI_ENV_OR(size_t, mori_env_size)
MORI_ENV_OR(int, mori_env_enum)
#undef MORI_ENV_OR

/* ---- every MORI_* variable set ---- */

/* Edit distance of two names (short: at most 63 characters compared). */
static int distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63) la = 63;
  if (lb > 63) lb = 63;
  int row[64];
  for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j];
      int best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

static const mori_env_var_t *nearest(const char *name) {
  size_t n = 0;
  const mori_env_var_t *t = mori_env_table(&n), *best = NULL;
  int best_d = INT_MAX;
  for (size_t i = 0; i < n; i++) {
    int d = distance(name, t[i].name);
    if (d < best_d) best_d = d, best = &t[i];
  }
  /* A name a few edits away is a typo of it; farther, a guess would mislead. */
  return best_d <= 3 ? best : NULL;
}

static void describe(const mori_env_var_t *var, const mori_env_value_t *v, char *out, size_t len) {
  switch (var->type) {
    case MORI_ENV_STRING: snprintf(out, len, "%s", var->secret ? "(hidden)" : v->text); break;
    case MORI_ENV_BOOL: snprintf(out, len, "%s", v->on ? "on" : "off"); break;
    case MORI_ENV_INT: snprintf(out, len, "%llu", v->num); break;
    case MORI_ENV_SIZE: mori_size_text((size_t)v->num, out); break;
    case MORI_ENV_MS: snprintf(out, len, "%llu ms", v->num); break;
    case MORI_ENV_ENUM: {
      const char *c = var->choices;
      for (int i = 0; i < v->index && c; i++) c = strchr(c, '|'), c = c ? c + 1 : NULL;
      snprintf(out, len, "%.*s", c ? (int)strcspn(c, "|") : 1, c ? c : "?");
      break;
    }
    case MORI_ENV_LOG_LEVEL: {
      static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
      snprintf(out, len, "%s", v->index >= 0 && v->index <= 4 ? names[v->index] : "?");
      break;
    }
  }
}

/* Whether a name (its first n bytes) says it holds a secret: SECRET or KEY
 * in any case, anywhere in it. */
static bool looks_secret(const char *name, size_t n) {
  static const char *const words[] = {"secret", "key"};
  for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
    size_t len = strlen(words[w]);
    for (size_t at = 0; at + len <= n; at++)
      if (strncasecmp(name + at, words[w], len) == 0) return true;
  }
  return false;
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

int mori_env_list(mori_env_visit_fn visit, void *ctx) {
  size_t count = 0;
  for (char **e = environ; e && *e; e++) count += !strncmp(*e, "MORI_", 5);
  const char **entries = calloc(count ? count : 1, sizeof(*entries));
  if (!entries) return mori_error_set(MORI_ENOMEM, "environment: listing %zu variables", count);
  size_t k = 0;
  for (char **e = environ; e && *e && k < count; e++)
    if (!strncmp(*e, "MORI_", 5)) entries[k++] = *e;
  qsort(entries, k, sizeof(*entries), by_name);
  mori_error_saved_t saved;
  mori_error_save(&saved);
  int problems = 0;
  for (size_t i = 0; i < k; i++) {
    mori_env_setting_t s;
    memset(&s, 0, sizeof(s));
    char name[128];
    size_t n = strcspn(entries[i], "=");
    snprintf(name, sizeof(name), "%.*s", (int)(n < sizeof(name) ? n : sizeof(name) - 1), entries[i]);
    s.name = name;
    s.value = entries[i][n] == '=' ? entries[i] + n + 1 : "";
    s.var = mori_env_find(name);
    if (!s.var) {
      const mori_env_var_t *near = nearest(name);
      /* A misspelt secret is still a secret: an unknown name that looks like
       * one, or whose likely meaning is one, is not shown. */
      if (looks_secret(entries[i], n) || (near && near->secret)) s.value = "(hidden)";
      snprintf(s.problem, sizeof(s.problem), "not a variable mori knows%s%s%s", near ? " (did you mean " : "",
               near ? near->name : "", near ? "?)" : "");
      problems++;
    } else {
      if (s.var->secret) s.value = "(hidden)";
      mori_env_value_t v;
      if (!*s.value) {
        snprintf(s.parsed, sizeof(s.parsed), "(empty: unset)");
      } else if (mori_env_parse(s.var, entries[i] + n + 1, &v) != 0) {
        snprintf(s.problem, sizeof(s.problem), "%s", mori_last_error());
        problems++;
      } else {
        describe(s.var, &v, s.parsed, sizeof(s.parsed));
      }
    }
    visit(ctx, &s);
  }
  mori_error_restore(&saved);
  free(entries);
  return problems;
}

struct check {
  int rc;
  char first_bad[1024];
  char unknown[512];
};

static void check_one(void *ctx, const mori_env_setting_t *s) {
  struct check *c = ctx;
  if (!s->var) {
    size_t used = strlen(c->unknown);
    const char *guess = strchr(s->problem, '('); /* "(did you mean X?)", when there is a likely one */
    snprintf(c->unknown + used, sizeof(c->unknown) - used, "%s%s%s%s", used ? ", " : "", s->name, guess ? " " : "",
             guess ? guess : "");
  } else if (s->problem[0] && !c->rc) {
    c->rc = strstr(s->problem, "out of range") ? MORI_ERANGE : MORI_EINVAL;
    snprintf(c->first_bad, sizeof(c->first_bad), "%s", s->problem);
  }
}

int mori_env_check(void) {
  static atomic_bool unknown_said;
  struct check c;
  memset(&c, 0, sizeof(c));
  int rc = mori_env_list(check_one, &c);
  if (rc < 0) return rc;
  if (c.unknown[0] && !atomic_exchange(&unknown_said, true))
    MORI_WARN("environment: mori does not know %s: ignored (docs/environment.md lists every variable)", c.unknown);
  if (c.rc) return mori_error_set(c.rc, "environment: %s", c.first_bad);
  return 0;
}
