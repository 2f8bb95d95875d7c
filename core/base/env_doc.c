// SPDX-License-Identifier: MIT
/* Writes docs/environment.md from the table of variables (env_table.c):
 *   bazel run //core/base:env_doc > docs/environment.md
 * //core/base:env_doc_test fails when the checked-in page differs. */
#include <stdio.h>
#include <string.h>

#include "core/base/env.h"
#include "core/base/size_text.h"

static const char *type_text(const mori_env_var_t *v, char *buf, size_t len) {
  switch (v->type) {
    case MORI_ENV_STRING: return "text";
    case MORI_ENV_BOOL: return "switch";
    case MORI_ENV_LOG_LEVEL: return "level";
    case MORI_ENV_ENUM: {
      /* "a|b|c" as "`a`, `b`, `c`" */
      size_t used = 0;
      for (const char *c = v->choices; c && *c && used < len;) {
        size_t n = strcspn(c, "|");
        used += (size_t)snprintf(buf + used, len - used, "%s`%.*s`", used ? ", " : "", (int)n, c);
        c += n + (c[n] == '|');
      }
      return buf;
    }
    case MORI_ENV_INT: snprintf(buf, len, "integer %llu-%llu", v->min, v->max); return buf;
    case MORI_ENV_MS: snprintf(buf, len, "milliseconds %llu-%llu", v->min, v->max); return buf;
    case MORI_ENV_SIZE: {
      char lo[MORI_SIZE_TEXT_MAX], hi[MORI_SIZE_TEXT_MAX];
      snprintf(buf, len, "size %s-%s", mori_size_text((size_t)v->min, lo), mori_size_text((size_t)v->max, hi));
      return buf;
    }
  }
  return "?";
}

static void section(const char *title, const char *intro, mori_env_layer_t a, mori_env_layer_t b) {
  size_t n = 0;
  const mori_env_var_t *t = mori_env_table(&n);
  printf("## %s\n\n%s\n\n| Variable | Type | Default | Read by | Meaning |\n|---|---|---|---|---|\n", title, intro);
  for (size_t i = 0; i < n; i++) {
    if (t[i].layer != a && t[i].layer != b) continue;
    char type[160];
    printf("| `%s` | %s | %s | %s | %s |\n", t[i].name, type_text(&t[i], type, sizeof(type)), t[i].default_text,
           t[i].reader, t[i].meaning);
  }
  printf("\n");
}

int main(void) {
  printf("<!-- SPDX-License-Identifier: MIT -->\n"
         "<!-- Generated from core/base/env_table.c by `bazel run //core/base:env_doc > docs/environment.md`; "
         "do not edit. -->\n"
         "# Environment variables\n\n"
         "Every variable any part of mori reads. Values are parsed strictly: a value that does not parse or is out "
         "of range is an error naming the variable and the value when a comm is made (a switch takes 1, true, yes, "
         "on or 0, false, no, off; a size takes \"6G\", \"512M\", \"64KiB\", \"64KB\" or plain bytes, in powers "
         "of 1024 (a lowercase b, bits, is refused); a duration takes milliseconds, or seconds with an \"s\"). A "
         "set MORI_* variable that mori does not know is reported once, with the name it most resembles, so a "
         "misspelt one does not pass silently. An empty variable counts as unset.\n\n");
  section("Read by the library", "libmori reads these; each is checked when a comm is made.", MORI_ENV_LIBRARY,
          MORI_ENV_LIBRARY);
  section("Set by the launcher", "mori_launch (or another launcher) sets these for each rank.", MORI_ENV_LAUNCH,
          MORI_ENV_LAUNCH);
  section("Read by the Python package", "The `mori` package reads these when imported.", MORI_ENV_PYTHON,
          MORI_ENV_PYTHON);
  section("mori's own tests, benchmarks and build", "Only mori's developers need these.", MORI_ENV_TOOLS,
          MORI_ENV_TOOLS);
  return 0;
}
