# SPDX-License-Identifier: MIT
"""mori's device library in Triton kernels: what Triton's own language
cannot say well (the MORI Shmem device state, the heap's peer translation,
block-wide put/get with signals, quiet and the proxy path to PEs reached
only by RDMA, the device barrier) as extern functions compiled to LLVM
bitcode and linked into the kernel (`extern_libs`).

    import mori.shmem
    from mori.triton import lib as ml   # `import mori.triton_lib as ml` also works

    @triton.jit
    def ring(buf, sig, out, n):
        me = ml.my_pe()
        peer = (me + 1) % ml.n_pes()
        rc = ml.putmem_signal_block(buf, buf + n, n, sig, 1, ml.SIGNAL_ADD, peer)
        rc2 = ml.signal_wait_until_block(sig, ml.CMP_GE, 1, 10**9)
        ...

    ml.launch(ring, (1,), buf, sig, out, n)   # or: ml.kernel(ring)[(1,)](...)

`launch` compiles the kernel with the library for the GPU at hand, loads it,
fills the module's device state (`mori.shmem.shmem_module_init` on the
kernel's CUmodule / hipModule_t) and only then launches; it fills again
when the state changed (shmem finalised and initialised again). A kernel
launched without it finds the state empty: every function answers -1003
(unreachable) and `ptr` answers 0, never garbage.

Scopes: the queries (my_pe, n_pes, heap_base, ptr, pe_accessible) are pure
and may take tensors (elementwise). Every other function is block scope: a
Triton program is one block, and every thread of the program must call it
with the same scalar arguments, at the program's top level (not under a
branch on per-element values); it returns 0 or a negative code the same on
every thread: -22 invalid argument, -1003 unreachable PE (or the state not
filled), -1007 aborted, -1008 timed out. Addresses are Triton pointers or
int64; sizes are bytes.

Environment (the Shmem Guide's variables):
  MORI_PRECOMPILE   at import, resolve the bitcode and compile and load the
                    library's own kernels (device_state, barrier_all,
                    putmem_signal), so a first call does not compile;
                    their modules are filled when shmem is initialised.
  MORI_DISABLE_JIT  never compile device bitcode at run time: use only the
                    bitcode packaged in the wheel (mori/triton/bitcode/) and
                    raise if it is missing. Otherwise a missing file is
                    compiled from the packaged sources (mori/triton/bitcode/
                    mori_triton_src.tar.gz) with clang and opt of LLVM 15
                    (MORI_BITCODE_LLVM_DIR, default /usr/lib/llvm-15) into
                    MORI_BITCODE_CACHE (default ~/.cache/mori/bitcode).

Why LLVM 15 bitcode: Triton 3.6 bundles a pre-release LLVM 22 that cannot
read clang 22.1's bitcode; LLVM reads the bitcode of older LLVMs, so
LLVM 15's is read by every Triton 3.x (see triton_bitcode/compile_bitcode.sh).
Importing this module needs triton; `import mori.triton` does not import
this module (it is loaded when named: `from mori.triton import lib`)."""
import ctypes
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading

import triton
import triton.language as tl
from triton.language import core

LIB_NAME = "mori"  # Triton's AMD backend links a library whose name every called function contains
STATE_SYMBOL = "globalGpuStates"
STATE_BYTES = 176  # sizeof(mori_shmem_device_state_t)

_HERE = os.path.dirname(os.path.abspath(__file__))  # mori/triton/
BITCODE_DIR = os.environ.get("MORI_BITCODE_DIR") or os.path.join(_HERE, "bitcode")
_SOURCES = "mori_triton_src.tar.gz"
_KINDS = ("nvptx", "amdgcn")

# Codes the block-scope functions return (= the host's MORI_E*).
OK = tl.constexpr(0)
EINVAL = tl.constexpr(-22)
EUNREACHABLE = tl.constexpr(-1003)
EABORTED = tl.constexpr(-1007)
ETIMEDOUT = tl.constexpr(-1008)
# signal ops and comparisons
SIGNAL_SET = tl.constexpr(0)
SIGNAL_ADD = tl.constexpr(1)
CMP_EQ = tl.constexpr(0)
CMP_NE = tl.constexpr(1)
CMP_GE = tl.constexpr(2)
CMP_GT = tl.constexpr(3)
CMP_LT = tl.constexpr(4)
CMP_LE = tl.constexpr(6)  # not 5: OpenSHMEM's 5 is GE; pass these names, never raw numbers
# pe_accessible
ACCESS_NONE = tl.constexpr(0)
ACCESS_LOAD_STORE = tl.constexpr(1)
ACCESS_PROXY = tl.constexpr(2)


