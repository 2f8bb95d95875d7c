# SPDX-License-Identifier: MIT
"""mori's device library linked into Triton kernels (mori.triton.lib) on
GPUs, over MORI Shmem heap memory (torchrun --nproc_per_node=N; N = 1 or
more, checks that need a second PE SKIP at one): the device state a kernel
sees after shmem_module_init (and what one sees without it), heap pointer
translation against the host's shmem_ptr_p2p, a store through a translated
pointer, put + signal around a ring with waits and a device barrier, get,
the device barrier under a data check, a wait that times out, and the
MORI_DISABLE_JIT / MORI_PRECOMPILE variables."""
import os
os.environ.setdefault("MORI_SHMEM_HEAP_SIZE", "1G")  # the shmem API's heap is static by default (the guide's)
import subprocess
import sys

try:
    import triton
    import triton.language as tl
except ImportError as e:
    if os.environ.get("RANK", "0") == "0":
        print(f"SKIP every check of test_triton_extern: triton is not importable ({e})", flush=True)
        print("SUMMARY 0 passed, 0 failed", flush=True)
    sys.exit(0)

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, needs_ranks, rank, summary, world  # noqa: E402

torch.cuda.set_device(rank % torch.cuda.device_count())
dev = torch.device("cuda", torch.cuda.current_device())
dist.init_process_group("gloo")  # barriers only; gloo also lets two PEs share one GPU
import mori.shmem as shmem  # noqa: E402
from mori.triton import lib as ml  # noqa: E402
import mori.triton_lib  # noqa: E402  (the first name of mori.triton.lib: the same module)

assert mori.triton_lib is ml, "mori.triton_lib is not mori.triton.lib"

shmem.shmem_torch_process_group_init(dist.group.WORLD.group_name)
me, npes = shmem.shmem_mype(), shmem.shmem_npes()
assert (me, npes) == (rank, world), f"shmem PE {me} of {npes}, torch rank {rank} of {world}"
nxt, prv = (me + 1) % npes, (me - 1) % npes
TIMEOUT_NS = 10 * 10**9
N = 1024  # int32 elements per buffer half


class _DeviceArray:
    """The CUDA array interface over a device address (heap memory)."""

    def __init__(self, address, count, typestr):
        self.__cuda_array_interface__ = {"shape": (count, ), "typestr": typestr, "data": (address, False),
                                         "version": 3}


def heap_tensor(address, count, dtype):
    typestr = {torch.int32: "<i4", torch.int64: "<i8"}[dtype]
    return torch.as_tensor(_DeviceArray(address, count, typestr), device=dev)


@triton.jit
def state_kernel(out, buf, plain, n_peers: tl.constexpr):
    tl.store(out + 0, ml.my_pe().to(tl.int64))
    tl.store(out + 1, ml.n_pes().to(tl.int64))
    tl.store(out + 2, ml.heap_base())
    # translation to every PE (elementwise), to a PE past the end, and of an
    # address outside the heap
    pes = tl.arange(0, n_peers)
    tl.store(out + 8 + pes, ml.ptr_int(buf, pes))
    tl.store(out + 8 + n_peers + pes, ml.pe_accessible(pes).to(tl.int64))
    tl.store(out + 3, ml.ptr_int(buf, ml.n_pes()))
    tl.store(out + 4, ml.ptr_int(plain, ml.my_pe()))


@triton.jit
def unfilled_kernel(out, buf):
    tl.store(out + 0, ml.my_pe().to(tl.int64))
    tl.store(out + 1, ml.n_pes().to(tl.int64))
    tl.store(out + 2, ml.heap_base())
    tl.store(out + 3, ml.ptr_int(buf, 0))


@triton.jit
def store_next_kernel(buf, value, n, BLOCK: tl.constexpr):
    peer = (ml.my_pe() + 1) % ml.n_pes()
    o = tl.arange(0, BLOCK)
    remote = ml.ptr(buf, peer)  # a typed pointer into the next PE's copy
    tl.store(remote + o, value + o, mask=o < n)


@triton.jit
def ring_round_kernel(src, dst, sig, out, rc, rnd, n, BLOCK: tl.constexpr):
    me = ml.my_pe()
    peer = (me + 1) % ml.n_pes()
    r1 = ml.putmem_signal_block(dst, src, n * 4, sig, 1, ml.SIGNAL_ADD, peer)
    r2 = ml.signal_wait_until_block(sig, ml.CMP_GE, rnd, 10000000000)
    seen = ml.signal_fetch_block(sig)
    o = tl.arange(0, BLOCK)
    tl.store(out + o, tl.load(dst + o, mask=o < n, volatile=True), mask=o < n)
    r3 = ml.barrier_all_block(10000000000)  # nobody overwrites dst before every PE has read it
    tl.store(rc + 0, r1)
    tl.store(rc + 1, r2)
    tl.store(rc + 2, r3)
    tl.store(rc + 3, seen.to(tl.int32))


@triton.jit
def get_kernel(dst, src, n, pe, rc):
    tl.store(rc, ml.getmem_block(dst, src, n * 4, pe))


