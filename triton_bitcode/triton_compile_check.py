# SPDX-License-Identifier: MIT
"""Compiles, without a GPU, a Triton kernel that calls every function of
mori.triton.lib, with the packaged bitcode linked, for NVIDIA sm_90 and AMD
gfx942 / gfx950 (triton.compile for an explicit target: Triton's own LLVM
reads the bitcode, links, inlines and generates code; ptxas builds the
cubin). Checks that the device state global survives into the code object
(shmem_module_init looks it up by name) and that no call to the library is
left unresolved.

    PYTHONPATH=<dir with triton>:python \\
      MORI_BITCODE_DIR=bazel-bin/triton_bitcode python3 triton_bitcode/triton_compile_check.py

Prints PASS/FAIL/SKIP lines; exit status 1 on a FAIL."""
import re
import sys

try:
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
except ImportError as e:
    print(f"SKIP triton is not importable ({e})")
    sys.exit(0)

from mori.triton import lib as ml


@triton.jit
def every_function(out, buf, sig, n):
    me = ml.my_pe()
    npes = ml.n_pes()
    peer = (me + 1) % npes
    remote = ml.ptr(buf, peer)
    tl.store(remote, me)  # a store through the translated pointer
    offs = tl.arange(0, 16)
    tl.store(out + 16 + offs, ml.ptr_int(buf + offs, peer))  # elementwise translation
    rc = ml.putmem_block(buf, buf + n, n * 4, peer)
    rc |= ml.getmem_block(buf + n, buf, n * 4, peer)
    rc |= ml.signal_op_block(sig, 1, ml.SIGNAL_ADD, peer)
    rc |= ml.putmem_signal_block(buf, buf + n, n * 4, sig, 2, ml.SIGNAL_SET, peer)
    rc |= ml.signal_wait_until_block(sig, ml.CMP_GE, 1, 1000000)
    rc |= ml.fence()
    rc |= ml.quiet_block(1000000)
    rc |= ml.barrier_all_block(1000000)
    tl.store(out + 0, me.to(tl.int64))
    tl.store(out + 1, npes.to(tl.int64))
    tl.store(out + 2, ml.heap_base())
    tl.store(out + 3, ml.pe_accessible(peer).to(tl.int64))
    tl.store(out + 4, ml.signal_fetch_block(sig))
    tl.store(out + 5, rc.to(tl.int64))


def check(target, kind):
    name = f"{target.backend}:{target.arch}"
    try:
        libs = ml.extern_libs(kind)
        k = triton.compile(ASTSource(every_function, {"out": "*i64", "buf": "*i32", "sig": "*u64", "n": "i32"}, {}),
                           target=target, options={"extern_libs": tuple(libs.items())})
    except Exception as e:  # report and go on to the next target
        print(f"FAIL {name}: compile: {type(e).__name__}: {e}")
        return False
    llir = k.asm["llir"]
    left = sorted({w for line in llir.splitlines() if line.startswith("declare") for w in line.split() if "mori_tl_" in w})
    if left:
        print(f"FAIL {name}: unresolved library calls: {left}")
        return False
    if kind == "nvptx":
        ok = re.search(r"\.visible \.global \.align \d+ \.b8 globalGpuStates\[168\]", k.asm["ptx"]) is not None
        ok = ok and len(k.asm["cubin"]) > 0
    else:
        ok = b"globalGpuStates" in k.asm["hsaco"]
    if not ok:
        print(f"FAIL {name}: the code object lacks globalGpuStates")
        return False
    binary = k.asm["cubin" if kind == "nvptx" else "hsaco"]
    print(f"PASS {name}: linked {libs['mori']}, {len(binary)} bytes of code object, globalGpuStates present")
    return True


results = [
    check(GPUTarget("cuda", 90, 32), "nvptx"),
    check(GPUTarget("hip", "gfx942", 64), "amdgcn"),
    check(GPUTarget("hip", "gfx950", 64), "amdgcn"),
]
sys.exit(0 if all(results) else 1)
