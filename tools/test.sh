#!/bin/bash
# SPDX-License-Identifier: MIT
# The test command (README, CI): installs what it needs, checks the SPDX
# lines and the includes against the Bazel deps (tools/check_layering.py), then
#   1. every host-platform test (multi-process, 2/4/8 ranks);
#   2. the same tests under ASan + UBSan;
#   3. the fuzz targets of what mori reads from others (bootstrap, window
#      rendezvous records, fd-channel messages), 45 s each (tools/fuzz.sh);
#   4. builds of the cuda and rocm configurations (compile + link);
#   5. the torch backend built against torch 2.11.0, and the mori wheels
#      (tools/wheel_test.sh installs each into a clean venv and checks it;
#      tools/wheel_audit.sh has auditwheel check their manylinux tag);
#   6. the install for C users (install/install_test.sh: `bazel run
#      //install`, then a program built with pkg-config and with CMake
#      outside Bazel, run at 2 ranks) and the quick-starts as written
#      (tests/docs: examples' header commands, runnable blocks of the docs).
# Ends with one line: "N passed, N failed". Exit code 0 only if all passed.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh torch || { echo "0 passed, 1 failed"; exit 1; }
export MORI_TORCH_DIR=$PWD/.deps/torch/torch

passed=0 failed=0 skipped=0
# What failed, said again just before the last line: a reader of the tail
# alone (CI shows its end) learns which check, test case and message.
recap=()
count_tests() { # $1 = label, $2 = its testlogs; reads every test.xml the last bazel test run wrote
  local xml n f s line files=()
  mapfile -d '' files < <(find -L "$2" -name test.xml -newer .deps/.stamp -print0 2>/dev/null)
  [ ${#files[@]} -gt 0 ] && xml=$(cat "${files[@]}") || xml=
  while IFS= read -r line; do recap+=("$1: $line"); done < <([ ${#files[@]} -eq 0 ] || python3 tools/failed_cases.py "${files[@]}")
  n=$(printf '%s' "$xml" | grep -o '<testcase ' | wc -l)
  f=$(printf '%s' "$xml" | grep -o '<failure' | wc -l)
  s=$(printf '%s' "$xml" | grep -o '<skipped' | wc -l)
  echo "$1: $((n - f - s)) test cases passed, $f failed, $s skipped"
  passed=$((passed + n - f - s)); failed=$((failed + f)); skipped=$((skipped + s)); last_failed=$f
}
step() { # $1 = label, rest = command; counts as one check
  echo "== $1"
  if "${@:2}"; then passed=$((passed + 1)); else echo "FAILED: $1"; failed=$((failed + 1)); recap+=("step: $1"); fi
}

step "every source file carries its SPDX line (tools/check_spdx.sh)" tools/check_spdx.sh
step "the include check finds planted violations (tools/check_layering.py --self-test)" tools/check_layering.py --self-test
step "every #include is of a direct dependency, no package include cycle (tools/check_layering.py)" tools/check_layering.py
step "every MORI_* variable the code reads is in core/base/env_table.c (tools/check_env_vars.py)" tools/check_env_vars.py
step "docs/environment.md is what the table generates (bazel run //core/base:env_doc)" \
  bash -c 'diff -u docs/environment.md <(bazel run --noshow_progress //core/base:env_doc 2>/dev/null)'
for config in host asan; do
  echo "== bazel test --config=$config //..."
  mkdir -p .deps && touch .deps/.stamp && sleep 1
  bazel test --config=$config --nocache_test_results --test_output=errors //... 2>&1 | grep -vE '^(INFO|Loading|Analyzing)' | tail -40
  rc=${PIPESTATUS[0]}
  # (.bazelrc: the asan build keeps its own outputs, so the host pass's
  # logs are still there for a reader after both passes.)
  count_tests "$config" "$([ $config = asan ] && echo bazel-asan-testlogs || echo bazel-testlogs)"
  # A target that failed to build or crashed before writing XML still counts.
  if [ "$rc" -ne 0 ] && [ "$last_failed" -eq 0 ]; then
    echo "bazel test failed (exit $rc)"; failed=$((failed + 1)); recap+=("$config: bazel test failed (exit $rc), no test case reported it")
  fi
done
step "install for C users: pkg-config and CMake builds outside Bazel, run at 2 ranks (install/install_test.sh)" \
  install/install_test.sh
step "quick-starts as written: examples' header commands, runnable blocks of README and docs (//tests/docs)" \
  bazel test --nocache_test_results //tests/docs:runnable_snippets_test
step "bench/report.py files every record under its own op; docs/performance.md is its output (bench/report_test.py)" \
  python3 bench/report_test.py .
step "docs/torch.md's 'Should I switch?' is what bench/switch_table.py makes of the result files" \
  python3 bench/switch_table.py --check
step "fuzz the bootstrap's decoders, the rendezvous records and the fd-channel messages (tools/fuzz.sh)" tools/fuzz.sh
# With no GPU, a GPU build must fail with a clear error, never a crash.
no_gpu_fails_cleanly() { # $1 = config, $2 = expected words
  local out rc
  out=$(MORI_RANK=0 MORI_WORLD_SIZE=1 timeout 60 bazel-$1-bin/examples/hello_window 2>&1); rc=$?
  echo "$out"
  [ "$rc" -eq 1 ] && grep -q "$2" <<<"$out" && grep -q MORI_ENO_GPU <<<"$out"
}
gpu_tests="//tests/gpu:gpu_window_test //tests/gpu:gpu_coll_test //tests/gpu:bench_p2p //tests/gpu:bench_coll //tests/gpu:gpu_ep_test //tests/gpu:bench_ep"
for config in cuda rocm; do
  step "bazel build --config=$config //... and the GPU tests" bazel build --config=$config //... $gpu_tests
  if command -v nvidia-smi >/dev/null 2>&1 || [ -e /dev/kfd ]; then continue; fi
  step "--config=$config without a GPU: a clear error" no_gpu_fails_cleanly $config "$([ $config = cuda ] && echo 'cannot load the driver' || echo 'no GPU present')"
done
# The rdma transport against a real verbs device: Soft-RoCE in a QEMU guest.
step "rdma suite, plain and under the software ConnectX, and the software ConnectX's own, on Soft-RoCE (QEMU guest), 2/4/8 ranks" tools/rdma_vm_test.sh 2 4 8
step "bazel build //torch_backend:mori (torch 2.11.0)" bazel build //torch_backend:mori
# Built, not skipped: the library exists (a skipped build makes only a note).
# (A transition builds it for cuda: bazel-out/<cpu>-<mode>-cuda-ST-<hash>/bin.)
torch_lib=$(ls -t $(find -L bazel-out -path '*-cuda-ST-*/bin/torch_backend/libmori_torch.so' 2>/dev/null) 2>/dev/null | head -1)
step "the torch backend was really built" test -n "$torch_lib"
step "the torch backend exports only public names" tools/check_exports.sh "$torch_lib" mori_torch_finalize \
  mori_torch_build_info mori_torch_alloc mori_torch_free
# mori_rdma_use_provider: the rdma transport's provider seam
# (transport/rdma/provider.h), exported for providers built apart, such as
# libmori_ce_nic.so.
step "libmori.so (cuda) exports only public names" tools/check_exports.sh "$(dirname "$(dirname "$torch_lib")")/libmori.so" \
  mori_rdma_use_provider
# Device-generic: the backend library needs neither of torch's device libraries.
needs_no_torch_device_library() { ! readelf -d "$1" | grep -E 'NEEDED.*(libc10_cuda|libtorch_cuda|libc10_hip|libtorch_hip)'; }
step "the torch backend needs no torch device library" needs_no_torch_device_library "$torch_lib"
# One SDK per process: the backend links libmori.so (as mori.shmem loads it)
# and defines none of mori's own functions, hidden or not.
links_libmori() {
  grep -q 'NEEDED.*\[libmori\.so\]' <<<"$(readelf -d "$1")" &&
    ! nm --defined-only "$1" | awk '{print $3}' | grep -v '^mori_torch_' | grep '^mori_' >/dev/null
}
step "the torch backend links libmori.so and holds no copy of it" links_libmori "$torch_lib"
# The Python package: a wheel (cuda), installed into a clean venv with no
# dependencies; with no GPU here, `import mori.allocator` must fail clearly
# (the torch of .deps has no CUDA libraries) and mori.shmem must work.
step "bazel build //:wheel (the mori package: cuda, torch 2.11.0)" bazel build //:wheel
wheel=$(ls -t bazel-bin/mori-*+cuda-py3-none-*.whl 2>/dev/null | head -1)
step "the wheel in a clean venv: mori.shmem without torch, clear import errors (tools/wheel_test.sh)" \
  tools/wheel_test.sh "$wheel" .deps/torch
step "bazel build --config=rocm //:wheel (the same sources for ROCm torch)" \
  bazel build --config=rocm //:wheel
rocm_wheel=$(ls -t bazel-rocm-bin/mori-*+rocm-py3-none-*.whl 2>/dev/null | head -1)
step "the rocm wheel in a clean venv: mori.shmem on host, the hip library when asked (tools/wheel_test.sh)" \
  tools/wheel_test.sh "$rocm_wheel"
# The rocm wheel is linux_x86_64 (its libmori.so links the HIP runtime).
step "auditwheel accepts the cuda wheel's manylinux tag (tools/wheel_audit.sh)" \
  tools/wheel_audit.sh "$wheel"

if [ ${#recap[@]} -gt 0 ]; then
  echo "== what failed"
  printf '  %s\n' "${recap[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