@triton.jit
def barrier_round_kernel(slots, epoch, stale, n_pes: tl.constexpr):
    me = ml.my_pe()
    half = (epoch % 2) * n_pes  # a PE one round ahead writes the other half
    for p in range(0, n_pes):
        tl.store(ml.ptr(slots + half + me, p), epoch * 1000 + me)
    rc = ml.barrier_all_block(10000000000)
    bad = (rc != 0).to(tl.int64)
    for p in range(0, n_pes):
        bad += (tl.load(slots + half + p, volatile=True) != epoch * 1000 + p).to(tl.int64)
    tl.store(stale, tl.load(stale) + bad)


@triton.jit
def wait_kernel(sig, timeout_ns, rc):
    tl.store(rc, ml.signal_wait_until_block(sig, ml.CMP_GE, 1, timeout_ns))


buf_addr = shmem.shmem_malloc(2 * N * 4)
sig_addr = shmem.shmem_malloc(8 * 8)
slots_addr = shmem.shmem_malloc(2 * npes * 8)
buf = heap_tensor(buf_addr, 2 * N, torch.int32)
sig = heap_tensor(sig_addr, 8, torch.int64)
slots = heap_tensor(slots_addr, 2 * npes, torch.int64)


def reset():
    buf.fill_(-1)
    sig.zero_()
    slots.fill_(-1)
    torch.cuda.synchronize()
    dist.barrier()


@check("the packaged bitcode for this GPU is found (MORI_DISABLE_JIT honoured) and linked")
def _():
    path = ml.bitcode_path()
    assert os.path.dirname(path) == ml.BITCODE_DIR, f"not the packaged file: {path}"
    assert ml.gpu_kind() == ("amdgcn" if torch.version.hip else "nvptx")


@check("device state after shmem_module_init: my_pe, n_pes, heap base, ptr to every PE = shmem_ptr_p2p")
def _():
    reset()
    plain = torch.zeros(16, dtype=torch.int32, device=dev)  # not heap memory
    width = triton.next_power_of_2(npes)
    out = torch.full((8 + 2 * width, ), -7, dtype=torch.int64, device=dev)
    ml.launch(state_kernel, (1, ), out, buf, plain, width)
    v = out.tolist()
    assert v[0] == me and v[1] == npes, f"my_pe/n_pes read {v[0]}/{v[1]}, want {me}/{npes}"
    assert 0 < v[2] <= buf_addr, f"heap base {v[2]:#x} is not at or below the allocation {buf_addr:#x}"
    for p in range(npes):
        host = shmem.shmem_ptr_p2p(buf_addr, me, p)
        assert v[8 + p] == host, f"ptr to PE {p}: device {v[8 + p]:#x}, host shmem_ptr_p2p {host:#x}"
        assert v[8 + width + p] == 1, f"PE {p}: pe_accessible {v[8 + width + p]}, want 1 (load/store on one node)"
    assert v[8 + me] == buf_addr, "ptr to this PE is not the address itself"
    for p in range(npes, width):
        assert v[8 + p] == 0 and v[8 + width + p] == 0, f"PE {p} (>= n_pes) translated to {v[8 + p]:#x}"
    assert v[3] == 0, f"ptr to PE n_pes gave {v[3]:#x}, want 0"
    assert v[4] == 0, f"ptr of a non-heap address gave {v[4]:#x}, want 0"
    info = ml.device_state()
    assert info == {"my_pe": me, "n_pes": npes, "heap_base": v[2]}, f"device_state() = {info}"


@check("a kernel linked without mori.triton.lib.launch (state never filled): my_pe -1003, ptr 0 — no garbage")
def _():
    out = torch.full((4, ), -7, dtype=torch.int64, device=dev)
    # Compiled and launched the plain Triton way: its module's globalGpuStates stays zero.
    unfilled_kernel[(1, )](out, buf, extern_libs=ml.extern_libs())
    v = out.tolist()
    assert v[0] == -1003 and v[1] == -1003, f"my_pe/n_pes {v[0]}/{v[1]} from an unfilled module, want -1003"
    assert v[2] == 0 and v[3] == 0, f"heap base {v[2]:#x} / ptr {v[3]:#x} from an unfilled module, want 0"


@check("store through ml.ptr into the next PE's copy (a typed Triton pointer)")
def _():
    reset()
    store_next_kernel_ = ml.kernel(store_next_kernel)
    store_next_kernel_[(1, )](buf, me * 100000, 512, BLOCK=512)
    torch.cuda.synchronize()
    dist.barrier()
    want = torch.arange(512, device=dev, dtype=torch.int32) + prv * 100000
    assert torch.equal(buf[:512], want), f"PE {me} holds {buf[:4].tolist()}..., want PE {prv}'s stores"
    assert bool((buf[512:] == -1).all()), "stores past the 512 elements"


