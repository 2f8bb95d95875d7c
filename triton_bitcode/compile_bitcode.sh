#!/bin/bash
# SPDX-License-Identifier: MIT
# Compiles mori's Triton device library (mori_triton_device.cu) to LLVM
# bitcode that Triton links as an extern library.
# usage: compile_bitcode.sh <nvptx|amdgcn> <out.bc> <src> [extra compiler flags, e.g. -I...]
#
# Which LLVM. Bitcode is read only by the same or a newer LLVM. Triton 3.6.0
# bundles LLVM "22.0.0git" (commit f6ded0be, a snapshot before the 22
# release); the 22.0.0git reader rejects what clang 22.1 writes (newer
# attributes such as nocreateundeforpoison and target_mem memory effects).
# LLVM 15 bitcode is older than every Triton 3.x LLVM, and LLVM reads older
# bitcode (auto-upgraded), so clang 15 is the compiler: Triton 3.6 was seen
# to link its output and build sm_90 cubins and gfx942/gfx950 code objects
# from it. clang 15 knows neither sm_90 nor gfx942, so the code is compiled
# for sm_80 / gfx940 and the target-cpu / target-features attributes are
# removed afterwards: the functions become generic, like CUDA's libdevice and
# ROCm's device libraries, and Triton's code generation for the GPU at hand
# (and its inliner, which wants caller and callee attributes to agree) treat
# them as its own.
#
# Steps: clang -> textual IR; drop target attributes and module flags (they
# would clash with the flags Triton's module carries, e.g.
# nvvm-reflect-ftz); opt: keep mori_tl_* and globalGpuStates external,
# internalize the rest and drop what nothing uses (the HIP headers' weak
# __assert_fail and the device-library code only it needs); write bitcode.
#
# MORI_BITCODE_LLVM_DIR: the LLVM install to use (default /usr/lib/llvm-15);
# it must be no newer than the LLVM of the Triton that links the result.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: compile_bitcode.sh <nvptx|amdgcn> <out.bc> <src> [flags...]" >&2; exit 2; }
target=$1 out=$2 src=$3
shift 3
llvm=${MORI_BITCODE_LLVM_DIR:-/usr/lib/llvm-15}
for tool in clang opt; do
  [ -x "$llvm/bin/$tool" ] || { echo "compile_bitcode.sh: $llvm/bin/$tool not found (install clang-15 and llvm-15, or set MORI_BITCODE_LLVM_DIR)" >&2; exit 1; }
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

common=(-std=c++17 -O2 -Wall -Werror -fno-exceptions -S -emit-llvm)
case "$target" in
  nvptx)
    # No CUDA toolkit: clang's CUDA mode plus cuda_prelude.h (threadIdx,
    # __syncthreads, ...); sm_80 is the newest architecture clang 15 knows.
    "$llvm/bin/clang" -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 --cuda-path=/nonexistent -nocudainc -nocudalib \
      -include "$here/cuda_prelude.h" "${common[@]}" "$@" "$src" -o "$tmp/a.ll" ;;
  amdgcn)
    # HIP headers (ROCm's, /usr/include/hip on Debian) and the three device
    # libraries the HIP headers call into (ockl: thread and block indices;
    # hip: __atomic_work_item_fence behind __threadfence*; the code-object
    # ABI selector), linked in and internalized so the bitcode needs no
    # library at Triton's link. gfx940 is the newest gfx9.4 target clang 15
    # knows; -fgpu-rdc keeps the extern "C" device functions (without it
    # clang internalizes and drops them).
    rocm=${MORI_BITCODE_ROCM_PATH:-/usr}
    libs=${MORI_ROCM_BITCODE_DIR:-/usr/lib/x86_64-linux-gnu/amdgcn/bitcode}
    for l in ockl hip oclc_abi_version_500 oclc_wavefrontsize64_on; do
      [ -f "$libs/$l.bc" ] || { echo "compile_bitcode.sh: $libs/$l.bc not found (install rocm-device-libs, or set MORI_ROCM_BITCODE_DIR)" >&2; exit 1; }
    done
    "$llvm/bin/clang" -x hip --cuda-device-only -fgpu-rdc --offload-arch=gfx940 --rocm-path="$rocm" -nogpulib \
      -D__AMDGCN_WAVEFRONT_SIZE=64 \
      -Xclang -mlink-builtin-bitcode -Xclang "$libs/ockl.bc" -Xclang -mlink-builtin-bitcode -Xclang "$libs/hip.bc" \
      -Xclang -mlink-builtin-bitcode -Xclang "$libs/oclc_abi_version_500.bc" \
      -Xclang -mlink-builtin-bitcode -Xclang "$libs/oclc_wavefrontsize64_on.bc" \
      "${common[@]}" "$@" "$src" -o "$tmp/a.ll" ;;
  *)
    echo "compile_bitcode.sh: unknown target '$target' (nvptx or amdgcn)" >&2
    exit 2 ;;
esac
sed -E 's/ "target-(cpu|features)"="[^"]*"//g; /^!llvm\.(module\.flags|ident) = /d' "$tmp/a.ll" > "$tmp/b.ll"
"$llvm/bin/opt" -passes='internalize,globaldce' -internalize-public-api-list='mori_tl_*' \
  -internalize-public-api-list=globalGpuStates "$tmp/b.ll" -o "$out"
