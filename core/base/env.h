// SPDX-License-Identifier: MIT
/* mori's environment variables: one table (env_table.c) says, for each
 * variable any part of mori reads, its type, default, meaning and the layer
 * that reads it; the parsers below look a name up there and parse strictly,
 * so a value that is out of range or does not parse is an error naming the
 * variable and the value, never a silent default. docs/environment.md is
 * generated from the table (//core/base:env_doc), and a check fails when
 * code reads a MORI_* variable the table lacks (tools/check_env_vars.py). */
#ifndef MORI_CORE_BASE_ENV_H
#define MORI_CORE_BASE_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include "core/base/error.h"

MORI_EXTERN_C_BEGIN

typedef enum mori_env_type {
  MORI_ENV_STRING,    /* any text (a name, a path, a list) */
  MORI_ENV_BOOL,      /* 1/0, true/false, yes/no, on/off */
  MORI_ENV_INT,       /* a whole number in [min, max] */
  MORI_ENV_SIZE,      /* bytes: "6G", "512M", "64K", "1T" (powers of 1024), or plain bytes, in [min, max] */
  MORI_ENV_MS,        /* a duration in milliseconds ("1500", "1500ms", "2s"), in [min, max] */
  MORI_ENV_ENUM,      /* one of `choices` (case-insensitive) */
  MORI_ENV_LOG_LEVEL, /* ERROR, WARN, INFO, DEBUG, TRACE (case-insensitive) or 0-4 */
} mori_env_type_t;

/* Who reads a variable. */
typedef enum mori_env_layer {
  MORI_ENV_LIBRARY, /* libmori (C): checked when a comm is made */
  MORI_ENV_PYTHON,  /* the Python package */
  MORI_ENV_LAUNCH,  /* set by mori_launch for the program it starts */
  MORI_ENV_TOOLS,   /* mori's own tests, benchmarks and build scripts */
} mori_env_layer_t;

typedef struct mori_env_var {
  const char *name;
  mori_env_type_t type;
  mori_env_layer_t layer;
  const char *reader;        /* the part that reads it ("core/heap", "transport/rdma", ...) */
  const char *default_text;  /* what applies when unset, as the docs say it */
  const char *meaning;
  const char *choices;       /* MORI_ENV_ENUM: the values, separated by '|' */
  unsigned long long min, max; /* MORI_ENV_INT, _SIZE, _MS: the accepted range */
  const char *alias_of;      /* an older name: the name that wins when both are set */
  bool secret;               /* its value is never printed */
} mori_env_var_t;

/* The table, in the order of the docs. */
const mori_env_var_t *mori_env_table(size_t *count);
/* The entry of `name`, or NULL. */
const mori_env_var_t *mori_env_find(const char *name);

/* A parsed value: which member holds it follows the type. */
typedef struct mori_env_value {
  const char *text;       /* the variable's text */
  bool on;                /* BOOL */
  unsigned long long num; /* INT, SIZE, MS (milliseconds) */
  int index;              /* ENUM: position in choices; LOG_LEVEL: the level */
} mori_env_value_t;

/* Parses `text` as `var` says; MORI_EINVAL (does not parse) or MORI_ERANGE
 * (out of range), the message naming the variable, the value and what is
 * accepted. */
int mori_env_parse(const mori_env_var_t *var, const char *text, mori_env_value_t *out);

/* The typed readers. Each leaves *value alone when the variable is unset or
 * empty and returns 0; sets it when the variable parses; returns the error
 * of mori_env_parse otherwise (*value unchanged). A name missing from the
 * table is MORI_EINVAL (a defect the check of the sources catches first). */
int mori_env_size(const char *name, size_t *value);
int mori_env_ms(const char *name, int *value);
int mori_env_int(const char *name, long long *value);
int mori_env_bool(const char *name, bool *value);
int mori_env_enum(const char *name, int *value);
/* The text of a table's STRING variable, NULL when unset or empty. */
const char *mori_env_string(const char *name);
/* Calls each(ctx, value, item) for every comma-separated item of a table's
 * STRING variable (none when unset or empty), in order, until one returns
 * nonzero, which is returned. `value`: the whole text, for messages; only
 * its first 255 bytes are split. */
int mori_env_each_item(const char *name, int (*each)(void *ctx, const char *value, const char *item), void *ctx);

/* For call sites that have no error path: the value, or `fallback` when
 * unset; a value that does not parse is logged (once per variable) and
 * gives `fallback` — mori_env_check has failed the comm for it already. */
bool mori_env_bool_or(const char *name, bool fallback);
long long mori_env_int_or(const char *name, long long fallback);
int mori_env_ms_or(const char *name, int fallback);
size_t mori_env_size_or(const char *name, size_t fallback);
/* ENUM: the position of the value among the choices, or `fallback`. */
int mori_env_enum_or(const char *name, int fallback);

/* Every MORI_* variable set in the environment: known ones parsed strictly
 * (the first that fails is the error), unknown ones warned about once per
 * process, with the known name it most resembles. Called when a comm is
 * made. */
int mori_env_check(void);

/* One MORI_* variable that is set, for `mori info`. */
typedef struct mori_env_setting {
  const char *name;              /* as set */
  const char *value;             /* as set ("(hidden)" for a secret) */
  const mori_env_var_t *var;     /* NULL: not a variable mori knows */
  char parsed[96];               /* the value as mori reads it ("16 GiB", "60000 ms", "on") */
  char problem[256];             /* why it does not parse, or for an unknown name the likely intended one */
} mori_env_setting_t;
typedef void (*mori_env_visit_fn)(void *ctx, const mori_env_setting_t *setting);
/* Calls `visit` for each MORI_* variable set, sorted by name; returns how
 * many are unknown or do not parse. */
int mori_env_list(mori_env_visit_fn visit, void *ctx);

MORI_EXTERN_C_END

#endif
