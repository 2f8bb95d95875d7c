# SPDX-License-Identifier: MIT
"""MoE expert parallelism in Python: the MORI-EP interface over mori/ep.h.

    import mori.shmem, mori.ops
    mori.shmem.shmem_init_attr(...)            # first: EP runs on MORI Shmem
    config = mori.ops.EpDispatchCombineConfig(data_type=torch.bfloat16, rank=rank, world_size=n,
                                              hidden_dim=7168, scale_dim=0, scale_type_size=1,
                                              max_token_type_size=4, max_num_inp_token_per_rank=4096,
                                              num_experts_per_rank=32, num_experts_per_token=8)
    op = mori.ops.EpDispatchCombineOp(config)  # collective
    out, w, s, idx, recv_num_token = op.dispatch(x, weights, scales, indices)
    y, yw = op.combine(expert(out), w, indices)

Every tensor a call returns is a view of the context's buffers (fixed
capacity, no host synchronisation): it is overwritten by the next call of
the same kind, so copy what must outlive it. Dispatch's outputs have
max_recv_tokens = world_size * max_num_inp_token_per_rank rows; the first
recv_num_token[0] of them are this call's. On the host platform the
tensors are CPU tensors; on cuda/hip they are on the current device.

The calls are torch custom ops (torch.ops.mori.ep_*) when traced
(torch.compile); eagerly they call the library directly, which is what
CUDA graph capture records. docs/ep.md has the whole interface."""
import ctypes
import dataclasses
import enum
import operator
import os
import sys
import warnings
from typing import Optional

import torch

from mori import _lib
from mori._lib import lib

from . import _ep_c as C
from ._ep_c import EpError
from ._ep_torch_ops import _OPS  # also registers torch.ops.mori.ep_*

__all__ = ["EpDispatchCombineConfig", "EpDispatchCombineKernelType", "EpDispatchCombineOp", "EpError"]


_Tensor, _int32, _int64, _float32 = torch.Tensor, torch.int32, torch.int64, torch.float32
_is_compiling = torch.compiler.is_compiling


class EpDispatchCombineKernelType(enum.IntEnum):
    """The MORI-EP guide's kernel types. IntraNode and InterNode are built;
    InterNodeV1, InterNodeV1LL and AsyncLL run as InterNode (docs/ep.md)."""
    IntraNode = 0
    InterNode = 1
    InterNodeV1 = 2
    InterNodeV1LL = 3
    AsyncLL = 4


@dataclasses.dataclass
class EpDispatchCombineConfig:
    """What an EpDispatchCombineOp is made for; the same on every rank but
    `rank`. Defaults are the MORI-EP guide's. Launch fields (warp_num_per_block,
    block_num, rdma_block_num) <= 0 let the library choose;
    MORI_EP_LAUNCH_CONFIG_MODE=AUTO makes it choose always."""
    data_type: torch.dtype            # dispatch's token dtype: bf16, fp16, fp32, float8_e4m3fn(uz)
    rank: int
    world_size: int
    hidden_dim: int                   # elements per token
    scale_dim: int                    # scales per token (0: none)
    scale_type_size: int              # bytes per scale
    max_token_type_size: int          # bytes of the widest token dtype used (combine may be wider)
    max_num_inp_token_per_rank: int   # the most tokens one rank dispatches in a call
    num_experts_per_rank: int
    num_experts_per_token: int        # top-k
    warp_num_per_block: int = 8
    block_num: int = 80
    # True: combine's input is any tensor (copied into the registered
    # buffer as it is sent); False: the expert outputs are written into
    # get_registered_combine_input_buffer() and that is passed, no copy
    # (another input is still copied; one overlapping this op's outputs is
    # cloned first). docs/ep.md, `combine`.
    use_external_inp_buf: bool = True
    kernel_type: EpDispatchCombineKernelType = EpDispatchCombineKernelType.IntraNode
    gpu_per_node: int = 8
    rdma_block_num: int = 0
    num_qp_per_pe: int = 1


_DTYPE_CODES = {
    torch.float32: C.FLOAT32,
    torch.bfloat16: C.BFLOAT16,
    torch.float16: C.FLOAT16,
    torch.float8_e4m3fn: C.FP8_E4M3FN,
    torch.float8_e4m3fnuz: C.FP8_E4M3FNUZ,
}
_COMBINE_DTYPES = (torch.bfloat16, torch.float32, torch.float16)
_SCALE_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e4m3fnuz,
                 torch.uint8, torch.int8, torch.int32, torch.float64, torch.int64)
# A scale dtype by its size, for the scales output when no scales were passed.
_SCALE_DTYPE_BY_SIZE = {1: torch.uint8, 2: torch.bfloat16, 4: torch.float32, 8: torch.float64}


class _DeviceArray:
    """A device allocation as __cuda_array_interface__ (bytes), so that
    torch.as_tensor makes a tensor over it without copying."""

    def __init__(self, addr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (addr, False),
                                         "version": 3, "strides": None}


def _raw_view(addr, nbytes, device):
    """A uint8 tensor over `nbytes` at `addr` (host memory on the host
    platform, device memory otherwise)."""
    if device.type == "cpu":
        return torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(addr), dtype=torch.uint8)
    return torch.as_tensor(_DeviceArray(addr, nbytes), device=device)


def _overlaps(t, buf):
    """Whether tensor t's bytes and buffer buf's share an address."""
    a, b = t.data_ptr(), buf.data_ptr()
    return a < b + buf.nbytes and b < a + t.nbytes


def _typed(raw, dtype, shape):
    """`raw`'s memory as a tensor of `dtype` and `shape` that is no view
    (it has no _base): torch.compile's functionalization handles mutated
    inputs that are plain tensors, not dtype-changing views of others."""
    stride, step = [], 1
    for size in reversed(shape):
        stride.insert(0, step)
        step *= size
    return torch.empty(0, dtype=dtype, device=raw.device).set_(raw.untyped_storage(), 0, tuple(shape), tuple(stride))


_INT32_MAX = 2**31 - 1


def _check_launch(rank, block_num, rdma_block_num, warp_per_block):
    """TypeError (naming the rank) unless each launch size is an int32 or -1
    (plain Python: also what tracing runs)."""
    for name, value in (("block_num", block_num), ("rdma_block_num", rdma_block_num),
                        ("warp_per_block", warp_per_block)):
        # (an int32 field: a larger value would be cut to its low bits)
        if not isinstance(value, int) or isinstance(value, bool) or not -1 <= value <= _INT32_MAX:
            raise TypeError(f"EpDispatchCombineOp on rank {rank}: {name}={value!r}; expected an int, -1 for the "
                            f"config's")


