#!/bin/bash
# Compiles one device-code source for the configured platform.
# usage: device_compile.sh <cuda|rocm> <out.o> <src> [extra compiler flags...]
set -euo pipefail
platform=$1 out=$2 src=$3
shift 3
case "$platform" in
  cuda)
    nvcc=${MORI_NVCC:-/usr/local/cuda/bin/nvcc}
    # sm_90 machine code for the H200s plus PTX so newer GPUs can JIT it.
    exec "$nvcc" -std=c++17 -O3 -x cu \
      -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90 \
      -Xcompiler -fPIC -Xcompiler -Wall -Werror all-warnings \
      -DMORI_PLATFORM_CUDA=1 "$@" -c "$src" -o "$out" ;;
  rocm)
    hipcc=${MORI_HIPCC:-/usr/bin/hipcc}
    # gfx90a (MI200) and gfx942 (MI300) where the compiler knows it.
    exec "$hipcc" -std=c++17 -O3 -x hip --offload-arch=gfx90a -fPIC -Wall -Werror \
      -DMORI_PLATFORM_HIP=1 "$@" -c "$src" -o "$out" ;;
  *)
    echo "device_compile.sh: no device compiler for platform '$platform'" >&2
    exit 2 ;;
esac
