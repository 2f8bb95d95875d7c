#!/bin/bash
# SPDX-License-Identifier: MIT
# Checks that a shared library built from mori exports only mori's public
# names: every exported C symbol starting with mori_ is declared MORI_API in
# a public header (or is one of the library's documented C entry points,
# given as extra arguments), and no C++ symbol of mori's own namespaces
# leaves it. Symbols of torch's and the C++ library's inline templates stay
# (they must unify with libtorch's).
#   tools/check_exports.sh <library.so> [allowed_entry_point ...]
set -euo pipefail
cd "$(dirname "$0")/.."
lib=$1
shift
public=$(cat */include/mori/*.h */*/include/mori/*.h 2>/dev/null |
  grep -oE 'MORI_API[^;(]*[^A-Za-z0-9_](mori_[A-Za-z0-9_]+)[[:space:]]*[(;]' |
  grep -oE 'mori_[A-Za-z0-9_]+[[:space:]]*[(;]$' | tr -d '(; ' | sort -u)
allowed=$(printf '%s\n' $public "$@" | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '{print $3}')
bad_c=$(printf '%s\n' $exported | grep '^mori_' | sort -u | comm -23 - <(printf '%s\n' $allowed) || true)
bad_cxx=$(printf '%s\n' $exported | grep '^_Z' | c++filt | grep -E '(^|[^A-Za-z_])mori(_torch)?::' || true)
n=$(printf '%s\n' $exported | grep -c '^mori_' || true)
if [ -n "$bad_c$bad_cxx" ]; then
  echo "check_exports: $lib exports internal names:"
  printf '  %s\n' $bad_c
  [ -n "$bad_cxx" ] && printf '  %s\n' "$bad_cxx"
  exit 1
fi
echo "check_exports: $lib exports $n mori_ names, all public"
