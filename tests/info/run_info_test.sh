#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs info_test.py with the system's python3.
#   run_info_test.sh <info_test.py> <mori_info> <mori_launch> <libmori.so>
# Under --config=asan the library needs the ASan runtime first in every
# process that loads it (mori_info, python): preload it; leak checking
# stays with the C suites.
set -eu
asan=$(ldd "$4" | awk '/libasan/ {print $3}')
if [ -n "$asan" ]; then
  export LD_PRELOAD=$asan
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
test=$1
shift
exec python3 "$test" "$@" -v
