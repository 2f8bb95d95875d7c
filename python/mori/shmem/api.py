# SPDX-License-Identifier: MIT
"""The MORI Shmem API of the Shmem Guide, in Python, over the C library.

Addresses are ints. A failed call raises ShmemError (its `code` is the
negative MORI_E* value, its message says which PE and which sizes), except
shmem_ptr_p2p, which answers 0 for "not reachable by load/store or not a
valid pointer", as the guide says.

Every integer is checked against the C type it is passed as before the
call (ctypes would silently wrap it: 2**64 bytes would be 0 bytes, PE 2**32
would be PE 0): sizes and alignments fit size_t, PEs and ranks int, flags
unsigned int, addresses and handles a pointer (0 to 2**64 - 1). A value out
of range is a ValueError, a value that is not an int (bool included) a
TypeError, each naming the call, the argument and the value. In a
collective call (shmem_malloc*, shmem_free, shmem_buffer_register) a PE
whose arguments are refused still takes its part of the call, failing it
(mori_shmem_refused), so every PE's call fails at once naming that PE and
the value, and no PE is left paired with that PE's next call."""
import ctypes
import operator

from mori._lib import UNIQUEID_BYTES, CallError, UniqueId, lib

MORI_SHMEM_INIT_WITH_MPI_COMM = 0
MORI_SHMEM_INIT_WITH_UNIQUEID = 1

MORI_SHMEM_MALLOC_DEFAULT = 0
MORI_SHMEM_MALLOC_UNCACHED = 1 << 0
MORI_SHMEM_MALLOC_CACHED = 1 << 1


class ShmemError(CallError):
    """A MORI Shmem call failed: `code` (negative), `name` (MORI_E...), and
    the message the library left (which PE, which sizes)."""


def _int_range(ctype, signed):
    bits = 8 * ctypes.sizeof(ctype)
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


# What an argument is passed to C as: (the name in messages, lowest, highest).
_SIZE = ("size_t", *_int_range(ctypes.c_size_t, False))
_INT = ("int", *_int_range(ctypes.c_int, True))
_UINT = ("unsigned int", *_int_range(ctypes.c_uint, False))
_POINTER = ("a pointer", *_int_range(ctypes.c_void_p, False))


def _int(call, name, value, ctype):
    """`value` as an int that fits `ctype` (one of the tuples above), or
    TypeError / ValueError naming the call, the argument and the value."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{call}: {name} must be an int, not {type(value).__name__} ({value!r})")
    value = operator.index(value)
    what, low, high = ctype
    if not low <= value <= high:
        raise ValueError(f"{call}: {name} {value} is out of range for {what} ({low} to {high})")
    return value


def _collective_args(call, convert):
    """The arguments of the collective `call`, converted by `convert`; when
    that raises, this PE's part of the call still runs, failed with the
    reason, before the exception propagates (see the module's text)."""
    try:
        return convert()
    except Exception as e:
        lib.mori_shmem_refused(call.encode(), str(e).encode(errors="replace")[:400])
        raise


def _check(call, rc):
    if rc < 0:
        raise ShmemError(call, rc)
    return rc


_plugins_listed = False
# Successful shmem_init_attr calls: what a view of an allocation checks it
# was made under (after shmem_finalize and a new init, a new allocation can
# sit where an old one did, its table too).
_init_generation = 0


def _list_plugins():
    # Every plug-in libmori.so holds: the single-node set, and the rdma
    # transport marked optional, so that it opens a NIC only when some PE is
    # on another node (libibverbs is loaded then, not before).
    global _plugins_listed
    if not _plugins_listed:
        _check("mori_shmem_use_all_plugins", lib.mori_shmem_use_all_plugins())
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
    communicator (Open MPI) or its handle. rank and world_size are ints of
    C's int range (the library checks 0 <= rank < world_size)."""
    flags = _int("shmem_init_attr", "flags", flags, _UINT)
    rank = _int("shmem_init_attr", "rank", rank, _INT)
    world_size = _int("shmem_init_attr", "world_size", world_size, _INT)
    if flags == MORI_SHMEM_INIT_WITH_MPI_COMM:  # checked before anything starts, as the others
        comm = _int("shmem_init_attr", "arg (the MPI_Comm handle)", _mpi_comm_handle(arg), _POINTER)
    _list_plugins()
    if flags == MORI_SHMEM_INIT_WITH_UNIQUEID:
        if not isinstance(arg, (bytes, bytearray, memoryview)):
            raise TypeError(f"shmem_init_attr: the unique ID is bytes ({UNIQUEID_BYTES} of them), not {type(arg).__name__}")
        uid = _unique_id(arg)
        rc = lib.shmem_init_attr(flags, rank, world_size, ctypes.cast(ctypes.byref(uid), ctypes.c_void_p))
    elif flags == MORI_SHMEM_INIT_WITH_MPI_COMM:
        handle = ctypes.c_void_p(comm)
        rc = lib.shmem_init_attr(flags, rank, world_size, ctypes.cast(ctypes.byref(handle), ctypes.c_void_p))
    else:
        rc = lib.shmem_init_attr(flags, rank, world_size, None)
    _check("shmem_init_attr", rc)
    global _init_generation
    _init_generation += 1


def shmem_torch_process_group_init(group_name):
    """Initialises from a torch process group registered under `group_name`
    (torch._C._distributed_c10d._register_process_group): the group's rank 0
    makes a unique ID and broadcasts it over the group."""
    import torch.distributed as dist  # only this path needs torch
    from torch._C._distributed_c10d import _resolve_process_group

    if not isinstance(group_name, str):
        raise TypeError(f"shmem_torch_process_group_init: group_name must be the group's name (str; "
                        f"group.group_name), not {type(group_name).__name__}")
    group = _resolve_process_group(group_name)
    rank, size = group.rank(), group.size()
    # Rank 0 broadcasts the ID or why it has none: the others must not stay
    # in the broadcast and pair it with rank 0's next collective.
    box = [None]
    if rank == 0:
        try:
            box[0] = shmem_get_unique_id()
        except Exception as e:
            box[0] = RuntimeError(f"{type(e).__name__}: {e}")
            dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0), group=group)
            raise
    dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0), group=group)
    if isinstance(box[0], Exception):
        raise RuntimeError(f"shmem_torch_process_group_init on group rank {rank}: group rank 0 could not make the "
                           f"unique ID: {box[0]}")
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


