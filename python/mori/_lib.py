# SPDX-License-Identifier: MIT
"""mori's one ctypes loader: picks the platform, loads libmori.so for it
once, and declares the signatures of the calls the package makes. Imports
nothing heavy (no torch): mori.shmem's unique-ID path works without it.

The wheel carries libmori.so per platform, each in its own directory:
lib/host/ (CPU ranks sharing memory) and lib/cuda/ or lib/hip/ (with the
torch backend's libraries next to it). The platform is, in this order:
  - the platform of MORI_LIB, when set (a libmori.so of a source build;
    MORI_PLATFORM, if also set, must name the same);
  - MORI_PLATFORM=host|cuda|hip;
  - the wheel's GPU platform when its driver is installed and a GPU is
    there (found without initialising the driver, so ranks may still be
    forked after the import);
  - host otherwise.
The choice is logged at INFO on the "mori" logger and is platform()."""
import ctypes
import glob
import logging
import os

_PACKAGE = os.path.dirname(os.path.abspath(__file__))  # mori/
LIB_ROOT = os.path.join(_PACKAGE, "lib")
_NAME = "libmori.so"
PLATFORMS = ("host", "cuda", "hip")
GPU_PLATFORMS = ("cuda", "hip")

log = logging.getLogger("mori")


def _platform_dir(platform):
    return os.path.join(LIB_ROOT, platform)


def packaged_platforms():
    """The platforms this installation carries a libmori.so for."""
    return tuple(p for p in PLATFORMS if os.path.exists(os.path.join(_platform_dir(p), _NAME)))


def _no_devices_visible(variables):
    """True when a visibility variable hides every device (set and empty, or
    starting with -1, as the runtimes read it)."""
    for var in variables:
        value = os.environ.get(var)
        if value is not None and (value.strip() == "" or value.strip().startswith("-1")):
            return var
    return None


