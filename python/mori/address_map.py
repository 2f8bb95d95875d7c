# SPDX-License-Identifier: MIT
"""Address maps: what a kernel library needs to reach one allocation on every
rank (Iris style: remote = peer_bases[rank] + (ptr - allocation_base)),
independent of the provider that allocated it. Two sources, one shape:

Symmetric tensors of torch (any symmetric-memory backend whose rendezvous
handle publishes buffer_ptrs: MORI, the default, NVSHMEM):

    import mori.address_map as am
    t = symm_mem.empty(n, device=dev)
    m = am.address_map(t, group)          # rendezvous if needed
    m.translate(t[100:].data_ptr(), peer)  # host-side, checked
    # in Triton: mori.triton.translate(ptr, peer, m.peer_bases, m.local_rank)

    v = am.contiguous_view(t, group)      # [world, n]: v[p] is rank p's t
    loc = am.locality(t, group)           # per-peer records, loc.table on the GPU

MORI Shmem allocations (also exported by mori.shmem; no torch needed):

    m = am.shmem_address_map(ptr)         # ShmemAddressMap, local
    am.shmem_translate(ptr, pe)

The table is per allocation: a view translates against its allocation's
root (the storage), and a pointer into another allocation needs that
allocation's map. A tensor's map is read off torch's rendezvous handle,
whose buffer_ptrs is exactly the table; the invariant
peer_bases[local_rank] == allocation_base is checked, not assumed.
contiguous_view, locality and adopt need the MORI backend (they read mori's
window and comm). torch is imported only by the functions over tensors, so
mori.shmem can use this module without it."""
import ctypes
import operator
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module does not import torch
    import torch

# mori_cap bits (mori/plugin.h).
CAP_LOAD_STORE = 1 << 0
CAP_COPY_ENGINE = 1 << 1
CAP_RDMA = 1 << 2
CAP_REMOTE_ATOMICS = 1 << 3

# The CAP_* bits every peer a tensor's table reaches offers, as the C maps
# count them (an unreachable peer, 0 in the table, takes nothing away, and
# this rank's own entry is always there): the peers a torch backend maps are
# GPUs of this node with peer access, reached by load/store and system-scope
# atomics.
_TABLE_CAPABILITIES = CAP_LOAD_STORE | CAP_REMOTE_ATOMICS

_EUNREACHABLE = -1003  # MORI_EUNREACHABLE (mori/error.h)


def _integer(value, what, name, kind):
    """value as an int: TypeError naming `what` and `name` for anything that
    is no integer (None, a float, a bool, which would pass as 0 or 1)."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{what}: {name} must be {kind}, not {type(value).__name__}")
    return operator.index(value)


@dataclass(frozen=True)
class _Map:
    """The fields every address map has."""
    host_bases: tuple  # the peer table on the host; 0: not load/store reachable
    local_rank: int
    world_size: int
    allocation_base: int  # == host_bases[local_rank]
    allocation_bytes: int
    capabilities: int  # CAP_* bits every reachable peer offers

    @staticmethod
    def _check_rank(rank, what, rank_word, world_size):
        rank = _integer(rank, what, rank_word.lower(), "an integer")
        if not 0 <= rank < world_size:
            raise ValueError(f"{what}: {rank_word.lower()} {rank} is out of range (world of {world_size})")
        return rank

    def _offset(self, ptr, what, rank_word):
        """ptr's offset in the allocation; ValueError outside it, TypeError
        for a ptr that is no integer address (None, a float)."""
        ptr = _integer(ptr, what, "ptr", "an integer address")
        off = ptr - self.allocation_base
        if not 0 <= off < self.allocation_bytes:
            raise ValueError(f"{what}: {ptr:#x} is outside the allocation [{self.allocation_base:#x}, "
                             f"+{self.allocation_bytes}) on {rank_word} {self.local_rank}")
        return off


@dataclass(frozen=True)
class AddressMap(_Map):
    """The map of a symmetric tensor's allocation."""
    peer_bases: "torch.Tensor"  # int64[world_size] on the tensor's device (the uint64 bits); 0: not reachable

    def translate(self, ptr, rank):
        """ptr (an address inside the allocation on this rank) as seen on
        `rank`; ValueError naming why when it cannot be."""
        rank = self._check_rank(rank, "mori address map", "rank", self.world_size)
        off = self._offset(ptr, "mori address map", "rank")
        base = self.host_bases[rank]
        if not base:
            raise ValueError(f"mori address map: rank {rank} is not load/store reachable from rank {self.local_rank}")
        return base + off


