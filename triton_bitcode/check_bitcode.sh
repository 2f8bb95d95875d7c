#!/bin/bash
# SPDX-License-Identifier: MIT
# Checks the Triton device library's bitcode with LLVM 15's tools (the
# version that wrote it):
#   - each file defines exactly the mori_tl_* functions mori.triton.lib
#     declares (its extern calls name them), and globalGpuStates, the global
#     shmem_module_init fills;
#   - nothing is left undefined but LLVM intrinsics (Triton's link resolves
#     nothing else for it: its AMD backend adds only ocml/ockl, and only for
#     calls whose names contain those words);
#   - no function carries target-cpu / target-features (generic code, so
#     Triton's inliner and code generation treat it as its own).
# usage: check_bitcode.sh <python/mori/triton/lib.py> <file.bc>...
set -uo pipefail
# Under pipefail, `echo "$x" | grep -q` fails at random: grep -q leaves at
# its first match and echo, writing line by line, can then die of SIGPIPE.
# Every match below reads a here-string instead.
llvm=${MORI_BITCODE_LLVM_DIR:-/usr/lib/llvm-15}
py=$1
shift
fail=0
want=$(grep -oE '"mori_tl_[a-z_]+"' "$py" | tr -d '"' | sort -u)
[ -n "$want" ] || { echo "FAIL: $py names no mori_tl_ function"; exit 1; }
for bc in "$@"; do
  syms=$("$llvm/bin/llvm-nm" "$bc") || { echo "FAIL: llvm-nm cannot read $bc"; fail=1; continue; }
  have=$(echo "$syms" | awk '$2 == "T" && $3 ~ /^mori_tl_/ {print $3}' | sort -u)
  if [ "$have" != "$want" ]; then
    echo "FAIL: $bc defines a different set of mori_tl_ functions than $py declares"
    diff <(echo "$want") <(echo "$have") | sed 's/^/  /'
    fail=1
  fi
  grep -qE '^-+ D globalGpuStates$' <<<"$syms" || { echo "FAIL: $bc does not define globalGpuStates"; fail=1; }
  ir=$("$llvm/bin/llvm-dis" "$bc" -o -) || { echo "FAIL: llvm-dis cannot read $bc"; fail=1; continue; }
  undefined=$(echo "$ir" | grep -E '^declare ' | grep -vE '@llvm\.' || true)
  [ -z "$undefined" ] || { echo "FAIL: $bc leaves functions undefined:"; echo "$undefined" | sed 's/^/  /'; fail=1; }
  if grep -qE '"target-(cpu|features)"' <<<"$ir"; then echo "FAIL: $bc carries target-cpu/target-features"; fail=1; fi
  [ $fail -ne 0 ] || echo "ok: $bc: $(echo "$have" | wc -l) functions, globalGpuStates, nothing undefined"
done
exit $fail
