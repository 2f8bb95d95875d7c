# SPDX-License-Identifier: MIT
"""torch.ops.mori.ep_*: MoE dispatch and combine as torch custom ops, what
EpDispatchCombineOp calls while torch.compile traces it (eagerly it calls
the library directly). Each op writes the context's buffers, passed in as
the mutated arguments, and returns nothing: the compiler sees which
tensors change and keeps the order of the calls. The context is its handle
(an int); the fake implementations do nothing, since the outputs exist
already with their shapes.

The library writes the context's own buffers, wherever the tensors passed
live. When the compiler passes those buffers (inductor writes mutated
inputs in place) nothing more happens; when it passes copies of them
(functionalization without re-inplacing, e.g. the aot_eager backend), the
implementation copies the buffers into them, so the results are right
either way."""
import weakref
from typing import Optional

import torch
from torch import Tensor

# Live contexts by handle (EpDispatchCombineOp adds itself), for the ops,
# which take the handle as an int.
_OPS = weakref.WeakValueDictionary()

_DISPATCH_OUTS = ("out_tokens", "out_weights", "out_scales", "out_indices", "recv_num_token", "src_token_pos")


def _fill(pairs):
    """Copies each buffer into the tensor that stands for it, unless it is
    that buffer."""
    for passed, buffer in pairs:
        if passed.data_ptr() != buffer.data_ptr() and passed.numel():
            passed.copy_(buffer)


def _dispatch_buffers(op, out_tokens, out_weights, out_scales, out_indices, recv_num_token, src_token_pos):
    return ((out_tokens, op._dispatch_tokens), (out_weights, op._dispatch_weights),
            (out_scales, op._scales_view(out_scales.dtype)), (out_indices, op._dispatch_indices),
            (recv_num_token, op._recv_num_token), (src_token_pos, op._src_token_pos))


def _op(handle):
    op = _OPS.get(handle)
    if op is None or op._ep is None:
        raise RuntimeError(f"torch.ops.mori.ep_*: no live EpDispatchCombineOp with handle {handle:#x}")
    return op


_ERRORS = {"TypeError": TypeError, "ValueError": ValueError}


# A call torch.compile traced with arguments this rank refuses (dtype,
# shape, launch size: what the trace can see): this rank's part of the call
# runs as refused and the error is raised when the graph runs, so the peers'
# calls are not paired with this rank's next one. It is marked as writing
# the buffers the other ops order themselves by (src_token_pos, which every
# dispatch writes and every combine reads; recv_num_token; the combine
# weights, which every combine writes), so no compiler pass moves it past
# a dispatch or combine of the same context.
@torch.library.custom_op("mori::ep_refused", mutates_args=("src_token_pos", "recv_num_token", "combine_weights"))
def ep_refused(handle: int, combine: bool, send_only: bool, kind: str, message: str, src_token_pos: Tensor,
               recv_num_token: Tensor, combine_weights: Tensor) -> None:
    op = _op(handle)
    op._refuse(combine, send_only)
    raise _ERRORS.get(kind, ValueError)(message)


@ep_refused.register_fake
def _(handle, combine, send_only, kind, message, src_token_pos, recv_num_token, combine_weights):
    return None


@torch.library.custom_op("mori::ep_dispatch", mutates_args=_DISPATCH_OUTS)
def ep_dispatch(handle: int, input: Tensor, weights: Optional[Tensor], scales: Optional[Tensor], indices: Tensor,
                block_num: int, rdma_block_num: int, warp_per_block: int, send_only: bool, out_tokens: Tensor,
                out_weights: Tensor, out_scales: Tensor, out_indices: Tensor, recv_num_token: Tensor,
                src_token_pos: Tensor) -> None:
    op = _op(handle)
    try:
        launch = op._launch_of(block_num, rdma_block_num, warp_per_block)
    except Exception:
        op._refuse(False, send_only)  # as the eager call: this rank's part still runs
        raise
    op._note_dispatch()
    op._raw_dispatch(send_only, input, weights, scales, indices, launch)
    _fill(_dispatch_buffers(op, out_tokens, out_weights, out_scales, out_indices, recv_num_token, src_token_pos))
    if not send_only:
        op._check_after()  # what this call reported, from this call (the host platform)