def _flag(name):
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


# ---------------------------------------------------------------- bitcode


def _active_target():
    try:
        return triton.runtime.driver.active.get_current_target()
    except Exception as e:  # no GPU driver: say so instead of Triton's message alone
        raise RuntimeError(f"mori.triton.lib: Triton has no active GPU target ({e})") from e


def gpu_kind(target=None):
    """"nvptx" (NVIDIA) or "amdgcn" (AMD), from Triton's active target (or
    `target`, a triton GPUTarget)."""
    target = target or _active_target()
    if target.backend == "cuda":
        return "nvptx"
    if target.backend == "hip":
        arch = str(target.arch)
        # The AMDGCN bitcode is built for the wave64 gfx9 GPUs (its clock is
        # s_memrealtime, which gfx10+ lack).
        if not arch.startswith("gfx9"):
            raise RuntimeError(f"mori.triton.lib: the AMDGCN bitcode serves gfx9 GPUs (gfx90a, gfx942, gfx950); "
                               f"this GPU is {arch}")
        return "amdgcn"
    raise RuntimeError(f"mori.triton.lib: no device library for Triton backend '{target.backend}' "
                       "(NVIDIA 'cuda' and AMD 'hip' are supported)")


def packaged_bitcode(kind):
    """Where the wheel puts the bitcode of `kind` (it may be missing)."""
    if kind not in _KINDS:
        raise ValueError(f"mori.triton.lib: bitcode kind '{kind}' is not one of {_KINDS}")
    return os.path.join(BITCODE_DIR, f"mori_triton_{kind}.bc")


_jit_lock = threading.Lock()


