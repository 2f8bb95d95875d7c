# SPDX-License-Identifier: MIT
"""The copy-engine NIC for the cross-node tests. libmori.so holds no
copy-engine NIC (only programs that ask for it have one), so a test that
wants it loads libmori_ce_nic.so, named by MORI_TEST_CE_NIC_LIBRARY (which
tools/gpu.sh sets), and hands its provider to libmori.so before the
group's communicator is made. Without the variable the rdma transport uses
libibverbs and a NIC."""
import ctypes
import os


def install():
    path = os.environ.get("MORI_TEST_CE_NIC_LIBRARY")
    if not path:
        return False
    # The libmori.so that `import mori.allocator` loaded (found by its soname).
    mori = ctypes.CDLL("libmori.so")
    nic = ctypes.CDLL(os.path.abspath(path))
    nic.mori_ce_nic_provider.restype = ctypes.c_void_p
    mori.mori_rdma_use_provider.argtypes = [ctypes.c_void_p]
    rc = mori.mori_rdma_use_provider(nic.mori_ce_nic_provider())
    if rc != 0:
        raise RuntimeError(f"mori_rdma_use_provider({path}) returned {rc}")
    return True