@ep_dispatch.register_fake
def _(handle, input, weights, scales, indices, block_num, rdma_block_num, warp_per_block, send_only, out_tokens,
      out_weights, out_scales, out_indices, recv_num_token, src_token_pos):
    return None


@torch.library.custom_op("mori::ep_dispatch_recv", mutates_args=_DISPATCH_OUTS)
def ep_dispatch_recv(handle: int, block_num: int, rdma_block_num: int, warp_per_block: int, out_tokens: Tensor,
                     out_weights: Tensor, out_scales: Tensor, out_indices: Tensor, recv_num_token: Tensor,
                     src_token_pos: Tensor) -> None:
    op = _op(handle)
    op._raw_recv("dispatch", op._launch_of(block_num, rdma_block_num, warp_per_block))
    _fill(_dispatch_buffers(op, out_tokens, out_weights, out_scales, out_indices, recv_num_token, src_token_pos))
    op._check_after()


@ep_dispatch_recv.register_fake
def _(handle, block_num, rdma_block_num, warp_per_block, out_tokens, out_weights, out_scales, out_indices,
      recv_num_token, src_token_pos):
    return None


# dispatch_state (the src_token_pos buffer) is read: combine follows the
# dispatch whose routing it reverses.
@torch.library.custom_op("mori::ep_combine", mutates_args=("out", "out_weights"))
def ep_combine(handle: int, input: Tensor, weights: Optional[Tensor], dtype_code: int, external: bool,
               block_num: int, rdma_block_num: int, warp_per_block: int, send_only: bool, dispatch_state: Tensor,
               out: Tensor, out_weights: Tensor) -> None:
    op = _op(handle)
    if not op._dispatched:
        # (eager combine says so before it traces; a compiled one here,
        # this rank's part run as refused first so the ranks stay in step)
        op._refuse(True, send_only)
        raise ValueError(f"EpDispatchCombineOp.combine on rank {op.rank}: no dispatch to combine: combine follows a "
                         f"dispatch")
    try:
        launch = op._launch_of(block_num, rdma_block_num, warp_per_block)
        input = op._combine_input(input, external)
    except Exception:
        op._refuse(True, send_only)  # as the eager call: this rank's part still runs
        raise
    op._raw_combine(send_only, input, dtype_code, weights, launch)
    _fill(((out, op._combine_output_view(out.dtype)), (out_weights, op._combine_weights)))
    if not send_only:
        op._check_after()


@ep_combine.register_fake
def _(handle, input, weights, dtype_code, external, block_num, rdma_block_num, warp_per_block, send_only,
      dispatch_state, out, out_weights):
    return None


@torch.library.custom_op("mori::ep_combine_recv", mutates_args=("out", "out_weights"))
def ep_combine_recv(handle: int, block_num: int, rdma_block_num: int, warp_per_block: int, out: Tensor,
                    out_weights: Tensor) -> None:
    op = _op(handle)
    op._raw_recv("combine", op._launch_of(block_num, rdma_block_num, warp_per_block))
    _fill(((out, op._combine_output_view(out.dtype)), (out_weights, op._combine_weights)))
    op._check_after()


@ep_combine_recv.register_fake
def _(handle, block_num, rdma_block_num, warp_per_block, out, out_weights):
    return None


@torch.library.custom_op("mori::ep_reset", mutates_args=("recv_num_token",))
def ep_reset(handle: int, recv_num_token: Tensor) -> None:
    op = _op(handle)
    op._raw_reset()
    _fill(((recv_num_token, op._recv_num_token),))


@ep_reset.register_fake
def _(handle, recv_num_token):
    return None
