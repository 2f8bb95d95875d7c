#!/bin/bash
# SPDX-License-Identifier: MIT
# Build once, run on a machine with NVIDIA GPUs: the GPU test suites, the
# torch backend's suites and the benchmark harness, with a summary at the
# end. The build half needs Bazel and no GPU; the run half needs the GPUs,
# torch, and no Bazel (it runs what the build half staged in gpu-bundle/:
# the C programs, and the mori wheel, which it installs into a virtual
# environment that sees the machine's torch).
#   tools/gpu.sh build            stage the cuda build in gpu-bundle/
#   tools/gpu.sh run [PARTS] [rounds]
# PARTS: a comma list of tests (GPU suites and torch suites), shared (the
# collectives and the torch suites at two ranks sharing one GPU), proxy (the
# proxy ring: its suite and benchmark, two ranks declared on different nodes
# with the copy-engine NIC standing in for the NIC), gda (GPU-initiated
# posting: the proxy suite's data cases and bench_gda, the software
# ConnectX over the copy-engine NIC), ep (MoE dispatch/combine: gpu_ep_test
# at world size 1 and at two ranks sharing one GPU, and bench_ep against the
# same run's device-to-device copy rate), ep_builds (every bench_ep* of
# gpu-bundle/bin interleaved, rounds times, compared), heap (the heap
# benchmark in every mode), coll (the collectives sweep), p2p (the device
# API benchmark), bench (the harness over BENCH_BACKENDS, default every
# backend), host (host cost per call at one rank: MORI against torch's
# default backend), sanitize (gpu_window_test, gpu_coll_test and
# gpu_shmem_test under compute-sanitizer's memcheck, racecheck and
# synccheck, one summary line per run, and the torch suites of
# SANITIZE_TORCH (default test_mori_ops test_ep) the same way; SANITIZE_TOOLS
# / SANITIZE_TESTS narrow it, SANITIZE_TIMEOUT bounds each run, default 900 s), stress (torch's barrier under stress at two ranks), or all of
# them. MORI_BENCH_ONLY narrows the harness's steps.
# Results and logs go to $OUT (default /tmp/mori-gpu-out). NVLink multicast
# stays off everywhere (mori never creates multicast objects).
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

if [ "$mode" = build ]; then
  set -e
  tools/install_deps.sh torch
  export MORI_TORCH_DIR=$PWD/.deps/torch/torch
  bazel build -c opt --config=cuda //tests/gpu:gpu_window_test //tests/gpu:gpu_coll_test //tests/gpu:gpu_shmem_test //tests/gpu:bench_p2p \
    //tests/gpu:bench_coll //tests/gpu:bench_heap //tests/gpu:gpu_proxy_test //tests/gpu:bench_proxy //tools/launch:mori_launch \
    //tests/gpu:gpu_gda_test //tests/gpu:bench_gda //tests/gpu:gpu_ep_test //tests/gpu:bench_ep \
    //transport/rdma/ce_nic:libmori_ce_nic.so //tools/info:mori_info
  rm -rf gpu-bundle && mkdir -p gpu-bundle/bin
  # --config=cuda builds into its own directory, bazel-cuda-bin (.bazelrc).
  cp -f bazel-cuda-bin/tests/gpu/gpu_window_test bazel-cuda-bin/tests/gpu/gpu_coll_test bazel-cuda-bin/tests/gpu/gpu_shmem_test \
    bazel-cuda-bin/tests/gpu/bench_p2p bazel-cuda-bin/tests/gpu/bench_coll bazel-cuda-bin/tests/gpu/bench_heap \
    bazel-cuda-bin/tests/gpu/gpu_proxy_test bazel-cuda-bin/tests/gpu/bench_proxy bazel-cuda-bin/tools/launch/mori_launch \
    bazel-cuda-bin/tests/gpu/gpu_gda_test bazel-cuda-bin/tests/gpu/bench_gda \
    bazel-cuda-bin/tests/gpu/gpu_ep_test bazel-cuda-bin/tests/gpu/bench_ep \
    bazel-cuda-bin/tools/info/mori_info gpu-bundle/bin/
  # The copy-engine NIC as a library of its own: the torch suites across
  # declared nodes load it (MORI_TEST_CE_NIC_LIBRARY); the wheel has none.
  mkdir -p gpu-bundle/lib && cp -f bazel-cuda-bin/transport/rdma/ce_nic/libmori_ce_nic.so gpu-bundle/lib/
  # The Python package: mori.allocator, mori.ops, mori.shmem and the libraries.
  bazel build -c opt //:wheel
  cp -f "$(ls -t bazel-bin/mori-*+cuda-py3-none-*.whl | head -1)" gpu-bundle/
  chmod -R u+w gpu-bundle
  # The benchmarks without their symbol tables: the bundle travels whole to
  # the GPU machine, whose copy takes at most 64 MiB (the tests keep theirs:
  # the sanitize part names what it expects by the host frames' symbols).
  strip --strip-unneeded gpu-bundle/bin/bench_*
  du -sh gpu-bundle
  bytes=$(du -sb gpu-bundle | cut -f1)
  [ "$bytes" -le $((64 * 1024 * 1024)) ] || echo "gpu-bundle is $bytes bytes, over 64 MiB: move what a run does not need aside" >&2
  exit 0
