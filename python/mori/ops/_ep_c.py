# SPDX-License-Identifier: MIT
"""ctypes declarations of mori/ep.h (MoE dispatch and combine) over the
libmori.so that mori._lib loaded. Imports no torch.

The calls are declared here, not in mori._lib's table, so that a library
without them (one built before EP existed) still serves mori.shmem, and the
Python names still import: making an EpDispatchCombineOp then raises an
ImportError that says the library lacks them."""
import ctypes

from mori._lib import PATH, CallError, lib

# mori_ep_dtype_t
FLOAT32, BFLOAT16, FLOAT16, FP8_E4M3FN, FP8_E4M3FNUZ = 0, 1, 2, 3, 4

_i32, _u32, _u64, _vp = ctypes.c_int32, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p


class Config(ctypes.Structure):
    """mori_ep_config_t."""
    _fields_ = [
        ("data_type", ctypes.c_int),
        ("rank", _i32),
        ("world_size", _i32),
        ("hidden_dim", _u32),
        ("scale_dim", _u32),
        ("scale_type_size", _u32),
        ("max_token_type_size", _u32),
        ("max_num_inp_token_per_rank", _u32),
        ("num_experts_per_rank", _u32),
        ("num_experts_per_token", _u32),
        ("warp_num_per_block", _i32),
        ("block_num", _i32),
        ("rdma_block_num", _i32),
        ("use_external_inp_buf", _i32),
        ("kernel_type", ctypes.c_int),
        ("gpu_per_node", _i32),
        ("num_qp_per_pe", _i32),
    ]


class Buffers(ctypes.Structure):
    """mori_ep_buffers_t."""
    _fields_ = [
        ("max_recv_tokens", _u64),
        ("dispatch_tokens", _vp),
        ("dispatch_weights", _vp),
        ("dispatch_scales", _vp),
        ("dispatch_indices", _vp),
        ("recv_num_token", _vp),
        ("src_token_pos", _vp),
        ("combine_input", _vp),
        ("combine_output", _vp),
        ("combine_weights", _vp),
    ]


class Launch(ctypes.Structure):
    """mori_ep_launch_t."""
    _fields_ = [("block_num", _i32), ("rdma_block_num", _i32), ("warp_per_block", _i32)]


assert ctypes.sizeof(Config) == 17 * 4, "mori_ep_config_t is 17 four-byte fields"
assert ctypes.sizeof(Buffers) == 10 * 8
assert ctypes.sizeof(Launch) == 12

_P = ctypes.POINTER
_SIGNATURES = {
    "mori_ep_config_init": (None, [_P(Config)]),
    "mori_ep_create": (ctypes.c_int, [_vp, _P(Config), _P(_vp)]),
    "mori_ep_create_refused": (ctypes.c_int, [_vp, ctypes.c_char_p]),
    "mori_ep_destroy": (ctypes.c_int, [_vp]),
    "mori_ep_buffers": (ctypes.c_int, [_vp, _P(Buffers)]),
    # input, weights, scales and indices are addresses (ints), stream too.
    "mori_ep_dispatch": (ctypes.c_int, [_vp, _vp, _vp, _vp, _vp, _u32, _P(Launch), _vp]),
    "mori_ep_dispatch_send": (ctypes.c_int, [_vp, _vp, _vp, _vp, _vp, _u32, _P(Launch), _vp]),
    "mori_ep_dispatch_recv": (ctypes.c_int, [_vp, _P(Launch), _vp]),
    "mori_ep_dispatch_refused": (ctypes.c_int, [_vp, ctypes.c_int, _vp]),
    "mori_ep_combine_refused": (ctypes.c_int, [_vp, ctypes.c_int, _vp]),
    "mori_ep_combine": (ctypes.c_int, [_vp, _vp, ctypes.c_int, _vp, _P(Launch), _vp]),
    "mori_ep_combine_send": (ctypes.c_int, [_vp, _vp, ctypes.c_int, _vp, _P(Launch), _vp]),
    "mori_ep_combine_recv": (ctypes.c_int, [_vp, _P(Launch), _vp]),
    # input, input rows, dtype, weights, weights rows, send_only, launch, stream
    "mori_ep_combine_rows": (ctypes.c_int, [_vp, _vp, ctypes.c_uint64, ctypes.c_int, _vp, ctypes.c_uint64, ctypes.c_int,
                                            _P(Launch), _vp]),
    "mori_ep_reset": (ctypes.c_int, [_vp, _vp]),
    "mori_ep_check": (ctypes.c_int, [_vp]),
    "mori_ep_config": (_P(Config), [_vp]),
}

MISSING = [name for name in _SIGNATURES if not hasattr(lib, name)]
for _name, (_res, _args) in _SIGNATURES.items():
    if _name not in MISSING:
        _fn = getattr(lib, _name)
        _fn.restype = _res
        _fn.argtypes = _args


def require():
    """ImportError unless the library has every call of mori/ep.h."""
    if MISSING:
        raise ImportError(f"mori.ops EP: {PATH} has no MoE dispatch/combine ({', '.join(MISSING)} missing): "
                          f"use a libmori.so built with collectives/ep (mori/ep.h)")


class EpError(CallError):
    """A mori_ep_* call failed, or a kernel reported bad data: `call`,
    `code` (negative MORI_E* value), `name` (MORI_E...) and the library's
    message (which rank, which token, which value)."""


def check(call, rc):
    if rc < 0:
        raise EpError(call, rc)
    return rc
