# SPDX-License-Identifier: MIT
"""mori's fused collectives on torch tensors (torch.ops.mori.*), each one
kernel that synchronises inside: when it returns on the stream, the next
kernel on that stream can read `out` on every rank.

    import mori.ops
    mori.ops.all_to_all(inp, out, group)          # out[r] = rank r's inp[me]
    mori.ops.all_reduce(inp, out, "sum", group)   # sum, avg, max, min
    mori.ops.all_to_all_vdev(inp, out, in_splits, out_splits_offsets, group)

`group` is a ProcessGroup or its name. Inputs and outputs are any CUDA
tensors (contiguous, same size and dtype); they need not be symmetric. The
first call at a size sizes the group's workspace (collectively); under CUDA
graph capture run the op once before capturing.

all_to_all_vdev has torch's all_to_all_vdev contract (MoE dispatch and
combine, sizes on the GPU): in_splits (int64, one per rank) counts the rows
(dim 0) of `inp` for each rank, packed in rank order; `out` must be a MORI
tensor rendezvoused on the group; out_splits_offsets (int64, 2 x ranks)
receives the rows from each rank and where they start in `out`.
"""
import torch

import mori.allocator  # noqa: F401  (loads the library that registers the ops)


def _name(group):
    return group if isinstance(group, str) else group.group_name


def all_to_all(inp, out, group):
    torch.ops.mori.all_to_all(inp, out, _name(group))
    return out


def all_reduce(inp, out, reduce_op, group):
    torch.ops.mori.all_reduce(inp, out, reduce_op, _name(group))
    return out


def all_to_all_vdev(inp, out, in_splits, out_splits_offsets, group):
    torch.ops.mori.all_to_all_vdev(inp, out, in_splits, out_splits_offsets, _name(group))
    return out


def all_to_all_vdev_2d(inp, out, in_splits, out_splits_offsets, group, major_align=None):
    """torch's all_to_all_vdev_2d (MoE dispatch): in_splits [ranks * experts]
    rank-major, out expert-major, each expert's rows rounded up to
    major_align (and at least major_align rows)."""
    torch.ops.mori.all_to_all_vdev_2d(inp, out, in_splits, out_splits_offsets, _name(group), major_align)
    return out


def all_to_all_vdev_2d_offset(inp, out, in_splits_offsets, out_splits_offsets, group):
    """torch's all_to_all_vdev_2d_offset (MoE combine): in_splits_offsets
    [2, experts * ranks] expert-major (as a dispatch leaves them), out
    rank-major."""
    torch.ops.mori.all_to_all_vdev_2d_offset(inp, out, in_splits_offsets, out_splits_offsets, _name(group))
    return out