fi

if [ "$mode" != run ]; then
  echo "usage: tools/gpu.sh build | run [tests,shared,proxy,gda,ep,ep_builds,heap,coll,coll_check,p2p,bench,host,stress,sanitize|all] [rounds]" >&2
  exit 2
fi
what=${2:-all}
[ "$what" = all ] && what=tests,shared,proxy,gda,ep,heap,coll,coll_check,p2p,bench,host,stress,sanitize
has() { [[ ",$what," == *",$1,"* ]]; }
rounds=${3:-3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/mori-gpu-out}
mkdir -p "$OUT"
# The wheel, installed into a fresh venv that sees the machine's torch; its
# python3 runs everything below (torchrun as `python3 -m torch.distributed.run`).
tools/venv_wheel.sh gpu-bundle/mori-*.whl "$OUT/venv" --system-site-packages || exit 1
export PATH=$OUT/venv/bin:$PATH
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
machine="$ngpu x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
echo "== $machine; $(nvidia-smi topo -m 2>/dev/null | sed -n 2p | tr -s ' ')"
summary=()
record() { summary+=("$1"); }
gtest_counts() { echo "$(grep -c '^\[       OK' "$1") passed, $(grep -c '^\[  FAILED  \] [A-Z]' "$1") failed"; }
# One GoogleTest suite of gpu-bundle/bin at RANKS ranks: gtest_suite LABEL RANKS BINARY LOG
gtest_suite() {
  MORI_TEST_RANKS=$2 timeout 150 "gpu-bundle/bin/$3" 2>&1 | tee "$OUT/$4.log" | grep -E '^\[ +(OK|FAILED) |^rank 0|Failure' | head -40
  record "$1: $(gtest_counts "$OUT/$4.log") (exit ${PIPESTATUS[0]})"
}
# One torch suite under torchrun:
#   torch_suite NAME RANKS SECONDS [also shown: an extended regexp] [log name] [label]
torch_suite() {
  local log="$OUT/${5:-$1}.log"
  timeout "$3" python3 -m torch.distributed.run --standalone --nproc_per_node="$2" "torch_backend/tests/$1.py" 2>&1 |
    tee "$log" | grep -E "^(PASS|FAIL|SKIP|SUMMARY)${4:+|$4}" | head -60
  record "${6:-$1}: $(grep -c '^PASS' "$log") passed, $(grep -c '^FAIL' "$log") failed, $(grep -c '^SKIP' "$log") skipped (exit ${PIPESTATUS[0]})"
}
# One benchmark of gpu-bundle/bin under mori_launch; its RESULT lines become
# $OUT/NAME.jsonl: bench_suite NAME RANKS SECONDS LAUNCHER_SECONDS [also shown: an extended regexp]
bench_suite() {
  timeout "$3" gpu-bundle/bin/mori_launch --no-prefix -n "$2" -t "$4" "gpu-bundle/bin/$1" 2>&1 |
    tee "$OUT/$1.log" | grep -E "RESULT${5:+|$5}"
  grep '^RESULT' "$OUT/$1.log" | sed 's/^RESULT //' > "$OUT/$1.jsonl"
  record "$1: $(wc -l < "$OUT/$1.jsonl") results"
}

