# SPDX-License-Identifier: MIT
"""Address maps of shmem allocations (mori_shmem_address_map): the peer-base
table of the allocation holding a pointer, for kernels that translate
remote = peer_bases[pe] + (ptr - allocation_base) themselves (mori.triton,
Iris style). The same fields as mori.address_map.AddressMap; the table is
given as its device address and a host tuple, and as a torch tensor only
when asked (torch is not needed otherwise)."""
import ctypes
from dataclasses import dataclass

from ._lib import AddressMap as _CMap
from ._lib import lib
from .api import _check

_EUNREACHABLE = -1003  # MORI_EUNREACHABLE (mori/error.h)


@dataclass(frozen=True)
class ShmemAddressMap:
    peer_bases_address: int  # device address of world_size uint64, valid until shmem_free
    host_bases: tuple  # the same table on the host; 0: not load/store reachable
    local_rank: int
    world_size: int
    allocation_base: int  # == host_bases[local_rank]
    allocation_bytes: int
    capabilities: int  # mori_cap bits every reachable PE offers

    @property
    def peer_bases(self):
        """The device table as an int64 torch tensor sharing its memory (the
        uint64 bits; needs torch)."""
        from .device_view import tensor_over

        return tensor_over(self.peer_bases_address, self.world_size, "int64")

    def translate(self, ptr, pe):
        """ptr (inside this allocation on this PE) as seen on `pe`:
        ValueError outside the allocation, ShmemError for a PE out of range
        or not reachable by load/store, or an allocation since freed."""
        if not 0 <= ptr - self.allocation_base < self.allocation_bytes:
            raise ValueError(f"mori.shmem address map: {ptr:#x} is outside the allocation "
                             f"[{self.allocation_base:#x}, +{self.allocation_bytes}) on PE {self.local_rank}")
        return shmem_translate(ptr, pe)


def shmem_address_map(ptr):
    """The map of the shmem allocation holding `ptr` (any address inside it).
    Local; ShmemError for a pointer outside every live allocation."""
    m = _CMap()
    _check("shmem_address_map", lib.mori_shmem_address_map(ptr, ctypes.byref(m)))
    # The host table, through ptr itself (a registered buffer need not
    # start where its mapping does); a PE not reached by load/store has 0.
    bases = []
    for pe in range(m.world_size):
        out = ctypes.c_void_p()
        rc = lib.mori_shmem_translate(ptr, pe, ctypes.byref(out))
        if rc == _EUNREACHABLE:
            bases.append(0)
        else:
            _check("shmem_address_map", rc)
            bases.append(out.value - (ptr - m.allocation_base))
    return ShmemAddressMap(peer_bases_address=m.peer_bases or 0, host_bases=tuple(bases), local_rank=m.local_rank,
                           world_size=m.world_size, allocation_base=m.allocation_base,
                           allocation_bytes=m.allocation_bytes, capabilities=m.capabilities)


def shmem_translate(ptr, pe):
    """ptr (inside a live shmem allocation) as seen on `pe`; ShmemError says
    why when it cannot be (freed, PE out of range, not reachable)."""
    out = ctypes.c_void_p()
    _check("shmem_translate", lib.mori_shmem_translate(ptr, pe, ctypes.byref(out)))
    return out.value
