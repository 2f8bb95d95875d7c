#!/bin/bash
# SPDX-License-Identifier: MIT
# Installs what building and testing mori needs, from Debian's packages (and,
# for the torch backend, torch 2.11.0's wheel from PyPI without its CUDA
# dependencies). Skips what is already there.
#   tools/install_deps.sh          # Bazel, GoogleTest, ROCm HIP headers, verbs, Open MPI
#                                  # (shmem tests), clang-22 with its sanitizer/libFuzzer runtimes,
#                                  # clang-15 + llvm-15 (the Triton bitcode: triton_bitcode/)
#   tools/install_deps.sh torch    # also torch headers/libraries in .deps/torch, and in
#                                  # .deps/torch_runtime what importing that torch on the CPU
#                                  # needs beyond the CUDA toolkit (the Python EP tests)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(bazel-bootstrap bazel-rules-java bazel-platforms bazel-skylib libgtest-dev
          libibverbs-dev libamdhip64-dev hipcc libhsa-runtime-dev rocm-device-libs
          clang-22 lld-22 clang-tools-22 libclang-rt-22-dev openmpi-bin
          clang-15 llvm-15)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ "${1:-}" = torch ] && [ ! -f .deps/torch/torch/include/torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp ]; then
  echo "install_deps: fetching torch 2.11.0 (headers and libraries only)"
  mkdir -p .deps
  python3 -m pip install -q --no-deps --no-compile --target .deps/torch torch==2.11.0
fi

# torch's wheel is a CUDA build: it imports without a GPU once the three
# libraries the CUDA toolkit here lacks and its Python dependencies are found
# (tests/ep_python/run_ep_test.sh puts them on the paths).
if [ "${1:-}" = torch ] && [ ! -f .deps/torch_runtime/nvidia/cusparselt/lib/libcusparseLt.so.0 ]; then
  echo "install_deps: fetching what importing torch on the CPU needs (.deps/torch_runtime)"
  python3 -m pip install -q --no-deps --no-compile --target .deps/torch_runtime \
    nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 nvidia-cufile==1.20.0.107 \
    filelock==4.3.2 fsspec==2026.9.0 jinja2==3.1.6 markupsafe==3.0.4 mpmath==1.4.1 networkx==3.6.1 \
    numpy==2.4.6 sympy==1.14.0 typing_extensions==4.16.0
fi
