#!/bin/bash
# SPDX-License-Identifier: MIT
# Installs mori for C users into PREFIX: include/, lib/libmori.so,
# lib/pkgconfig/mori.pc, lib/cmake/mori/, bin/mori_launch (docs/install.md).
#   bazel run //install -- PREFIX            (the platform of the build: --config=cuda|rocm)
#   install.sh [--tarball FILE] PREFIX      (a tree packed by //install:tree)
set -euo pipefail
usage() { echo "usage: $0 [--tarball mori_install.tar.gz] PREFIX"; }
tarball=""
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  --tarball) tarball=$2; shift 2 ;;
esac
[ $# -eq 1 ] || { usage >&2; exit 2; }
prefix=$1
# Under `bazel run` the working directory is the runfiles tree: a relative
# PREFIX means the directory the command was typed in.
if [[ "$prefix" != /* ]]; then prefix="${BUILD_WORKING_DIRECTORY:-$PWD}/$prefix"; fi
if [ -z "$tarball" ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  for t in "${RUNFILES_DIR:-$0.runfiles}/mori/install/tree.tar.gz" "$here/tree.tar.gz"; do
    [ -f "$t" ] && tarball=$t && break
  done
fi
[ -f "$tarball" ] || { echo "install.sh: no install tree (tree.tar.gz) found; build //install:tree" >&2; exit 1; }
mkdir -p "$prefix"
tar -xzf "$tarball" -C "$prefix" --no-same-owner
echo "mori $(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/mori.pc") ($(sed -n 's/^platform=//p' "$prefix/lib/pkgconfig/mori.pc")) installed in $prefix"
echo "  pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs mori"
echo "  CMake:      cmake -DCMAKE_PREFIX_PATH=$prefix ...   then find_package(mori) and mori::mori"
