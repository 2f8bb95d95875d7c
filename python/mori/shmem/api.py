# SPDX-License-Identifier: MIT
"""The MORI Shmem API of the Shmem Guide, in Python, over the C library.

Addresses are ints. A failed call raises ShmemError (its `code` is the
negative MORI_E* value, its message says which PE and which sizes), except
shmem_ptr_p2p, which answers 0 for "not reachable by load/store or not a
valid pointer", as the guide says."""
import ctypes

from mori._lib import UNIQUEID_BYTES, CallError, UniqueId, lib

MORI_SHMEM_INIT_WITH_MPI_COMM = 0
MORI_SHMEM_INIT_WITH_UNIQUEID = 1

MORI_SHMEM_MALLOC_DEFAULT = 0
MORI_SHMEM_MALLOC_UNCACHED = 1 << 0
MORI_SHMEM_MALLOC_CACHED = 1 << 1


class ShmemError(CallError):
    """A MORI Shmem call failed: `code` (negative), `name` (MORI_E...), and
    the message the library left (which PE, which sizes)."""


def _check(call, rc):
    if rc < 0:
        raise ShmemError(call, rc)
    return rc


_plugins_listed = False


def _list_plugins():
    # This library links the single-node plug-ins (p2p, fd and fabric handles).
    global _plugins_listed
    if not _plugins_listed:
        _check("mori_shmem_use_local_plugins", lib.mori_shmem_use_local_plugins())
        _plugins_listed = True


def shmem_get_unique_id():
    """128 bytes for every rank: rank 0's bootstrap address and a job token.
    Call it on rank 0 (it starts listening there) and hand the bytes out."""
    uid = UniqueId()
    _check("shmem_get_unique_id", lib.shmem_get_unique_id(ctypes.byref(uid)))
    return bytes(uid.bytes)


def _unique_id(data):
    data = bytes(data)
    uid = UniqueId()
    _check("shmem_init_attr", lib.mori_shmem_uniqueid_from_bytes(data, len(data), ctypes.byref(uid)))
    return uid


def _mpi_comm_handle(comm):
    """The MPI_Comm handle (Open MPI: a pointer) of an mpi4py communicator,
    or an int that already is one."""
    if isinstance(comm, int):
        return comm
    try:
        from mpi4py import MPI  # only when an MPI communicator is passed
    except ImportError as e:
        raise TypeError("shmem_init_attr: pass an mpi4py communicator or an MPI_Comm handle (int)") from e
    return MPI._handleof(comm)


def shmem_init_attr(flags, rank, world_size, arg):
    """Collective. flags MORI_SHMEM_INIT_WITH_UNIQUEID: arg is the 128 bytes
    of shmem_get_unique_id; MORI_SHMEM_INIT_WITH_MPI_COMM: arg is an mpi4py
    communicator (Open MPI) or its handle."""
    _list_plugins()
    if flags == MORI_SHMEM_INIT_WITH_UNIQUEID:
        if not isinstance(arg, (bytes, bytearray, memoryview)):
            raise TypeError(f"shmem_init_attr: the unique ID is bytes ({UNIQUEID_BYTES} of them), not {type(arg).__name__}")
        uid = _unique_id(arg)
        rc = lib.shmem_init_attr(flags, rank, world_size, ctypes.cast(ctypes.byref(uid), ctypes.c_void_p))
    elif flags == MORI_SHMEM_INIT_WITH_MPI_COMM:
        handle = ctypes.c_void_p(_mpi_comm_handle(arg))
        rc = lib.shmem_init_attr(flags, rank, world_size, ctypes.cast(ctypes.byref(handle), ctypes.c_void_p))
    else:
        rc = lib.shmem_init_attr(flags, rank, world_size, None)
    _check("shmem_init_attr", rc)


def shmem_torch_process_group_init(group_name):
    """Initialises from a torch process group registered under `group_name`
    (torch._C._distributed_c10d._register_process_group): the group's rank 0
    makes a unique ID and broadcasts it over the group."""
    import torch.distributed as dist  # only this path needs torch
    from torch._C._distributed_c10d import _resolve_process_group

    group = _resolve_process_group(group_name)
    rank, size = group.rank(), group.size()
    box = [shmem_get_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0), group=group)
    shmem_init_attr(MORI_SHMEM_INIT_WITH_UNIQUEID, rank, size, box[0])


def shmem_finalize():
    """Local and idempotent; shmem_init_attr works again afterwards."""
    _check("shmem_finalize", lib.shmem_finalize())


def shmem_mype():
    return _check("shmem_mype", lib.shmem_mype())


def shmem_npes():
    return _check("shmem_npes", lib.shmem_npes())


def shmem_num_qp_per_pe():
    return _check("shmem_num_qp_per_pe", lib.shmem_num_qp_per_pe())


def _alloc(call, fn, *args):
    out = ctypes.c_void_p()
    _check(call, fn(*args, ctypes.byref(out)))
    return out.value or 0


def shmem_malloc(size):
    """Collective: `size` bytes at the same heap offset on every PE; the address."""
    return _alloc("shmem_malloc", lib.shmem_malloc, size)


def shmem_malloc_align(alignment, size):
    return _alloc("shmem_malloc_align", lib.shmem_malloc_align, alignment, size)


def shmem_ext_malloc_with_flags(size, flags):
    return _alloc("shmem_ext_malloc_with_flags", lib.shmem_ext_malloc_with_flags, size, flags)


def shmem_free(ptr):
    """Collective."""
    _check("shmem_free", lib.shmem_free(ptr or None))


def shmem_buffer_register(ptr, size):
    """Collective; 0 on success."""
    return _check("shmem_buffer_register", lib.shmem_buffer_register(ptr, size))


def shmem_buffer_deregister(ptr, size):
    """0 on success."""
    return _check("shmem_buffer_deregister", lib.shmem_buffer_deregister(ptr, size))


def shmem_ptr_p2p(ptr, my_pe, dest_pe):
    """The load/store address of `ptr` on dest_pe, or 0 (another node,
    MORI_DISABLE_P2P, or not a valid pointer)."""
    return lib.shmem_ptr_p2p(ptr, my_pe, dest_pe) or 0


def shmem_barrier_all():
    _check("shmem_barrier_all", lib.shmem_barrier_all())


def shmem_module_init(module_handle):
    """Copies the device state into the module's globalGpuStates (a
    CUmodule / hipModule_t handle as an int, e.g. a Triton kernel's)."""
    _check("shmem_module_init", lib.shmem_module_init(module_handle))