def address_map(tensor, group=None):
    """The address map of the allocation behind `tensor` (a symmetric tensor:
    symm_mem.empty or the MORI MemPool). Rendezvous is collective: call it
    on every rank of the group, like symm_mem.rendezvous."""
    import torch
    import torch.distributed._symmetric_memory as symm_mem

    name = _group_name(group)
    storage = tensor.untyped_storage()
    root = storage.data_ptr()
    hdl = symm_mem.rendezvous(tensor, name)
    if hdl is None:
        raise ValueError("mori address map: the tensor is not symmetric memory of the current backend "
                         "(allocate it with symm_mem.empty)")
    bases = tuple(int(p) for p in hdl.buffer_ptrs)
    rank, world = hdl.rank, hdl.world_size
    if bases[rank] != root:
        raise ValueError(f"mori address map: the handle's table says {bases[rank]:#x} for rank {rank}, the tensor's "
                         f"allocation starts at {root:#x}: the handle does not describe this allocation")
    table = torch.tensor([b - (1 << 64) if b >= 1 << 63 else b for b in bases], dtype=torch.int64,
                         device=tensor.device)
    return AddressMap(peer_bases=table, local_rank=rank, world_size=world, allocation_base=root,
                      allocation_bytes=storage.nbytes(), capabilities=_TABLE_CAPABILITIES, host_bases=bases)


def _group_name(group):
    import torch.distributed as dist

    group = group if group is not None else dist.group.WORLD
    return group if isinstance(group, str) else group.group_name


def _mori_window(tensor, group, what):
    """Rendezvous (collective) of a MORI-backend tensor; the group's name."""
    import torch.distributed._symmetric_memory as symm_mem

    backend = symm_mem.get_backend(tensor.device)
    if backend != "MORI":
        raise ValueError(f"mori {what}: the symmetric-memory backend of {tensor.device} is {backend!r}, not 'MORI' "
                         "(import mori.allocator and symm_mem.set_backend('MORI') before allocating)")
    name = _group_name(group)
    if symm_mem.rendezvous(tensor, name) is None:
        raise ValueError(f"mori {what}: the tensor is not symmetric memory (allocate it with symm_mem.empty)")
    import mori.allocator  # noqa: F401  (loads the library that registers torch.ops.mori)

    return name


def contiguous_view(tensor, group=None):
    """Every rank's copy of `tensor` as one tensor of shape
    [world_size, *tensor.shape] over the window's flat span: row p is rank
    p's memory, written and read by plain loads and stores (nvFuser's
    contiguous view). Collective (it rendezvouses, like address_map); the
    view keeps the allocation alive. Exists only when every rank of the
    group is load/store reachable (one node) and the ranks' allocations
    sit at the same place of their mappings (MORI_SHMEM_MODE=isolation, an
    allocation above a heap chunk, or heap carves at equal offsets);
    otherwise a RuntimeError says which, naming the rank and size. Also
    refused: a backend other than MORI (ValueError), a span whose stride is
    not a multiple of the element size."""
    import torch

    name = _mori_window(tensor, group, "contiguous view")
    return torch.ops.mori.contiguous_view(tensor, name)


@dataclass(frozen=True)
class Locality:
    peers: tuple  # mori.shmem.PeerLocality per rank of the group
    table: "torch.Tensor"  # int32[world_size] on the tensor's GPU: the uint32 words kernels read (mori/device/locality.h)


def locality(tensor, group=None):
    """How this rank reaches each rank of the group (class: self, lsa,
    node, remote; direct access, system-scope atomics, RDMA, copy engine),
    separate from the address map. Collective (it rendezvouses); the table
    is the comm's and lives as long as the group."""
    import torch

    from mori.shmem.locality import decode

    name = _mori_window(tensor, group, "locality")
    table = torch.ops.mori.locality(tensor, name)
    return Locality(peers=decode([w & 0xFFFFFFFF for w in table.tolist()]), table=table)


