# SPDX-License-Identifier: MIT
"""Locality of the PEs (mori/device/locality.h): per peer its class and what
reaches it, one uint32 word each, the same layout on the host and in the
device table kernels read. The decoding here is shared with the torch side
(mori.address_map.locality)."""
import ctypes
from dataclasses import dataclass, field

from mori._lib import lib

# Word layout: bits 0-1 the class, bits 8-11 the flags.
PEER_SELF, PEER_LSA, PEER_NODE, PEER_REMOTE = 0, 1, 2, 3
CLASS_NAMES = {PEER_SELF: "self", PEER_LSA: "lsa", PEER_NODE: "node", PEER_REMOTE: "remote"}
CLASS_MASK = 0x3
DIRECT = 1 << 8
SYSTEM_ATOMICS = 1 << 9
RDMA = 1 << 10
COPY_ENGINE = 1 << 11


@dataclass(frozen=True)
class PeerLocality:
    rank: int
    peer_class: str  # "self", "lsa" (same node, load/store), "node" (same node, no load/store), "remote"
    direct_access: bool
    system_atomics: bool
    rdma: bool
    copy_engine: bool
    word: int  # the raw word, as kernels read it


def decode(words):
    """PeerLocality records of a list of words (index = rank)."""
    return tuple(
        PeerLocality(rank=r, peer_class=CLASS_NAMES[w & CLASS_MASK], direct_access=bool(w & DIRECT),
                     system_atomics=bool(w & SYSTEM_ATOMICS), rdma=bool(w & RDMA), copy_engine=bool(w & COPY_ENGINE),
                     word=w) for r, w in enumerate(words))


@dataclass(frozen=True)
class ShmemLocality:
    peers: tuple  # PeerLocality per PE
    table_address: int  # device address of npes uint32 words, valid until shmem_finalize
    # Which init it is of: the comm's address (with the table's and the PE
    # count; a new init may reuse any one of them, hardly all three).
    _comm: int = field(default=0, repr=False, compare=False)
    # The shmem_init_attr it is of (mori.shmem.api's count of inits): a new
    # init can reuse all three above (malloc hands the old addresses back).
    _generation: int = field(default=0, repr=False, compare=False)

    @property
    def table(self):
        """The device table as an int32 torch tensor sharing its memory
        (needs torch). ShmemError after shmem_finalize, and for a locality
        of an earlier init: the table it names was released (a tensor taken
        before stays a view of released memory: do not keep it past
        shmem_finalize)."""
        from . import api

        if (_current_state("ShmemLocality.table") != (self._comm, self.table_address, len(self.peers))
                or self._generation != api._init_generation):
            from .api import ShmemError

            raise ShmemError("ShmemLocality.table", -22, "MORI_EINVAL",
                             "this locality is of an earlier shmem_init_attr: its table was released at "
                             "shmem_finalize; call shmem_locality() again")
        from .device_view import tensor_over

        return tensor_over(self.table_address, len(self.peers), "int32")


def _current_state(call):
    """(comm address, locality table address, PE count) of shmem as it is
    now (ShmemError naming `call` when shmem is not initialised)."""
    from .api import _check

    comm = ctypes.c_void_p()
    _check(call, lib.mori_shmem_comm(ctypes.byref(comm)))
    table = ctypes.c_void_p()
    _check(call, lib.mori_comm_locality_dev(comm, ctypes.byref(table)))
    return comm.value, table.value, lib.mori_comm_size(comm)


def shmem_locality():
    """The locality of every PE as seen from this one (local, no
    communication)."""
    from .api import _check

    comm = ctypes.c_void_p()
    _check("shmem_locality", lib.mori_shmem_comm(ctypes.byref(comm)))
    n = lib.mori_comm_size(comm)
    words = (ctypes.c_uint32 * n)()
    _check("shmem_locality", lib.mori_comm_locality(comm, words, n))
    table = ctypes.c_void_p()
    _check("shmem_locality", lib.mori_comm_locality_dev(comm, ctypes.byref(table)))
    from . import api

    return ShmemLocality(peers=decode(list(words)), table_address=table.value, _comm=comm.value,
                         _generation=api._init_generation)