def _jit_compile(kind):
    """Compiles the bitcode of `kind` from the packaged sources into the
    cache (once per sources and LLVM), returning its path."""
    sources = os.path.join(BITCODE_DIR, _SOURCES)
    if not os.path.exists(sources):
        raise FileNotFoundError(f"mori.triton.lib: neither {packaged_bitcode(kind)} nor the sources to compile it "
                                f"({sources}) are installed; reinstall the mori wheel")
    llvm = os.environ.get("MORI_BITCODE_LLVM_DIR", "/usr/lib/llvm-15")
    for tool in ("clang", "opt"):
        if not os.access(os.path.join(llvm, "bin", tool), os.X_OK):
            raise FileNotFoundError(
                f"mori.triton.lib: compiling the {kind} bitcode at run time needs {llvm}/bin/{tool} (LLVM 15, or "
                "set MORI_BITCODE_LLVM_DIR to an LLVM no newer than Triton's); set MORI_DISABLE_JIT=1 to forbid it")
    with open(sources, "rb") as f:
        key = hashlib.sha256(f.read() + llvm.encode()).hexdigest()[:16]
    cache = os.environ.get("MORI_BITCODE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "mori", "bitcode")
    out = os.path.join(cache, key, f"mori_triton_{kind}.bc")
    with _jit_lock:
        if os.path.exists(out):
            return out
        os.makedirs(os.path.dirname(out), exist_ok=True)
        work = tempfile.mkdtemp(prefix="mori-bitcode-")
        try:
            with tarfile.open(sources) as tar:
                try:
                    tar.extractall(work, filter="data")  # plain files only, inside work
                except TypeError:  # a Python without extraction filters
                    tar.extractall(work)
            tmp_out = os.path.join(work, os.path.basename(out))
            env = dict(os.environ, MORI_BITCODE_LLVM_DIR=llvm)
            cmd = ["bash", "triton_bitcode/compile_bitcode.sh", kind, tmp_out, "triton_bitcode/mori_triton_device.cu",
                   "-Icore/device/include", "-Idevice/include", "-Itransport/rdma/gda/include", "-Ishmem/include"]
            run = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
            if run.returncode != 0:
                raise RuntimeError(f"mori.triton.lib: compiling the {kind} bitcode failed (exit {run.returncode}): "
                                   f"{run.stderr.strip()[-2000:]}")
            os.replace(tmp_out, out)  # atomic: another process sees all of it or nothing
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return out


def bitcode_path(kind=None):
    """The bitcode to link for the GPU at hand (or `kind`): the packaged
    file; if it is missing, compiled at run time — unless MORI_DISABLE_JIT
    is set, which raises FileNotFoundError instead."""
    kind = kind or gpu_kind()
    path = packaged_bitcode(kind)
    if os.path.exists(path):
        return path
    if _flag("MORI_DISABLE_JIT"):
        raise FileNotFoundError(f"mori.triton.lib: the {kind} bitcode is not packaged ({path} is missing) and "
                                "MORI_DISABLE_JIT is set, so it is not compiled at run time; reinstall the mori wheel "
                                "(it carries mori/triton/bitcode/) or unset MORI_DISABLE_JIT")
    return _jit_compile(kind)


def extern_libs(kind=None):
    """The `extern_libs` option that links the library: {"mori": path}."""
    return {LIB_NAME: bitcode_path(kind)}


# ------------------------------------------------------ extern functions

_I32 = core.dtype("int32")
_I64 = core.dtype("int64")


def _extern(symbol, args, types, ret, pure, _semantic):
    return core.extern_elementwise(LIB_NAME, "", args, {tuple(types): (symbol, ret)}, is_pure=pure,
                                   _semantic=_semantic)


@core.extern
def _my_pe(_semantic=None):
    return _extern("mori_tl_my_pe", [], [], _I32, True, _semantic)


@core.extern
def _n_pes(_semantic=None):
    return _extern("mori_tl_n_pes", [], [], _I32, True, _semantic)


@core.extern
def _heap_base(_semantic=None):
    return _extern("mori_tl_heap_base", [], [], _I64, True, _semantic)


@core.extern
def _ptr(addr, pe, _semantic=None):
    return _extern("mori_tl_ptr", [addr, pe], [_I64, _I32], _I64, True, _semantic)


@core.extern
def _pe_accessible(pe, _semantic=None):
    return _extern("mori_tl_pe_accessible", [pe], [_I32], _I32, True, _semantic)


@core.extern
def _putmem_block(dest, src, nbytes, pe, _semantic=None):
    return _extern("mori_tl_putmem_block", [dest, src, nbytes, pe], [_I64, _I64, _I64, _I32], _I32, False, _semantic)


@core.extern
def _getmem_block(dest, source, nbytes, pe, _semantic=None):
    return _extern("mori_tl_getmem_block", [dest, source, nbytes, pe], [_I64, _I64, _I64, _I32], _I32, False,
                   _semantic)


@core.extern
def _signal_op_block(sig, value, op, pe, _semantic=None):
    return _extern("mori_tl_signal_op_block", [sig, value, op, pe], [_I64, _I64, _I32, _I32], _I32, False, _semantic)


@core.extern
def _putmem_signal_block(dest, src, nbytes, sig, value, op, pe, _semantic=None):
    return _extern("mori_tl_putmem_signal_block", [dest, src, nbytes, sig, value, op, pe],
                   [_I64, _I64, _I64, _I64, _I64, _I32, _I32], _I32, False, _semantic)


@core.extern
def _signal_wait_until_block(sig, cmp, value, timeout_ns, _semantic=None):
    return _extern("mori_tl_signal_wait_until_block", [sig, cmp, value, timeout_ns], [_I64, _I32, _I64, _I64], _I32,
                   False, _semantic)


@core.extern
def _signal_fetch_block(sig, _semantic=None):
    return _extern("mori_tl_signal_fetch_block", [sig], [_I64], _I64, False, _semantic)


@core.extern
def _fence(_semantic=None):
    return _extern("mori_tl_fence", [], [], _I32, False, _semantic)


@core.extern
def _quiet_block(timeout_ns, _semantic=None):
    return _extern("mori_tl_quiet_block", [timeout_ns], [_I64], _I32, False, _semantic)


@core.extern
def _barrier_all_block(timeout_ns, _semantic=None):
    return _extern("mori_tl_barrier_all_block", [timeout_ns], [_I64], _I32, False, _semantic)


@triton.jit
def _addr(x):
    """A pointer or an integer as the int64 address the library takes."""
    return tl.cast(x, tl.int64)


@triton.jit
def my_pe():
    """This PE (-1003 when the module's state was not filled)."""
    return _my_pe()


@triton.jit
def n_pes():
    """The number of PEs (-1003 when the module's state was not filled)."""
    return _n_pes()


@triton.jit
def heap_base():
    """This PE's symmetric heap base address (int64; 0 when not filled)."""
    return _heap_base()


@triton.jit
def ptr_int(addr, pe):
    """Where this process reaches heap address `addr` (this PE's) of PE
    `pe` by load/store, as int64; 0 outside the heap, in a heap chunk not
    mapped, or for a PE not reached by load/store (another node). The
    device knows the heap's chunks, not its allocations: an address in a
    mapped chunk translates whether or not an allocation holds it (the
    host's shmem_ptr_p2p answers NULL there). Elementwise."""
    return _ptr(_addr(addr), tl.cast(pe, tl.int32))


@triton.jit
def ptr(p, pe):
    """The pointer `p` (into this PE's heap) as a pointer of the same type
    into PE `pe`'s copy, reached by load/store; a null pointer when `pe` is
    not reached so (check with pe_accessible). Elementwise."""
    return tl.cast(_ptr(_addr(p), tl.cast(pe, tl.int32)), p.dtype)


@triton.jit
def pe_accessible(pe):
    """ACCESS_LOAD_STORE (1), ACCESS_PROXY (2: RDMA through the proxy) or
    ACCESS_NONE (0, also for an invalid PE). Elementwise."""
    return _pe_accessible(tl.cast(pe, tl.int32))


@triton.jit
def putmem_block(dest, src, nbytes, pe):
    """The program copies `nbytes` from local `src` to heap address `dest`
    on `pe` (a load/store PE: directly; an RDMA PE: one proxy request, both
    addresses in the heap chunk of shmem's world window — all of a static
    heap — completed by quiet_block)."""
    return _putmem_block(_addr(dest), _addr(src), tl.cast(nbytes, tl.int64), tl.cast(pe, tl.int32))


@triton.jit
def getmem_block(dest, source, nbytes, pe):
    """The program copies `nbytes` from heap address `source` on `pe` to
    local `dest` (RDMA PEs through the proxy, as putmem_block)."""
    return _getmem_block(_addr(dest), _addr(source), tl.cast(nbytes, tl.int64), tl.cast(pe, tl.int32))


@triton.jit
def signal_op_block(sig, value, op, pe):
    """After a program barrier, one thread sets (SIGNAL_SET) or adds to
    (SIGNAL_ADD) the uint64 at heap address `sig` on `pe`, with release at
    system scope: the program's earlier stores to that PE come first."""
    return _signal_op_block(_addr(sig), tl.cast(value, tl.int64), tl.cast(op, tl.int32), tl.cast(pe, tl.int32))


@triton.jit
def putmem_signal_block(dest, src, nbytes, sig, value, op, pe):
    """putmem_block, then signal_op_block on the same PE: the signal
    arrives after the data."""
    return _putmem_signal_block(_addr(dest), _addr(src), tl.cast(nbytes, tl.int64), _addr(sig),
                                tl.cast(value, tl.int64), tl.cast(op, tl.int32), tl.cast(pe, tl.int32))


@triton.jit
def signal_wait_until_block(sig, cmp, value, timeout_ns):
    """Waits until this PE's uint64 at heap address `sig` compares (CMP_EQ,
    CMP_NE, CMP_GE, CMP_GT, CMP_LT, CMP_LE; any other: EINVAL) with
    `value`, acquiring; timeout_ns 0 waits for good (shmem's abort flag
    still ends it). A timeout returns ETIMEDOUT and leaves a record that
    mori_shmem_check reports."""
    return _signal_wait_until_block(_addr(sig), tl.cast(cmp, tl.int32), tl.cast(value, tl.int64),
                                    tl.cast(timeout_ns, tl.int64))


@triton.jit
def signal_fetch_block(sig):
    """This PE's uint64 at heap address `sig` (acquire), as int64."""
    return _signal_fetch_block(_addr(sig))


@triton.jit
def fence():
    """Orders each thread's earlier stores to peers before its later ones."""
    return _fence()


@triton.jit
def quiet_block(timeout_ns):
    """Completes the program's earlier stores to load/store PEs and every
    proxy request this process submitted (RDMA PEs)."""
    return _quiet_block(tl.cast(timeout_ns, tl.int64))


@triton.jit
def barrier_all_block(timeout_ns):
    """Every PE's program meets here (one program per PE at a time); needs
    every PE reached by load/store (one node), else EUNREACHABLE — then use
    the host's shmem_barrier_all."""
    return _barrier_all_block(tl.cast(timeout_ns, tl.int64))


# ------------------------------------------------- launch and the state


class _State:
    """mori_shmem_device_state() through libmori.so, for noticing a new
    state (shmem finalised and initialised again)."""

    def __init__(self):
        from mori import _lib

        self._fn = _lib.lib.mori_shmem_device_state

    def current(self):
        """The state's bytes, or None when shmem is not initialised."""
        buf = ctypes.create_string_buffer(STATE_BYTES)
        return bytes(buf.raw) if self._fn(buf) == 0 else None


_state = None
_filled = {}  # module handle -> the state bytes it was filled with
_fill_lock = threading.Lock()


def _state_bytes():
    global _state
    if _state is None:
        _state = _State()
    return _state.current()


def _uses_library(compiled):
    asm = getattr(compiled, "asm", {})
    text = asm.get("llir") or asm.get("ptx") or asm.get("amdgcn") or ""
    return STATE_SYMBOL in text


def _load(compiled):
    """The compiled kernel's module handle (CUmodule / hipModule_t as an
    int), loading it first: Triton loads a kernel's module lazily, at its
    first launch (CompiledKernel._init_handles, which sets .module)."""
    if getattr(compiled, "module", None) is None:
        init = getattr(compiled, "_init_handles", None)
        if init is None:
            raise RuntimeError("mori.triton.lib: this Triton's CompiledKernel has no _init_handles; cannot load the "
                               "module before the first launch (Triton 3.6 has it)")
        init()
    handle = getattr(compiled, "module", None)
    if not handle:
        raise RuntimeError("mori.triton.lib: Triton loaded the kernel but its CompiledKernel.module is empty")
    return int(handle)


def fill(compiled, required=True):
    """Loads `compiled` (a triton CompiledKernel) and copies the shmem
    device state into its module's globalGpuStates (shmem_module_init),
    unless it holds the current state already. A kernel that calls no
    library function has no such global: nothing to do. required=False:
    return False instead of raising when shmem is not initialised."""
    if not _uses_library(compiled):
        return False
    handle = _load(compiled)
    state = _state_bytes()
    if state is None:
        if not required:
            return False
        raise RuntimeError("mori.triton.lib: mori.shmem is not initialised (shmem_init_attr or "
                           "shmem_torch_process_group_init) — the kernel's device state cannot be filled")
    with _fill_lock:
        if _filled.get(handle) != state:
            from mori.shmem import shmem_module_init

            shmem_module_init(handle)
            _filled[handle] = state
    return True


def _with_library(kwargs):
    libs = dict(kwargs.pop("extern_libs", None) or {})
    libs[LIB_NAME] = bitcode_path()
    kwargs["extern_libs"] = libs
    return kwargs


def compile_kernel(fn, *args, grid, **kwargs):
    """Compiles the @triton.jit kernel `fn` for these arguments with the
    library linked, loads it and fills its device state; the
    CompiledKernel (Triton's warmup, so nothing runs)."""
    compiled = fn.warmup(*args, grid=grid, **_with_library(kwargs))
    if hasattr(compiled, "result"):  # an asynchronous compile
        compiled = compiled.result()
    fill(compiled)
    return compiled


def launch(fn, grid, *args, **kwargs):
    """fn[grid](*args, **kwargs) with the library linked and the device
    state filled before the kernel runs; returns Triton's CompiledKernel."""
    kwargs = _with_library(kwargs)
    compile_kernel(fn, *args, grid=grid, **kwargs)
    return fn[grid](*args, **kwargs)


class kernel:
    """ml.kernel(fn)[grid](*args): launch() with Triton's launch syntax."""

    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, grid):
        return lambda *args, **kwargs: launch(self.fn, grid, *args, **kwargs)