if has tests; then
  echo "== the installed wheel"
  # The loader picks the cuda platform by itself here (a GPU and its driver).
  python3 -c "import mori, mori.allocator, mori.ops, mori.shmem, mori.address_map; print(mori.__version__, mori.platform()); assert mori.platform() == 'cuda'; print(mori.allocator.__file__); print(mori.allocator.supports()); mori.finalize(); mori.finalize()" 2>&1 |
    tee "$OUT/wheel.log"
  record "wheel: import mori.allocator, mori.ops, mori.shmem on the cuda platform, mori.finalize (exit ${PIPESTATUS[0]})"
  for t in gpu_window_test gpu_coll_test gpu_shmem_test; do
    echo "== $t ($ngpu ranks)"
    gtest_suite "$t" "$ngpu" "$t" "$t"
  done
  for t in test_torch_backend test_mori_ops test_triton test_views test_symm_mem_ops test_ep; do
    echo "== torch: $t"
    torch_suite "$t" "$ngpu" 200
  done
  echo "== torch: test_trap (its own process: a trap ends the CUDA context)"
  torch_suite test_trap 1 100 '^next call'
  # Adoption and the Triton device library need peers even on one GPU: two
  # ranks share it (gloo), and the window and shmem suites run there at two
  # ranks too (legacy IPC across processes, module init, the device barrier).
  pair=$(( ngpu < 2 ? 2 : ngpu ))
  for t in test_triton_extern test_adopt; do
    echo "== torch: $t ($pair ranks)"
    torch_suite "$t" "$pair" 200
  done
  if [ "$ngpu" -lt 2 ]; then
    echo "== gpu_window_test (2 ranks on one GPU)"
    gtest_suite "gpu_window_test at 2 ranks on one GPU" 2 gpu_window_test gpu_window_test_2ranks
    echo "== gpu_shmem_test (2 PEs on one GPU)"
    gtest_suite "gpu_shmem_test at 2 PEs on one GPU" 2 gpu_shmem_test gpu_shmem_test_2ranks
  fi
fi

if has shared; then
  # The collectives and the torch suites with two ranks sharing one GPU
  # (each its own context; gloo for the torch job, its references computed
  # on the GPU or moved through host memory): peers across processes where
  # there is only one GPU. Correctness only: the GPU is time-sliced.
  # MORI_SHARED_SUITES narrows the list.
  for t in ${MORI_SHARED_SUITES:-gpu_coll_test test_torch_backend test_mori_ops test_check_calls test_triton test_views test_ep}; do
    echo "== $t (2 ranks on one GPU)"
    if [ "$t" = gpu_coll_test ]; then
      MORI_COLL_TEST_ITERS=${MORI_COLL_TEST_ITERS:-1000} CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} \
        gtest_suite "gpu_coll_test at 2 ranks on one GPU" 2 gpu_coll_test gpu_coll_test_2ranks
    else
      CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} torch_suite "$t" 2 300 "" "${t}_2ranks" "$t at 2 ranks on one GPU"
    fi
  done
fi

if has proxy; then
  # Two ranks always: with one GPU both run on it (each its own context).
  echo "== gpu_proxy_test (2 ranks on $ngpu GPU(s), copy-engine NIC)"
  gtest_suite gpu_proxy_test 2 gpu_proxy_test gpu_proxy_test
  echo "== proxy ring benchmark (bench_proxy)"
  bench_suite bench_proxy 2 200 190
  export MORI_TEST_CE_NIC_LIBRARY=$PWD/gpu-bundle/lib/libmori_ce_nic.so
  echo "== torch: test_cross_node (a group spanning two declared nodes, 2 ranks)"
  torch_suite test_cross_node 2 200 'rdma: rank'
  echo "== torch: test_cross_node_first_ops (the first window ops of a process, 2 ranks)"
  torch_suite test_cross_node_first_ops 2 150 'Timeout'
fi

