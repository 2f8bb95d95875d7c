# SPDX-License-Identifier: MIT
"""Loads mori's C library (libmori.so, through ctypes) once and declares the
signatures of the calls the package makes. Imports nothing heavy: the
unique-ID path works without torch."""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(_HERE)  # mori/, where the wheel puts libmori.so
_NAME = "libmori.so"


def _find():
    forced = os.environ.get("MORI_LIB")
    if forced:
        return forced
    path = os.path.join(_PACKAGE, _NAME)
    if os.path.exists(path):
        return path
    raise ImportError(
        f"mori.shmem: {_NAME} not found in {_PACKAGE}; install the mori wheel (`bazel build //:wheel`), "
        "or build the library with `bazel build //:libmori.so` and set MORI_LIB to its path"
    )


PATH = _find()
try:
    # The torch backend links the same file: whichever loads it first, a
    # process holds one copy (one heap, one registry).
    lib = ctypes.CDLL(PATH)
except OSError as e:
    raise ImportError(f"mori.shmem: cannot load {PATH}: {e}") from e

_c_int, _c_uint, _c_size, _c_void_p = ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p
UNIQUEID_BYTES = 128


class UniqueId(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint8 * UNIQUEID_BYTES)]


class AddressMap(ctypes.Structure):
    """mori_address_map_t (mori/device/address_map.h), 40 bytes."""
    _fields_ = [
        ("peer_bases", ctypes.c_void_p),
        ("allocation_base", ctypes.c_uint64),
        ("allocation_bytes", ctypes.c_uint64),
        ("local_rank", ctypes.c_int32),
        ("world_size", ctypes.c_int32),
        ("capabilities", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


assert ctypes.sizeof(AddressMap) == 40, "mori_address_map_t is 40 bytes"

_SIGNATURES = {
    # name: (restype, argtypes)
    "mori_strerror": (ctypes.c_char_p, [_c_int]),
    "mori_err_name": (ctypes.c_char_p, [_c_int]),
    "mori_last_error": (ctypes.c_char_p, []),
    "mori_shmem_use_local_plugins": (_c_int, []),
    "shmem_get_unique_id": (_c_int, [ctypes.POINTER(UniqueId)]),
    "mori_shmem_uniqueid_from_bytes": (_c_int, [ctypes.c_char_p, _c_size, ctypes.POINTER(UniqueId)]),
    "shmem_init_attr": (_c_int, [_c_uint, _c_int, _c_int, _c_void_p]),
    "shmem_finalize": (_c_int, []),
    "shmem_mype": (_c_int, []),
    "shmem_npes": (_c_int, []),
    "shmem_num_qp_per_pe": (_c_int, []),
    "shmem_malloc": (_c_int, [_c_size, ctypes.POINTER(_c_void_p)]),
    "shmem_malloc_align": (_c_int, [_c_size, _c_size, ctypes.POINTER(_c_void_p)]),
    "shmem_ext_malloc_with_flags": (_c_int, [_c_size, _c_uint, ctypes.POINTER(_c_void_p)]),
    "shmem_free": (_c_int, [_c_void_p]),
    "shmem_buffer_register": (_c_int, [_c_void_p, _c_size]),
    "shmem_buffer_deregister": (_c_int, [_c_void_p, _c_size]),
    "shmem_ptr_p2p": (_c_void_p, [_c_void_p, _c_int, _c_int]),
    "shmem_barrier_all": (_c_int, []),
    "shmem_module_init": (_c_int, [_c_void_p]),
    "mori_shmem_address_map": (_c_int, [_c_void_p, ctypes.POINTER(AddressMap)]),
    "mori_shmem_translate": (_c_int, [_c_void_p, _c_int, ctypes.POINTER(_c_void_p)]),
    "mori_shmem_comm": (_c_int, [ctypes.POINTER(_c_void_p)]),
    "mori_comm_size": (_c_int, [_c_void_p]),
    "mori_comm_locality": (_c_int, [_c_void_p, ctypes.POINTER(ctypes.c_uint32), _c_int]),
    "mori_comm_locality_dev": (_c_int, [_c_void_p, ctypes.POINTER(_c_void_p)]),
    "mori_runtime_platform": (ctypes.c_char_p, []),
}

for _name, (_res, _args) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args