# ------------------------------------------- the library's own kernels


# Scalars travel in an int64 tensor (`scalars`: not `params`, which is a
# local of the argument binder Triton generates and would shadow it), so every call has the same
# signature and MORI_PRECOMPILE's warmup is the very kernel later calls use
# (Triton types and specialises a Python int by its value).


@triton.jit
def _device_state_kernel(out):
    tl.store(out + 0, my_pe().to(tl.int64))
    tl.store(out + 1, n_pes().to(tl.int64))
    tl.store(out + 2, heap_base())


@triton.jit
def _barrier_all_kernel(rc, scalars):
    tl.store(rc, barrier_all_block(tl.load(scalars)))


@triton.jit
def _putmem_signal_kernel(rc, scalars):
    dest = tl.load(scalars + 0)
    src = tl.load(scalars + 1)
    nbytes = tl.load(scalars + 2)
    sig = tl.load(scalars + 3)
    value = tl.load(scalars + 4)
    op = tl.load(scalars + 5)
    pe = tl.load(scalars + 6)
    timeout_ns = tl.load(scalars + 7)
    r = putmem_signal_block(dest, src, nbytes, sig, value, op, pe)
    q = quiet_block(timeout_ns)
    tl.store(rc, tl.where(r != 0, r, q))


def _own_kernels(torch):
    """The library's kernels and the argument dtypes their warmup takes."""
    return [
        (_device_state_kernel, (torch.int64, )),
        (_barrier_all_kernel, (torch.int32, torch.int64)),
        (_putmem_signal_kernel, (torch.int32, torch.int64)),
    ]


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("mori.triton.lib: the library's host helpers (device_state, barrier_all, putmem_signal) "
                          "need torch for their result buffers") from e
    return torch


