#!/bin/bash
# SPDX-License-Identifier: MIT
# tools/check_env_vars.py fails on a variable the table lacks (in C, Python
# anywhere in the tree, shell) and on a table entry nothing uses, and passes
# constants and marked lines: run on a small tree of its own.
set -euo pipefail
check=$1
tree=$(mktemp -d "${TEST_TMPDIR:-/tmp}/envtree.XXXXXX")
mkdir -p "$tree/core/base" "$tree/lib" "$tree/python/mori/deep" "$tree/tools"
table() { printf '%s\n' "static const mori_env_var_t table[] = {" "$@" "};" > "$tree/core/base/env_table.c"; }
expect() { # $1 = exit status wanted, $2 = text the output must hold
  set +e
  out=$(python3 "$check" "$tree" 2>&1)
  rc=$?
  set -e
  if [ "$rc" -ne "$1" ] || ! grep -qF -- "$2" <<<"$out"; then
    echo "wanted exit $1 and \"$2\"; got exit $rc:"; echo "$out"; exit 1
  fi
}
cat > "$tree/lib/a.c" <<'C'
#include <stdlib.h>
enum { MORI_SOME_CONSTANT = 1 };
static const char *a(void) { return getenv("MORI_A"); }
static const char *c(void) { return "MORI_SOME_CONSTANT"; }
C
table '    {"MORI_A", MORI_ENV_STRING},'
expect 0 "1 variables in the code"
# Python in a folder the check has never heard of.
printf 'import os\nMORI_FLAG = 3\n__all__ = ["MORI_FLAG"]\nx = os.environ.get("MORI_B")\n' > "$tree/python/mori/deep/b.py"
expect 1 "python/mori/deep/b.py: reads MORI_B"
table '    {"MORI_A", MORI_ENV_STRING},' '    {"MORI_B", MORI_ENV_STRING},'
expect 0 "2 variables in the code"
printf 'env = dict(os.environ, MORI_D="1")\n' >> "$tree/python/mori/deep/b.py"
expect 1 "reads MORI_D"
printf 'os.environ["MORI_D"] = "1"  # env-check: ignore (a test)\n' > "$tree/python/mori/deep/b2.py"
sed -i '$d' "$tree/python/mori/deep/b.py"
expect 0 "2 variables in the code"
printf '#!/bin/sh\nn=${MORI_E:-4}\n' > "$tree/tools/run.sh"
expect 1 "tools/run.sh: reads MORI_E"
rm "$tree/tools/run.sh"
table '    {"MORI_A", MORI_ENV_STRING},' '    {"MORI_B", MORI_ENV_STRING},' '    {"MORI_GONE", MORI_ENV_STRING},'
expect 1 "lists MORI_GONE, which nothing reads"
echo "PASS"
