# SPDX-License-Identifier: MIT
"""mori.shmem: the MORI Shmem API (OpenSHMEM-style symmetric memory) of the
Shmem Guide. `from mori import shmem`, `import mori.shmem`, or the guide's
`import mori` then `mori.shmem.X` (imported on first use); importing it
does not import torch (only a tensor view of a device table asks for it).
Calls go to libmori.so, the library the torch backend uses too. Integers
are checked against their C types before a call (see mori.shmem.api)."""
from mori.address_map import ShmemAddressMap, shmem_address_map, shmem_translate
from .api import (
    MORI_SHMEM_INIT_WITH_MPI_COMM,
    MORI_SHMEM_INIT_WITH_UNIQUEID,
    MORI_SHMEM_MALLOC_CACHED,
    MORI_SHMEM_MALLOC_DEFAULT,
    MORI_SHMEM_MALLOC_UNCACHED,
    ShmemError,
    shmem_barrier_all,
    shmem_buffer_deregister,
    shmem_buffer_register,
    shmem_ext_malloc_with_flags,
    shmem_finalize,
    shmem_free,
    shmem_get_unique_id,
    shmem_init_attr,
    shmem_malloc,
    shmem_malloc_align,
    shmem_module_init,
    shmem_mype,
    shmem_npes,
    shmem_num_qp_per_pe,
    shmem_ptr_p2p,
    shmem_torch_process_group_init,
)
from .locality import PeerLocality, ShmemLocality, shmem_locality

__all__ = [
    "PeerLocality",
    "ShmemAddressMap",
    "ShmemLocality",
    "shmem_address_map",
    "shmem_locality",
    "shmem_translate",
    "MORI_SHMEM_INIT_WITH_MPI_COMM",
    "MORI_SHMEM_INIT_WITH_UNIQUEID",
    "MORI_SHMEM_MALLOC_CACHED",
    "MORI_SHMEM_MALLOC_DEFAULT",
    "MORI_SHMEM_MALLOC_UNCACHED",
    "ShmemError",
    "shmem_barrier_all",
    "shmem_buffer_deregister",
    "shmem_buffer_register",
    "shmem_ext_malloc_with_flags",
    "shmem_finalize",
    "shmem_free",
    "shmem_get_unique_id",
    "shmem_init_attr",
    "shmem_malloc",
    "shmem_malloc_align",
    "shmem_module_init",
    "shmem_mype",
    "shmem_npes",
    "shmem_num_qp_per_pe",
    "shmem_ptr_p2p",
    "shmem_torch_process_group_init",
]