def _cuda_gpus():
    """(count, how it was found) of NVIDIA GPUs, or (0, why not). The driver
    is only opened, never initialised (cuInit in this process would break
    CUDA in the ranks forked from it): the count comes from NVML, or from
    the device nodes when NVML is absent."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0, "no CUDA driver (libcuda.so.1 cannot be loaded)"
    hidden = _no_devices_visible(("CUDA_VISIBLE_DEVICES",))
    if hidden:
        return 0, f"{hidden}={os.environ[hidden]!r} hides every GPU"
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        nvml = None
    if nvml is not None and nvml.nvmlInit_v2() == 0:
        try:
            count = ctypes.c_uint(0)
            if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0:
                return count.value, f"libcuda.so.1 loads, NVML counts {count.value} GPUs"
        finally:
            nvml.nvmlShutdown()
    # No NVML (or one that cannot answer, as in some sandboxes): the nodes.
    nodes = glob.glob("/dev/nvidia[0-9]*")
    return len(nodes), f"libcuda.so.1 loads, {len(nodes)} /dev/nvidiaN device nodes"


def _hip_gpus():
    """(count, how it was found) of AMD GPUs, or (0, why not): the HIP
    runtime must load, and the GPU nodes are counted in the kernel driver's
    topology (no runtime initialised, for the same reason as with CUDA)."""
    for name in ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"):
        try:
            ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return 0, "no HIP runtime (libamdhip64.so cannot be loaded)"
    hidden = _no_devices_visible(("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"))
    if hidden:
        return 0, f"{hidden}={os.environ[hidden]!r} hides every GPU"
    if not os.path.exists("/dev/kfd"):
        return 0, "no /dev/kfd (the amdgpu kernel driver)"
    count = 0
    for props in glob.glob("/sys/class/kfd/kfd/topology/nodes/*/properties"):
        try:
            with open(props) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "gfx_target_version" and int(value) != 0:  # 0: a CPU node
                        count += 1
        except (OSError, ValueError):
            continue
    return count, f"the HIP runtime loads, the kfd topology lists {count} GPUs"


_PROBES = {"cuda": _cuda_gpus, "hip": _hip_gpus}


def choose_platform():
    """(platform, path of its libmori.so, why), by the rules above;
    ImportError when the asked-for platform is not installed."""
    asked = os.environ.get("MORI_PLATFORM", "").strip().lower()
    if asked and asked not in PLATFORMS:
        raise ImportError(f"mori: MORI_PLATFORM={asked!r}; expected one of {', '.join(PLATFORMS)}")
    forced = os.environ.get("MORI_LIB")
    if forced:  # its platform is what it was built for (checked against MORI_PLATFORM once loaded)
        return asked or None, forced, "MORI_LIB is set"
    have = packaged_platforms()
    if asked:
        if asked not in have:
            raise ImportError(f"mori: MORI_PLATFORM={asked} but this installation has no {asked} build of "
                              f"{_NAME} (it has: {', '.join(have) or 'none'}, in {LIB_ROOT})")
        return asked, os.path.join(_platform_dir(asked), _NAME), "MORI_PLATFORM is set"
    if not have:
        raise ImportError(f"mori: no {_NAME} in {LIB_ROOT}; install the mori wheel (`bazel build //:wheel`), "
                          f"or build the library with `bazel build //:libmori.so` and set MORI_LIB to its path")
    reasons = []
    for gpu in GPU_PLATFORMS:
        if gpu in have:
            count, how = _PROBES[gpu]()
            if count > 0:
                return gpu, os.path.join(_platform_dir(gpu), _NAME), how
            reasons.append(how)
    if "host" in have:
        why = "; ".join(reasons) or "no GPU build installed"
        return "host", os.path.join(_platform_dir("host"), _NAME), why
    raise ImportError(f"mori: this installation has only a {'/'.join(have)} build of {_NAME} and no GPU was found "
                      f"({'; '.join(reasons)}); set MORI_PLATFORM to force it")


def load_library(path, mode=ctypes.DEFAULT_MODE):
    """ctypes.CDLL(path), an ImportError naming the path when it fails."""
    try:
        return ctypes.CDLL(path, mode=mode)
    except OSError as e:
        raise ImportError(f"mori: cannot load {path}: {e}") from e


_chosen, PATH, WHY = choose_platform()
# The torch backend links the same file (by its soname): whichever loads it
# first, a process holds one copy (one heap, one registry).
lib = load_library(PATH)
lib.mori_runtime_platform.restype = ctypes.c_char_p
lib.mori_runtime_platform.argtypes = []
PLATFORM = lib.mori_runtime_platform().decode()
if _chosen and PLATFORM != _chosen:
    raise ImportError(f"mori: MORI_PLATFORM={_chosen} but {PATH} is a build for {PLATFORM}")
LIB_DIR = os.path.dirname(os.path.abspath(PATH))
log.info("mori: platform %s (%s): %s", PLATFORM, WHY, PATH)


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
    "mori_finalize": (_c_int, []),
    "mori_shmem_use_local_plugins": (_c_int, []),
    "mori_shmem_use_all_plugins": (_c_int, []),
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
    "mori_shmem_refused": (_c_int, [ctypes.c_char_p, ctypes.c_char_p]),
    "shmem_buffer_deregister": (_c_int, [_c_void_p, _c_size]),
    "shmem_ptr_p2p": (_c_void_p, [_c_void_p, _c_int, _c_int]),
    "shmem_barrier_all": (_c_int, []),
    "shmem_module_init": (_c_int, [_c_void_p]),
    "mori_shmem_address_map": (_c_int, [_c_void_p, ctypes.POINTER(AddressMap)]),
    "mori_shmem_translate": (_c_int, [_c_void_p, _c_int, ctypes.POINTER(_c_void_p)]),
    "mori_shmem_comm": (_c_int, [ctypes.POINTER(_c_void_p)]),
    "mori_comm_size": (_c_int, [_c_void_p]),
    "mori_comm_device": (_c_int, [_c_void_p]),
    "mori_comm_locality": (_c_int, [_c_void_p, ctypes.POINTER(ctypes.c_uint32), _c_int]),
    "mori_comm_locality_dev": (_c_int, [_c_void_p, ctypes.POINTER(_c_void_p)]),
    "mori_shmem_device_state": (_c_int, [_c_void_p]),
}

for _name, (_res, _args) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


class CallError(RuntimeError):
    """A call into libmori.so failed: `call` (its name), `code` (the negative
    MORI_E* value), `name` (MORI_E...) and `detail`, the message the library
    left (which rank or PE, which sizes). mori.shmem and mori.ops raise
    their own subclasses."""

    def __init__(self, call, code, name=None, detail=None):
        self.call = call
        self.code = code
        # name and detail are given when the error is rebuilt (unpickled,
        # copied): the library's last error is then another thread's or
        # process's, not this one's.
        self.name = lib.mori_err_name(code).decode() if name is None else name
        self.detail = lib.mori_last_error().decode(errors="replace") if detail is None else detail
        super().__init__(f"{call}: {self.name}: {self.detail}")

    def __reduce__(self):
        # What multiprocessing and concurrent.futures use to send an error
        # to another process: it arrives whole, message included.
        return (type(self), (self.call, self.code, self.name, self.detail))
