# SPDX-License-Identifier: MIT
"""One PE of the Python EP suite (host platform, CPU tensors): MORI Shmem
through a unique-ID file, then EpDispatchCombineOp checked against
ep_reference in every dtype and routing, back to back, refusing bad input,
and under torch.compile.
    ep_pe.py <rank> <world> <uid file> <back-to-back calls>"""
import copy
import gc
import os
import pickle
import sys
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ep_reference as ref  # noqa: E402
from uid_file import share_unique_id  # noqa: E402

import mori  # noqa: E402
import mori.ops  # noqa: E402
from mori import shmem  # noqa: E402

HIDDEN, MAX_TOKENS, EXPERTS_PER_RANK, TOPK = 40, 10, 4, 4
DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float8_e4m3fn)
SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def bits(t):
    return t.contiguous().view(SAME_SIZE_INT[t.element_size()])


def expect_raises(kind, fn, says):
    try:
        fn()
    except kind as e:
        for s in says:
            assert s in str(e), f"{kind.__name__} without {s!r}: {e}"
        return e
    raise AssertionError(f"no {kind.__name__} (expected one saying {says})")


class Pe:
    def __init__(self, rank, world):
        self.rank, self.world = rank, world

    def config(self, dtype, **kw):
        scaled = dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
        args = dict(data_type=dtype, rank=self.rank, world_size=self.world, hidden_dim=HIDDEN,
                    scale_dim=2 if scaled else 0, scale_type_size=4, max_token_type_size=4,
                    max_num_inp_token_per_rank=MAX_TOKENS, num_experts_per_rank=EXPERTS_PER_RANK,
                    num_experts_per_token=TOPK, gpu_per_node=self.world)
        args.update(kw)
        return mori.ops.EpDispatchCombineConfig(**args)

    def inputs(self, op, seed, kind, n=None):
        c = op.config
        return [ref.make_inputs(seed, r, self.world, c.data_type, HIDDEN, MAX_TOKENS, EXPERTS_PER_RANK, TOPK,
                                c.scale_dim, kind, n) for r in range(self.world)]

    def one_call(self, op, seed, kind, combine_dtype, variant="plain", n=None):
        """A dispatch and a combine checked against the reference. variant:
        plain (dispatch; combine of recv rows), full (combine of the whole
        capacity), registered (combine from the registered buffer), split
        (send/recv halves), no_weights, no_scales (a scaled dtype's call
        without scales: the rows arrive with zero scales)."""
        me, c = self.rank, op.config
        everyone = self.inputs(op, seed, kind, n)
        x, w, s, idx = everyone[me]
        where = f"rank {me} of {self.world}, {c.data_type}, seed {seed}, {kind}, {variant}"
        send_w = None if variant == "no_weights" else w
        if variant == "no_scales":
            s = None
        if variant == "split":
            got = op.dispatch_send(x, send_w, s, idx)
            assert op.dispatch_recv() is None
        elif variant == "split_interrupted":
            # Calls made while the send half waits for its receive half are
            # refused by the library without touching the pending dispatch
            # (whose rows the combine below must still return).
            got = op.dispatch_send(x, send_w, s, idx)
            expect_raises(mori.ops.EpError, lambda: op.dispatch_send(x, send_w, s, idx), ("still waiting",))
            expect_raises(mori.ops.EpError, lambda: op.dispatch(x, send_w, s, idx), ("still waiting",))
            expect_raises(ValueError, lambda: op.dispatch(x.float(), send_w, s, idx), ("input is torch.float32",))
            assert op.dispatch_recv() is None
        else:
            got = op.dispatch(x, send_w, s, idx)
        out, ow, os_, oi, cnt = got
        ex, ew, es, ei, epos = ref.expected_dispatch(everyone, me, self.world, EXPERTS_PER_RANK, MAX_TOKENS)
        n_recv = int(cnt[0])
        assert n_recv == ex.shape[0], f"{where}: received {n_recv} rows, expected {ex.shape[0]}"
        assert out.shape == (op.max_recv_tokens, HIDDEN) and out.dtype == c.data_type, (where, out.shape, out.dtype)
        assert torch.equal(bits(out[:n_recv]), bits(ex)), f"{where}: dispatched tokens differ"
        assert torch.equal(oi[:n_recv], ei), f"{where}: dispatched indices differ"
        if send_w is not None:
            assert torch.equal(bits(ow[:n_recv]), bits(ew)), f"{where}: dispatched weights differ"
        else:  # none given: zeros, not an earlier call's
            assert not ow[:n_recv].any(), f"{where}: weights arrived without any sent: {ow[:n_recv]}"
        if variant == "no_scales":
            assert c.scale_dim and not bits(os_[:n_recv]).any(), f"{where}: scales arrived without any sent"
        elif es is not None:
            assert torch.equal(bits(os_[:n_recv]), bits(es)), f"{where}: dispatched scales differ"
        pos = op.get_dispatch_src_token_pos()
        assert torch.equal(pos, epos), f"{where}: src_token_pos {pos.tolist()} != {epos.tolist()}"
        if n_recv:
            src_rank, src_tok = op.decode_send_flat_idx(pos)
            assert torch.equal(src_rank * self.world * MAX_TOKENS + src_tok, pos)
            assert op.decode_send_flat_idx(int(pos[-1])) == (int(src_rank[-1]), int(src_tok[-1]))

        y = ref.expert(out[:n_recv], me, combine_dtype)
        cw_in = ow[:n_recv]
        if variant == "full":
            full = torch.zeros(op.max_recv_tokens, HIDDEN, dtype=combine_dtype)
            full[:n_recv] = y
            co, cw = op.combine(full, ow, idx)
        elif variant == "registered":
            buf = op.get_registered_combine_input_buffer(combine_dtype)
            buf[:n_recv] = y
            co, cw = op.combine(buf, ow, idx, use_external_inp_buf=0)
        elif variant == "split":
            co, cw = op.combine_send(y, cw_in, idx)
            assert op.combine_recv() is None
        elif variant == "no_weights":
            co, cw = op.combine(y, None, idx, call_reset=True)
            assert cw is None
        else:
            co, cw = op.combine(y, cw_in, idx)
        ey, eww = ref.expected_combine(x, w, idx, EXPERTS_PER_RANK, self.world, combine_dtype)
        assert co.shape == (x.shape[0], HIDDEN) and co.dtype == combine_dtype, (where, co.shape, co.dtype)
        rtol, atol = ref.TOLERANCE[combine_dtype]
        torch.testing.assert_close(co, ey, rtol=rtol, atol=atol, msg=lambda m: f"{where}: combine: {m}")
        if variant != "no_weights":  # (that one asserted None above)
            assert cw is not None, f"{where}: combine returned no weights though it was given them"
            torch.testing.assert_close(cw, eww, rtol=1e-6, atol=1e-6,
                                       msg=lambda m: f"{where}: combine weights: {m}\n{cw}\n!=\n{eww}")

    def correctness(self):
        seed = 1
        for dtype in DTYPES:
            op = mori.ops.EpDispatchCombineOp(self.config(dtype))
            combine_dtypes = (torch.bfloat16, torch.float32) if dtype.itemsize == 1 else (dtype,)
            for kind in ref.ROUTINGS:
                for cdt in combine_dtypes:
                    seed += 1
                    self.one_call(op, seed, kind, cdt)
            for variant in ("full", "registered", "split", "no_weights") + (("no_scales",) if dtype.itemsize == 1 else ()):
                seed += 1
                self.one_call(op, seed, "uniform", combine_dtypes[0], variant)
            seed += 1
            self.one_call(op, seed, "uniform", combine_dtypes[0], n=MAX_TOKENS)  # every rank full
            op.destroy()
            op.destroy()  # idempotent
        # use_external_inp_buf=False in the config: combine reads the registered buffer
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16, use_external_inp_buf=False))
        self.one_call(op, 99, "uniform", torch.bfloat16, "registered")
        self.one_call(op, 100, "skewed", torch.bfloat16)  # input copied to the registered buffer
        op.destroy()

    def two_combines(self):
        """Two combines of each dispatch from the registered buffer's path
        (use_external_inp_buf=False), the second with other rows: a rank
        that wrote its second combine's rows into the registered buffer
        while a peer still read its first would corrupt the peer's first."""
        me = self.rank
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16, use_external_inp_buf=False))
        for seed in range(300, 340):
            everyone = self.inputs(op, seed, "uniform")
            x, w, s, idx = everyone[me]
            out, ow, _, _, cnt = op.dispatch(x, w, s, idx)
            n_recv = int(cnt[0])
            y = ref.expert(out[:n_recv], me, torch.bfloat16)
            ey, _ = ref.expected_combine(x, w, idx, EXPERTS_PER_RANK, self.world, torch.bfloat16)
            rtol, atol = ref.TOLERANCE[torch.bfloat16]
            for k, scale in enumerate((1.0, 2.0)):  # x2: exact in bfloat16, so the sums scale exactly
                co, _ = op.combine(y * scale, ow[:n_recv], idx)
                torch.testing.assert_close(co, ey * scale, rtol=rtol, atol=atol,
                                           msg=lambda m: f"rank {me}, seed {seed}, combine {k + 1} of 2: {m}")
        op.destroy()

    def back_to_back(self, calls):
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16))
        start = time.time()
        for i in range(calls):
            kind = ref.ROUTINGS[i % len(ref.ROUTINGS)]
            self.one_call(op, 10_000 + i, kind, torch.bfloat16)
        op.destroy()
        return time.time() - start

    def refusals(self):
        me, world = self.rank, self.world
        c = self.config(torch.bfloat16)
        op = mori.ops.EpDispatchCombineOp(c)
        x, w, s, idx = self.inputs(op, 7, "uniform", n=4)[me]
        on = f"on rank {me}"
        bad_dispatch = [
            (ValueError, lambda: op.dispatch(x.to(torch.float16), w, None, idx), ("input is torch.float16",
                                                                                  "torch.bfloat16", on)),
            (ValueError, lambda: op.dispatch(torch.zeros(MAX_TOKENS + 1, HIDDEN, dtype=torch.bfloat16), None, None,
                                             torch.zeros(MAX_TOKENS + 1, TOPK, dtype=torch.int32)),
             (f"{MAX_TOKENS + 1} tokens", f"max_num_inp_token_per_rank is {MAX_TOKENS}", on)),
            (ValueError, lambda: op.dispatch(x[:, :HIDDEN - 1].contiguous(), w, None, idx),
             ("shape (4, 39)", f"(4, {HIDDEN})")),
            (ValueError, lambda: op.dispatch(x, w, None, idx.to(torch.int64)), ("indices is torch.int64",)),
            (ValueError, lambda: op.dispatch(x, w, None, idx[:, :2].contiguous()), ("indices has shape (4, 2)",)),
            (ValueError, lambda: op.dispatch(x, w.double(), None, idx), ("weights is torch.float64",)),
            (ValueError, lambda: op.dispatch(x, w, torch.ones(4, 1), idx), ("scale_dim is 0",)),
            (ValueError, lambda: op.dispatch(x.t().contiguous().t(), w, None, idx), ("not contiguous",)),
            (ValueError, lambda: op.dispatch(x[0], w, None, idx), ("2-D tensor",)),
            (TypeError, lambda: op.dispatch(x, w, None, idx.tolist()), ("must be a torch.Tensor",)),
            (ValueError, lambda: op.dispatch(x.to("meta"), w, None, idx), ("input is on meta",)),
            (TypeError, lambda: op.dispatch(x, w, None, idx, block_num=None), ("block_num=None",)),
            (TypeError, lambda: op.dispatch(x, w, None, idx, block_num=2**40), (f"block_num={2**40}",)),
            # (sizes equal to a cached shape's, 1 and -1, are refused as
            # tracing refuses them: True and -1.0 found the cache)
            (TypeError, lambda: op.dispatch(x, w, None, idx, block_num=True), ("block_num=True",)),
            (TypeError, lambda: op.dispatch(x, w, None, idx, warp_per_block=-1.0), ("warp_per_block=-1.0",)),
        ]
        op.dispatch(x, w, None, idx, block_num=1)  # (1, -1, -1) cached
        for kind, fn, says in bad_dispatch:
            expect_raises(kind, fn, says)
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)  # still works
        n = int(cnt[0])
        y = out[:n].clone()
        bad_combine = [
            (ValueError, lambda: op.combine(y.to(torch.int32), ow, idx), ("combine runs in bf16, fp16 or fp32",)),
            (ValueError, lambda: op.combine(torch.zeros(op.max_recv_tokens + 1, HIDDEN, dtype=torch.bfloat16), ow,
                                            idx), (f"at most {op.max_recv_tokens}",)),
            (ValueError, lambda: op.combine(y[:, :3].contiguous(), ow, idx), (f"(n, {HIDDEN})".replace("n", str(n)),)),
            (ValueError, lambda: op.combine(y, ow[:, :2].contiguous(), idx), ("weights has shape",)),
            (ValueError, lambda: op.combine(y, ow, idx[:, :1]), ("indices has shape",)),
            (TypeError, lambda: op.combine(y, ow.tolist(), idx), ("weights must be a torch.Tensor or None",)),
            (TypeError, lambda: op.combine(y, ow, idx.tolist()), ("indices must be a torch.Tensor or None",)),
            (ValueError, lambda: op.combine(y.to("meta"), ow, idx), ("input is on meta",)),
        ]
        if n:  # fewer rows than the dispatch delivered
            bad_combine.append((ValueError, lambda: op.combine(y[:n - 1], ow, idx),
                                (f"delivered {n} rows but input has {n - 1}",)))
        for kind, fn, says in bad_combine:
            expect_raises(kind, fn, says)
        # combine's indices: top-k expert indices, int32 or int64.
        expect_raises(ValueError, lambda: op.combine(y, ow, idx.float()), ("indices is torch.float32",))
        op.combine(y, ow, idx.long())
        op.combine(y, ow, idx)
        # Token positions: what get_dispatch_src_token_pos can hold (MORI-EP's
        # flat format: src_rank * world_size * max_num_inp_token_per_rank +
        # src_token_id; MAX_TOKENS is a token id past the last).
        for pos in (-1, world * world * MAX_TOKENS, MAX_TOKENS, True, 2**40, 2.0):
            expect_raises(ValueError, lambda: op.decode_send_flat_idx(pos), ("not a token position", on))
        last = (world - 1) * world * MAX_TOKENS + MAX_TOKENS - 1
        assert op.decode_send_flat_idx(last) == (world - 1, MAX_TOKENS - 1)
        # An expert index out of range: found by the call's work, the token
        # dropped, and raised on every rank by that call itself (the host
        # platform checks after every call, free there).
        bad_idx = idx.clone()
        bad_idx[1, 2] = world * EXPERTS_PER_RANK + 5
        err = expect_raises(mori.ops.EpError, lambda: op.dispatch(x, w, None, bad_idx), ("MORI_EINVAL",))
        assert err.code < 0, err
        # Sent to another process (multiprocessing pickles it), it arrives
        # whole: rebuilding it used to fail (or read the last error anew).
        for back in (pickle.loads(pickle.dumps(err)), copy.copy(err)):
            assert type(back) is mori.ops.EpError and str(back) == str(err), (back, err)
        op.check()  # cleared
        self.one_call(op, 8, "uniform", torch.bfloat16)  # and the context goes on
        # ... and without check_every_call (a GPU's default), from check().
        op.check_every_call = False
        op.dispatch(x, w, None, bad_idx)
        expect_raises(mori.ops.EpError, op.check, ("MORI_EINVAL",))
        op.check()
        op.check_every_call = True
        self.one_call(op, 9, "uniform", torch.bfloat16)
        # reset() clears recv_num_token, not the dispatch: a combine after it
        # still reverses that dispatch, and is checked against the rows it
        # delivered (an input of recv_num_token's 0 rows, after reset, was
        # taken and summed rows never written: zeros).
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        n = int(cnt[0])
        y = out[:n].clone()
        want = op.combine(y, None, None)[0].clone()
        op.reset()
        assert int(cnt[0]) == 0
        if n:
            expect_raises(ValueError, lambda: op.combine(y[:0], None, None), (f"delivered {n} rows but input has 0",))
        assert torch.equal(op.combine(y, None, None)[0], want), f"rank {me}: a combine after reset() differs"
        # On a GPU the rows a dispatch delivered are on the device: the
        # binding passes each tensor's rows, and the kernel refuses a call
        # given fewer (run here with the host's count hidden from Python,
        # as on a GPU). Each rank with rows gives too few: of the input
        # (fused call, the fast path), of the weights (the send half), an
        # empty input (no address: not taken for the registered buffer),
        # and a slice of the registered buffer; its check names both
        # counts, the others' the refusal.
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        n = int(cnt[0])
        y, yw = out[:n].clone(), ow[:n].clone()
        registered = op.get_registered_combine_input_buffer(torch.bfloat16)
        registered[:n].copy_(y)
        short = max(n - 1, 0)
        cases = [
            ("input", short, lambda: op.combine(y[:short], yw, idx)),
            ("weights", short, lambda: (op.combine_send(y, yw[:short], idx), op.combine_recv())),
            ("input", 0, lambda: op.combine(torch.empty(0, HIDDEN, dtype=torch.bfloat16, device=y.device), yw, idx)),
            ("input", short, lambda: op.combine(registered[:short], yw, idx)),
        ]
        held, op._recv_num_token_c = op._recv_num_token_c, None
        op.check_every_call = False
        try:
            for what, given, call in cases:
                call()
                if n:
                    expect_raises(mori.ops.EpError, op.check,
                                  (f"combine {what} holds {given} rows, fewer than the {n} its last dispatch delivered",))
                else:
                    try:
                        op.check()  # no row of its own to miss: at most a short peer's refusal
                    except mori.ops.EpError as error:
                        assert "refused its part of a combine" in str(error), f"rank {me}: {error}"
                op.check()  # cleared
        finally:
            op._recv_num_token_c = held
            op.check_every_call = True
        self.one_call(op, 10, "uniform", torch.bfloat16)
        op.destroy()
        expect_raises(RuntimeError, lambda: op.dispatch(x, w, None, idx), ("destroyed",))
        # Nothing of a destroyed op reads freed memory (one of them crashed
        # the process after mori.finalize).
        for call in (op.get_dispatch_src_token_pos, op.check, op.reset, op.dispatch_recv, op.combine_recv,
                     lambda: op.get_registered_combine_input_buffer(torch.bfloat16),
                     lambda: op.combine(y, None, None)):
            expect_raises(RuntimeError, call, ("destroyed", on))
        # A fresh op has no dispatch to combine.
        op = mori.ops.EpDispatchCombineOp(c)
        expect_raises(ValueError, lambda: op.combine(torch.ones(4, HIDDEN, dtype=torch.bfloat16), None, None),
                      ("no dispatch to combine", on))
        self.one_call(op, 14, "uniform", torch.bfloat16)
        op.destroy()
        # Configs refused on every rank, before anything collective.
        bad_configs = [
            (dict(data_type=torch.float64), ("data_type torch.float64",)),
            (dict(rank=me + world), (f"PE {me} of {world}",)),
            (dict(world_size=world + 1), (f"world_size={world + 1}",)),
            (dict(num_experts_per_token=world * EXPERTS_PER_RANK + 1), ("exceeds",)),
            (dict(hidden_dim=0), ("hidden_dim=0",)),
            (dict(hidden_dim=2**32 + HIDDEN), (f"hidden_dim={2**32 + HIDDEN}", "below 2**31")),
            (dict(max_token_type_size=1), ("max_token_type_size=1",)),
            # fp8 tokens fit 1 byte, but no combine dtype does (was the library's EpError)
            (dict(data_type=torch.float8_e4m3fn, scale_dim=2, max_token_type_size=1),
             ("max_token_type_size=1 holds no combine dtype",)),
            (dict(scale_dim=-1), ("scale_dim=-1",)),
            (dict(kernel_type=9), ("kernel_type=9",)),
            (dict(scale_dim=1, scale_type_size=3), ("scale_type_size of a scale dtype's size", "got 3")),
            # 32-bit fields: cut to their low bits before (block_num 2**32 + 3
            # ran as 3), and a bool passed as 1.
            (dict(block_num=2**32 + 3), (f"block_num={2**32 + 3}",)),
            (dict(warp_num_per_block=-(2**40)), (f"warp_num_per_block={-(2**40)}",)),
            (dict(gpu_per_node=2**31), (f"gpu_per_node={2**31}",)),
            (dict(num_qp_per_pe=-2), ("num_qp_per_pe=-2",)),
            (dict(warp_num_per_block=True), ("warp_num_per_block=True",)),
            (dict(hidden_dim=True), ("hidden_dim=True",)),
        ]
        for kw, says in bad_configs:
            expect_raises(ValueError, lambda: mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16, **kw)),
                          says + (f"rank {me}",))
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16))
        expect_raises(ValueError, lambda: op.get_registered_combine_input_buffer(torch.float64),
                      ("combine runs in bf16, fp16 or fp32",))
        op8 = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16, max_token_type_size=2))
        expect_raises(ValueError, lambda: op8.combine(torch.zeros(1, HIDDEN), None, None),
                      ("max_token_type_size is 2",))
        op8.destroy()
        op.destroy()
        # A dispatch refused on one rank only: that rank's part still runs
        # with no tokens, so the others' calls complete without its tokens,
        # their check names it, and every rank stays in step.
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16))
        x, w, s, idx = self.inputs(op, 11, "uniform", n=4)[me]
        if me == world - 1:
            big = torch.zeros(MAX_TOKENS + 1, HIDDEN, dtype=torch.bfloat16)
            big_idx = torch.zeros(MAX_TOKENS + 1, TOPK, dtype=torch.int32)
            expect_raises(ValueError, lambda: op.dispatch(big, None, None, big_idx), ("max_num_inp_token_per_rank",))
        else:
            # raised by the call itself, which ran (the host platform)
            expect_raises(mori.ops.EpError, lambda: op.dispatch(x, w, None, idx),
                          (f"rank {world - 1} refused its part of a dispatch",))
        op.check()  # cleared; the refusing rank's own refusal is not reported again
        for seed in (12, 13):
            self.one_call(op, seed, "uniform", torch.bfloat16)
        op.destroy()
        # Without a check before every call (a GPU's default), a refusal of
        # rank 0's own leaves nothing that hides its next report: a bad
        # expert index after it is still named there.
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16))
        op.check_every_call = False
        x, w, s, idx = self.inputs(op, 15, "uniform", n=4)[me]
        if me == 0:
            expect_raises(ValueError, lambda: op.dispatch(x.to(torch.float16), w, None, idx), ("input is torch.float16",))
        else:
            op.dispatch(x, w, None, idx)
        bad_idx = idx.clone()
        bad_idx[1, 2] = world * EXPERTS_PER_RANK + 5
        op.dispatch(x, w, None, bad_idx)
        # The others' one record is rank 0's refusal, which came first.
        expect_raises(mori.ops.EpError, op.check, ("expert index",) if me == 0 else ("rank 0 refused its part",))
        op.check()
        self.one_call(op, 16, "uniform", torch.bfloat16)
        op.destroy()

    def one_rank_refusals(self):
        """What one rank alone refuses keeps every rank in step: a config
        (the create is collective), an argument of the wrong kind (not only
        ValueError/TypeError from the checks), and what fails before the
        launch. Each call fails at once on every rank, naming the rank, and
        the next calls pair as they should."""
        me, world = self.rank, self.world
        bad = world - 1
        start = time.time()
        if me == bad:
            expect_raises(ValueError, lambda: mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16, hidden_dim=0)),
                          ("hidden_dim=0", f"rank {me}"))
        else:
            expect_raises(mori.ops.EpError, lambda: mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16)),
                          (f"rank {bad} refused the config", "hidden_dim=0"))
        assert time.time() - start < 10, f"a create refused on rank {bad} took {time.time() - start:.1f} s"
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16))
        self.one_call(op, 31, "uniform", torch.bfloat16)
        # Scales given as a list on rank 0 only.
        x, w, s, idx = self.inputs(op, 32, "uniform", n=4)[me]
        if me == 0:
            expect_raises(TypeError, lambda: op.dispatch(x, w, [1.0], idx), ("scales must be a torch.Tensor",
                                                                             "rank 0"))
        else:
            expect_raises(mori.ops.EpError, lambda: op.dispatch(x, w, None, idx),
                          ("rank 0 refused its part of a dispatch",))
        self.one_call(op, 33, "uniform", torch.bfloat16)
        # A combine input that overlaps the registered buffer elsewhere (a
        # shifted slice of it) is copied out first: the same result as its
        # copy (torch refused the overlapping copy, on that rank only).
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        n = int(cnt[0])
        reg = op.get_registered_combine_input_buffer(torch.bfloat16)
        reg[:n + 1] = torch.arange((n + 1) * HIDDEN, dtype=torch.float32).reshape(n + 1, HIDDEN).to(torch.bfloat16)
        shifted = reg[1:n + 1]
        copied = shifted.clone()
        got = op.combine(shifted, None, None, use_external_inp_buf=0)[0].clone()
        want = op.combine(copied, None, None, use_external_inp_buf=0)[0].clone()
        assert torch.equal(got, want), f"rank {me}: combine of a shifted slice of the registered buffer differs"
        # The same with an external input (the config's default, the fast
        # path): the kernel's copy into the buffer overwrote rows of the
        # slice before reading them, and this rank's own rows came out wrong.
        # (A dispatch first: the buffer is rewritten only once no peer can
        # still read the last combine's rows from it.)
        op.dispatch(x, w, None, idx)
        reg[1:n + 1] = copied
        got = op.combine(shifted, None, None)[0]
        assert torch.equal(got, want), f"rank {me}: combine of a shifted slice (external input) differs"
        op.destroy()
        # Bad launch arguments on one rank, on the fast paths (a dispatch of
        # block_num 2**40, a combine of warp_per_block 1.5): that rank's part
        # runs as refused, the others' calls name it.
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16))
        x, w, _, idx = self.inputs(op, 35, "uniform", n=4)[me]
        if me == 0:
            expect_raises(TypeError, lambda: op.dispatch(x, w, None, idx, block_num=2**40), ("block_num",))
        else:
            expect_raises(mori.ops.EpError, lambda: op.dispatch(x, w, None, idx),
                          ("rank 0 refused its part of a dispatch",))
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        y = out[:int(cnt[0])].clone()
        if me == 0:
            expect_raises(TypeError, lambda: op.combine(y, None, None, warp_per_block=1.5),
                          ("warp_per_block", "rank 0"))
        else:
            expect_raises(mori.ops.EpError, lambda: op.combine(y, None, None), ("rank 0 refused its part of a combine",))
        self.one_call(op, 36, "uniform", torch.bfloat16)
        # The same off the fast path (a registered input: the launch was
        # checked after the refusal's reach, and the peers waited out their
        # timeout, then every call of theirs was refused).
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        y = out[:int(cnt[0])].clone()
        if me == 0:
            expect_raises(TypeError, lambda: op.combine(y, None, None, use_external_inp_buf=0, block_num=None),
                          ("block_num=None", "rank 0"))
        else:
            expect_raises(mori.ops.EpError, lambda: op.combine(y, None, None, use_external_inp_buf=0),
                          ("rank 0 refused its part of a combine",))
        self.one_call(op, 37, "uniform", torch.bfloat16)
        # A call the library refuses on rank 0 (its input inside the dispatch
        # outputs) while the same call reports a bad expert index of the last
        # rank: rank 0's error carries that report too, and the next call
        # (correct everywhere) passes on every rank; it raised that report
        # on rank 0 alone.
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        if me == 0:
            e = expect_raises(mori.ops.EpError, lambda: op.dispatch(out[:1], None, None, idx[:1]),
                              ("overlaps this context's dispatch outputs",))
            if world > 1:
                assert "this call also reported" in str(e), str(e)
        else:
            bad_idx = idx.clone()
            bad_idx[0, 0] = EXPERTS_PER_RANK * world + 7
            expect_raises(mori.ops.EpError, lambda: op.dispatch(x, w, None, bad_idx),
                          ("rank 0 refused its part of a dispatch",))
        self.one_call(op, 38, "uniform", torch.bfloat16)
        # Any exception before the launch, not only the checks' (here one
        # injected into rank 0's combine as its input is put in place).
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        y = out[:int(cnt[0])].clone()
        if me == 0:
            def broken(input, external=True):
                raise RuntimeError("injected before the launch")
            op._combine_input = broken
            expect_raises(RuntimeError, lambda: op.combine(y, None, None, use_external_inp_buf=0), ("injected",))
            del op._combine_input
        else:
            expect_raises(mori.ops.EpError, lambda: op.combine(y, None, None, use_external_inp_buf=0),
                          ("rank 0 refused its part of a combine",))
        self.one_call(op, 37, "uniform", torch.bfloat16)
        # Halves: a report comes from the receive half, on every rank at the
        # same half (a send half that raised after its work left its
        # receive half pending, and the next call out of step).
        bad_idx = idx.clone()
        bad_idx[0, 1] = world * EXPERTS_PER_RANK + 3
        op.dispatch_send(x, w, None, bad_idx)
        expect_raises(mori.ops.EpError, op.dispatch_recv, ("MORI_EINVAL",))
        n = int(op._recv_num_token[0])
        op.combine_send(op._dispatch_tokens[:n].clone(), None, None)
        op.combine_recv()
        if me == world - 1:
            expect_raises(ValueError, lambda: op.dispatch_send(x.float(), w, None, idx), ("input is torch.float32",))
        else:
            op.dispatch_send(x, w, None, idx)
            expect_raises(mori.ops.EpError, op.dispatch_recv, (f"rank {world - 1} refused its part of a dispatch",))
        n = int(op._recv_num_token[0])
        op.combine_send(op._dispatch_tokens[:n].clone(), None, None)
        op.combine_recv()
        self.one_call(op, 38, "uniform", torch.bfloat16, variant="split")
        self.one_call(op, 39, "uniform", torch.bfloat16, variant="split_interrupted")
        # A dispatch refused while a combine_send waits leaves the dispatch
        # that combine reverses, and so the row check of a later combine of
        # it (after reset(), whose count that check keeps): one row where it
        # delivered more was read past its end.
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        n = int(cnt[0])
        y = out[:n].clone()
        op.reset()
        op.combine_send(y, None, None)
        expect_raises(mori.ops.EpError, lambda: op.dispatch(x, w, None, idx), ("still waiting",))
        op.combine_recv()
        if n > 1:
            expect_raises(ValueError, lambda: op.combine(y[:1], None, None), (f"delivered {n} rows but input has 1",))
        op.combine(y, None, None)
        # A dispatch the library refuses (an input inside its outputs) still
        # ran this rank's part: combine is checked against what that part
        # delivered, not the dispatch before it.
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        if me == 0:
            expect_raises(mori.ops.EpError, lambda: op.dispatch(out[:1], w[:1], None, idx[:1]), ("MORI_EINVAL",))
        else:
            expect_raises(mori.ops.EpError, lambda: op.dispatch(x[:1], w[:1], None, idx[:1]), ("rank 0 refused",))
        m = int(cnt[0])
        co = op.combine(out[:m].clone(), None, None)[0]
        assert co.shape[0] == (0 if me == 0 else 1), (me, tuple(co.shape))
        self.one_call(op, 39, "uniform", torch.bfloat16)
        op.destroy()
        for call in (lambda: op.convert_dispatch_output(out, idx), lambda: op.convert_combine_input(out, None, None),
                     lambda: op.dispatch_standard_moe(x, w, None, idx), lambda: op.combine_standard_moe(out, None, None)):
            expect_raises(RuntimeError, call, ("destroyed", f"rank {me}"))
        # A config of the wrong type on one rank takes part in the create too.
        if me == bad:
            expect_raises(TypeError, lambda: mori.ops.EpDispatchCombineOp(dict(hidden_dim=HIDDEN)),
                          ("must be an EpDispatchCombineConfig",))
        else:
            expect_raises(mori.ops.EpError, lambda: mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16)),
                          (f"rank {bad} refused the config",))
        # 8-byte scales (scale_type_size 8): float64 scales travel with their
        # tokens (the scales output was an empty view).
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16, scale_dim=2, scale_type_size=8))
        x, w, _, idx = self.inputs(op, 34, "uniform", n=4)[me]
        sc = torch.tensor([[me * 100.0 + t, 0.5] for t in range(x.shape[0])], dtype=torch.float64)
        _, _, osc, _, cnt = op.dispatch(x, w, sc, idx)
        n = int(cnt[0])
        assert osc.dtype == torch.float64 and osc.shape == (op.max_recv_tokens, 2), (osc.dtype, osc.shape)
        pos = op.get_dispatch_src_token_pos()
        for i in range(n):
            r, t = op.decode_send_flat_idx(int(pos[i]))
            assert osc[i].tolist() == [r * 100.0 + t, 0.5], (me, i, osc[i].tolist(), r, t)
        op.destroy()

    def launch_modes(self):
        """The config's launch shape reaches the library; with
        MORI_EP_LAUNCH_CONFIG_MODE=auto none does (the table picks), and the
        calls' shapes are ignored, as in AMD's mori."""
        from mori.ops import _ep_c as C
        from mori._lib import lib

        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16, block_num=40, warp_num_per_block=4))
        got = lib.mori_ep_config(op._ep).contents
        assert (got.block_num, got.warp_num_per_block, got.rdma_block_num) == (40, 4, 0), (got.block_num,)
        assert op._launch_of(7, -1, 2).block_num == 7
        self.one_call(op, 400, "uniform", torch.bfloat16)
        op.destroy()
        os.environ["MORI_EP_LAUNCH_CONFIG_MODE"] = "AUTO"
        try:
            op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16, block_num=40, warp_num_per_block=4))
        finally:
            del os.environ["MORI_EP_LAUNCH_CONFIG_MODE"]
        got = lib.mori_ep_config(op._ep).contents
        assert (got.block_num, got.warp_num_per_block) == (-1, -1), (got.block_num, got.warp_num_per_block)
        launch = op._launch_of(7, 3, 2)
        assert isinstance(launch, C.Launch) and (launch.block_num, launch.warp_per_block) == (-1, -1)
        self.one_call(op, 401, "skewed", torch.bfloat16)
        # The calls' shapes are still checked (a compiled call checks them:
        # eagerly they were ignored unchecked, so the two differed).
        x, w, _, idx = self.inputs(op, 402, "uniform", n=4)[self.rank]
        for kw, says in ((dict(block_num=2**40), f"block_num={2**40}"), (dict(rdma_block_num=True), "rdma_block_num=True"),
                         (dict(warp_per_block=None), "warp_per_block=None")):
            expect_raises(TypeError, lambda: op.dispatch(x, w, None, idx, **kw), (says, f"rank {self.rank}"))
        self.one_call(op, 403, "uniform", torch.bfloat16)
        op.destroy()

    def compiled(self):
        """dispatch and combine inside torch.compile(fullgraph=True): the
        custom ops are in the graph, and the results match eager."""
        me = self.rank
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16))
        graphs = []

        def backend(gm, example_inputs):
            graphs.append(str(gm.graph))
            return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

        def step(x, w, idx):
            out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
            y = (out.to(torch.float32) * (me + 1)).to(torch.bfloat16)
            co, cw = op.combine(y, ow, idx)
            return co * 1, cw * 1, cnt * 1

        fn = torch.compile(step, backend=backend, fullgraph=True)
        kinds = [k for k in ref.ROUTINGS if k != "empty_source"]  # one shape: one graph
        for seed in range(200, 208):
            everyone = self.inputs(op, seed, kinds[seed % len(kinds)], n=MAX_TOKENS)
            x, w, s, idx = everyone[me]
            co, cw, cnt = fn(x, w, idx)
            ex = ref.expected_dispatch(everyone, me, self.world, EXPERTS_PER_RANK, MAX_TOKENS)[0]
            assert int(cnt[0]) == ex.shape[0], (int(cnt[0]), ex.shape[0])
            ey, eww = ref.expected_combine(x, w, idx, EXPERTS_PER_RANK, self.world, torch.bfloat16)
            rtol, atol = ref.TOLERANCE[torch.bfloat16]
            torch.testing.assert_close(co, ey, rtol=rtol, atol=atol)
            torch.testing.assert_close(cw, eww, rtol=1e-6, atol=1e-6)
        assert len(graphs) == 1, f"{len(graphs)} graphs (recompiled or broke)"
        assert "mori.ep_dispatch" in graphs[0] and "mori.ep_combine" in graphs[0], graphs[0]
        # A compiled dispatch_send + dispatch_recv whose scales are not of
        # the config's default dtype for their size (int32, not float32):
        # the receive half must name the scales view the send half said it
        # would fill, or the graph ends by writing the send-time contents of
        # that view back over the scales received.
        sop = mori.ops.EpDispatchCombineOp(self.config(torch.float8_e4m3fn))

        def split_step(x, s, idx):
            got = sop.dispatch_send(x, None, s, idx)
            sop.dispatch_recv()
            return got[2] * 1, got[4] * 1

        sfn = torch.compile(split_step, backend="aot_eager", fullgraph=True)
        for seed in (220, 221):
            everyone = [(x, w, (s * 1000).to(torch.int32), idx)
                        for x, w, s, idx in self.inputs(sop, seed, "uniform", n=MAX_TOKENS)]
            x, _, s, idx = everyone[me]
            got_s, cnt = sfn(x, s, idx)
            es = ref.expected_dispatch(everyone, me, self.world, EXPERTS_PER_RANK, MAX_TOKENS)[2]
            n = int(cnt[0])
            assert n == es.shape[0], (n, es.shape)
            assert got_s.dtype == torch.int32 and torch.equal(got_s[:n], es), (seed, got_s[:n], es)
            assert torch.equal(sop.dispatch(x, None, s, idx)[2][:n], es)  # eager agrees
        sop.destroy()
        if "libasan" in os.environ.get("LD_PRELOAD", ""):
            # A refusal in the graph raises through torch's C++ dispatcher,
            # and a C++ exception in a Python process with AddressSanitizer
            # preloaded stops it in the sanitizer's own __cxa_throw check
            # (its interceptor found no libstdc++ when it started): the
            # host run checks these cases.
            op.destroy()
            return
        # Arguments rank 0 refuses while the graph is traced (int64 indices;
        # a launch size that is no int32): the refusal is in rank 0's graph,
        # so its part of the call runs as refused when the graph runs, and
        # rank 0 raises then; the peers' compiled calls name rank 0, and the
        # eager calls after pair as they should. Before, rank 0 raised while
        # tracing and ran nothing: the peers' calls paired with its next one.
        x, w, _, idx = self.inputs(op, 210, "uniform", n=MAX_TOKENS)[me]
        for what, args, kind in (("indices", dict(idx=idx.to(torch.int64)), ValueError),
                                 ("block_num", dict(block_num=2**40), TypeError)):
            graphs.clear()

            def refused_step(x, w, idx, block_num=-1):
                out, ow, _, _, cnt = op.dispatch(x, w, None, idx, block_num=block_num)
                return out * 1, cnt * 1

            fn = torch.compile(refused_step, backend=backend, fullgraph=True)
            if me == 0:
                expect_raises(kind, lambda: fn(x, w, **dict(dict(idx=idx), **args)), (what, "rank 0"))
                assert any("mori.ep_refused" in g for g in graphs), graphs
            else:
                expect_raises(mori.ops.EpError, lambda: fn(x, w, idx), ("rank 0 refused its part of a dispatch",))
            self.one_call(op, 211, "uniform", torch.bfloat16)
        # A combine whose input dtype rank 0 refuses while tracing, in a
        # function that goes on to use both results: the refusal's stand-ins
        # must trace as the accepted call's would (the weights were None
        # once, so rank 0's trace failed and ran nothing).
        out, ow, _, _, cnt = op.dispatch(x, w, None, idx)
        n = int(cnt[0])
        y, yw = out[:n].clone(), ow[:n].clone()

        def refused_combine(y, yw):
            co, cw = op.combine(y, yw, None)
            return co * 1, cw * 1

        cfn = torch.compile(refused_combine, backend="aot_eager", fullgraph=True)
        if me == 0:
            expect_raises(ValueError, lambda: cfn(y.to(torch.float64), yw), ("float64", "rank 0"))
        else:
            expect_raises(mori.ops.EpError, lambda: cfn(y, yw), ("rank 0 refused its part of a combine",))
        self.one_call(op, 212, "uniform", torch.bfloat16)
        op.destroy()
        # use_external_inp_buf=False: a combine input that overlaps this
        # context's combine outputs (here the outputs themselves, holding
        # the expert's rows) is copied out first, compiled as eagerly (the
        # compiled call passed the library such an input, which it refuses).
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16, use_external_inp_buf=False))
        outs = op._combine_output_view(torch.bfloat16)

        def overlapping_combine(n):
            co, cw = op.combine(outs[:n], None, None)
            return co * 1

        cfn = torch.compile(overlapping_combine, backend="aot_eager", fullgraph=True)
        for seed, fn in ((213, overlapping_combine), (214, cfn), (215, cfn)):
            everyone = self.inputs(op, seed, "uniform", n=MAX_TOKENS // self.world)
            x, w, _, idx = everyone[me]
            out, _, _, _, cnt = op.dispatch(x, w, None, idx)
            n = int(cnt[0])
            outs[:n] = ref.expert(out[:n], me, torch.bfloat16)
            ey, _ = ref.expected_combine(x, w, idx, EXPERTS_PER_RANK, self.world, torch.bfloat16)
            rtol, atol = ref.TOLERANCE[torch.bfloat16]
            torch.testing.assert_close(fn(n)[:x.shape[0]], ey, rtol=rtol, atol=atol,
                                       msg=lambda m: f"rank {me}, seed {seed}: {m}")
        op.destroy()

    def standard_moe(self):
        """convert_dispatch_output / convert_combine_input against their
        definition (mori.ops.ep_layout)."""
        me, world = self.rank, self.world
        op = mori.ops.EpDispatchCombineOp(self.config(torch.bfloat16))
        for seed, kind in ((300, "uniform"), (301, "duplicate_ranks"), (302, "skewed"), (303, "duplicate_experts")):
            everyone = self.inputs(op, seed, kind)
            x, w, s, idx = everyone[me]
            px, count, src_info, layout = op.dispatch_standard_moe(x, w, None, idx)
            rx, rw, _, ri, rpos = ref.expected_dispatch(everyone, me, world, EXPERTS_PER_RANK, MAX_TOKENS)
            for e in range(EXPERTS_PER_RANK):
                ge = me * EXPERTS_PER_RANK + e
                rows = torch.nonzero((ri.to(torch.int64) == ge).any(1)).flatten()
                k = rows.numel()
                assert int(count[e]) == k, (e, int(count[e]), k)
                assert torch.equal(bits(px[e, :k]), bits(rx[rows])), f"expert {e}: packed rows differ"
                assert torch.all(bits(px[e, k:]) == 0), f"expert {e}: padding not zero"
                assert torch.equal(src_info[e, :k], rpos[rows] % (world * MAX_TOKENS))
                src_rank = rpos[rows] // (world * MAX_TOKENS)
                for r in range(world):
                    begin, cnt = int(layout[e, r]) >> 32, int(layout[e, r]) & 0xFFFFFFFF
                    assert cnt == int((src_rank == r).sum()), (e, r, cnt)
                    assert torch.all(src_rank[begin:begin + cnt] == r)
            # The way back: each packed row scaled by its expert's number + 1, summed per dispatched row.
            scale = torch.arange(1, EXPERTS_PER_RANK + 1, dtype=torch.float32)[:, None, None]
            processed = (px.to(torch.float32) * scale).to(torch.bfloat16)
            combined_rows = op.convert_combine_input(processed, src_info, layout)
            n = rx.shape[0]
            expect = torch.zeros(n, HIDDEN)
            for e in range(EXPERTS_PER_RANK):
                hit = (ri.to(torch.int64) == me * EXPERTS_PER_RANK + e).any(1)
                expect += (rx.to(torch.float32) * (e + 1)).to(torch.bfloat16).to(torch.float32) * hit[:, None]
            torch.testing.assert_close(combined_rows[:n], expect.to(torch.bfloat16), rtol=1.6e-2, atol=1e-2)
            out = op.combine_standard_moe(processed, None, idx, packed_recv_src_info=src_info,
                                          packed_recv_layout_range=layout)
            assert out.shape == (x.shape[0], HIDDEN)
            # reset() clears recv_num_token, not the dispatch: the way back
            # after it still covers the rows that dispatch delivered (it
            # summed none of them: zeros, silently).
            out = out.clone()
            op.reset()
            torch.testing.assert_close(op.convert_combine_input(processed, src_info, layout)[:n],
                                       combined_rows[:n], rtol=0, atol=0)
            torch.testing.assert_close(op.combine_standard_moe(processed, None, idx), out, rtol=0, atol=0,
                                       msg=lambda m: f"rank {me}, seed {seed}: combine_standard_moe after reset(): {m}")
        # A layout the conversion refuses on rank 0 only (one row short):
        # rank 0's part of the combine still runs, the peers' calls name it
        # at once (they waited out their timeout, and every later call of
        # theirs was refused), and the next round pairs as it should.
        if me == 0:
            expect_raises(ValueError, lambda: op.combine_standard_moe(processed[:, :-1], None, idx),
                          ("packed_recv_x has shape", "rank 0"))
        else:
            expect_raises(mori.ops.EpError, lambda: op.combine_standard_moe(processed, None, idx),
                          ("rank 0 refused its part of a combine",))
        self.one_call(op, 303, "uniform", torch.bfloat16)
        op.destroy()


def main(rank, world, uid_path, calls):
    rank, world, calls = int(rank), int(world), int(calls)
    pe = Pe(rank, world)
    expect_raises(RuntimeError, lambda: mori.ops.EpDispatchCombineOp(pe.config(torch.bfloat16)),
                  ("needs MORI Shmem initialised first", "MORI_ENOT_INITIALIZED"))
    uid = share_unique_id(shmem, rank, uid_path)
    shmem.shmem_init_attr(shmem.MORI_SHMEM_INIT_WITH_UNIQUEID, rank, world, uid)
    timings = {}
    # torch.compile at 2 PEs: tracing is CPU-bound, and at more PEs on few
    # cores the peers' waits starve it (the graph is the same at any count).
    parts = ("correctness", "two_combines", "refusals", "one_rank_refusals", "standard_moe", "launch_modes") + (("compiled",) if world == 2 else ())
    for part in parts:
        start = time.time()
        getattr(pe, part)()
        timings[part] = time.time() - start
    timings["back_to_back"] = pe.back_to_back(calls)
    # MORI Shmem finalized while an op lives: the op's comm and bootstrap
    # stay (with a warning) until the op is destroyed, which still works.
    op = mori.ops.EpDispatchCombineOp(pe.config(torch.bfloat16))
    pe.one_call(op, 21, "uniform", torch.bfloat16)
    # An op collected without destroy() (collective, so not from the
    # collector) says that its buffers stay.
    leaked = mori.ops.EpDispatchCombineOp(pe.config(torch.bfloat16))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        del leaked
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) and "without destroy()" in str(w.message) for w in seen), seen
    shmem.shmem_finalize()
    # mori.finalize releases the memory the op's tensors view: refused while
    # the op lives (reading a dispatch output afterwards crashed).
    expect_raises(RuntimeError, mori.finalize, ("1 EpDispatchCombineOp(s)", f"rank {rank}", "destroy()"))
    op.destroy()
    mori.finalize()
    print(f"PE {rank} of {world}: ok; {calls} back-to-back calls checked; "
          + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
