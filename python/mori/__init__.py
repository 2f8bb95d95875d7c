# SPDX-License-Identifier: MIT
"""mori: symmetric memory for GPUs. `import mori.allocator` registers the
"MORI" backend of torch's symmetric memory; then
`torch.distributed._symmetric_memory.set_backend("MORI")`. `import mori.ops`
adds the fused collectives (with the torch backend) and MoE dispatch/combine
(mori.ops.EpDispatchCombineOp, any platform), `import mori.shmem` is MORI Shmem (no torch
needed, and it runs on the host platform where there is no GPU),
`mori.address_map` the address maps of both, and `mori.triton` their
functions for Triton kernels (`mori.triton.lib`: mori's device library).

Importing `mori` itself loads nothing: the platform (host, cuda or hip) is
chosen when a module that calls the C library is first imported, or by
platform(). The Shmem Guide's style, `import mori` then `mori.shmem.X`,
works too: a subpackage named as an attribute of `mori` (shmem, ops,
address_map, triton, allocator, info, triton_lib) is imported then, on
first use, as `import mori.X` would (with its ImportError when it cannot
be, e.g. mori.triton without triton); `import mori` alone imports none of
them, and so no torch."""
try:
    from mori._version import __version__  # generated from bazel/version.bzl by the build
except ImportError:  # a source checkout run in place (PYTHONPATH=python): the same file, read
    def _source_version():
        import os
        import re

        path = os.path.join(os.path.dirname(__file__), "..", "..", "bazel", "version.bzl")
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            return "0+unknown"
        parts = [re.search(rf"^MORI_VERSION_{p}\s*=\s*(\d+)", text, re.M) for p in ("MAJOR", "MINOR", "PATCH")]
        return ".".join(m.group(1) for m in parts) if all(parts) else "0+unknown"

    __version__ = _source_version()

__all__ = ["__version__", "finalize", "platform"]

# The public subpackages and modules, imported when first named (PEP 562).
# Neither in __all__ nor in dir(mori): `from mori import *`, help(mori) and
# other tools that list a module's names must stay as light as `import mori`
# (and not fail where triton or torch is missing).
_SUBMODULES = ("address_map", "allocator", "info", "ops", "shmem", "triton", "triton_lib")


def __getattr__(name):
    if name in _SUBMODULES:
        import importlib

        # Binds mori.<name> too, so later uses do not come here again.
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")



def platform():
    """The platform of the libmori.so this process uses: "host", "cuda" or
    "hip" (loading it if nothing has yet; see mori._lib for how it is
    chosen: MORI_PLATFORM, else the GPU one when a GPU and its driver are
    there, else host)."""
    from mori import _lib

    return _lib.PLATFORM


def finalize():
    """Releases what mori.allocator and mori.shmem started in this process:
    the torch backend's windows and allocations, MORI Shmem (heap, comm,
    bootstrap), then everything else mori holds (mori_finalize), so nothing
    is left behind. Local (never collective) and idempotent; a part never
    imported is not loaded for it. shmem_init_attr works again afterwards.
    RuntimeError naming the call when one fails, and, before anything is
    released, while an EpDispatchCombineOp is alive (its tensors are views
    of memory this releases: destroy() it first)."""
    import sys

    ops = sys.modules.get("mori.ops._ep_torch_ops")
    live = [op for op in list(getattr(ops, "_OPS", {}).values()) if getattr(op, "_ep", None) is not None]
    if live:
        raise RuntimeError(f"mori.finalize: {len(live)} EpDispatchCombineOp(s) of rank {live[0].rank} are alive; their "
                           f"buffers and output tensors are views of memory mori.finalize releases: call destroy() "
                           f"(collective) on them first")
    backend = sys.modules.get("mori._torch_backend")
    if getattr(backend, "lib", None) is not None:
        backend.lib.mori_torch_finalize()
    loader = sys.modules.get("mori._lib")
    lib = getattr(loader, "lib", None)
    if lib is None:
        return
    for call in ("shmem_finalize", "mori_finalize"):
        rc = getattr(lib, call)()
        if rc < 0:
            raise RuntimeError(f"mori.finalize: {call}: {lib.mori_err_name(rc).decode()}: "
                               f"{lib.mori_last_error().decode(errors='replace')}")
