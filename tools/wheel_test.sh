#!/bin/bash
# SPDX-License-Identifier: MIT
# Installs a mori wheel into a clean virtual environment, with no network and
# no dependencies, and checks it there (tools/wheel_test.py): the installed
# files against RECORD, the metadata (licence, requires-python, classifiers,
# mori.__version__), the host platform chosen by itself (no GPU here) and a
# real 2-PE mori.shmem job on it from the wheel alone, the GPU platform's
# library when MORI_PLATFORM asks for it, and clear ImportErrors from
# `import mori.allocator` on host, for another torch minor, a CPU-only
# torch, no GPU, and (given TORCH_DIR, a torch installation without its GPU
# libraries) a torch that cannot load.
#   tools/wheel_test.sh <mori-*.whl> [TORCH_DIR]
set -euo pipefail
whl=$(realpath "$1")
torch_dir=${2:+$(realpath "$2")}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$here/venv_wheel.sh" "$whl" "$tmp/venv"
echo "wheel_test: installed $(basename "$whl") into a clean venv ($("$tmp/venv/bin/python" --version))"
# torch imports typing_extensions before its libraries: lend it the host's
# copy, so that what fails in the venv is loading torch's GPU libraries.
if [ -n "$torch_dir" ] && te=$(python3 -c 'import typing_extensions as t; print(t.__file__)' 2>/dev/null); then
  mkdir -p "$tmp/torch_deps" && ln -s "$te" "$tmp/torch_deps/"
  torch_dir=$torch_dir:$tmp/torch_deps
fi
"$tmp/venv/bin/python" "$here/wheel_test.py" ${torch_dir:+--torch-dir "$torch_dir"} -v 2>&1
