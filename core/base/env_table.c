// SPDX-License-Identifier: MIT
/* Every environment variable any part of mori reads (see env.h). A variable
 * read anywhere in the sources and missing here fails
 * tools/check_env_vars.py; docs/environment.md is generated from this table
 * (bazel run //core/base:env_doc) and checked for staleness. */
#include "core/base/env.h"

#define KIB 1024ull
#define GIB (1024ull * 1024 * 1024)
#define TIB (1024ull * GIB)
#define DAY_MS 86400000ull

#define S(...) .type = MORI_ENV_STRING, __VA_ARGS__
#define B(...) .type = MORI_ENV_BOOL, __VA_ARGS__
#define E(list, ...) .type = MORI_ENV_ENUM, .choices = list, __VA_ARGS__
#define I(lo, hi, ...) .type = MORI_ENV_INT, .min = (lo), .max = (hi), __VA_ARGS__
#define Z(lo, hi, ...) .type = MORI_ENV_SIZE, .min = (lo), .max = (hi), __VA_ARGS__
#define T(lo, hi, ...) .type = MORI_ENV_MS, .min = (lo), .max = (hi), __VA_ARGS__
#define LIB .layer = MORI_ENV_LIBRARY
#define PY .layer = MORI_ENV_PYTHON
#define LAUNCH .layer = MORI_ENV_LAUNCH
#define TOOLS .layer = MORI_ENV_TOOLS

