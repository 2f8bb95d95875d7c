"""Registers the "MORI" SymmetricMemory backend with torch on import.

    import mori.allocator
    import torch.distributed._symmetric_memory as symm_mem
    symm_mem.set_backend("MORI")

The backend is a plain shared library (no Python ABI): loading it registers
the allocator. An exit hook releases every window and allocation while the
GPU runtime is still up; after it, frees become no-ops.
"""
import atexit
import ctypes
import os

import torch  # loads libtorch*, which the backend links against

_LIB_PATH = os.environ.get("MORI_TORCH_LIB", os.path.join(os.path.dirname(__file__), "libmori_torch.so"))
if not os.path.exists(_LIB_PATH):
    raise ImportError(
        f"mori: {_LIB_PATH} not found; build it with `bazel build //torch_backend:mori` "
        "and put libmori_torch.so next to this file (or set MORI_TORCH_LIB)"
    )
torch.ops.load_library(_LIB_PATH)
_lib = ctypes.CDLL(_LIB_PATH)
_lib.mori_torch_build_info.restype = ctypes.c_char_p

BACKEND_NAME = "MORI"
BUILD_INFO = _lib.mori_torch_build_info().decode()


def supports():
    """What this build supports, as a dict (platform, torch, handles, transports)."""
    info = dict(kv.split("=", 1) for kv in BUILD_INFO.split())
    info["multicast"] = False
    info["signal_pad_ops"] = True  # barrier / put_signal / wait_signal
    return info


def finalize():
    """Releases everything MORI holds. Runs by itself at exit; idempotent."""
    _lib.mori_torch_finalize()


atexit.register(finalize)