if has gda; then
  # GPU-initiated posting: the kernels write the WQEs the software ConnectX
  # reads (over the copy-engine NIC), MORI_RDMA_GDA=on. The proxy suite's
  # data cases (its fault cases inject the copy-engine NIC's faults and
  # expect the proxy's codes).
  echo "== gpu_gda_test (2 ranks on $ngpu GPU(s), software ConnectX over the copy-engine NIC)"
  GTEST_FILTER='GpuProxy.HostApiPutsAddsAndGetsGpuMemory:GpuProxy.PutsSignalsAtomicsAndGetsReachThePeerThroughTheRing:GpuProxy.GpuMemoryRegistrationSaysDmabufOrWhyNot:GpuProxy.WarpBatchesOfGpuPostingLandEveryLanesBytes' \
    gtest_suite gpu_gda_test 2 gpu_gda_test gpu_gda_test
  echo "== GPU posting benchmark (bench_gda)"
  bench_suite bench_gda 2 200 190
fi

if has ep; then
  echo "== gpu_ep_test (world size 1)"
  gtest_suite "gpu_ep_test at world size 1" 1 gpu_ep_test gpu_ep_test_1rank
  echo "== gpu_ep_test (2 ranks on one GPU)"
  MORI_EP_TEST_CALLS=${MORI_EP_TEST_CALLS:-1000} CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} \
    gtest_suite "gpu_ep_test at 2 ranks on one GPU" 2 gpu_ep_test gpu_ep_test_2ranks
  echo "== MoE dispatch/combine benchmark (bench_ep, world size 1)"
  bench_suite bench_ep 1 300 290 TABLE_ROW
fi

if has ep_builds; then
  # bench_ep builds against each other, interleaved in one run: every
  # gpu-bundle/bin/bench_ep* (staged by hand: a variant built from another
  # tree, copied in as bench_ep_NAME), one after another, $rounds times;
  # each round's results carry its binary's name, and tests/gpu/ep_table.py
  # --builds compares them against the same round's copy rate.
  builds=$(cd gpu-bundle/bin && ls bench_ep bench_ep_* 2>/dev/null)
  echo "== bench_ep builds interleaved, $rounds rounds: $(echo $builds)"
  : > "$OUT/ep_builds.jsonl"
  for round in $(seq "$rounds"); do
    for b in $builds; do
      timeout 120 gpu-bundle/bin/mori_launch --no-prefix -n 1 -t 110 "gpu-bundle/bin/$b" > "$OUT/ep_builds_${b}_$round.log" 2>&1
      grep '^RESULT' "$OUT/ep_builds_${b}_$round.log" | sed "s/^RESULT {/{\"build\": \"$b\", /" >> "$OUT/ep_builds.jsonl"
    done
  done
  python3 tests/gpu/ep_table.py --builds "$OUT/ep_builds.jsonl" | tee "$OUT/ep_builds.md"
  record "bench_ep builds ($(echo $builds)): $(wc -l < "$OUT/ep_builds.jsonl") results over $rounds rounds"
fi

if has heap; then
  : > "$OUT/bench_heap.jsonl"
  for mode in vmm static isolation; do
    echo "== heap benchmark, MORI_SHMEM_MODE=$mode"
    MORI_SHMEM_MODE=$mode MORI_SHMEM_HEAP_SIZE=$([ $mode = static ] && echo 8G || echo 512G) \
      timeout 120 gpu-bundle/bin/mori_launch --no-prefix -n "$ngpu" -t 110 gpu-bundle/bin/bench_heap 2>&1 | tee "$OUT/bench_heap_$mode.log" | grep RESULT
    grep '^RESULT' "$OUT/bench_heap_$mode.log" | sed 's/^RESULT //' >> "$OUT/bench_heap.jsonl"
  done
  record "bench_heap: $(wc -l < "$OUT/bench_heap.jsonl") results"
  if [ "$ngpu" -lt 2 ]; then
    # Peers' costs (importing and mapping a new chunk) need peers: two ranks
    # share the GPU (host-side costs; no NVLink in the figures).
    echo "== heap benchmark, MORI_SHMEM_MODE=vmm, 2 ranks on one GPU"
    MORI_SHMEM_MODE=vmm MORI_SHMEM_HEAP_SIZE=512G timeout 150 gpu-bundle/bin/mori_launch --no-prefix -n 2 -t 140 \
      gpu-bundle/bin/bench_heap 2>&1 | tee "$OUT/bench_heap_vmm_2ranks.log" | grep RESULT
    grep '^RESULT' "$OUT/bench_heap_vmm_2ranks.log" | sed 's/^RESULT //' > "$OUT/bench_heap_2ranks_1gpu.jsonl"
    record "bench_heap at 2 ranks on one GPU: $(wc -l < "$OUT/bench_heap_2ranks_1gpu.jsonl") results"
  fi