def _address(call, name, ptr):
    """An address for C: None stays NULL, an int must fit a pointer."""
    return None if ptr is None else _int(call, name, ptr, _POINTER) or None


def shmem_malloc(size):
    """Collective: `size` bytes at the same heap offset on every PE; the address."""
    size = _collective_args("shmem_malloc", lambda: _int("shmem_malloc", "size", size, _SIZE))
    return _alloc("shmem_malloc", lib.shmem_malloc, size)


def shmem_malloc_align(alignment, size):
    alignment, size = _collective_args("shmem_malloc_align", lambda: (
        _int("shmem_malloc_align", "alignment", alignment, _SIZE), _int("shmem_malloc_align", "size", size, _SIZE)))
    return _alloc("shmem_malloc_align", lib.shmem_malloc_align, alignment, size)


def shmem_ext_malloc_with_flags(size, flags):
    size, flags = _collective_args("shmem_ext_malloc_with_flags", lambda: (
        _int("shmem_ext_malloc_with_flags", "size", size, _SIZE),
        _int("shmem_ext_malloc_with_flags", "flags", flags, _UINT)))
    return _alloc("shmem_ext_malloc_with_flags", lib.shmem_ext_malloc_with_flags, size, flags)


def shmem_free(ptr):
    """Collective."""
    ptr = _collective_args("shmem_free", lambda: _address("shmem_free", "ptr", ptr))
    _check("shmem_free", lib.shmem_free(ptr))


def shmem_buffer_register(ptr, size):
    """Collective; 0 on success."""
    ptr, size = _collective_args("shmem_buffer_register", lambda: (
        _address("shmem_buffer_register", "ptr", ptr), _int("shmem_buffer_register", "size", size, _SIZE)))
    return _check("shmem_buffer_register", lib.shmem_buffer_register(ptr, size))


def shmem_buffer_deregister(ptr, size):
    """0 on success."""
    ptr = _address("shmem_buffer_deregister", "ptr", ptr)
    size = _int("shmem_buffer_deregister", "size", size, _SIZE)
    return _check("shmem_buffer_deregister", lib.shmem_buffer_deregister(ptr, size))


def shmem_ptr_p2p(ptr, my_pe, dest_pe):
    """The load/store address of `ptr` on dest_pe, or 0 (another node,
    MORI_DISABLE_P2P, a PE out of range, or not a valid pointer). An
    argument that is no C value at all (not an int, or outside a pointer's
    or C int's range) raises, as everywhere in this module."""
    ptr = _address("shmem_ptr_p2p", "ptr", ptr)
    my_pe = _int("shmem_ptr_p2p", "my_pe", my_pe, _INT)
    dest_pe = _int("shmem_ptr_p2p", "dest_pe", dest_pe, _INT)
    return lib.shmem_ptr_p2p(ptr, my_pe, dest_pe) or 0


def shmem_barrier_all():
    _check("shmem_barrier_all", lib.shmem_barrier_all())


def shmem_module_init(module_handle):
    """Copies the device state into the module's globalGpuStates (a
    CUmodule / hipModule_t handle as an int, e.g. a Triton kernel's)."""
    module_handle = _address("shmem_module_init", "module_handle", module_handle)
    _check("shmem_module_init", lib.shmem_module_init(module_handle))
