# SPDX-License-Identifier: MIT
"""mori.ops: mori's operations on torch tensors.

- MoE expert parallelism, the MORI-EP interface (mori.ops.ep):
  EpDispatchCombineConfig, EpDispatchCombineKernelType and
  EpDispatchCombineOp. It needs MORI Shmem initialised (mori.shmem), runs on
  every platform (CPU tensors on the host platform) and needs no torch
  backend. See docs/ep.md.
- The fused collectives of the torch backend (mori.ops.collectives):
  all_to_all, all_reduce, all_to_all_vdev, all_to_all_vdev_2d and
  all_to_all_vdev_2d_offset, on CUDA/HIP tensors.

`import mori.ops` loads the torch backend when it can (so torch.ops.mori.*
is registered, as before) and otherwise still imports: the reason the
backend could not load is raised when a collective is first used. The EP
names are imported when first used."""
import importlib

_EP_NAMES = ("EpDispatchCombineConfig", "EpDispatchCombineKernelType", "EpDispatchCombineOp", "EpError")
_COLLECTIVE_NAMES = ("all_to_all", "all_reduce", "all_to_all_vdev", "all_to_all_vdev_2d",
                     "all_to_all_vdev_2d_offset")

__all__ = list(_EP_NAMES + _COLLECTIVE_NAMES)

try:  # the torch backend registers torch.ops.mori.* when it loads
    from . import collectives as _collectives
    _backend_error = None
except ImportError as e:  # host platform, no GPU torch, ...: EP still works
    _collectives = None
    _backend_error = e


def __getattr__(name):
    if name in _EP_NAMES:
        try:
            ep = importlib.import_module(".ep", __name__)
        except ModuleNotFoundError as e:
            if e.name != "torch":
                raise
            # (a bare "No module named 'torch'" did not say who needs it)
            raise ImportError(f"mori.ops.{name} needs torch, which is not installed in this Python; "
                              "mori.shmem works without it") from e
        value = getattr(ep, name)
    elif name in _COLLECTIVE_NAMES:
        if _collectives is None:
            raise ImportError(f"mori.ops.{name} needs mori's torch backend, which did not load: "
                              f"{_backend_error}") from _backend_error
        value = getattr(_collectives, name)
    else:
        raise AttributeError(f"module 'mori.ops' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
