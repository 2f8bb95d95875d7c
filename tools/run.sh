#!/bin/bash
# SPDX-License-Identifier: MIT
# The main job (README): installs what it needs, builds, and runs a
# symmetric-memory program across ranks of this machine.
#   - no GPU: hello_window on 4 CPU ranks (host platform);
#   - NVIDIA GPUs: the cuda build's GPU test suite and the p2p benchmark,
#     one rank per GPU; then, where python3 has torch, the mori wheel
#     installed into a venv and an all-to-all on the MORI torch backend.
# MORI_RANKS overrides the number of ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
if [ "$gpus" -ge 1 ]; then
  ranks=${MORI_RANKS:-$gpus}
  echo "mori: $gpus GPU(s) found: cuda platform, $ranks ranks"
  bazel build -c opt --config=cuda //tools/launch:mori_launch //tests/gpu:gpu_window_test //tests/gpu:bench_p2p
  # --config=cuda builds into its own directory, bazel-cuda-bin (.bazelrc).
  MORI_TEST_RANKS=$ranks bazel-cuda-bin/tests/gpu/gpu_window_test
  bazel-cuda-bin/tools/launch/mori_launch -n "$ranks" -t 300 bazel-cuda-bin/tests/gpu/bench_p2p
  if [ "$ranks" -ge 2 ] && python3 -c "import torch" 2>/dev/null; then
    # Built against this python3's torch (MORI_TORCH_DIR unset), so the
    # wheel matches it.
    echo "mori: torch $(python3 -c 'import torch; print(torch.__version__)'): the mori wheel in a venv"
    env -u MORI_TORCH_DIR bazel build -c opt //:wheel
    venv=$(mktemp -d)
    trap 'rm -rf "$venv"' EXIT
    tools/venv_wheel.sh "$(ls -t bazel-bin/mori-*+cuda-py3-none-*.whl | head -1)" "$venv" --system-site-packages
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 "$venv/bin/python3" -m torch.distributed.run --standalone \
      --nproc_per_node="$ranks" torch_backend/examples/a2a_cuda.py MORI
  fi
else
  ranks=${MORI_RANKS:-4}
  echo "mori: no GPU found: host platform, $ranks CPU ranks"
  bazel build //tools/launch:mori_launch //examples:hello_window
  bazel-bin/tools/launch/mori_launch -n "$ranks" -t 120 bazel-bin/examples/hello_window
fi