def device_state():
    """What the device sees: {"my_pe", "n_pes", "heap_base"} read by a
    kernel (one program) on the current device."""
    torch = _torch()
    out = torch.full((3, ), -1, dtype=torch.int64, device="cuda")
    launch(_device_state_kernel, (1, ), out)
    v = out.tolist()
    return {"my_pe": v[0], "n_pes": v[1], "heap_base": v[2]}


def barrier_all(timeout_ns=10**10):
    """A device-side barrier of every PE (barrier_all_block in one program);
    raises RuntimeError with the code when it fails."""
    torch = _torch()
    rc = torch.full((1, ), 1, dtype=torch.int32, device="cuda")
    params = torch.tensor([int(timeout_ns)], dtype=torch.int64, device="cuda")
    launch(_barrier_all_kernel, (1, ), rc, params)
    code = int(rc.item())
    if code != 0:
        raise RuntimeError(f"mori.triton.lib: barrier_all_block returned {code} on PE {device_state()['my_pe']}")


def putmem_signal(dest, src, nbytes, sig, value, op, pe, timeout_ns=10**10):
    """One program: putmem_signal_block then quiet_block (addresses as
    ints); raises RuntimeError with the code when it fails."""
    torch = _torch()
    rc = torch.full((1, ), 1, dtype=torch.int32, device="cuda")
    params = torch.tensor([int(dest), int(src), int(nbytes), int(sig), int(value), int(op), int(pe), int(timeout_ns)],
                          dtype=torch.int64, device="cuda")
    launch(_putmem_signal_kernel, (1, ), rc, params)
    code = int(rc.item())
    if code != 0:
        raise RuntimeError(f"mori.triton.lib: putmem_signal to PE {pe} ({nbytes} bytes) returned {code}")


def precompile():
    """Compiles the library's own kernels for the current GPU (Triton's
    warmup: into its kernel cache and its disk cache, nothing runs) and
    loads them, filling their state when shmem is initialised (else the
    first call fills it): what MORI_PRECOMPILE does at import. Returns the
    CompiledKernels."""
    torch = _torch()
    libs = extern_libs()
    compiled = []
    for fn, dtypes in _own_kernels(torch):
        k = fn.warmup(*dtypes, grid=(1, ), extern_libs=libs)
        if hasattr(k, "result"):
            k = k.result()
        _load(k)
        fill(k, required=False)
        compiled.append(k)
    return compiled


if _flag("MORI_PRECOMPILE"):
    try:
        precompile()
    except Exception as e:
        raise ImportError(f"mori.triton.lib: MORI_PRECOMPILE is set and precompiling failed: {e}") from e
