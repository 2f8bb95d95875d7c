#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs a Python unittest file with the system's python3.
#   run_python_test.sh <test.py> <the shared library it loads>
# Under --config=asan the library needs the ASan runtime first in the
# process: preload it. Leak checking stays with the C suites (the
# interpreter keeps its own allocations until exit by design).
set -eu
asan=$(ldd "$2" | awk '/libasan/ {print $3}')
if [ -n "$asan" ]; then
  export LD_PRELOAD=$asan
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
exec python3 "$1" -v