static const mori_env_var_t table[] = {
    /* ---- logging ---- */
    {"MORI_GLOBAL_LOG_LEVEL", MORI_ENV_LOG_LEVEL, LIB, .reader = "core/base (log)", .default_text = "WARN",
     .meaning = "How much mori logs to stderr: ERROR, WARN, INFO, DEBUG or TRACE (case-insensitive; or 0-4)."},
    {"MORI_LOG_LEVEL", MORI_ENV_LOG_LEVEL, LIB, .reader = "core/base (log)", .default_text = "WARN",
     .meaning = "The older name of MORI_GLOBAL_LOG_LEVEL.", .alias_of = "MORI_GLOBAL_LOG_LEVEL"},
    {"MORI_TRACE", S(LIB), .reader = "core/base (trace)", .default_text = "off",
     .meaning = "Tracing of mori's host calls (docs/tracing.md): nvtx (NVTX ranges on CUDA, ROCTX on ROCm), "
                "file:PATH (a Chrome/Perfetto JSON trace per rank; %r: the rank, %p: the process id), or both, "
                "comma-separated."},

    /* ---- the symmetric heap ---- */
    {"MORI_SHMEM_MODE", E("static|vmm|isolation", LIB), .reader = "core (heap)",
     .default_text = "vmm (the shmem API: static)",
     .meaning = "How the symmetric heap holds memory: one static block of MORI_SHMEM_HEAP_SIZE, growth in chunks "
                "(vmm), or a mapping per allocation (isolation)."},
    {"MORI_SHMEM_HEAP_SIZE", Z(4 * KIB, 64 * TIB, LIB), .reader = "core (heap)",
     .default_text = "vmm: 512G of address space; static: none (required)",
     .meaning = "static: the heap's size; vmm: the most the heap may grow to, a whole number of chunks (address "
                "space reserved at once: lower it under a virtual-memory limit such as ulimit -v)."},
    {"MORI_SHMEM_VMM_CHUNK_SIZE", Z(4 * KIB, 1 * TIB, LIB), .reader = "core (heap)", .default_text = "1G",
     .meaning = "vmm: the heap grows by this much at a time, rounded up to the device's mapping granularity; at most "
                "MORI_SHMEM_HEAP_SIZE, which must be a whole number of the rounded chunks, and the heap holds at most "
                "16777216 (2^24) chunks."},
    {"MORI_SHMEM_HEAP_TYPE", E("normal|uncached", LIB), .reader = "core (heap)",
     .default_text = "normal (the shmem API: uncached)",
     .meaning = "The heap's memory type on GPUs (uncached: fine-grained on AMD GPUs, the same as normal on NVIDIA "
                "GPUs and on the host platform)."},
    {"MORI_HEAP_DEFER_FREES", B(LIB), .reader = "core (heap)", .default_text = "off (always on with GPUs)",
     .meaning = "Freed heap memory waits for a device synchronisation before reuse; on the host platform for tests."},

    /* ---- platform, comm, windows ---- */
    {"MORI_HANDLE_TYPE", E("posix_fd|fabric", LIB), .reader = "core/platform (probe)",
     .default_text = "fabric where it works, else posix_fd",
     .meaning = "The handle type memory is shared with between processes; set alike on every rank (ranks set "
                "differently fail comm creation, named)."},
    {"MORI_HOST_ID", S(LIB), .reader = "core (comm)", .default_text = "host name and boot id",
     .meaning = "The node this rank counts as on: ranks with different ids act as if on different machines "
                "(simulates several nodes on one)."},
    {"MORI_DISABLE_P2P", B(LIB), .reader = "core (comm)", .default_text = "off",
     .meaning = "No peer is reached by load/store or copy engines: the LSA team is each rank alone."},
    {"MORI_NODE_CHANNEL", B(LIB), .reader = "core (node channel)", .default_text = "on",
     .meaning = "Ranks of one machine exchange collective steps through shared memory; 0 uses the bootstrap."},
    {"MORI_UNTIMED_WAIT_MS", T(0, 7 * DAY_MS, LIB), .reader = "core (window)", .default_text = "600000",
     .meaning = "The longest a window op given no timeout (torch's barrier, put_signal and wait_signal with timeout_ms "
                "0) waits before it is reported as timed out naming the peer; 0 waits forever (read when a window is "
                "made)."},
    {"MORI_TRAP_ON_DEVICE_ERROR", B(LIB), .reader = "core (window)", .default_text = "off",
     .meaning = "A kernel that records an error in a window's mailbox also traps (read when a window is made)."},

    /* ---- bootstrap and launch ---- */
    {"MORI_BOOTSTRAP_TIMEOUT_MS", T(1, DAY_MS, LIB), .reader = "core/bootstrap", .default_text = "60000",
     .meaning = "The default time limit of every bootstrap step and of the waits that follow it (node channel, fd "
                "channel, rdma), in milliseconds (\"2s\" also works)."},
    {"MORI_RANK", I(0, 2147483646, LAUNCH), .reader = "core/bootstrap", .default_text = "RANK, OMPI_COMM_WORLD_RANK, "
     "PMI_RANK or SLURM_PROCID", .meaning = "This process's rank."},
    {"MORI_WORLD_SIZE", I(1, 2147483647, LAUNCH), .reader = "core/bootstrap",
     .default_text = "WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS", .meaning = "The number of ranks."},
    {"MORI_LOCAL_RANK", I(0, 2147483646, LAUNCH), .reader = "tests, examples", .default_text = "unset",
     .meaning = "Set by mori_launch: the rank among the ranks of this machine (programs choose their GPU by it)."},
    {"MORI_LOCAL_SIZE", I(1, 2147483647, LAUNCH), .reader = "tests, examples", .default_text = "unset",
     .meaning = "Set by mori_launch: the number of ranks on this machine."},
    {"MORI_BOOTSTRAP_ADDR", S(LAUNCH), .reader = "core/bootstrap", .default_text = "MASTER_ADDR:(MASTER_PORT+1) (torchrun's store owns MASTER_PORT; 29501 without MASTER_PORT), else SLURM_LAUNCH_NODE_IPADDR (or 127.0.0.1):20000+(a hash of the job id)",
     .meaning = "Rank 0's address, host:port (or a host alone, with MORI_BOOTSTRAP_PORT)."},
    {"MORI_BOOTSTRAP_PORT", I(1, 65535, LAUNCH), .reader = "core/bootstrap", .default_text = "the port in MORI_BOOTSTRAP_ADDR",
     .meaning = "Rank 0's port, with a MORI_BOOTSTRAP_ADDR that gives none (one that gives another port is an error)."},
    {"MORI_BOOTSTRAP_LISTEN_FD", I(0, 2147483647, LAUNCH), .reader = "core/bootstrap", .default_text = "unset",
     .meaning = "A listening socket a launcher opened for rank 0 (mori_launch sets it), on MORI_BOOTSTRAP_ADDR's port; the process's first bootstrap takes it over, later ones bind the address themselves."},
    {"MORI_BOOTSTRAP_SECRET", S(LAUNCH), .reader = "core/bootstrap", .default_text = "a private file (see docs/security.md)",
     .meaning = "The job's secret: ranks prove they belong to the job with it.", .secret = true},
    {"MORI_BOOTSTRAP_SECRET_FILE", S(LAUNCH), .reader = "core/bootstrap", .default_text = "unset",
     .meaning = "A file (mode 0600) holding the job's secret."},

    /* ---- the rdma transport ---- */
    {"MORI_RDMA_DEVICES", S(LIB), .reader = "transport/rdma", .default_text = "every active device",
     .meaning = "NICs a rank may open: an include list of whole names, comma-separated, or after ^ an exclude list "
                "(docs/multinode.md)."},
    {"MORI_RDMA_DEVICE", S(LIB), .reader = "transport/rdma", .default_text = "unset",
     .meaning = "The older name of MORI_RDMA_DEVICES.", .alias_of = "MORI_RDMA_DEVICES"},
    {"MORI_NUM_QP_PER_PE", I(1, 64, LIB), .reader = "transport/rdma", .default_text = "1",
     .meaning = "Queue pairs per peer."},
    {"MORI_IB_GID_INDEX", I(0, 255, LIB), .reader = "transport/rdma", .default_text = "1 when the port has two GIDs or more, else 0",
     .meaning = "The GID index of the port."},
    {"MORI_RDMA_GID_INDEX", I(0, 255, LIB), .reader = "transport/rdma", .default_text = "unset",
     .meaning = "The older name of MORI_IB_GID_INDEX.", .alias_of = "MORI_IB_GID_INDEX"},
    {"MORI_RDMA_SL", I(0, 15, LIB), .reader = "transport/rdma", .default_text = "0", .meaning = "The service level."},
    {"MORI_RDMA_TC", I(0, 255, LIB), .reader = "transport/rdma", .default_text = "0", .meaning = "The traffic class."},
    {"MORI_RDMA_PORT", I(1, 255, LIB), .reader = "transport/rdma", .default_text = "1",
     .meaning = "The port of the device."},
    {"MORI_ENABLE_RAIL_ONLY", B(LIB), .reader = "transport/rdma", .default_text = "off",
     .meaning = "Queue pairs only to same-rail peers (same local rank on another node) and same-host peers."},
    {"MORI_RDMA_MAX_MSG", I(0, 2147483647, LIB), .reader = "transport/rdma", .default_text = "the port's max_msg_sz",
     .meaning = "The largest message one work request carries, in bytes."},
    {"MORI_RDMA_TIMEOUT_MS", T(1, DAY_MS, LIB), .reader = "transport/rdma", .default_text = "MORI_BOOTSTRAP_TIMEOUT_MS",
     .meaning = "How long a quiet, a blocked post and a window's deregistration wait for completions."},
    {"MORI_RDMA_GDA", E("auto|on|off", LIB), .reader = "transport/rdma/gda", .default_text = "auto",
     .meaning = "GPU-initiated posting: auto (when every step works, else the proxy), on (comm creation fails naming the missing step), off (the proxy)."},
    {"MORI_RDMA_GDA_DEPTH", I(16, 32768, LIB), .reader = "transport/rdma/gda", .default_text = "512",
     .meaning = "Work requests each GPU-posting queue pair holds (rounded up to a power of two)."},
    {"MORI_RDMA_CE_FAULTS", S(TOOLS), .reader = "transport/rdma/ce_nic (tests)", .default_text = "unset",
     .meaning = "Faults the copy-engine NIC injects, for tests: fail@N or stall@N, comma-separated."},
    {"MORI_RDMA_SWCX_QUEUES", E("device|host", TOOLS), .reader = "transport/rdma/swcx (tests)", .default_text = "device",
     .meaning = "Where the software ConnectX puts each send queue's ring and doorbell record: device memory (it fetches what the doorbell register names, as a NIC reading GPU memory does) or host memory mapped for the GPU (it polls the record)."},
    {"MORI_RDMA_SWCX_FAULTS", S(TOOLS), .reader = "transport/rdma/swcx (tests)", .default_text = "unset",
     .meaning = "Faults the software ConnectX injects, for tests: error@N, late@N:MS or stall@N, comma-separated."},

    /* ---- fused collectives (tuning) ---- */
    {"MORI_COLL_CHECK_CALLS", B(LIB), .reader = "collectives", .default_text = "0",
     .meaning = "Every collective context compares each call's arguments across its members on the device before "
                "anything moves, and a call they differ on fails with MORI_EMISMATCH naming a member and both calls "
                "(one more exchange per call: a debugging aid). Read when a context is made; the members must agree."},
    {"MORI_COLL_SLICE_BYTES", Z(16, 1 * GIB, LIB), .reader = "collectives", .default_text = "chosen per call",
     .meaning = "The slice of a flagged transfer."},
    {"MORI_COLL_THREADS", I(1, 1024, LIB), .reader = "collectives", .default_text = "chosen per call",
     .meaning = "Threads per block of the collective kernels."},
    {"MORI_COLL_MAX_BLOCKS", I(1, 65535, LIB), .reader = "collectives", .default_text = "what the device keeps resident",
     .meaning = "The most blocks a collective kernel uses."},
    {"MORI_COLL_BLOCK_SHARE", B(LIB), .reader = "collectives", .default_text = "chosen per call",
     .meaning = "Blocks are shared between the phases of a collective."},
    {"MORI_EP_LAUNCH_CONFIG_MODE", E("manual|auto", LIB), .reader = "collectives (ep)", .default_text = "manual",
     .meaning = "How MoE dispatch/combine picks blocks and warps when neither the call nor the config gives them: "
                "manual (every resident block, 16 warps each) or auto (the shipped table by architecture, world size, "
                "dtype, tokens and hidden size)."},
    {"MORI_EP_HOST_BLOCKS", I(1, 8, LIB), .reader = "collectives (ep)", .default_text = "1",
     .meaning = "Host platform: the most blocks (threads of the calling rank) a MoE dispatch/combine call runs; "
                "the call's or the config's block_num, else 1, up to this. Read when the context is made."},
    {"MORI_A2A_ALGO", E("slices|ll", LIB), .reader = "collectives", .default_text = "by size",
     .meaning = "Forces the staged all-to-all's algorithm."},
    {"MORI_A2A_LL_MAX_BYTES", Z(1, 1 * TIB, LIB), .reader = "collectives", .default_text = "256K",
     .meaning = "All-to-alls up to this size per member use LL lines."},
    {"MORI_A2AV_PIECES", I(1, 256, LIB), .reader = "collectives", .default_text = "by size (1 to 32)",
     .meaning = "Pieces per member of the all-to-all-v."},
    {"MORI_ALLREDUCE_ALGO", E("ll|rsag|oneshot", LIB), .reader = "collectives", .default_text = "by size",
     .meaning = "Forces the all-reduce's algorithm."},
    {"MORI_ALLREDUCE_LL_MAX_BYTES", Z(1, 1 * TIB, LIB), .reader = "collectives", .default_text = "256K",
     .meaning = "All-reduces up to this size use LL lines."},
    {"MORI_ALLREDUCE_LL_LINES", I(1, 1u << 24, LIB), .reader = "collectives", .default_text = "by size",
     .meaning = "8-byte lines per work item of the LL all-reduce."},

    /* ---- MORI Shmem ---- */
    {"MORI_SOCKET_IFNAME", S(LIB), .reader = "shmem", .default_text = "the first non-loopback interface that is up (IPv4 first), else loopback",
     .meaning = "Interfaces the unique ID's address is taken from, comma-separated prefixes; a leading ^ excludes."},
    {"MORI_MPI_LIBRARY", S(LIB), .reader = "shmem", .default_text = "libmpi.so.40",
     .meaning = "The MPI library MORI_SHMEM_INIT_WITH_MPI_COMM loads."},
    {"MORI_IGNORE_CPU_AFFINITY", B(LIB), .reader = "shmem", .default_text = "off",
     .meaning = "shmem_init leaves the calling thread's CPUs alone."},
    {"MORI_DISABLE_TOPO", B(LIB), .reader = "shmem", .default_text = "off",
     .meaning = "No topology detection (so no CPU placement)."},
    {"MORI_CPU_AFFINITY_NO_SPLIT", B(LIB), .reader = "shmem", .default_text = "off",
     .meaning = "shmem_init pins the init thread to the whole NUMA node, not this GPU's slice of it."},

    /* ---- the Python package ---- */
    {"MORI_PLATFORM", E("host|cuda|hip", PY), .reader = "python (mori._lib)", .default_text = "the GPU's, else host",
     .meaning = "The platform whose libmori.so the Python package loads; by default the GPU platform when its driver "
                "finds a device, else the host platform."},
    {"MORI_LIB", S(PY), .reader = "python (mori.shmem)", .default_text = "the libmori.so in the package",
     .meaning = "The libmori.so the package loads."},
    {"MORI_TORCH_LIB", S(PY), .reader = "python (mori)", .default_text = "the libmori_torch.so in the package",
     .meaning = "The torch backend library the package loads."},
    {"MORI_BITCODE_DIR", S(PY), .reader = "python (mori.triton_lib)", .default_text = "the package's bitcode/",
     .meaning = "Where the device bitcode for Triton kernels is."},
    {"MORI_BITCODE_CACHE", S(PY), .reader = "python (mori.triton_lib)", .default_text = "~/.cache/mori/bitcode",
     .meaning = "Where bitcode compiled at run time is kept."},
    {"MORI_BITCODE_LLVM_DIR", S(PY), .reader = "python (mori.triton_lib), triton_bitcode scripts",
     .default_text = "/usr/lib/llvm-15", .meaning = "The LLVM that compiles bitcode at run time."},
    {"MORI_DISABLE_JIT", B(PY), .reader = "python (mori.triton_lib)", .default_text = "off",
     .meaning = "Bitcode missing from the package is an error instead of being compiled at run time."},
    {"MORI_PRECOMPILE", B(PY), .reader = "python (mori.triton_lib)", .default_text = "off",
     .meaning = "Compile all bitcode when mori.triton_lib is imported."},

    /* ---- mori's own tests, benchmarks and build ---- */
    {"MORI_TORCH_DIR", S(TOOLS), .reader = "bazel (torch.bzl)", .default_text = "asks python3",
     .meaning = "The torch installation the torch backend is built against."},
    {"MORI_NVCC", S(TOOLS), .reader = "bazel (device_compile.sh)", .default_text = "/usr/local/cuda/bin/nvcc",
     .meaning = "The CUDA compiler of device code."},
    {"MORI_LLVM_DIR", S(TOOLS), .reader = "bazel (device_compile.sh)", .default_text = "/usr/lib/llvm-22",
     .meaning = "The LLVM that compiles HIP device code."},
    {"MORI_ROCM_BITCODE_DIR", S(TOOLS), .reader = "bazel, triton_bitcode scripts",
     .default_text = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", .meaning = "ROCm's device libraries."},
    {"MORI_BITCODE_ROCM_PATH", S(TOOLS), .reader = "triton_bitcode scripts", .default_text = "/usr",
     .meaning = "The ROCm installation bitcode is compiled against."},
    {"MORI_TEST_RANKS", I(1, 4096, TOOLS), .reader = "tests", .default_text = "set by the test rule",
     .meaning = "The ranks a multi-rank test runs at."},
    {"MORI_TEST_TIMEOUT_S", I(1, 86400, TOOLS), .reader = "tests (the multi-rank harness)", .default_text = "120",
     .meaning = "How long a multi-rank test's ranks may run before they are stopped (a long run asked for by hand)."},
    {"MORI_EP_TEST_CALLS", I(1, 1 << 30, TOOLS), .reader = "tests (ep_test, gpu_ep_test)",
     .default_text = "10000 (3000 at 8 ranks)", .meaning = "Back-to-back dispatch/combine calls the EP tests check."},
    {"MORI_BENCH_EP_TOKENS", I(1, 1 << 24, TOOLS), .reader = "tests/gpu (bench_ep)", .default_text = "4096",
     .meaning = "Tokens per rank of the EP benchmark."},
    {"MORI_BENCH_EP_HIDDEN", I(1, 1 << 20, TOOLS), .reader = "tests/gpu (bench_ep)", .default_text = "7168",
     .meaning = "Hidden size (bf16 elements per token) of the EP benchmark."},
    {"MORI_BENCH_EP_TOPK", I(1, 1024, TOOLS), .reader = "tests/gpu (bench_ep)", .default_text = "8",
     .meaning = "Experts per token of the EP benchmark."},
    {"MORI_BENCH_EP_EXPERTS", I(1, 1 << 20, TOOLS), .reader = "tests/gpu (bench_ep)", .default_text = "32",
     .meaning = "Experts in all of the EP benchmark (spread evenly over the ranks)."},
    {"MORI_BENCH_EP_ROUNDS", I(1, 1 << 20, TOOLS), .reader = "tests/gpu (bench_ep)", .default_text = "7",
     .meaning = "Rounds of the EP benchmark (the summary gives their median and range)."},
    {"MORI_BENCH_EP_ITERS", I(1, 1 << 20, TOOLS), .reader = "tests/gpu (bench_ep)", .default_text = "20",
     .meaning = "Calls timed per round of the EP benchmark."},
    {"MORI_BENCH_EP_TUNE", B(TOOLS), .reader = "tests/gpu (bench_ep)", .default_text = "off",
     .meaning = "The EP benchmark sweeps blocks and warps per block and prints the best as a launch-table row."},
    {"MORI_TEST_ALL_K", B(TOOLS), .reader = "tests", .default_text = "off",
     .meaning = "The allocation-failure test goes on after the first failing step."},
    {"MORI_TEST_ONLY", S(TOOLS), .reader = "torch tests", .default_text = "unset",
     .meaning = "Only the torch suites' checks whose name contains this text run."},
    {"MORI_TEST_PG_TIMEOUT_S", I(1, 86400, TOOLS), .reader = "torch tests", .default_text = "180",
     .meaning = "The torch process group's timeout in the torch tests, in seconds."},
    {"MORI_TEST_CHECK_STALL_S", I(1, 86400, TOOLS), .reader = "torch tests", .default_text = "120",
     .meaning = "A torch test check still running after this many seconds prints every thread's Python stack on stderr (the check goes on)."},
    {"MORI_OPS_ITERS", I(1, 1u << 30, TOOLS), .reader = "torch tests", .default_text = "by test",
     .meaning = "Iterations of the torch op tests."},
    {"MORI_TEST_CE_NIC_LIBRARY", S(TOOLS), .reader = "torch tests", .default_text = "unset",
     .meaning = "The libmori_ce_nic.so the torch suites across declared nodes load as the rdma provider."},
    {"MORI_OPS_RESULT", S(TOOLS), .reader = "torch tests (test_symm_mem_ops)", .default_text = "unset",
     .meaning = "Where the torch.ops.symm_mem check writes one JSON line per op (docs/torch.md's list)."},
    {"MORI_STRESS_PAD_BYTES", Z(4, 64ull << 20, TOOLS), .reader = "torch tests (test_barrier_stress)", .default_text = "640K",
     .meaning = "The signal pad size the torch barrier stress test sets: large enough that windows' signal-arena slots "
                "are released and reused within its runs."},
    {"MORI_STRESS_RUNS", I(1, 1u << 20, TOOLS), .reader = "torch tests (test_barrier_stress), tests (barrier_stress_test)",
     .default_text = "100 (torch), by rank count (tests)", .meaning = "Runs of the barrier stress tests."},
    {"MORI_STRESS_STACKS_AFTER_S", I(1, 86400, TOOLS), .reader = "torch tests (test_barrier_stress)",
     .default_text = "60 (3x for the first run)",
     .meaning = "A run of the stress test that takes this many seconds prints every thread's Python stack and exits."},
    {"MORI_STRESS_STALL_S", I(1, 86400, TOOLS), .reader = "torch tests (test_barrier_stress)", .default_text = "20",
     .meaning = "Seconds without progress after which each rank of the stress test prints its stalled barriers (window, "
                "channel, the epoch waited for, each peer's epoch seen) and its stacks."},
    {"MORI_STRESS_TIMEOUT_S", I(1, 86400, TOOLS), .reader = "tools/gpu.sh", .default_text = "400",
     .meaning = "The time limit of the stress part of tools/gpu.sh."},
    {"MORI_BENCH_PROVIDER", E("copy_engine|verbs", TOOLS), .reader = "bench_proxy, bench_gda_msgrate",
     .default_text = "copy_engine (bench_gda_msgrate: verbs when an RDMA device is present)",
     .meaning = "The rdma provider the benchmark measures (under the software ConnectX for bench_gda_msgrate)."},
    {"MORI_BENCH_OPS", I(1, 1u << 24, TOOLS), .reader = "bench_gda_msgrate", .default_text = "2000",
     .meaning = "Messages per path, put size and round of the message-rate benchmark."},
    {"MORI_AUDITWHEEL_DIR", S(TOOLS), .reader = "tools/wheel_audit.sh", .default_text = ".deps/auditwheel",
     .meaning = "Where tools/wheel_audit.sh installs auditwheel."},
    {"MORI_COLL_TEST_ITERS", I(1, 1u << 30, TOOLS), .reader = "tests, tools/gpu.sh", .default_text = "by test",
     .meaning = "Iterations of the GPU collectives test."},
    {"MORI_SHARED_SUITES", S(TOOLS), .reader = "tools/gpu.sh", .default_text = "the GPU suites",
     .meaning = "The suites tools/gpu.sh runs with ranks sharing one GPU."},
    {"MORI_RANKS", I(1, 1024, TOOLS), .reader = "tools/run.sh", .default_text = "the GPUs, or 4",
     .meaning = "Ranks tools/run.sh starts."},
    {"MORI_BENCH_ROUNDS", I(1, 1u << 20, TOOLS), .reader = "GPU benchmarks", .default_text = "5",
     .meaning = "Rounds of the proxy benchmark."},
    {"MORI_BENCH_COLL_QUICK", B(TOOLS), .reader = "GPU benchmarks", .default_text = "off",
     .meaning = "The collectives benchmark measures fewer sizes."},
    {"MORI_BENCH_COLL_CHECK", B(TOOLS), .reader = "GPU benchmarks", .default_text = "off",
     .meaning = "The collectives benchmark makes every context twice, unchecked and then checking its calls."},
    {"MORI_BENCH_COLL_GRIDS", S(TOOLS), .reader = "GPU benchmarks", .default_text = "the device's",
     .meaning = "Grid sizes the collectives benchmark sweeps, comma-separated."},
    {"MORI_BENCH_MACHINE", S(TOOLS), .reader = "bench", .default_text = "unset",
     .meaning = "The machine name recorded with benchmark results."},
    {"MORI_BENCH_ONLY", S(TOOLS), .reader = "bench", .default_text = "every op",
     .meaning = "Ops the benchmark worker runs, comma-separated."},
    {"MORI_WHEEL_TEST_TORCH_DIR", S(TOOLS), .reader = "tools/wheel_test.py", .default_text = "unset",
     .meaning = "The torch the wheel test adds to its virtual environment."},
    {"MORI_FUZZ_CC", S(TOOLS), .reader = "tools/fuzz.sh", .default_text = "clang-22, clang",
     .meaning = "The compiler of the fuzz targets."},
    {"MORI_FUZZ_SECONDS", I(1, 86400, TOOLS), .reader = "tools/fuzz.sh", .default_text = "45",
     .meaning = "How long each fuzz target runs."},
    {"MORI_VM_DIR", S(TOOLS), .reader = "tools/rdma_vm_test.sh", .default_text = "/tmp/mori-rdma-vm",
     .meaning = "Where the Soft-RoCE test keeps its virtual machine."},
    {"MORI_VM_SUITES", S(TOOLS), .reader = "tools/rdma_vm_test.sh", .default_text = "every suite",
     .meaning = "The suites the Soft-RoCE test runs in its guest, space-separated (a subset of its list)."},
    {"MORI_VM_BENCH_OUT", S(TOOLS), .reader = "tools/rdma_vm_test.sh", .default_text = "unset (no benchmark)",
     .meaning = "Also run bench_gda_msgrate in the guest and write its JSON lines to this file."},
};

const mori_env_var_t *mori_env_table(size_t *count) {
  *count = sizeof(table) / sizeof(table[0]);
  return table;
}
