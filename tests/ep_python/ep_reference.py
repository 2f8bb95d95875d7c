# SPDX-License-Identifier: MIT
"""What MoE dispatch and combine must produce, from torch operations alone,
and the routings the tests use. Every rank makes every rank's inputs from
the same seeds, so each can compute its own expected outputs.

dispatch, seen from rank `me`: the tokens of every source rank r, in
(r, token) order, that have at least one of their top-k experts on `me`
(expert e lives on rank e // experts_per_rank), each once whatever the
number of its experts there, with its weights, indices and scales;
src_token_pos = r * world * max_tokens + token (MORI-EP's flat format).

combine, seen from rank `me`: token t gets the fp32 sum of the rows each
distinct destination rank sends back for it, cast to the combine dtype;
weights the same."""
import torch

# The routings each correctness run goes through.
ROUTINGS = ("uniform", "skewed", "duplicate_ranks", "duplicate_experts", "empty_source", "empty_destination")


def routing(kind, gen, n, world, experts_per_rank, topk):
    """[n, topk] int32 expert ids of one kind, distinct within a row but
    for duplicate_experts: uniform: any experts; skewed: every token
    picks expert 0, the rest near it (rank 0 gets everything);
    duplicate_ranks: all of a token's experts on as few ranks as possible
    (several experts of one rank); duplicate_experts: as uniform, with a
    token's first expert named twice (a router's top-k may repeat one: the
    token still goes to its rank once); empty_destination: no token picks
    the last rank."""
    total = world * experts_per_rank
    if kind in ("uniform", "empty_source"):
        return torch.rand(n, total, generator=gen).argsort(1)[:, :topk].to(torch.int32)
    if kind == "skewed":
        near = torch.rand(n, min(total, topk * 2) - 1, generator=gen).argsort(1)[:, :topk - 1] + 1
        return torch.cat([torch.zeros(n, 1, dtype=torch.int64), near], 1).to(torch.int32)
    if kind == "duplicate_ranks":
        rank = torch.randint(0, world, (n, 1), generator=gen)
        local = torch.rand(n, experts_per_rank, generator=gen).argsort(1)
        take = min(topk, experts_per_rank)
        ids = rank * experts_per_rank + local[:, :take]
        if take < topk:  # the rest on the next rank
            more = ((rank + 1) % world) * experts_per_rank + torch.rand(
                n, experts_per_rank, generator=gen).argsort(1)[:, :topk - take]
            ids = torch.cat([ids, more], 1)
        return ids.to(torch.int32)
    if kind == "duplicate_experts":
        ids = torch.rand(n, total, generator=gen).argsort(1)[:, :topk]
        if topk > 1:
            ids[:, topk - 1] = ids[:, 0]
        return ids.to(torch.int32)
    if kind == "empty_destination":
        allowed = (world - 1) * experts_per_rank if world > 1 else total
        return torch.rand(n, allowed, generator=gen).argsort(1)[:, :topk].to(torch.int32)
    raise ValueError(kind)


def make_inputs(seed, rank, world, dtype, hidden, max_tokens, experts_per_rank, topk, scale_dim, kind, n=None):
    """(x [n, hidden] dtype, weights [n, topk] fp32, scales [n, scale_dim]
    fp32 or None, indices [n, topk] int32) of `rank` for one call."""
    gen = torch.Generator().manual_seed(seed * 1000003 + rank)
    if n is None:
        n = int(torch.randint(1, max_tokens + 1, (1,), generator=gen))
    if kind == "empty_source" and rank == 0:
        n = 0
    x = (torch.randn(n, hidden, generator=gen) * 4).to(dtype)
    weights = torch.rand(n, topk, generator=gen)
    scales = torch.rand(n, scale_dim, generator=gen) if scale_dim else None
    indices = routing(kind, gen, n, world, experts_per_rank, topk)
    return x, weights, scales, indices


def destination_ranks(indices, experts_per_rank, world):
    """[n, world] bool: token t goes to rank d."""
    n = indices.shape[0]
    hit = torch.zeros(n, world + 1, dtype=torch.bool)
    dest = (indices.to(torch.int64) // experts_per_rank).clamp(0, world)
    hit.scatter_(1, dest, True)
    return hit[:, :world]


def expected_dispatch(all_inputs, me, world, experts_per_rank, max_tokens):
    """(x, weights, scales, indices, src_token_pos) that rank `me` receives,
    from every rank's (x, weights, scales, indices); src_token_pos in the
    MORI-EP flat format: src_rank * world * max_tokens + src_token."""
    xs, ws, ss, ids, pos = [], [], [], [], []
    for r, (x, w, s, idx) in enumerate(all_inputs):
        mask = destination_ranks(idx, experts_per_rank, world)[:, me]
        xs.append(x[mask])
        ws.append(w[mask])
        ids.append(idx[mask])
        if s is not None:
            ss.append(s[mask])
        pos.append(r * world * max_tokens + torch.nonzero(mask).flatten().to(torch.int32))
    return (torch.cat(xs), torch.cat(ws), torch.cat(ss) if ss else None, torch.cat(ids), torch.cat(pos))


def expert(rows, rank, dtype):
    """The 'expert' every test runs on a rank's received rows: a scaling by
    (rank + 1) in fp32, cast to the combine dtype (so each destination's
    copy differs and a row sent back to the wrong place shows)."""
    return (rows.to(torch.float32) * (rank + 1)).to(dtype)


def expected_combine(x, weights, indices, experts_per_rank, world, dtype):
    """(output, weights) that a rank gets back for its own tokens when
    every destination d ran expert(rows, d, dtype) and sent the dispatch
    weights back unchanged."""
    dest = destination_ranks(indices, experts_per_rank, world)
    acc = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float32)
    wacc = torch.zeros_like(weights)
    for d in range(world):
        m = dest[:, d].to(torch.float32)[:, None]
        acc += expert(x, d, dtype).to(torch.float32) * m
        wacc += weights * m
    return acc.to(dtype), wacc


TOLERANCE = {  # (rtol, atol) of combine: fp32 sums in another order, then one rounding
    torch.float32: (1e-5, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float16: (2e-3, 1e-3),
}
