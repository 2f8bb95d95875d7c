# SPDX-License-Identifier: MIT
"""A torch tensor over a table mori keeps in device memory (an address map's
peer bases, a locality table), without copying it: the tensor aliases the
table and is valid exactly as long as the table (the allocation, the comm).
torch is imported only here, when a tensor is asked for, so mori.shmem stays
importable without it."""
import ctypes

from mori._lib import lib

_TYPESTR = {"int64": ("<i8", 8), "int32": ("<i4", 4)}


class _CudaArray:
    """Enough of the CUDA array interface for torch.as_tensor to wrap a
    device address (torch finds the device from the pointer itself)."""

    def __init__(self, address, count, typestr):
        self.__cuda_array_interface__ = {"shape": (count,), "typestr": typestr, "data": (address, False),
                                         "version": 3}


def tensor_over(address, count, dtype):
    """`count` elements of `dtype` ("int64" or "int32") at a device address
    of mori's library as a torch tensor sharing that memory: a CPU tensor on
    the host platform (where device memory is host memory), a GPU tensor on
    cuda and hip. ImportError when torch is not installed."""
    try:
        import torch
    except ImportError as e:
        raise ImportError("mori.shmem: a tensor view of a device table needs torch; without torch use the "
                          "table's address (an int) and its host copy") from e
    typestr, size = _TYPESTR[dtype]
    if lib.mori_runtime_platform().decode() == "host":
        return torch.frombuffer((ctypes.c_char * (count * size)).from_address(address), dtype=getattr(torch, dtype))
    return torch.as_tensor(_CudaArray(address, count, typestr))