class _Adoption:
    """One adoption (adopt()): ends on release(), or when no map of it is
    left (each map, copies too, holds this object, and the finalizer holds
    the tensor). A handle, not a value: copying a map shares it, and it is
    not pickled (another process has no adoption)."""

    def __init__(self, release, *args):
        self._end = weakref.finalize(self, release, *args)

    @property
    def alive(self):
        return self._end.alive

    def end(self):
        self._end()

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise TypeError("mori address map: an adoption belongs to its process and cannot be pickled; "
                        "adopt the tensor in the other process")


@dataclass(frozen=True, eq=False, repr=False)
class AdoptedMap(AddressMap):
    """The address map of a tensor mori did not allocate (adopt()): holds the
    tensor, so its memory stays alive while peers can reach it. release()
    (local) ends the adoption, as does the collection of its last map (a
    dataclasses.replace or copy.copy of a map is a map of the same
    adoption); then translate and peer_bases raise ValueError, as the peers'
    memory may be gone. A handle: maps compare and hash by identity."""
    # The adoption (a field, so a copy holds it too); None: a map no
    # adoption stands behind, never usable.
    _release: object = field(default=None)

    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def release(self):
        if self._release is not None:
            self._release.end()

    @property
    def released(self):
        return self._release is None or not self._release.alive

    def _live(self, what):
        if self.released:
            raise ValueError(f"mori address map: {what}: the adoption of the storage at {self.allocation_base:#x} was "
                             "released; adopt the tensor again")

    # The dataclass field of AddressMap, behind a check: a kernel given the
    # table after release would reach memory the peers may have freed.
    @property
    def peer_bases(self):
        self._live("peer_bases")
        return self.__dict__["_peer_bases"]

    @peer_bases.setter
    def peer_bases(self, table):  # only the dataclass's __init__ sets it
        self.__dict__["_peer_bases"] = table

    def translate(self, ptr, rank):
        """As AddressMap.translate; ValueError once the adoption was released."""
        self._live("translate")
        return super().translate(ptr, rank)

    def __repr__(self):
        state = "released" if self.released else "live"
        return (f"AdoptedMap({state}, local_rank={self.local_rank}, world_size={self.world_size}, "
                f"allocation_base={self.allocation_base:#x}, allocation_bytes={self.allocation_bytes})")


def adopt(tensor, group=None):
    """Makes a tensor that mori did not allocate reachable by every rank of
    the group without a copy, and returns its address map (an AdoptedMap).
    The tensor may come from torch's caching allocator (shared through the
    runtime's IPC handle of the cudaMalloc block that holds it, at whatever
    offset the tensor sits there) or from another symmetric-memory backend
    (torch's default one: its virtual-memory mapping is shared as is). The
    whole storage is adopted, so views translate against its root; every
    rank's storage must have the same size. Collective over the group, like
    a rendezvous; errors (sizes that differ, memory that cannot be shared)
    are a RuntimeError on every rank naming the cause. The peer table has
    world_size entries; 0 where a rank is not load/store reachable."""
    import torch

    import mori.allocator  # noqa: F401  (loads the library that registers torch.ops.mori)
    import torch.distributed as dist

    from torch.distributed.distributed_c10d import _resolve_process_group

    name = _group_name(group)
    table = torch.ops.mori.adopt(tensor, name)
    # The adoption holds the tensor (its memory must outlive the adoption)
    # and releases once, on release() or when its last map is collected. It
    # is made at once: whatever fails from here on releases it, so the
    # storage is not left adopted with no map to release it (a later adopt
    # of it would be refused as adopted already).
    adoption = _Adoption(torch.ops.mori.release, tensor, name)
    try:
        bases = tuple(int(b) & 0xFFFFFFFFFFFFFFFF for b in table.tolist())
        storage = tensor.untyped_storage()
        root = storage.data_ptr()
        rank = dist.get_rank(_resolve_process_group(name))
        if bases[rank] != root:
            raise RuntimeError(f"mori adopt: the table says {bases[rank]:#x} for rank {rank}, the storage starts at {root:#x}")
        return AdoptedMap(peer_bases=table, local_rank=rank, world_size=len(bases), allocation_base=root,
                          allocation_bytes=storage.nbytes(), capabilities=_TABLE_CAPABILITIES, host_bases=bases,
                          _release=adoption)
    except BaseException:
        adoption.end()
        raise


