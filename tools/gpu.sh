#!/bin/bash
# The GPU run, in two halves (the device machine has no Bazel):
#   tools/gpu.sh build   here: builds the cuda configuration and stages the
#                        binaries, the torch backend and the examples in .carry/
#   tools/gpu.sh run     there (carry .carry): runs the GPU tests, the torch
#                        backend tests and the benchmarks, and prints a summary
# Environment kept set there: no NVLink multicast anywhere.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

if [ "$mode" = build ]; then
  set -e
  tools/install_deps.sh torch
  export MORI_TORCH_DIR=$PWD/.deps/torch/torch
  bazel build -c opt --config=cuda //tests/gpu:gpu_window_test //tests/gpu:bench_p2p //tools/launch:mori_launch \
    //torch_backend:libmori_torch.so
  rm -rf .carry && mkdir -p .carry/bin .carry/python
  cp -f bazel-bin/tests/gpu/gpu_window_test bazel-bin/tests/gpu/bench_p2p bazel-bin/tools/launch/mori_launch .carry/bin/
  if [ -f bazel-bin/torch_backend/libmori_torch.so ]; then
    cp -r torch_backend/python/mori .carry/python/
    cp -f bazel-bin/torch_backend/libmori_torch.so .carry/python/mori/
  fi
  [ -d ../shared/bench ] && cp -r ../shared/bench .carry/anchor_bench
  chmod -R u+w .carry
  du -sh .carry
  exit 0
fi

if [ "$mode" != run ]; then
  echo "usage: tools/gpu.sh build|run" >&2
  exit 2
fi

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/mori-gpu-out}
mkdir -p "$OUT"
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "== $(nvidia-smi -L | head -8 | tr '\n' ';')"
summary=()
record() { summary+=("$1"); }

echo "== GPU tests ($ngpu ranks)"
MORI_TEST_RANKS=$ngpu timeout 300 .carry/bin/gpu_window_test 2>&1 | tee "$OUT/gpu_window_test.log" | grep -vE '^\[ RUN' | tail -40
rc=${PIPESTATUS[0]}
record "gpu_window_test: $(grep -c '^\[       OK' "$OUT/gpu_window_test.log") passed, $(grep -c '^\[  FAILED  \] [A-Z]' "$OUT/gpu_window_test.log") failed (exit $rc)"

echo "== p2p benchmark"
timeout 200 .carry/bin/mori_launch -n "$ngpu" -t 180 .carry/bin/bench_p2p 2>&1 | tee "$OUT/bench_p2p.log" | grep RESULT
record "bench_p2p: $(grep -c RESULT "$OUT/bench_p2p.log") results"

if [ -d .carry/python/mori ] && [ "${MORI_SKIP_TORCH:-0}" != 1 ]; then
  export PYTHONPATH=$PWD/.carry/python:${PYTHONPATH:-}
  echo "== torch backend tests"
  timeout 300 torchrun --nproc_per_node="$ngpu" torch_backend/tests/test_torch_backend.py 2>&1 | tee "$OUT/torch_tests.log" | grep -E "PASS|FAIL|Error|error" | head -60
  record "torch backend: $(grep -c '^PASS' "$OUT/torch_tests.log") passed, $(grep -c '^FAIL' "$OUT/torch_tests.log") failed"
  echo "== examples"
  for ex in a2a_triton a2a_cuda; do
    timeout 120 torchrun --nproc_per_node="$ngpu" torch_backend/examples/$ex.py MORI 2>&1 | tee -a "$OUT/examples.log" | grep -E "correct|Error"
  done
  record "examples: $(grep -c 'all-to-all correct' "$OUT/examples.log") of $((2 * ngpu)) ranks correct"
  echo "== torch benchmarks (MORI vs default vs NVSHMEM)"
  # Twice, in opposite orders, so that no backend always runs first.
  for backend in MORI default NVSHMEM MORI-kernel NVSHMEM default MORI; do
    timeout 200 torchrun --nproc_per_node="$ngpu" torch_backend/bench/bench_torch.py "$backend" 2>&1 | tee -a "$OUT/torch_bench.log" | grep -E "RESULT|Error" | head -20
  done
  record "torch bench: $(grep -c RESULT "$OUT/torch_bench.log") results"
fi

echo "== summary"
printf '%s\n' "${summary[@]}"
