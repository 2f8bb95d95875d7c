"""Loads mori's torch backend library once: the C entry points (ctypes), the
"MORI" allocator registration and the torch.ops.mori operators (static
registration when the library loads), and the MemPool shim when this build
has one. Checks that the library was built for the torch in use."""
import ctypes
import os

import torch  # loads libtorch*, which the backend links against

_HERE = os.path.dirname(__file__)
PATH = os.environ.get("MORI_TORCH_LIB", os.path.join(_HERE, "libmori_torch.so"))
if not os.path.exists(PATH):
    raise ImportError(
        f"mori: {PATH} not found; install the mori wheel, or build it with "
        "`bazel build //torch_backend:mori` and put libmori_torch.so next to this file (or set MORI_TORCH_LIB)"
    )
# Global, so that the MemPool shim resolves the backend's entry points.
lib = ctypes.CDLL(PATH, mode=ctypes.RTLD_GLOBAL)
lib.mori_torch_build_info.restype = ctypes.c_char_p
BUILD_INFO = lib.mori_torch_build_info().decode()
INFO = dict(kv.split("=", 1) for kv in BUILD_INFO.split())

_built_for = INFO.get("torch", "")
_running = ".".join(torch.__version__.split("+")[0].split(".")[:2])
if _built_for != _running:
    raise ImportError(
        f"mori: this backend was built for torch {_built_for} and torch {torch.__version__} is running; "
        "the SymmetricMemory interface changes between torch minor versions: use a mori build for this torch"
    )
torch.ops.load_library(PATH)

_MEMPOOL = os.path.join(os.path.dirname(PATH), "libmori_torch_mempool.so")
HAS_MEMPOOL = os.path.exists(_MEMPOOL)
if HAS_MEMPOOL:
    torch.ops.load_library(_MEMPOOL)