@dataclass(frozen=True)
class ShmemAddressMap(_Map):
    """The map of a MORI Shmem allocation (mori_shmem_address_map): the
    table as its device address and the host tuple, and as a torch tensor
    only when asked (torch is not needed otherwise)."""
    peer_bases_address: int  # device address of world_size uint64, valid until shmem_free
    # What peer_bases checks the allocation by: the shmem_init_attr it was
    # made under, and an address inside it. Fields, so that a copy
    # (dataclasses.replace) is checked as its original is.
    _generation: int = field(default=-1, repr=False, compare=False)
    _ptr: int = field(default=0, repr=False, compare=False)

    @property
    def peer_bases(self):
        """The device table as an int64 torch tensor sharing its memory (the
        uint64 bits; needs torch). ShmemError once the allocation is gone
        (shmem_free, shmem_finalize): the table was released with it, and
        its memory may hold another allocation's table by then (a tensor
        taken before stays a view of it: do not keep it past shmem_free)."""
        from mori._lib import AddressMap as CMap
        from mori._lib import lib
        from mori.shmem import api
        from mori.shmem.device_view import tensor_over

        live = CMap()
        gone = (self._generation != api._init_generation
                or lib.mori_shmem_address_map(self._ptr or self.allocation_base, ctypes.byref(live)) < 0
                or (live.peer_bases or 0) != self.peer_bases_address or live.allocation_base != self.allocation_base)
        if gone:
            raise api.ShmemError("ShmemAddressMap.peer_bases", -22, "MORI_EINVAL",
                                 f"the allocation at {self.allocation_base:#x} this map is of was freed (shmem_free or "
                                 f"shmem_finalize), and its table with it: take the map of a live allocation")
        return tensor_over(self.peer_bases_address, self.world_size, "int64")

    def translate(self, ptr, pe):
        """ptr (inside this allocation on this PE) as seen on `pe`:
        ValueError outside the allocation, ShmemError for a PE out of range
        or not reachable by load/store, or an allocation since freed (a new
        allocation made since at the same place is translated as itself:
        a map lives as long as its allocation)."""
        self._offset(ptr, "mori.shmem address map", "PE")
        return shmem_translate(ptr, pe)


def shmem_address_map(ptr):
    """The map of the shmem allocation holding `ptr` (any address inside it).
    Local; ShmemError for a pointer outside every live allocation."""
    from mori._lib import AddressMap as CMap
    from mori._lib import lib
    from mori.shmem.api import _POINTER, _check, _int

    ptr = _int("shmem_address_map", "ptr", ptr, _POINTER)  # ctypes would wrap it
    m = CMap()
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
    from mori.shmem import api

    return ShmemAddressMap(peer_bases_address=m.peer_bases or 0, host_bases=tuple(bases), local_rank=m.local_rank,
                           world_size=m.world_size, allocation_base=m.allocation_base,
                           allocation_bytes=m.allocation_bytes, capabilities=m.capabilities,
                           _generation=api._init_generation, _ptr=ptr)


def shmem_translate(ptr, pe):
    """ptr (inside a live shmem allocation) as seen on `pe`; ShmemError says
    why when it cannot be (freed, PE out of range, not reachable)."""
    from mori._lib import lib
    from mori.shmem.api import _INT, _POINTER, _check, _int

    ptr = _int("shmem_translate", "ptr", ptr, _POINTER)  # ctypes would wrap both: PE 2**32 is PE 0
    pe = _int("shmem_translate", "pe", pe, _INT)
    out = ctypes.c_void_p()
    _check("shmem_translate", lib.mori_shmem_translate(ptr, pe, ctypes.byref(out)))
    return out.value
