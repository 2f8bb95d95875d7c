#!/bin/bash
# SPDX-License-Identifier: MIT
# Fuzzes what mori reads from others: the bootstrap's frame decoder and
# start-up reader (tests/fuzz/bootstrap_wire_fuzz.c), rank 0's address
# parser (tests/fuzz/bootstrap_address_fuzz.c), the records window creation
# gathers from every rank (tests/fuzz/rendezvous_fuzz.c) and the fd
# channel's message decoder (tests/fuzz/fd_message_fuzz.c). Builds each
# libFuzzer target with clang outside Bazel (-fsanitize=fuzzer,address,
# undefined), runs it from its seed corpus in tests/fuzz/corpus/<target>/
# for MORI_FUZZ_SECONDS (default 45; four targets, about three minutes in
# all) and prints one line per target: "fuzz <target>: passed|FAILED".
# New inputs and crash reproducers go to .fuzz/ (not to the repository).
# Exit code 0 only if every target built and ran clean.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${MORI_FUZZ_SECONDS:-45}
work=.fuzz
mkdir -p "$work"

# The first clang that can link a libFuzzer program (clang-22 needs
# libclang-rt-22-dev, which tools/install_deps.sh installs).
cc=""
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' >"$work/probe.c"
for candidate in ${MORI_FUZZ_CC:-} clang-22 clang; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -fsanitize=fuzzer,address,undefined "$work/probe.c" -o "$work/probe" 2>/dev/null; then
    cc=$candidate
    break
  fi
done
if [ -z "$cc" ]; then
  echo "fuzz: no clang with libFuzzer found (install clang-22 and libclang-rt-22-dev: tools/install_deps.sh)"
  exit 1
fi

flags=(-std=gnu11 -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -Wall -Wextra -Werror -Wno-unused-parameter -I. -Icore/include -Icore/device/include)
# What each target links besides its own file.
sources() {
  case $1 in
    bootstrap_*) echo core/base/error.c core/base/sha256.c core/base/hmac_sha256.c \
                      core/bootstrap/address.c core/bootstrap/handshake.c core/bootstrap/wire.c ;;
    rendezvous) echo core/base/error.c core/base/handle_type.c core/rendezvous.c ;;
    fd_message) echo handles/posix_fd/fd_message.c ;;
  esac
}
failed=0
for target in bootstrap_wire bootstrap_address rendezvous fd_message; do
  bin=$work/$target
  # shellcheck disable=SC2046 # the list is words by design
  if ! "$cc" "${flags[@]}" "tests/fuzz/${target}_fuzz.c" $(sources "$target") -o "$bin" 2>"$work/$target.build.log"; then
    cat "$work/$target.build.log"
    echo "fuzz $target: FAILED (does not build with $cc)"
    failed=$((failed + 1))
    continue
  fi
  mkdir -p "$work/corpus/$target" "$work/artifacts"
  # New inputs land in the first directory; the seeds stay as they are.
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$work/artifacts/$target-" "$work/corpus/$target" "tests/fuzz/corpus/$target" \
       >"$work/$target.log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$target.log" | grep -o '[0-9]*$')
    echo "fuzz $target: passed (${runs:-?} inputs in ${seconds} s, $cc)"
  else
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$work/$target.log" | head -20
    echo "fuzz $target: FAILED (log: $work/$target.log)"
    failed=$((failed + 1))
  fi
done
[ "$failed" -eq 0 ]
