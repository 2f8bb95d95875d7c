# SPDX-License-Identifier: MIT
"""The expert-major ("standard MoE", DeepEP low-latency) layout of a
dispatch's output, and back, in torch operations on the device (no host
synchronisation, fixed shapes, so they can be captured and compiled).

Dispatch leaves a rank its received rows in (source rank, source token)
order, one row per token whatever the number of this rank's experts the
token chose. The expert-major layout has one slot per (token, local
expert) instead:

  packed_recv_x             [E, R, hidden]  slot s of expert e: the s-th row routed to e
  packed_recv_count         [E] int32        slots of e in use
  packed_recv_src_info      [E, R] int32     the source token id of each slot (-1: unused)
  packed_recv_layout_range  [E, W] int64     (begin << 32) | count of each source rank's slots

with E = num_experts_per_rank, R = max_recv_tokens (world_size x
max_num_inp_token_per_rank), W = world_size; within an expert the slots
keep the (source rank, source token) order; unused slots are zero. A token
that lists one expert twice in its top-k has one slot there.
convert_combine_input goes back: each dispatched row gets the fp32 sum of
its slots' rows over this rank's experts (the expert weighting is the
caller's, as with combine)."""
import torch

_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _routing(op, topk_idx):
    """(ok [R, K] bool: slot k of row i goes to a local expert, first of
    its kind in the row; local [R, K] int64 expert; pos [R, E] int64: the
    slot row i takes in each expert; hits [R, E] int32)."""
    c = op.config
    rows, experts = op.max_recv_tokens, c.num_experts_per_rank
    idx = topk_idx.to(torch.int64)
    local = idx - op.rank * experts
    # (the last dispatch's count, also after reset() cleared recv_num_token)
    valid_row = torch.arange(rows, device=idx.device) < op._dispatch_count().to(torch.int64)
    ok = (local >= 0) & (local < experts) & valid_row[:, None]
    k = idx.shape[1]
    earlier = torch.ones(k, k, dtype=torch.bool, device=idx.device).tril(-1)
    repeated = ((idx[:, :, None] == idx[:, None, :]) & earlier).any(-1)
    ok &= ~repeated
    target = torch.where(ok, local, experts)  # column `experts` takes what goes nowhere
    hits = torch.zeros(rows, experts + 1, dtype=torch.int32, device=idx.device)
    hits.scatter_(1, target, 1)
    hits = hits[:, :experts]
    pos = torch.cumsum(hits, 0, dtype=torch.int64) - 1
    return ok, local, pos, hits


def _slots(op, ok, local, pos):
    """[R, K] flat slot numbers (e * R + slot) of each (row, k); E * R where
    the pair goes nowhere."""
    rows, experts = op.max_recv_tokens, op.config.num_experts_per_rank
    safe = torch.where(ok, local, 0)
    slot = torch.gather(pos, 1, safe)
    return torch.where(ok, safe * rows + slot, experts * rows)


def convert_dispatch_output(op, dispatch_out_x, dispatch_out_topk_idx):
    c = op.config
    rows, experts, world, hidden = op.max_recv_tokens, c.num_experts_per_rank, c.world_size, c.hidden_dim
    if tuple(dispatch_out_x.shape) != (rows, hidden) or tuple(dispatch_out_topk_idx.shape) != (
            rows, c.num_experts_per_token):
        raise ValueError(f"convert_dispatch_output on rank {op.rank}: expected dispatch's outputs "
                         f"[{rows}, {hidden}] and [{rows}, {c.num_experts_per_token}], got "
                         f"{tuple(dispatch_out_x.shape)} and {tuple(dispatch_out_topk_idx.shape)}")
    ok, local, pos, hits = _routing(op, dispatch_out_topk_idx)
    slots = _slots(op, ok, local, pos)
    dev, dtype = dispatch_out_x.device, dispatch_out_x.dtype
    as_int = _SAME_SIZE_INT[dispatch_out_x.element_size()]  # index_copy_ on any dtype (fp8 too)
    packed = torch.zeros(experts * rows + 1, hidden, dtype=as_int, device=dev)  # + the slot of nowhere
    src = dispatch_out_x.view(as_int)
    src_tok = torch.remainder(op._src_token_pos, c.max_num_inp_token_per_rank)
    info = torch.full((experts * rows + 1,), -1, dtype=torch.int32, device=dev)
    for k in range(slots.shape[1]):
        packed.index_copy_(0, slots[:, k], src)
        info.index_copy_(0, slots[:, k], src_tok)
    packed_x = packed[:experts * rows].view(dtype).view(experts, rows, hidden)
    count = hits.sum(0, dtype=torch.int32)
    src_rank = torch.div(op._src_token_pos, c.max_num_inp_token_per_rank, rounding_mode="floor").to(torch.int64)
    src_rank = torch.clamp(src_rank, 0, world - 1)  # rows past the count: their hits are 0 anyway
    per_rank = torch.zeros(world, experts, dtype=torch.int64, device=dev)
    per_rank.index_add_(0, src_rank, hits.to(torch.int64))
    per_rank = per_rank.t()
    begin = torch.cumsum(per_rank, 1) - per_rank
    layout = (begin << 32) | per_rank
    return packed_x, count, info[:experts * rows].view(experts, rows), layout.contiguous()


def convert_combine_input(op, packed_recv_x, packed_recv_src_info=None, packed_recv_layout_range=None):
    """src_info and layout_range are accepted for DeepEP's signature; the
    slots are those of the last dispatch (its indices are in the op)."""
    c = op.config
    rows, experts, hidden = op.max_recv_tokens, c.num_experts_per_rank, c.hidden_dim
    if tuple(packed_recv_x.shape) != (experts, rows, hidden):
        raise ValueError(f"convert_combine_input on rank {op.rank}: packed_recv_x has shape "
                         f"{tuple(packed_recv_x.shape)}; expected [{experts}, {rows}, {hidden}]")
    if packed_recv_src_info is not None and tuple(packed_recv_src_info.shape) != (experts, rows):
        raise ValueError(f"convert_combine_input on rank {op.rank}: packed_recv_src_info has shape "
                         f"{tuple(packed_recv_src_info.shape)}; expected [{experts}, {rows}]")
    if packed_recv_layout_range is not None and tuple(packed_recv_layout_range.shape) != (experts, c.world_size):
        raise ValueError(f"convert_combine_input on rank {op.rank}: packed_recv_layout_range has shape "
                         f"{tuple(packed_recv_layout_range.shape)}; expected [{experts}, {c.world_size}]")
    ok, local, pos, _ = _routing(op, op._dispatch_indices)
    slots = _slots(op, ok, local, pos)
    flat = packed_recv_x.reshape(experts * rows, hidden)
    acc = torch.zeros(rows, hidden, dtype=torch.float32, device=packed_recv_x.device)
    for k in range(slots.shape[1]):  # a fixed order: the same sums every time
        got = flat.index_select(0, torch.where(ok[:, k], slots[:, k], 0)).to(torch.float32)
        acc += torch.where(ok[:, k, None], got, 0.0)
    return acc.to(packed_recv_x.dtype)