@check("put + signal around the ring, wait, read, device barrier: 30 rounds, every value checked")
def _():
    reset()
    src, dst = buf[:N], buf[N:]
    out = torch.empty(N, dtype=torch.int32, device=dev)
    rc = torch.empty(4, dtype=torch.int32, device=dev)
    base = torch.arange(N, device=dev, dtype=torch.int32)
    for rnd in range(1, 31):
        src.copy_(base + (rnd * 1000003 + me * 7919))
        ml.launch(ring_round_kernel, (1, ), src, dst, sig, out, rc, rnd, N, BLOCK=N)
        codes = rc.tolist()
        assert codes[:3] == [0, 0, 0], f"round {rnd}: put_signal {codes[0]}, wait {codes[1]}, barrier {codes[2]}"
        assert codes[3] == rnd, f"round {rnd}: signal reads {codes[3]}, want {rnd}"
        want = base + (rnd * 1000003 + prv * 7919)
        bad = int((out != want).sum().item())
        assert bad == 0, f"round {rnd}: {bad} of {N} elements are not PE {prv}'s"


@check("getmem_block from the next PE")
def _():
    needs_ranks(2)
    reset()
    buf[:N].copy_(torch.arange(N, device=dev, dtype=torch.int32) * 3 + me)
    torch.cuda.synchronize()
    dist.barrier()
    got = torch.full((N, ), -1, dtype=torch.int32, device=dev)
    rc = torch.full((1, ), 1, dtype=torch.int32, device=dev)
    ml.launch(get_kernel, (1, ), got, buf, N, nxt, rc)
    assert int(rc.item()) == 0, f"getmem_block returned {int(rc.item())}"
    want = torch.arange(N, device=dev, dtype=torch.int32) * 3 + nxt
    assert torch.equal(got, want), f"got {got[:4].tolist()}..., want PE {nxt}'s"
    dist.barrier()


@check("putmem_signal host helper (one program, then quiet) to the next PE")
def _():
    needs_ranks(2)
    reset()
    buf[:N].copy_(torch.arange(N, device=dev, dtype=torch.int32) + me * 10)
    torch.cuda.synchronize()
    dist.barrier()
    ml.putmem_signal(buf_addr + N * 4, buf_addr, N * 4, sig_addr, 5, ml.SIGNAL_SET.value, nxt)
    torch.cuda.synchronize()
    dist.barrier()
    assert int(sig[0].item()) == 5, f"signal {int(sig[0].item())}, want 5 (set by PE {prv})"
    assert torch.equal(buf[N:], torch.arange(N, device=dev, dtype=torch.int32) + prv * 10)


@check("device barrier: 200 rounds, every PE's store visible after each (0 stale)")
def _():
    reset()
    stale = torch.zeros(1, dtype=torch.int64, device=dev)
    width = npes
    for epoch in range(1, 201):
        ml.launch(barrier_round_kernel, (1, ), slots, epoch, stale, width)
    assert int(stale.item()) == 0, f"{int(stale.item())} stale reads or failed barriers"
    ml.barrier_all()


@check("MORI_DISABLE_JIT: a missing packaged file is an error naming the variable, never a compile")
def _():
    saved = ml.BITCODE_DIR, os.environ.get("MORI_DISABLE_JIT")
    empty = f"/tmp/mori-no-bitcode-{os.getpid()}"
    os.makedirs(empty, exist_ok=True)
    try:
        ml.BITCODE_DIR = empty
        os.environ["MORI_DISABLE_JIT"] = "1"
        try:
            ml.bitcode_path()
            raise AssertionError("bitcode_path() answered with nothing packaged and MORI_DISABLE_JIT=1")
        except FileNotFoundError as e:
            assert "MORI_DISABLE_JIT" in str(e) and "not packaged" in str(e), str(e)
    finally:
        ml.BITCODE_DIR = saved[0]
        if saved[1] is None:
            os.environ.pop("MORI_DISABLE_JIT", None)
        else:
            os.environ["MORI_DISABLE_JIT"] = saved[1]


@check("MORI_PRECOMPILE=1: `import mori.triton_lib` compiles and loads the library's kernels (fresh process)")
def _():
    if rank != 0:
        return
    code = ("import mori.triton_lib as ml; ks = ml.precompile(); "
            "assert all(k.module for k in ks), 'a kernel was not loaded'; print('precompiled', len(ks))")
    env = dict(os.environ, MORI_PRECOMPILE="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "precompiled 3" in run.stdout, f"exit {run.returncode}: {run.stderr[-800:]}"


@check("a wait that cannot be met times out with -1008 (1 ms bound), not a hang")
def _():
    reset()
    rc = torch.full((1, ), 1, dtype=torch.int32, device=dev)
    ml.launch(wait_kernel, (1, ), sig[4:], 1000000, rc)
    assert int(rc.item()) == -1008, f"the wait returned {int(rc.item())}, want -1008 (timed out)"


ok = summary()
dist.barrier()
try:
    shmem.shmem_free(slots_addr)
    shmem.shmem_free(sig_addr)
    shmem.shmem_free(buf_addr)
    shmem.shmem_finalize()
except Exception as e:  # noqa: BLE001 — the last check leaves a timeout record on purpose
    if rank == 0:
        print(f"note: shmem teardown: {e}", flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