fi

if has coll; then
  echo "== collectives sweep (bench_coll)"
  bench_suite bench_coll "$ngpu" 420 410
fi

if has coll_check; then
  # What checking calls (MORI_COLL_CHECK_CALLS) costs: the quick sweep with
  # every context made unchecked and then checked, three rounds; every
  # bench_coll* of the bundle (a variant built from another tree, copied in
  # as bench_coll_NAME) in each round, one after another.
  builds=$(cd gpu-bundle/bin && ls bench_coll bench_coll_* 2>/dev/null)
  echo "== collectives, unchecked beside checked (3 rounds: $(echo $builds))"
  : > "$OUT/bench_coll_check.jsonl"
  for round in 1 2 3; do
    for b in $builds; do
      MORI_BENCH_COLL_QUICK=1 MORI_BENCH_COLL_CHECK=1 timeout 200 gpu-bundle/bin/mori_launch --no-prefix -n "$ngpu" -t 190 \
        "gpu-bundle/bin/$b" 2>&1 | tee "$OUT/bench_coll_check_${b}_$round.log" | grep -c RESULT
      grep '^RESULT' "$OUT/bench_coll_check_${b}_$round.log" |
        sed "s/^RESULT {/{\"round\": $round, \"build\": \"$b\", /" >> "$OUT/bench_coll_check.jsonl"
    done
  done
  python3 tests/gpu/coll_check_table.py "$OUT/bench_coll_check.jsonl" | tee "$OUT/bench_coll_check.md"
  record "bench_coll checked beside unchecked: $(wc -l < "$OUT/bench_coll_check.jsonl") results"
fi

if has p2p; then
  echo "== device API benchmark (bench_p2p)"
  bench_suite bench_p2p "$ngpu" 200 180
fi

if has bench; then
  backends=${BENCH_BACKENDS:-MORI,default,NVSHMEM,NCCL-symm,NCCL}
  echo "== benchmark harness: $rounds rounds, $backends"
  MORI_BENCH_MACHINE="$machine" timeout $((rounds * 240)) python3 bench/run.py --rounds "$rounds" \
    --backends "$backends" --out "$OUT/bench.jsonl" 2>&1
  record "bench: $(wc -l < "$OUT/bench.jsonl") records, $(grep -c '"error"' "$OUT/bench.jsonl") with errors"
fi

if has host; then
  echo "== host cost per call, one rank ($rounds rounds)"
  : > "$OUT/host_cost.jsonl"
  timeout $((rounds * 150)) python3 bench/host_cost.py --rounds "$rounds" --out "$OUT/host_cost.jsonl" 2>&1 |
    grep -E '^(host_cost|[a-z].* (issue|eager|wall)_us)|Error' | head -40
  record "host_cost: $(wc -l < "$OUT/host_cost.jsonl") records, $(grep -c '"error"' "$OUT/host_cost.jsonl") with errors"
fi

if has stress; then
  # torch's barrier under stress at two ranks (sharing one GPU where there
  # is one): the pattern that once hung, MORI_STRESS_RUNS runs; a stall is
  # named after MORI_STRESS_STALL_S on every rank (STALL lines: the barrier
  # the GPU has not finished, the epoch it waits for and each peer's epoch
  # seen), and a run taking MORI_STRESS_STACKS_AFTER_S ends the job.
  echo "== torch: test_barrier_stress (2 ranks)"
  MORI_TEST_PG_TIMEOUT_S=${MORI_TEST_PG_TIMEOUT_S:-150} torch_suite test_barrier_stress 2 ${MORI_STRESS_TIMEOUT_S:-400} \
    'runs done|STALL'
fi

