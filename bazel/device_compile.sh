#!/bin/bash
# SPDX-License-Identifier: MIT
# Compiles one device-code source for the configured platform.
# usage: device_compile.sh <cuda|rocm> <out.o> <src> [extra compiler flags...]
set -euo pipefail
platform=$1 out=$2 src=$3
shift 3
case "$platform" in
  cuda)
    nvcc=${MORI_NVCC:-/usr/local/cuda/bin/nvcc}
    # Machine code for sm_80 (A100; also runs on sm_86 / sm_89), sm_90
    # (H100 / H200) and sm_100 (B200 / GB200), plus compute_100 PTX that
    # the driver compiles for a newer GPU (sm_120 and later). README's
    # support matrix lists these; nvcc 13 knows all of them.
    exec "$nvcc" -std=c++17 -O3 -x cu \
      -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 \
      -gencode=arch=compute_100,code=sm_100 -gencode=arch=compute_100,code=compute_100 \
      -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -Xcompiler -Wall -Werror all-warnings \
      -DMORI_PLATFORM_CUDA=1 "$@" -c "$src" -o "$out" ;;
  rocm)
    # Debian's hipcc (ROCm 5.2) stops at gfx90a; Debian's clang-22 also
    # reaches gfx942 (MI300X/MI325X), gfx950 (MI355X) and gfx1250 (MI450)
    # with the HIP 5.2 headers. One fat object carries every target.
    llvm=${MORI_LLVM_DIR:-/usr/lib/llvm-22}
    bitcode=${MORI_ROCM_BITCODE_DIR:-/usr/lib/x86_64-linux-gnu/amdgcn/bitcode}
    # The driver runs clang-offload-bundler (clang-tools-22) by name.
    export PATH="$llvm/bin:$PATH"
    # target:wavefront size. Measured with clang-22, not assumed: the backend
    # folds __builtin_amdgcn_wavefrontsize() to 64 on the gfx9 targets and to
    # 32 on gfx1250, whose kernels carry .wavefront_size 32 (it rejects
    # -mwavefrontsize64). clang-22 no longer defines __AMDGCN_WAVEFRONT_SIZE,
    # which HIP 5.2 reads for warpSize, so each target gets its own value and
    # the matching device-library selector. The host pass parses the same
    # headers and needs a value too: 64, what clang used to define there. Host
    # code must not trust it (one binary serves wave32 and wave64 GPUs): ask
    # the device (hipDeviceProp_t::warpSize).
    targets="gfx90a:64 gfx942:64 gfx950:64 gfx1250:32"
    per_target=(-Xarch_host -D__AMDGCN_WAVEFRONT_SIZE=64)
    for tw in $targets; do
      t=${tw%:*} w=${tw#*:}
      per_target+=(--offload-arch="$t" "-Xarch_$t" "-D__AMDGCN_WAVEFRONT_SIZE=$w"
                   "-Xarch_$t" "--hip-device-lib=oclc_wavefrontsize64_$([ "$w" = 64 ] && echo on || echo off).bc")
    done
    # Only the device libraries the HIP headers need, named one by one (ockl:
    # device assert and printf; hip: __atomic_work_item_fence, behind
    # __threadfence*; the code-object ABI selector): Debian's set has no
    # oclc_isa_version_942.bc or later, which the driver's default set would
    # want. --hip-device-lib, not -nogpulib with -Xclang -mlink-builtin-bitcode:
    # -Xarch cannot carry -Xclang, and -Xclang would also hand AMDGPU bitcode
    # to the host pass.
    exec "$llvm/bin/clang" -std=c++17 -O3 -x hip "${per_target[@]}" \
      --rocm-device-lib-path="$bitcode" --hip-device-lib=ockl.bc --hip-device-lib=hip.bc \
      --hip-device-lib=oclc_abi_version_500.bc \
      -fuse-ld=lld --ld-path="$llvm/bin/ld.lld" -fPIC -fvisibility=hidden -Wall -Werror \
      -DMORI_PLATFORM_HIP=1 "$@" -c "$src" -o "$out" ;;
  *)
    echo "device_compile.sh: no device compiler for platform '$platform'" >&2
    exit 2 ;;
esac
