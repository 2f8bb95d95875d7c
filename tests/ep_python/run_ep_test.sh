#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs a Python unittest file that needs torch, with the system's python3.
#   run_ep_test.sh <test.py> <the libmori.so it loads>
# torch is the installation Bazel found (MORI_TORCH_DIR, set by BUILD.bazel
# from @torch//:defs.bzl), imported on the CPU: a CUDA build of torch loads
# without a GPU once its libraries are found, from the CUDA toolkit and from
# the runtime directory `tools/install_deps.sh torch` fills next to it
# (.deps/torch_runtime; EP_TORCH_RUNTIME overrides it).
set -eu
torch_dir=${MORI_TORCH_DIR:?MORI_TORCH_DIR (the torch package directory) is not set}
runtime=${EP_TORCH_RUNTIME:-$(dirname "$(dirname "$torch_dir")")/torch_runtime}
libs=
for d in "$runtime"/nvidia/*/lib; do
  [ -d "$d" ] && libs=$libs${libs:+:}$d
done
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$(dirname "$torch_dir"):$runtime${PYTHONPATH:+:$PYTHONPATH}
if ! err=$(python3 -c 'import torch' 2>&1); then
  echo "run_ep_test: torch from $torch_dir does not import on the CPU (run tools/install_deps.sh torch):" >&2
  echo "$err" | tail -3 >&2
  exit 1
fi
asan=$(ldd "$2" | awk '/libasan/ {print $3}')
if [ -n "$asan" ]; then
  export LD_PRELOAD=$asan
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
exec python3 "$1" -v
