#!/bin/bash
# SPDX-License-Identifier: MIT
# Every rank logs mori's version once at init, at INFO, and the number is the
# one bazel/version.bzl defines.
#   version_logged_test.sh <mori_launch> <hello_window> <version.bzl>
set -u
launch=$1 bin=$2 bzl=$3
num() { sed -n "s/^$1 *= *\([0-9]*\).*/\1/p" "$bzl"; }
version="$(num MORI_VERSION_MAJOR).$(num MORI_VERSION_MINOR).$(num MORI_VERSION_PATCH)"
out=$(MORI_GLOBAL_LOG_LEVEL=INFO "$launch" -n 2 -t 60 "$bin" 2>&1) || { echo "$out"; echo "FAIL: the job failed"; exit 1; }
lines=$(echo "$out" | grep -c "mori $version (platform host)")
[ "$lines" -eq 2 ] || { echo "$out"; echo "FAIL: $lines lines name mori $version, want one per rank (2)"; exit 1; }
quiet=$(MORI_GLOBAL_LOG_LEVEL=WARN "$launch" -n 2 -t 60 "$bin" 2>&1)
if echo "$quiet" | grep -q "mori $version (platform"; then echo "$quiet"; echo "FAIL: the version line shows at WARN"; exit 1; fi
echo "OK: each rank logged mori $version once"
