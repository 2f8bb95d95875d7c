#!/bin/bash
# The test command (README, CI): installs what it needs, then
#   1. every host-platform test (multi-process, 2/4/8 ranks);
#   2. the same tests under ASan + UBSan;
#   3. builds of the cuda and rocm configurations (compile + link);
#   4. the torch backend built against torch 2.11.0.
# Ends with one line: "N passed, N failed". Exit code 0 only if all passed.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh torch || { echo "0 passed, 1 failed"; exit 1; }
export MORI_TORCH_DIR=$PWD/.deps/torch/torch

passed=0 failed=0
count_tests() { # $1 = label; reads every test.xml of the last bazel test run
  local p f
  p=$(find -L bazel-testlogs -name test.xml -newer .deps/.stamp -print0 2>/dev/null | xargs -0 -r cat | grep -o '<testcase [^>]*' | wc -l)
  f=$(find -L bazel-testlogs -name test.xml -newer .deps/.stamp -print0 2>/dev/null | xargs -0 -r cat | grep -c '<failure' || true)
  echo "$1: $((p - f)) test cases passed, $f failed"
  passed=$((passed + p - f)); failed=$((failed + f))
}
step() { # $1 = label, rest = command; counts as one check
  echo "== $1"
  if "${@:2}"; then passed=$((passed + 1)); else echo "FAILED: $1"; failed=$((failed + 1)); fi
}

for config in host asan; do
  echo "== bazel test --config=$config //..."
  mkdir -p .deps && touch .deps/.stamp && sleep 1
  bazel test --config=$config --test_output=errors //... 2>&1 | grep -vE '^(INFO|Loading|Analyzing)' | tail -40
  rc=${PIPESTATUS[0]}
  count_tests "$config"
  # A target that failed to build or crashed before writing XML still counts.
  [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=$((failed + 1))
done
step "bazel build --config=cuda //..." bazel build --config=cuda //...
step "bazel build --config=rocm //..." bazel build --config=rocm //...
step "bazel build --config=cuda //torch_backend:mori (torch 2.11.0)" bazel build --config=cuda //torch_backend:mori

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