if has sanitize; then
  # Each suite under each compute-sanitizer tool, at SANITIZE_RANKS ranks
  # (default 1: the tools slow kernels down many times over). Two probes'
  # reports are expected and counted apart: mori's handle-type probe
  # (mori_platform_probe_handle_types: cuMemCreate with fabric handles, not
  # permitted where the fabric is not set up; in the wheel's stripped
  # libmori.so only the call and its error name it), and NCCL's kernel
  # probe when torch makes a NCCL group (ncclInitKernelsForDevice asks for
  # kernels not built for this architecture). So are two that tests cause
  # on purpose: the kernel GpuDeviceApi.OptInTrapStopsTheKernelAfterRecording
  # TheTimeout traps (and the launch failure its host then sees), and
  # mori_mem_register's question whether memory of the runtime's allocator
  # is a VMM mapping (cuMemRetainAllocationHandle says no, and the memory is
  # adopted through legacy IPC handles). Any other report fails the run.
  sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
  expected=${SANITIZE_EXPECTED:-'mori_platform_probe_handle_types|CUDA_ERROR_NOT_PERMITTED [(]error 800[)] due to "operation not permitted" on CUDA API call to cuMemCreate|ncclInitKernelsForDevice|GpuDeviceApi_OptInTrapStopsTheKernelAfterRecordingTheTimeout|CUDA_ERROR_INVALID_VALUE [(]error 1[)] due to "invalid argument" on CUDA API call to cuMemRetainAllocationHandle'}
  # "UNEXPECTED EXPECTED": the reports of a sanitizer log, apart and in the probe.
  sanitizer_reports() {
    # Reports are blocks of "========= " lines: one that starts without
    # an indent opens a report; the summary line closes the output.
    awk -v expected="$expected" '
      function close_block() {
        if (open && block ~ expected) ok++
        else if (open) { bad++; if (bad <= 3) print block > "/dev/stderr" }
        open = 0; block = ""
      }
      /^========= (COMPUTE-SANITIZER|Target application returned)/ || / SUMMARY: / { close_block(); next }
      /^========= [^ ]/ { close_block(); open = 1; block = $0; next }
      /^=========  / { if (open) block = block "\n" $0; next }
      { close_block() }
      END { close_block(); printf "%d %d", bad + 0, ok + 0 }' "$1"
  }
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
    for t in ${SANITIZE_TESTS:-gpu_window_test gpu_coll_test gpu_shmem_test}; do
      log="$OUT/sanitize_${tool}_$t.log"
      echo "== compute-sanitizer --tool $tool $t (${SANITIZE_RANKS:-1} rank(s))"
      MORI_COLL_TEST_ITERS=${MORI_COLL_TEST_ITERS:-20} MORI_EP_TEST_CALLS=${MORI_EP_TEST_CALLS:-50} \
        MORI_TEST_RANKS=${SANITIZE_RANKS:-1} timeout -s KILL "${SANITIZE_TIMEOUT:-900}" "$sanitizer" --tool "$tool" --target-processes all \
        "gpu-bundle/bin/$t" > "$log" 2>&1
      code=$?
      read -r unexpected probe <<< "$(sanitizer_reports "$log")"
      record "sanitize $tool $t: $unexpected unexpected report(s), $probe expected (probes); tests $(gtest_counts "$log") (exit $code)"
    done
    # The torch suites in SANITIZE_TORCH (default test_mori_ops test_ep), one
    # rank, the whole torchrun job under the tool.
    for t in ${SANITIZE_TORCH-test_mori_ops test_ep}; do
      log="$OUT/sanitize_${tool}_$t.log"
      echo "== compute-sanitizer --tool $tool torch $t (1 rank)"
      MORI_OPS_ITERS=${MORI_OPS_ITERS:-50} MORI_EP_TEST_CALLS=${MORI_EP_TEST_CALLS:-50} \
        timeout -s KILL "${SANITIZE_TIMEOUT:-900}" "$sanitizer" --tool "$tool" --target-processes all \
        python3 -m torch.distributed.run --standalone --nproc_per_node=1 "torch_backend/tests/$t.py" > "$log" 2>&1
      code=$?
      read -r unexpected probe <<< "$(sanitizer_reports "$log")"
      record "sanitize $tool torch $t: $unexpected unexpected report(s), $probe expected (probes); tests $(grep -c '^PASS' "$log") passed, $(grep -c '^FAIL' "$log") failed (exit $code)"
    done
  done
fi

echo "== summary"
printf '%s\n' "${summary[@]}"
