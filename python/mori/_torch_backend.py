# SPDX-License-Identifier: MIT
"""Loads mori's torch backend library once, through mori's loader (mori._lib,
from the GPU platform's directory, next to the libmori.so it links): the C
entry points, the "MORI" allocator registration and the torch.ops.mori
operators (static registration when the library loads), and the MemPool shim
when this build has one.

Before anything is loaded it checks, each failure an ImportError that says
what to do: mori's platform is a GPU one (not host), the installed torch is
the minor version this build was compiled against (the wheel records it in
mori/_build_info.py; the SymmetricMemory interface changes between minors),
torch loads (a CUDA build of torch
without its CUDA libraries does not), torch is a build for this mori's GPU
platform, and torch sees a GPU."""
import ctypes
import os

from mori import _lib as _platform_lib

try:
    from mori import _build_info  # written when the wheel is built
except ImportError:  # a source tree: only the library knows what it was built for
    _build_info = None

BUILT_FOR = _build_info.TORCH_VERSION if _build_info else None
PLATFORM = _build_info.PLATFORM if _build_info else None


def _minor(version):
    return ".".join(version.split("+")[0].split(".")[:2])


def _wrong_torch(built_for, running):
    return ImportError(
        f"mori: this build of mori was compiled against torch {built_for}, but torch {running} is installed; "
        f"the SymmetricMemory interface changes between torch minor versions: install torch {_minor(built_for)}.* "
        f"or a mori wheel built against torch {_minor(running)}"
    )


def _installed_torch_version():
    """The installed torch's version from its package metadata, without
    importing it (importing may fail, or crash on a foreign ABI)."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:
        return None
    try:
        return version("torch")
    except PackageNotFoundError:
        return None


# The backend links libmori.so of a GPU platform: refuse before torch loads
# when mori chose the host one.
if _platform_lib.PLATFORM == "host":
    _gpu = [p for p in _platform_lib.packaged_platforms() if p != "host"]
    raise ImportError(
        f"mori.allocator: mori's platform is host ({_platform_lib.WHY}); the torch backend allocates GPU memory "
        f"and needs a GPU platform ({'/'.join(_gpu) or 'none installed'}): run it on a machine with a GPU and "
        "its driver, or set MORI_PLATFORM to the GPU platform; mori.shmem works on host"
    )

if BUILT_FOR:
    _installed = _installed_torch_version()
    if _installed and _minor(_installed) != _minor(BUILT_FOR):
        raise _wrong_torch(BUILT_FOR, _installed)

try:
    import torch  # loads libtorch*, whose symbols the backend uses
except (ImportError, OSError) as e:
    raise ImportError(
        f"mori.allocator needs torch{' ' + BUILT_FOR if BUILT_FOR else ''}"
        f"{' built for ' + PLATFORM if PLATFORM else ''}, and `import torch` failed: {e}. "
        "A GPU build of torch needs its GPU runtime libraries (pip installs them with torch; "
        "a machine with GPUs has the driver); mori.shmem works without torch"
    ) from e

if BUILT_FOR and _minor(torch.__version__) != _minor(BUILT_FOR):
    raise _wrong_torch(BUILT_FOR, torch.__version__)

_torch_platform = "rocm" if getattr(torch.version, "hip", None) else "cuda" if torch.version.cuda else None
if PLATFORM and _torch_platform != PLATFORM:
    raise ImportError(
        f"mori: this build of mori is for {PLATFORM}, but torch {torch.__version__} is "
        f"{'a ' + _torch_platform + ' build' if _torch_platform else 'a CPU-only build'}; "
        f"install a {PLATFORM} build of torch or a mori wheel built for {_torch_platform or 'a GPU platform'}"
    )
# device_count asks NVML (or amdsmi) when it can, so no GPU context is made
# here and ranks may still be forked after the import.
if torch.cuda.device_count() == 0:
    raise ImportError(
        f"mori.allocator: torch {torch.__version__} sees no GPU (torch.cuda.device_count() is 0); "
        "the MORI backend allocates GPU memory: run it on a machine with GPUs "
        "(check CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES and the driver)"
    )

_TORCH_LIB_DIR = os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "lib")


def _torch_libraries_global(names):
    """Makes torch's own libraries (loaded by `import torch`) global, so the
    backend's libraries, which name none of them (a wheel depends on no
    library it does not carry), resolve torch's symbols in them."""
    for name in names:
        path = os.path.join(_TORCH_LIB_DIR, name)
        if os.path.exists(path):
            _platform_lib.load_library(path, mode=ctypes.RTLD_GLOBAL)


_torch_libraries_global(("libc10.so", "libtorch_cpu.so", "libtorch.so"))

PATH = os.environ.get("MORI_TORCH_LIB") or os.path.join(_platform_lib.LIB_DIR, "libmori_torch.so")
if not os.path.exists(PATH):
    raise ImportError(
        f"mori: {PATH} not found; install the mori wheel (`bazel build //:wheel`, then "
        "`pip install bazel-bin/mori-*.whl`)"
    )
# Global, so that the MemPool shim resolves the backend's entry points.
# libmori.so, which it links, is found next to it.
lib = _platform_lib.load_library(PATH, mode=ctypes.RTLD_GLOBAL)
lib.mori_torch_build_info.restype = ctypes.c_char_p
BUILD_INFO = lib.mori_torch_build_info().decode()
INFO = dict(kv.split("=", 1) for kv in BUILD_INFO.split())

_built_for = INFO.get("torch", "")
if _built_for != _minor(torch.__version__):
    raise _wrong_torch(_built_for, torch.__version__)
torch.ops.load_library(PATH)

_MEMPOOL = os.path.join(os.path.dirname(PATH), "libmori_torch_mempool.so")
HAS_MEMPOOL = os.path.exists(_MEMPOOL)
if HAS_MEMPOOL:
    _torch_libraries_global(("libc10_cuda.so", "libtorch_cuda.so"))  # the shim's CUDAPluggableAllocator
    torch.ops.load_library(_MEMPOOL)
