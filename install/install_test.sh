#!/bin/bash
# SPDX-License-Identifier: MIT
# The install for C users as a user meets it (CI: tools/test.sh): installs
# into a fresh prefix with `bazel run //install`, checks the tree (every
# public header compiles on its own), then builds examples/getting_started.c
# outside Bazel with pkg-config and with CMake (find_package(mori),
# mori::mori) and runs each at 2 ranks under the installed mori_launch.
#   install/install_test.sh [bazel flags...]      (from the repository root)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

echo "== bazel run //install -- $prefix"
bazel run "$@" //install -- "$prefix" || { echo "FAIL: bazel run //install"; exit 1; }
for f in include/mori/version.h include/mori/window.h include/mori/device.h lib/libmori.so lib/pkgconfig/mori.pc \
  lib/cmake/mori/moriConfig.cmake lib/cmake/mori/moriConfigVersion.cmake bin/mori_launch bin/mori_info; do
  [ -e "$prefix/$f" ] || fail "$f is not installed"
done
# Every public header of the sources is installed.
for h in $(cd "$root" && ls -d */include/mori */*/include/mori 2>/dev/null | xargs -I{} find {} -name '*.h' | sed 's|.*/include/||'); do
  [ -f "$prefix/include/$h" ] || fail "public header $h is not installed"
done
# Each header compiles alone against the tree, as C (the device headers
# too: CPU ranks use them from plain C), with the compiler's default dialect
# and with strict C11 plus POSIX (docs/install.md).
for h in $(cd "$prefix/include" && find mori -name '*.h' | sort); do
  for std in "" "-std=c11 -D_POSIX_C_SOURCE=200809L"; do
    echo "#include \"$h\"" | cc $std -Wall -Werror -fsyntax-only -I"$prefix/include" -x c - 2>"$tmp/err" ||
      fail "$h does not compile on its own (${std:-default dialect}): $(head -3 "$tmp/err")"
  done
done
version=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion mori)
want=$(sed -n 's/^#define MORI_VERSION_STRING "\(.*\)"/\1/p' "$prefix/include/mori/version.h")
[ -n "$version" ] && [ "$version" = "$want" ] || fail "pkg-config says version '$version', mori/version.h '$want'"

# bin/mori_info runs from the tree, on the tree's libmori.so.
info=$(env -u LD_LIBRARY_PATH "$prefix/bin/mori_info" 2>&1)
grep -qx "mori $want, platform .*" <<<"${info%%$'\n'*}" || fail "bin/mori_info: $(echo "$info" | head -3)"
grep -q "libmori.so => $prefix/bin/../lib/libmori.so" <<<"$(ldd "$prefix/bin/mori_info")" ||
  fail "bin/mori_info does not load the tree's libmori.so: $(ldd "$prefix/bin/mori_info" | grep libmori)"

check_run() { # $1 = label, $2 = program
  local out
  out=$("$prefix/bin/mori_launch" -n 2 -t 60 "$2" 2>&1)
  local rc=$?
  echo "$out" | grep -v ' INFO '
  [ "$rc" -eq 0 ] || { fail "$1: exit status $rc"; return; }
  [ "$(echo "$out" | grep -c "mori $want): 2 values from 2 ranks, 0 wrong")" -eq 2 ] || fail "$1: not every rank reported 0 wrong"
}

echo "== pkg-config: cc examples/getting_started.c \$(pkg-config --cflags --libs mori)"
PKG_CONFIG_PATH=$prefix/lib/pkgconfig cc -Wall -Werror -o "$tmp/gs_pkgconfig" "$root/examples/getting_started.c" \
  $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs mori) || fail "the pkg-config build"
[ -x "$tmp/gs_pkgconfig" ] && check_run "pkg-config build" "$tmp/gs_pkgconfig"

echo "== CMake: find_package(mori $version), mori::mori"
if cmake -S "$root/install/test" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" -DMORI_VERSION_WANTED="$version" \
  -DMORI_PROGRAM="$root/examples/getting_started.c" >"$tmp/cmake.log" 2>&1 &&
  cmake --build "$tmp/build" >>"$tmp/cmake.log" 2>&1; then
  check_run "CMake build" "$tmp/build/getting_started"
else
  cat "$tmp/cmake.log"
  fail "the CMake build"
fi
echo "== CMake refuses a version the tree is not"
if cmake -S "$root/install/test" -B "$tmp/build9" -DCMAKE_PREFIX_PATH="$prefix" -DMORI_VERSION_WANTED=9.0 \
  -DMORI_PROGRAM="$root/examples/getting_started.c" >"$tmp/cmake9.log" 2>&1; then
  fail "find_package(mori 9.0) accepted version $version"
fi

echo "== the tree can be moved"
mv "$prefix" "$tmp/moved"
prefix=$tmp/moved
PKG_CONFIG_PATH=$prefix/lib/pkgconfig cc -o "$tmp/gs_moved" "$root/examples/getting_started.c" \
  $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs mori) && check_run "moved tree" "$tmp/gs_moved" ||
  fail "the build against the moved tree"

if [ "$failures" -ne 0 ]; then echo "install test: $failures failures"; exit 1; fi
echo "install test: OK (mori $version)"