def _flat_token_positions(raw, world_size, max_tokens):
    """The library's positions (src_rank * max_tokens + id) in MORI-EP's
    flat format (src_rank * world_size * max_tokens + id): int32 while the
    largest value fits, else int64."""
    stride = world_size * max_tokens
    raw = raw.to(torch.int64)
    flat = torch.div(raw, max_tokens, rounding_mode="floor") * stride + torch.remainder(raw, max_tokens)
    return flat if stride * world_size - 1 > _INT32_MAX else flat.to(torch.int32)


class EpDispatchCombineOp:
    """Dispatch and combine for one config. Collective to make (every rank
    of MORI Shmem's world, after mori.shmem is initialised); calls are
    issued in the same order on every rank. destroy() (collective) frees
    the context; its views must not be used after it."""

    def __init__(self, config: EpDispatchCombineConfig):
        self.config = config
        self._ep = None
        C.require()
        rc = lib.shmem_npes()
        if rc < 0:
            raise RuntimeError(
                "EpDispatchCombineOp needs MORI Shmem initialised first (mori.shmem.shmem_init_attr or "
                f"mori.shmem.shmem_torch_process_group_init), as the MORI-EP guide says: shmem_npes answered "
                f"{lib.mori_err_name(rc).decode()}")
        me, npes = lib.shmem_mype(), rc
        self.rank = me
        comm = ctypes.c_void_p()
        C.check("mori_shmem_comm", lib.mori_shmem_comm(ctypes.byref(comm)))
        try:
            if not isinstance(config, EpDispatchCombineConfig):
                raise TypeError(f"EpDispatchCombineOp on rank {me}: config must be an EpDispatchCombineConfig, not "
                                f"{type(config).__name__}")
            self._validate_config(config, me, npes)
            cfg = C.Config()
            lib.mori_ep_config_init(ctypes.byref(cfg))
            cfg.data_type = _DTYPE_CODES[config.data_type]
            for field in ("rank", "world_size", "hidden_dim", "scale_dim", "scale_type_size", "max_token_type_size",
                          "max_num_inp_token_per_rank", "num_experts_per_rank", "num_experts_per_token",
                          "warp_num_per_block", "block_num", "rdma_block_num", "gpu_per_node", "num_qp_per_pe"):
                setattr(cfg, field, int(getattr(config, field)))
            # MORI_EP_LAUNCH_CONFIG_MODE=auto: as in AMD's mori, the table
            # picks the launch shape and the config's and the calls' shapes
            # are not used (the library lets any given shape win, so none is
            # given).
            self._auto_launch = os.environ.get("MORI_EP_LAUNCH_CONFIG_MODE", "").strip().lower() == "auto"
            if self._auto_launch:
                cfg.block_num = cfg.warp_num_per_block = cfg.rdma_block_num = -1
            cfg.use_external_inp_buf = 1 if config.use_external_inp_buf else 0
            cfg.kernel_type = int(config.kernel_type)
        except Exception as e:
            # Creating is collective: a config refused here, on this rank
            # only, still takes its part, so every rank's create fails at
            # once naming this rank and why (none is left paired with this
            # rank's next create).
            lib.mori_ep_create_refused(comm, str(e).encode(errors="replace")[:400])
            raise
        ep = ctypes.c_void_p()
        C.check("mori_ep_create", lib.mori_ep_create(comm, ctypes.byref(cfg), ctypes.byref(ep)))
        self._ep = ep.value
        self._handle = self._ep
        _OPS[self._handle] = self
        try:
            bufs = C.Buffers()
            C.check("mori_ep_buffers", lib.mori_ep_buffers(self._ep, ctypes.byref(bufs)))
            self._make_views(bufs, lib.mori_comm_device(comm))
        except BaseException:
            # The caller never gets this op: it must not keep mori.finalize
            # refusing (its context stays until the process ends; __del__
            # says so).
            _OPS.pop(self._handle, None)
            raise
        self._default_launch = C.Launch(-1, -1, -1)
        self._launches = {(-1, -1, -1): self._default_launch}
        self._last_num_tokens = 0
        # The scales' dtype of the last dispatch_send (None: the config's
        # default view): its dispatch_recv, compiled, names the same view as
        # the one the send half declared it would fill.
        self._sent_scales_key = None
        # Whether a dispatch went to the library (combine reverses what it
        # holds), and on the host platform what recv_num_token held when
        # reset() cleared it: combine's input must still cover the rows of
        # the dispatch it reverses (None: the live count is that dispatch's).
        self._dispatched = False
        self._count_at_reset = None
        # The same count as a tensor on the context's device (a copy made
        # by reset(), stream-ordered, no host sync), for the layout
        # conversions (ep_layout), which must cover that dispatch's rows
        # after reset() as combine does. None: recv_num_token is it.
        self._count_kept = None
        # The send half waiting for its receive half ("dispatch_send",
        # "combine_send" or None), as the library holds it: while one waits
        # the library refuses every other call without touching anything,
        # the pending dispatch's token count included.
        self._waiting = None
        self._last_combine_dtype = config.data_type if config.data_type in _COMBINE_DTYPES else torch.bfloat16
        # Report device-found bad data (an expert index out of range, a
        # peer that refused its part) as an exception from the very call
        # that found it where that is free: on the host platform, where a
        # call has completed when it returns, so every rank raises at the
        # same call. On a GPU reading the report waits for the device (and
        # cannot be graph-captured), so there check() does it when asked.
        self.check_every_call = not self._on_gpu
        # What the fast paths compare against, as plain attributes.
        self._dtype = config.data_type
        self._hidden = config.hidden_dim
        self._topk = config.num_experts_per_token
        self._max_tokens = config.max_num_inp_token_per_rank
        self._scale_dim = config.scale_dim if self._scales_raw.numel() else 0
        self._scale_dtypes = frozenset(d for d, v in self._scales_views.items() if v.numel() or not self._scale_dim)
        self._external = bool(config.use_external_inp_buf)
        self._combine_input_ptr = self._combine_input_raw.data_ptr()
        self._combine_input_end = self._combine_input_ptr + self._combine_input_raw.nbytes
        self._weights_fallback = self._dispatch_weights.data_ptr()
        # An empty input has no address (torch answers 0), and NULL would
        # mean the registered buffer, every row: an empty input is this
        # op's own placeholder instead, given as 0 rows, so that the kernel
        # refuses a call whose dispatch delivered any (outside the context's
        # memory, which the library's overlap checks would refuse).
        self._empty_input = torch.empty(16, dtype=torch.uint8, device=self.device)
        self._empty_input_ptr = self._empty_input.data_ptr()
        self._dtype_codes = _DTYPE_CODES

    # ---- construction -------------------------------------------------------------------------------
    def _validate_config(self, c, me, npes):
        where = f"EpDispatchCombineConfig on rank {me}"
        if c.data_type not in _DTYPE_CODES:
            raise ValueError(f"{where}: data_type {c.data_type} is not one of "
                             f"{', '.join(str(d) for d in _DTYPE_CODES)}")
        if (c.rank, c.world_size) != (me, npes):
            raise ValueError(f"{where}: rank={c.rank}, world_size={c.world_size}, but MORI Shmem's world is "
                             f"PE {me} of {npes}")
        # The C config's fields are 32-bit: a larger value would be cut to
        # its low bits. A bool is an int to Python, never a size here; other
        # integer types (numpy's) are taken as the ints they stand for.
        def whole(value):
            if isinstance(value, bool):
                return False
            try:
                operator.index(value)
            except TypeError:
                return False
            return True

        for name in ("hidden_dim", "max_num_inp_token_per_rank", "num_experts_per_rank", "num_experts_per_token",
                     "max_token_type_size"):
            value = getattr(c, name)
            if not whole(value) or not 0 < value <= _INT32_MAX:
                raise ValueError(f"{where}: {name}={value!r}; expected a positive int below 2**31")
        for name in ("scale_dim", "scale_type_size"):
            value = getattr(c, name)
            if not whole(value) or not 0 <= value <= _INT32_MAX:
                raise ValueError(f"{where}: {name}={value!r}; expected an int >= 0 below 2**31")
        # Launch and placement fields: <= 0 lets the library choose; -1 is
        # the usual spelling, and nothing below it means anything else.
        for name in ("warp_num_per_block", "block_num", "rdma_block_num", "gpu_per_node", "num_qp_per_pe"):
            value = getattr(c, name)
            if not whole(value) or not -1 <= value <= _INT32_MAX:
                raise ValueError(f"{where}: {name}={value!r}; expected an int from -1 (chosen) below 2**31")
        if c.scale_dim > 0 and c.scale_type_size not in _SCALE_DTYPE_BY_SIZE:
            raise ValueError(f"{where}: scale_dim={c.scale_dim} needs scale_type_size of a scale dtype's size "
                             f"({', '.join(str(n) for n in _SCALE_DTYPE_BY_SIZE)} bytes); got {c.scale_type_size}")
        size = torch.empty((), dtype=c.data_type).element_size()
        if c.max_token_type_size < size:
            raise ValueError(f"{where}: max_token_type_size={c.max_token_type_size} is smaller than data_type "
                             f"{c.data_type}'s {size} bytes")
        if c.max_token_type_size == 1:  # (as the library says it, but a ValueError like the other fields')
            raise ValueError(f"{where}: max_token_type_size=1 holds no combine dtype (bfloat16 and float16 take 2 "
                             f"bytes, float32 4)")
        if c.num_experts_per_token > c.num_experts_per_rank * c.world_size:
            raise ValueError(f"{where}: num_experts_per_token={c.num_experts_per_token} exceeds the "
                             f"{c.num_experts_per_rank * c.world_size} experts")
        try:
            EpDispatchCombineKernelType(c.kernel_type)
        except ValueError:
            raise ValueError(f"{where}: kernel_type={c.kernel_type!r} is not an EpDispatchCombineKernelType") from None

    def _make_views(self, b, comm_device):
        c = self.config
        if _lib.PLATFORM == "host":
            self.device = torch.device("cpu")
            self._stream = lambda: None
        else:
            # The comm's GPU, where the context's memory is and its kernels
            # run (the library switches to it for each launch), whatever GPU
            # is current now: views and the device check say that one.
            index = comm_device if comm_device >= 0 else torch.cuda.current_device()
            self.device = torch.device("cuda", index)
            raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            if raw_stream is not None:
                self._stream = lambda: raw_stream(index)
            else:
                self._stream = lambda: torch.cuda.current_stream(index).cuda_stream
        self._on_gpu = self.device.type != "cpu"
        # What Tensor.get_device() says of a tensor on this op's device (-1: the CPU):
        # the fast paths' device check, cheaper than comparing torch.device objects.
        self._device_index = self.device.index if self._on_gpu else -1
        dev = self.device
        rows, hidden, topk = int(b.max_recv_tokens), c.hidden_dim, c.num_experts_per_token
        self.max_recv_tokens = rows
        self._base = b
        esize = torch.empty((), dtype=c.data_type).element_size()
        self._dispatch_tokens = _typed(_raw_view(b.dispatch_tokens, rows * hidden * esize, dev), c.data_type,
                                       (rows, hidden))
        self._dispatch_weights = _typed(_raw_view(b.dispatch_weights, rows * topk * 4, dev), torch.float32,
                                        (rows, topk))
        self._dispatch_indices = _typed(_raw_view(b.dispatch_indices, rows * topk * 4, dev), torch.int32,
                                        (rows, topk))
        self._recv_num_token = _typed(_raw_view(b.recv_num_token, 4, dev), torch.int32, (1,))
        self._src_token_pos = _typed(_raw_view(b.src_token_pos, rows * 4, dev), torch.int32, (rows,))
        scale_bytes = c.scale_dim * c.scale_type_size
        self._scales_raw = (_raw_view(b.dispatch_scales, rows * scale_bytes, dev)
                            if scale_bytes and b.dispatch_scales else torch.empty(0, dtype=torch.uint8, device=dev))
        self._combine_input_raw = _raw_view(b.combine_input, rows * hidden * c.max_token_type_size, dev)
        self._combine_output_raw = _raw_view(b.combine_output,
                                             c.max_num_inp_token_per_rank * hidden * c.max_token_type_size, dev)
        self._combine_weights = _typed(_raw_view(b.combine_weights, c.max_num_inp_token_per_rank * topk * 4, dev),
                                       torch.float32, (c.max_num_inp_token_per_rank, topk))
        # Every typed view is made here, none while torch.compile traces.
        fits = [d for d in _COMBINE_DTYPES if torch.empty((), dtype=d).element_size() <= c.max_token_type_size]
        self._combine_outputs = {d: _typed(self._combine_output_raw, d, (c.max_num_inp_token_per_rank, hidden))
                                 for d in fits}
        self._combine_inputs = {d: _typed(self._combine_input_raw, d, (rows, hidden)) for d in fits}
        self._combine_results = {}  # (dtype, rows, weights?) -> the tuple combine returns
        self._scales_views = {}
        for d in _SCALE_DTYPES:
            if torch.empty((), dtype=d).element_size() == c.scale_type_size:
                self._scales_views[d] = (_typed(self._scales_raw, d, (rows, c.scale_dim)) if self._scales_raw.numel()
                                         else torch.empty(rows, 0, dtype=d, device=dev))
        default = _SCALE_DTYPE_BY_SIZE.get(c.scale_type_size, torch.uint8)
        if default not in self._scales_views:
            self._scales_views[default] = torch.empty(rows, 0, dtype=default, device=dev)
        self._dispatch_results = {d: (self._dispatch_tokens, self._dispatch_weights, v, self._dispatch_indices,
                                      self._recv_num_token) for d, v in self._scales_views.items()}
        self._dispatch_results[None] = self._dispatch_results[default]
        self._recv_num_token_c = (ctypes.c_int32.from_address(b.recv_num_token) if not self._on_gpu else None)

    def _scales_view(self, dtype):
        return self._scales_views[dtype]

    def _combine_output_view(self, dtype):
        return self._combine_outputs[dtype]

    def get_registered_combine_input_buffer(self, dtype, hidden_dim=-1):
        """The registered combine input as [max_recv_tokens, hidden_dim] of
        `dtype` (bf16, fp16 or fp32, at most max_token_type_size bytes):
        write the expert outputs here (rows in dispatch order) and combine
        reads them without a copy (use_external_inp_buf False)."""
        self._alive("get_registered_combine_input_buffer")
        c = self.config
        if hidden_dim not in (-1, c.hidden_dim):
            raise ValueError(f"get_registered_combine_input_buffer on rank {self.rank}: hidden_dim={hidden_dim}, "
                             f"the config's is {c.hidden_dim}")
        view = self._combine_inputs.get(dtype)
        if view is None:
            self._check_combine_dtype("get_registered_combine_input_buffer", dtype)
        return view

    # ---- checks --------------------------------------------------------------------------------------
    def _bad(self, call, what):
        return ValueError(f"EpDispatchCombineOp.{call} on rank {self.rank}: {what}")

    def _check_tensor(self, call, name, t, dtype, shape):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"EpDispatchCombineOp.{call} on rank {self.rank}: {name} must be a torch.Tensor, "
                            f"not {type(t).__name__}")
        if t.dtype != dtype:
            raise self._bad(call, f"{name} is {t.dtype}; the config says {dtype}")
        if t.shape != shape:
            raise self._bad(call, f"{name} has shape {tuple(t.shape)}; expected {tuple(shape)}")
        if t.device != self.device and (t.numel() or t.device.type == "meta"):
            raise self._bad(call, f"{name} is on {t.device}; this context's buffers are on {self.device}")
        if not t.is_contiguous():
            raise self._bad(call, f"{name} is not contiguous")

    def _check_dispatch(self, call, input, weights, scales, indices):
        c = self.config
        if not isinstance(input, torch.Tensor) or input.dim() != 2:
            raise self._bad(call, f"input must be a 2-D tensor [tokens, hidden_dim={c.hidden_dim}], got "
                                  f"{tuple(input.shape) if isinstance(input, torch.Tensor) else type(input).__name__}")
        n = input.shape[0]
        if n > c.max_num_inp_token_per_rank:
            raise self._bad(call, f"{n} tokens; max_num_inp_token_per_rank is {c.max_num_inp_token_per_rank}")
        self._check_tensor(call, "input", input, c.data_type, (n, c.hidden_dim))
        topk = c.num_experts_per_token
        self._check_tensor(call, "indices", indices, torch.int32, (n, topk))
        if weights is not None:
            self._check_tensor(call, "weights", weights, torch.float32, (n, topk))
        if scales is not None and not isinstance(scales, torch.Tensor):
            raise TypeError(f"EpDispatchCombineOp.{call} on rank {self.rank}: scales must be a torch.Tensor or None, "
                            f"not {type(scales).__name__}")
        if scales is not None and c.scale_dim == 0:
            if scales.numel():
                raise self._bad(call, f"scales has shape {tuple(scales.shape)} but the config's scale_dim is 0")
            scales = None
        if scales is not None:
            if scales.element_size() != c.scale_type_size or scales.dtype not in self._scales_views:
                raise self._bad(call, f"scales are {scales.dtype} ({scales.element_size()} bytes); the config's "
                                      f"scale_type_size is {c.scale_type_size} (scale dtypes: "
                                      f"{', '.join(str(d) for d in self._scales_views)})")
            self._check_tensor(call, "scales", scales, scales.dtype, (n, c.scale_dim))
        return n, scales

    def _check_combine_dtype(self, call, dtype):
        c = self.config
        if dtype not in _COMBINE_DTYPES:
            raise self._bad(call, f"dtype {dtype}: combine runs in bf16, fp16 or fp32")
        size = torch.empty((), dtype=dtype).element_size()
        if size > c.max_token_type_size:
            raise self._bad(call, f"dtype {dtype} is {size} bytes; the config's max_token_type_size is "
                                  f"{c.max_token_type_size}")

    def _check_combine(self, call, input, weights, indices, use_external_inp_buf):
        c = self.config
        if not isinstance(input, torch.Tensor) or input.dim() != 2:
            raise self._bad(call, f"input must be a 2-D tensor [rows, hidden_dim={c.hidden_dim}]")
        rows = input.shape[0]
        if rows > self.max_recv_tokens:
            raise self._bad(call, f"input has {rows} rows; a dispatch delivers at most {self.max_recv_tokens}")
        dtype = input.dtype
        if dtype not in self._combine_outputs:
            self._check_combine_dtype(call, dtype)
        self._check_tensor(call, "input", input, dtype, (rows, c.hidden_dim))
        for name, t in (("weights", weights), ("indices", indices)):
            if t is not None and not isinstance(t, torch.Tensor):
                raise TypeError(f"EpDispatchCombineOp.{call} on rank {self.rank}: {name} must be a torch.Tensor "
                                f"or None, not {type(t).__name__}")
        if weights is not None:
            rows_w = weights.shape[0] if weights.dim() else 0
            self._check_tensor(call, "weights", weights, torch.float32, (rows_w, c.num_experts_per_token))
            if weights.shape[0] > self.max_recv_tokens:
                raise self._bad(call, f"weights has {weights.shape[0]} rows; at most {self.max_recv_tokens}")
        if indices is not None and (indices.dim() != 2 or indices.shape[1] != c.num_experts_per_token):
            raise self._bad(call, f"indices has shape {tuple(indices.shape)}; expected [tokens, "
                                  f"{c.num_experts_per_token}]")
        if indices is not None and indices.dtype not in (torch.int32, torch.int64):
            raise self._bad(call, f"indices is {indices.dtype}; expected an int32 or int64 tensor (top-k expert "
                                  f"indices)")
        # (is_compiling first: tracing must not read, and so guard on, state
        # the custom ops change when they run)
        if not torch.compiler.is_compiling() and not self._dispatched:
            raise self._bad(call, "no dispatch to combine: combine follows a dispatch")
        if self._recv_num_token_c is not None and not torch.compiler.is_compiling():
            # the host platform: the count is known without a sync
            got = self._delivered()
            if rows < got or (weights is not None and weights.shape[0] < got):
                raise self._bad(call, f"the last dispatch delivered {got} rows but input has {rows}"
                                      + (f" and weights {weights.shape[0]}" if weights is not None else ""))
        if use_external_inp_buf == -1:
            use_external_inp_buf = c.use_external_inp_buf
        return bool(use_external_inp_buf)

    def check(self):
        """Raises EpError for what a kernel of this context reported since
        the last check (an expert index out of range: the token was dropped;
        a wait that timed out), and clears it. A local read: every rank
        holds the same reports, so call it at the same point on every rank
        (on the host platform every call does, after its work)."""
        self._alive("check")
        C.check("mori_ep_check", lib.mori_ep_check(self._ep))

    def _alive(self, call):
        if self._ep is None:
            raise RuntimeError(f"EpDispatchCombineOp.{call} on rank {self.rank}: the op was destroyed")

    def _refuse(self, combine, send_only):
        """This rank's part of a call it refused (its arguments, or anything
        that failed before the launch): it still runs, with no tokens and
        marked refused, so a call refused on some ranks only leaves no rank
        paired with this rank's next call; the others' calls report this
        rank (their check, or on the host platform the call itself). Eager
        only: while tracing, _traced_refusal puts it in the graph."""
        fn = lib.mori_ep_combine_refused if combine else lib.mori_ep_dispatch_refused
        fn(self._ep, 1 if send_only else 0, self._stream())
        if not combine and self._waiting is None:  # (with a half waiting, the library ran nothing)
            self._note_dispatch()
            self._last_num_tokens = 0
        if self.check_every_call:
            # This rank raises its own error for the call; what the call
            # also reported here is not raised again by its next call.
            lib.mori_ep_check(self._ep)

    def _traced_refusal(self, combine, send_only, error, like=None, weights=None):
        """A call refused while torch.compile traces it: the refusal goes
        into the graph (torch.ops.mori.ep_refused, which runs this rank's
        refused part and raises `error`'s type and message when the graph
        runs), so the compiled call stays in step with the peers' as the
        eager one does. The op writes every buffer the dispatch and combine
        ops order themselves by, so the compiler keeps it where the call
        was. Returns what the call's trace returns, shaped as the accepted
        call's would be (`like`: combine's input or dispatch's scales;
        `weights`: whether combine got any), so the caller's code after it
        still traces; the graph raises before anything reads it."""
        kind = "TypeError" if isinstance(error, TypeError) else "ValueError"
        if combine:
            outs = self._combine_outputs
            dtype = like.dtype if isinstance(like, torch.Tensor) and like.dtype in outs else (
                self._dtype if self._dtype in outs else next(iter(outs), None))
            n = self._last_num_tokens
            result = (outs[dtype][:n] if dtype is not None else None,
                      self._combine_weights[:n] if weights is not None else None)
        else:
            key = like.dtype if isinstance(like, torch.Tensor) and like.dtype in self._dispatch_results else None
            result = self._dispatch_results[key]
        torch.ops.mori.ep_refused(self._handle, combine, send_only, kind, str(error), self._src_token_pos,
                                  self._recv_num_token, self._combine_weights)
        return result

    def _failed(self, call, rc):
        """The error of a library call that returned rc < 0. The library ran
        this rank's part (as refused, or as far as it got); with
        check_every_call, what the call also reported here is taken now, as
        _refuse does, and joins the message: the next call must not raise
        this one's reports."""
        error = EpError(call, rc)
        if self.check_every_call and self._ep is not None and lib.mori_ep_check(self._ep) < 0:
            also = lib.mori_last_error().decode(errors="replace")
            error = EpError(call, rc, error.name, f"{error.detail}; this call also reported: {also}")
        return error

    def _note_dispatch(self):
        """A dispatch part goes to the library (whatever it then returns):
        combine reverses what the library holds, and its row check reads
        the live count again."""
        if self._waiting is not None:
            return  # the library refuses the call without touching the dispatch it holds
        self._dispatched = True
        self._count_at_reset = None
        self._count_kept = None

    def _delivered(self):
        """The rows the dispatch combine reverses delivered here (the host
        platform, where the count costs nothing)."""
        return self._count_at_reset if self._count_at_reset is not None else self._recv_num_token_c.value

    def _check_after(self):
        """With check_every_call, what this call's work reported raises
        from it (the call has run: its results are in the views)."""
        if self.check_every_call:
            C.check("mori_ep_check", lib.mori_ep_check(self._ep))

    # ---- the raw calls (eager, and the custom ops' implementations) --------------------------------------
    def _launch_of(self, block_num, rdma_block_num, warp_per_block):
        """The call's launch shape, checked as tracing checks it (with
        MORI_EP_LAUNCH_CONFIG_MODE=auto too, which then uses the table's):
        an eager call refuses what a compiled one refuses."""
        if type(block_num) is not int or type(rdma_block_num) is not int or type(warp_per_block) is not int:
            # (True == 1 and -1.0 == -1 would find a cached shape)
            _check_launch(self.rank, block_num, rdma_block_num, warp_per_block)
        key = (block_num, rdma_block_num, warp_per_block)
        launch = self._launches.get(key)
        if launch is None:
            _check_launch(self.rank, *key)
            launch = self._launches[key] = self._default_launch if self._auto_launch else C.Launch(*key)
        return launch

    def _checked_launch(self, block_num, rdma_block_num, warp_per_block):
        """The call's launch shape; while tracing, None after the same check
        (the custom op makes the shape when it runs)."""
        if torch.compiler.is_compiling():
            _check_launch(self.rank, block_num, rdma_block_num, warp_per_block)
            return None
        return self._launch_of(block_num, rdma_block_num, warp_per_block)

    def _raw_dispatch(self, send_only, input, weights, scales, indices, launch):
        fn, call = ((lib.mori_ep_dispatch_send, "mori_ep_dispatch_send") if send_only
                    else (lib.mori_ep_dispatch, "mori_ep_dispatch"))
        rc = fn(self._ep, input.data_ptr(), weights.data_ptr() if weights is not None else None,
                scales.data_ptr() if scales is not None else None, indices.data_ptr(), input.shape[0], launch,
                self._stream())
        if rc < 0:
            # The library ran this rank's part as refused, with no tokens;
            # but with a half waiting it ran nothing and still holds that
            # half's dispatch, which the next combine reverses.
            if self._waiting is None:
                self._last_num_tokens = 0
            raise self._failed(call, rc)
        if send_only:
            self._waiting = "dispatch_send"

    def _raw_combine(self, send_only, input, dtype_code, weights, launch):
        call = "mori_ep_combine_send" if send_only else "mori_ep_combine"
        # (The registered buffer goes by its address: read in place, its
        # rows checked like any input's.)
        ptr = input.data_ptr() or self._empty_input_ptr
        # An empty weights tensor has no address (torch answers 0), but its
        # rank still gets summed weights back: pass one that is not NULL (its
        # 0 rows, below, keep the kernel from reading it).
        wptr = (weights.data_ptr() or self._weights_fallback) if weights is not None else None
        # The rows each holds: on a GPU only the kernel knows the rows the
        # dispatch delivered, and it refuses a call given fewer (mori_ep_check).
        rc = lib.mori_ep_combine_rows(self._ep, ptr, input.shape[0], dtype_code, wptr,
                                      weights.shape[0] if weights is not None else 0, int(send_only), launch,
                                      self._stream())
        if rc < 0:
            raise self._failed(call, rc)
        if send_only:
            self._waiting = "combine_send"

    def _in_registered_input(self, input):
        """Whether the library refuses `input` as a combine input inside the
        registered buffer without starting there (collectives/ep.c,
        check_not_shifted): it takes an input's extent as max_recv_tokens
        rows, whatever the rows passed, so one just below the buffer counts."""
        p, start = input.data_ptr(), self._combine_input_ptr
        return p != start and p < self._combine_input_end and (
            p >= start or start - p < self.max_recv_tokens * self._hidden * input.element_size())

    def _combine_input(self, input, external=True):
        """What combine passes the library for `input` (eager, and the
        custom op when it runs). The kernel reads the registered buffer. An
        input that is not that buffer goes to the library as it is: its
        kernel copies the rows there itself, after every peer has read the
        rows of an earlier combine of the same dispatch (a copy made here
        would overwrite them under a peer still reading). One that overlaps
        the buffer elsewhere (a shifted slice of it: that copy would
        overwrite rows before reading them) is copied out first; so is one
        that overlaps this context's outputs when use_external_inp_buf is
        off (on, the library refuses it, as it refuses such a dispatch)."""
        if input.data_ptr() == self._combine_input_ptr:
            return input
        if self._in_registered_input(input) or (not external and any(
                _overlaps(input, b) for b in (self._combine_output_raw, self._combine_weights))):
            return input.clone()
        return input

    def _raw_recv(self, which, launch):
        fn = lib.mori_ep_dispatch_recv if which == "dispatch" else lib.mori_ep_combine_recv
        rc = fn(self._ep, launch, self._stream())
        if self._waiting == f"{which}_send":
            self._waiting = None  # (the library ends the wait once the half matches, even if its launch fails)
        if rc < 0:
            raise EpError(f"mori_ep_{which}_recv", rc)

    def _raw_reset(self):
        held = self._delivered() if self._recv_num_token_c is not None else None
        kept = self._count_kept if self._count_kept is not None else self._recv_num_token.clone()
        C.check("mori_ep_reset", lib.mori_ep_reset(self._ep, self._stream()))
        self._count_at_reset = held
        self._count_kept = kept

    def _dispatch_count(self):
        """The rows the last dispatch delivered here, as a [1] int32 tensor
        on the device: recv_num_token, or what it held when reset() cleared it."""
        return self._count_kept if self._count_kept is not None else self._recv_num_token

    # ---- the MORI-EP interface ------------------------------------------------------------------------
    def _dispatch_result(self, scales):
        return self._dispatch_results[scales.dtype if scales is not None else None]

    def _dispatch(self, send_only, input, weights, scales, indices, block_num, rdma_block_num, warp_per_block):
        call = "dispatch_send" if send_only else "dispatch"
        self._alive(call)
        try:
            n, scales = self._check_dispatch(call, input, weights, scales, indices)
            launch = self._checked_launch(block_num, rdma_block_num, warp_per_block)
            result = self._dispatch_result(scales)
        except Exception as error:
            if torch.compiler.is_compiling():
                return self._traced_refusal(False, send_only, error, like=scales)
            self._refuse(False, send_only)
            raise
        if torch.compiler.is_compiling():
            torch.ops.mori.ep_dispatch(self._handle, input, weights, scales, indices, block_num, rdma_block_num,
                                       warp_per_block, send_only, result[0], result[1], result[2], result[3],
                                       result[4], self._src_token_pos)
        else:
            self._note_dispatch()  # (compiled: the custom op does, when it runs)
            self._raw_dispatch(send_only, input, weights, scales, indices, launch)
        if send_only:  # (a send half the library refused leaves the pending one's)
            self._sent_scales_key = scales.dtype if scales is not None else None
        self._last_num_tokens = n
        if not torch.compiler.is_compiling() and not send_only:
            # (a send half's reports come with its receive half)
            self._check_after()
        return result

    def dispatch(self, input, weights, scales, indices, block_num=-1, rdma_block_num=-1, warp_per_block=-1):
        """Sends each token of `input` [tokens, hidden_dim] (data_type) once to
        every distinct rank among its top-k experts `indices` [tokens, top-k]
        (int32), with `weights` [tokens, top-k] (fp32, or None) and `scales`
        [tokens, scale_dim] (or None / empty). Returns (tokens, weights, scales,
        indices, recv_num_token): views of this rank's received rows
        [max_recv_tokens, ...], ordered by (source rank, source token); the
        first recv_num_token[0] rows are this call's."""
        # The fast path: plain tensors that fit, eagerly; anything else (and
        # every error message) goes through _dispatch.
        n = -1
        if (not _is_compiling() and type(input) is _Tensor and type(indices) is _Tensor and input.dtype is self._dtype
                and indices.dtype is _int32 and input.is_cuda is self._on_gpu and indices.is_cuda is self._on_gpu
                and not input.is_meta and not indices.is_meta
                and input.get_device() == self._device_index and indices.get_device() == self._device_index
                and len(shape := input.shape) == 2 and shape[1] == self._hidden
                and (n := shape[0]) <= self._max_tokens and indices.shape == (n, self._topk)
                and input.is_contiguous() and indices.is_contiguous()
                and (weights is None or (type(weights) is _Tensor and weights.dtype is _float32
                                         and weights.is_cuda is self._on_gpu and weights.shape == (n, self._topk)
                                         and not weights.is_meta and weights.get_device() == self._device_index
                                         and weights.is_contiguous()))
                and (scales is None or (self._scale_dim and type(scales) is _Tensor and scales.dtype in self._scale_dtypes
                                        and scales.is_cuda is self._on_gpu and not scales.is_meta
                                        and scales.get_device() == self._device_index
                                        and scales.shape == (n, self._scale_dim) and scales.is_contiguous()))
                and self._ep is not None):
            try:
                launch = self._launch_of(block_num, rdma_block_num, warp_per_block)
            except Exception:
                self._refuse(False, False)
                raise
            self._note_dispatch()
            rc = lib.mori_ep_dispatch(self._ep, input.data_ptr(), None if weights is None else weights.data_ptr(),
                                      None if scales is None else scales.data_ptr(), indices.data_ptr(), n, launch,
                                      self._stream())
            if rc < 0:
                if self._waiting is None:  # as in _raw_dispatch
                    self._last_num_tokens = 0
                raise self._failed("mori_ep_dispatch", rc)
            self._last_num_tokens = n
            if self.check_every_call:
                C.check("mori_ep_check", lib.mori_ep_check(self._ep))
            return self._dispatch_results[None if scales is None else scales.dtype]
        return self._dispatch(False, input, weights, scales, indices, block_num, rdma_block_num, warp_per_block)

    def dispatch_send(self, input, weights, scales, indices, block_num=-1, rdma_block_num=-1, warp_per_block=-1):
        """The sending half of dispatch; returns the views dispatch returns,
        filled once dispatch_recv has run. Work may run in between."""
        return self._dispatch(True, input, weights, scales, indices, block_num, rdma_block_num, warp_per_block)

    def dispatch_recv(self, block_num=-1, rdma_block_num=-1, warp_per_block=-1):
        """The receiving half: waits for the peers' tokens and fills the
        views dispatch_send returned. Returns None."""
        self._alive("dispatch_recv")
        if torch.compiler.is_compiling():
            r = self._dispatch_results[self._sent_scales_key]
            torch.ops.mori.ep_dispatch_recv(self._handle, block_num, rdma_block_num, warp_per_block, r[0], r[1],
                                            r[2], r[3], r[4], self._src_token_pos)
        else:
            self._raw_recv("dispatch", self._launch_of(block_num, rdma_block_num, warp_per_block))
            self._check_after()

    def _combine(self, send_only, input, weights, indices, block_num, rdma_block_num, warp_per_block,
                 use_external_inp_buf):
        call = "combine_send" if send_only else "combine"
        self._alive(call)
        try:
            external = self._check_combine(call, input, weights, indices, use_external_inp_buf)
            dtype = input.dtype
            launch = self._checked_launch(block_num, rdma_block_num, warp_per_block)
            if launch is not None:  # (eager: traced, the custom op prepares its input when it runs)
                input = self._combine_input(input, external)
        except Exception as error:
            # As for dispatch: this rank's part still runs, sending nothing,
            # so the others' calls end at once naming this rank and every
            # rank stays in step.
            if torch.compiler.is_compiling():
                return self._traced_refusal(True, send_only, error, like=input, weights=weights)
            self._refuse(True, send_only)
            raise
        n = self._last_num_tokens
        self._last_combine_dtype = dtype
        if torch.compiler.is_compiling():
            result = (self._combine_outputs[dtype][:n], self._combine_weights[:n] if weights is not None else None)
            torch.ops.mori.ep_combine(self._handle, input, weights, _DTYPE_CODES[dtype], external, block_num,
                                      rdma_block_num, warp_per_block, send_only, self._src_token_pos,
                                      self._combine_output_view(dtype), self._combine_weights)
        else:
            key = (dtype, n, weights is not None)
            result = self._combine_results.get(key)
            if result is None:
                result = (self._combine_outputs[dtype][:n], self._combine_weights[:n] if weights is not None else None)
                self._combine_results[key] = result
            self._raw_combine(send_only, input, _DTYPE_CODES[dtype], weights, launch)
            if not send_only:
                self._check_after()
        return result

    def combine(self, input, weights, indices, block_num=-1, rdma_block_num=-1, warp_per_block=-1,
                use_external_inp_buf=-1, call_reset=False):
        """Sends each processed row of `input` [rows, hidden_dim] (bf16, fp16
        or fp32; rows in the last dispatch's output order, at least its
        recv_num_token) back to its source rank, which sums the copies of
        each token in fp32, in its original order. `weights` [rows, top-k]
        fp32 (or None) are summed the same way; `indices` is accepted for
        the guide's signature (the routing is the last dispatch's). Returns
        (output [tokens, hidden_dim] of input's dtype, weights [tokens,
        top-k] or None), tokens being the last dispatch's. The weighting
        by expert belongs to the caller: with identity experts the output
        is the input times the number of distinct ranks it went to."""
        # The fast path, as in dispatch.
        if (not _is_compiling() and type(input) is _Tensor and (out := self._combine_outputs.get(input.dtype)) is not None
                and input.is_cuda is self._on_gpu and not input.is_meta and input.get_device() == self._device_index
                and len(shape := input.shape) == 2
                and shape[1] == self._hidden and (rows := shape[0]) <= self.max_recv_tokens and input.is_contiguous()
                and (weights is None or (type(weights) is _Tensor and weights.dtype is _float32
                                         and weights.is_cuda is self._on_gpu and len(wshape := weights.shape) == 2
                                         and wshape[1] == self._topk and wshape[0] <= self.max_recv_tokens
                                         and not weights.is_meta and weights.get_device() == self._device_index
                                         and weights.is_contiguous()))
                and (indices is None or (type(indices) is _Tensor and (indices.dtype is _int32 or indices.dtype is _int64)
                                         and len(ishape := indices.shape) == 2 and ishape[1] == self._topk))
                and self._dispatched
                and (use_external_inp_buf == 1 or (use_external_inp_buf == -1 and self._external))
                and not self._in_registered_input(input)
                and (self._recv_num_token_c is None
                     or ((got := self._delivered()) <= rows and (weights is None or got <= wshape[0])))
                and self._ep is not None):
            n = self._last_num_tokens
            key = (input.dtype, n, weights is not None)
            result = self._combine_results.get(key)
            if result is None:
                result = self._combine_results[key] = (out[:n], self._combine_weights[:n] if weights is not None
                                                       else None)
            try:
                launch = self._launch_of(block_num, rdma_block_num, warp_per_block)
            except Exception:
                self._refuse(True, False)
                raise
            ptr = input.data_ptr() or self._empty_input_ptr  # (as in _raw_combine)
            rc = lib.mori_ep_combine_rows(self._ep, ptr, rows, self._dtype_codes[input.dtype],
                                          None if weights is None else (weights.data_ptr() or self._weights_fallback),
                                          0 if weights is None else wshape[0], 0, launch, self._stream())
            if rc < 0:
                raise self._failed("mori_ep_combine", rc)
            self._last_combine_dtype = input.dtype
            if self.check_every_call:
                C.check("mori_ep_check", lib.mori_ep_check(self._ep))
        else:
            result = self._combine(False, input, weights, indices, block_num, rdma_block_num, warp_per_block,
                                   use_external_inp_buf)
        if call_reset:
            self.reset()
        return result

    def combine_send(self, input, weights, indices, block_num=-1, rdma_block_num=-1, warp_per_block=-1,
                     use_external_inp_buf=-1):
        """The sending half of combine; returns the views combine returns,
        filled once combine_recv has run."""
        return self._combine(True, input, weights, indices, block_num, rdma_block_num, warp_per_block,
                             use_external_inp_buf)

    def combine_recv(self, block_num=-1, rdma_block_num=-1, warp_per_block=-1):
        """The receiving half of combine. Returns None."""
        self._alive("combine_recv")
        if torch.compiler.is_compiling():
            torch.ops.mori.ep_combine_recv(self._handle, block_num, rdma_block_num, warp_per_block,
                                           self._combine_output_view(self._last_combine_dtype), self._combine_weights)
        else:
            self._raw_recv("combine", self._launch_of(block_num, rdma_block_num, warp_per_block))
            self._check_after()

    def reset(self):
        """Stream-ordered: clears recv_num_token and the per-call state. Not
        needed between calls (kept for the guide's interface); a combine
        after it still reverses the last dispatch (rows written into the
        registered buffer by hand for a second combine of one dispatch may
        still be read by a peer's first: pass them as the input instead)."""
        self._alive("reset")
        if torch.compiler.is_compiling():
            torch.ops.mori.ep_reset(self._handle, self._recv_num_token)
        else:
            self._raw_reset()

    def get_dispatch_src_token_pos(self):
        """The origin of each of the last dispatch's rows, in MORI-EP's flat
        format: src_rank * world_size * max_num_inp_token_per_rank +
        src_token_id (recv_num_token[0] of them; a new tensor, int32, or
        int64 where world_size^2 * max_num_inp_token_per_rank exceeds 2^31;
        reads the count, so on a GPU it waits for the stream). decode_send_flat_idx
        turns a value back into (src_rank, src_token_id)."""
        self._alive("get_dispatch_src_token_pos")
        n = int(self._recv_num_token[0].item())
        # The library keeps src_rank * max_num_inp_token_per_rank + id (the
        # C API's src_token_pos); MORI-EP's stride per source rank is every
        # rank's capacity, world_size * max_num_inp_token_per_rank.
        return _flat_token_positions(self._src_token_pos[:n], self.config.world_size,
                                     self.config.max_num_inp_token_per_rank)

    def _flat_stride(self):
        """MORI-EP's flat-index stride per source rank."""
        return self.config.world_size * self.config.max_num_inp_token_per_rank

    def decode_send_flat_idx(self, pos):
        """(src_rank, src_token_id) of a get_dispatch_src_token_pos value (an
        int or a tensor of them)."""
        c = self.config
        m, stride = c.max_num_inp_token_per_rank, self._flat_stride()
        if isinstance(pos, torch.Tensor):
            # (not range-checked: that would wait for the device)
            return torch.div(pos, stride, rounding_mode="floor"), torch.remainder(pos, stride)
        try:
            value = None if isinstance(pos, bool) else operator.index(pos)
        except TypeError:
            value = None
        if value is None or not 0 <= value < c.world_size * stride or value % stride >= m:
            raise ValueError(f"EpDispatchCombineOp.decode_send_flat_idx on rank {self.rank}: {pos!r} is not a "
                             f"token position: expected src_rank * {stride} (world_size {c.world_size} x "
                             f"max_num_inp_token_per_rank {m}) + src_token_id, with src_rank < {c.world_size} and "
                             f"src_token_id < {m}")
        return divmod(value, stride)

    # ---- DeepEP-style layouts (mori.ops.ep_layout) ----------------------------------------------------
    def convert_dispatch_output(self, dispatch_out_x, dispatch_out_topk_idx, block_num=-1, warp_per_block=-1):
        """The last dispatch's rows in the expert-major layout of DeepEP's
        low-latency mode: (packed_recv_x [num_experts_per_rank,
        max_recv_tokens, hidden_dim], packed_recv_count [num_experts_per_rank]
        int32, packed_recv_src_info [num_experts_per_rank, max_recv_tokens]
        int32 (the source token id), packed_recv_layout_range
        [num_experts_per_rank, world_size] int64 ((begin << 32) | count of
        each source rank's rows)). See docs/ep.md. block_num and
        warp_per_block are checked as a call's launch sizes and not used
        (AMD's signature: the conversion runs as torch operations)."""
        self._alive("convert_dispatch_output")
        _check_launch(self.rank, block_num, -1, warp_per_block)
        from . import ep_layout

        return ep_layout.convert_dispatch_output(self, dispatch_out_x, dispatch_out_topk_idx)

    def convert_combine_input(self, packed_recv_x, packed_recv_src_info, packed_recv_layout_range, block_num=-1,
                              warp_per_block=-1):
        """Back from the expert-major layout to combine's input: row i of the
        last dispatch gets the fp32 sum of its rows' outputs over this rank's
        experts (in the dtype of packed_recv_x; [max_recv_tokens,
        hidden_dim]). block_num and warp_per_block as in
        convert_dispatch_output."""
        self._alive("convert_combine_input")
        _check_launch(self.rank, block_num, -1, warp_per_block)
        from . import ep_layout

        return ep_layout.convert_combine_input(self, packed_recv_x, packed_recv_src_info, packed_recv_layout_range)

    def dispatch_standard_moe(self, input, weights, scales, indices, block_num=-1, rdma_block_num=-1,
                              warp_per_block=-1):
        """dispatch, then convert_dispatch_output: (packed_recv_x,
        packed_recv_count, packed_recv_src_info, packed_recv_layout_range)."""
        self._alive("dispatch_standard_moe")
        out, _, _, idx, _ = self.dispatch(input, weights, scales, indices, block_num, rdma_block_num,
                                          warp_per_block)
        return self.convert_dispatch_output(out, idx)

    def combine_standard_moe(self, input, weights, indices, block_num=-1, rdma_block_num=-1, warp_per_block=-1,
                             call_reset=False, packed_recv_src_info=None, packed_recv_layout_range=None):
        """convert_combine_input of the expert-major `input`, then combine
        (weights: the dispatch weights or None). Returns combine's output."""
        self._alive("combine_standard_moe")
        try:
            rows = self.convert_combine_input(input, packed_recv_src_info, packed_recv_layout_range)
        except Exception as error:
            # As combine's own refusals: this rank's part still runs.
            if torch.compiler.is_compiling():
                return self._traced_refusal(True, False, error, like=input)[0]
            self._refuse(True, False)
            raise
        out, _ = self.combine(rows, weights, indices, block_num, rdma_block_num, warp_per_block,
                              call_reset=call_reset)
        return out

    # ---- lifetime ---------------------------------------------------------------------------------------
    def __del__(self):
        # destroy() is collective, so it cannot run from the garbage
        # collector: say that the buffers stay instead of losing them quietly.
        # At interpreter exit the process ends anyway, and the warnings
        # machinery may already be gone: nothing to say then.
        if getattr(self, "_ep", None) is not None and not sys.is_finalizing():
            warnings.warn(f"EpDispatchCombineOp on rank {self.rank} was collected without destroy(): its buffers "
                          f"stay allocated until the process ends; call destroy() (collective) on every rank",
                          ResourceWarning, stacklevel=2)

    def destroy(self):
        """Collective: waits for the device and frees the context. Its views
        must not be used afterwards. Idempotent."""
        if self._ep is not None:
            ep, self._ep = self._ep, None
            _OPS.pop(self._handle, None)
            C.check("mori_ep_destroy", lib.mori_ep_destroy(ep))

