# SPDX-License-Identifier: MIT
"""Registers the "MORI" SymmetricMemory backend with torch on import.

    import mori.allocator
    import torch.distributed._symmetric_memory as symm_mem
    symm_mem.set_backend("MORI")

Choose the backend before the first symmetric allocation (torch locks the
choice then). An exit hook releases every window and allocation while the
GPU runtime is still up; after it, frees become no-ops.
"""
import atexit

from mori import _torch_backend as _backend

BACKEND_NAME = "MORI"
BUILD_INFO = _backend.BUILD_INFO


def supports():
    """What this build supports, as a dict (platform, torch, handles,
    transports, ops, mempool)."""
    info = dict(_backend.INFO)
    info["multicast"] = False
    info["signal_pad_ops"] = True  # barrier / put_signal / wait_signal
    info["mempool"] = _backend.HAS_MEMPOOL
    return info


def finalize():
    """Releases everything MORI holds. Runs by itself at exit; idempotent."""
    _backend.lib.mori_torch_finalize()


atexit.register(finalize)
