# SPDX-License-Identifier: MIT
"""The benchmark harness: how every figure of docs/performance.md is taken.

- GPU time: `iters` calls captured in a CUDA graph, the graph replayed
  `replays` times back to back between two events; one sample is
  elapsed / (replays * iters). Several samples per process.
- Eager time: a Python loop of `iters` calls between two events (what a
  training or inference loop sees: host launch cost included).
- Both after warm-up, every rank starting together.
- Correctness in the same process: each op's output is compared with the
  expected one over fresh inputs, and each synchronisation primitive gets a
  write -> sync -> read check whose stale rounds are counted.

Records are JSON objects, one per measurement, appended to a .jsonl file by
rank 0. A record that could not be taken carries "error" instead of times.
"""
import json
import os
import statistics
import time

import torch
import torch.distributed as dist


class Harness:
    def __init__(self, backend, round_, out_path, rank, world, device):
        self.backend, self.round, self.out_path = backend, round_, out_path
        self.rank, self.world, self.dev = rank, world, device

    # ---- records ----

    def record(self, what, size=0, label="", **fields):
        rec = dict(backend=self.backend, round=self.round, world=self.world, what=what, size=size, label=label)
        if os.environ.get("MORI_BENCH_MACHINE"):
            rec["machine"] = os.environ["MORI_BENCH_MACHINE"]
        rec.update(fields)
        if self.rank == 0:
            with open(self.out_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
            brief = {k: v for k, v in rec.items() if k in ("gpu_us", "eager_us", "correct", "stale_rounds", "error", "ms")}
            print(f"RESULT {self.backend} r{self.round} {what} {size} {label} {brief}", flush=True)
        return rec

    def agree(self, value):
        """The value of every rank (a list), e.g. to AND correctness."""
        out = [None] * self.world
        dist.all_gather_object(out, value)
        return out

    # ---- timing ----

    def sync(self):
        torch.cuda.synchronize()
        dist.barrier()

    def gpu_time(self, fn, iters=20, replays=5, samples=5):
        """Microseconds per call from CUDA-graph replay: (median, min, max)."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        self.sync()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(iters):
                fn()
        graph.replay()
        self.sync()

        def replay():
            for _ in range(replays):
                graph.replay()

        timed = self.event_time(replay, replays * iters, samples)
        del graph
        return timed

    def eager_time(self, fn, iters=100, warm=10, samples=3):
        """Microseconds per call of a Python loop: (median, min, max)."""
        for _ in range(warm):
            fn()
        self.sync()

        def loop():
            for _ in range(iters):
                fn()

        return self.event_time(loop, iters, samples)

    def event_time(self, run, calls, samples):
        """Microseconds per call of run() (which makes calls calls) between two
        CUDA events, over samples runs: (median, min, max); synced after."""
        values = []
        for _ in range(samples):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            run()
            b.record()
            b.synchronize()
            values.append(a.elapsed_time(b) * 1e3 / calls)
        self.sync()
        return statistics.median(values), min(values), max(values)

    def measure(self, what, size, label, fn, check=None, stale=None, graph=True, eager=True, **extra):
        """Times fn both ways and records it with the outcome of `check`
        (returns True when the output is right) and `stale` (returns the
        number of stale rounds of a synchronisation check)."""
        fields = dict(extra)
        try:
            if graph:
                try:
                    m, lo, hi = self.gpu_time(fn)
                    fields.update(gpu_us=round(m, 3), gpu_us_min=round(lo, 3), gpu_us_max=round(hi, 3))
                except Exception as e:  # noqa: BLE001 (a backend whose op cannot be captured)
                    torch.cuda.synchronize()
                    fields["graph_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            if eager:
                m, lo, hi = self.eager_time(fn)
                fields.update(eager_us=round(m, 3), eager_us_min=round(lo, 3), eager_us_max=round(hi, 3))
            if check is not None:
                fields["correct"] = all(self.agree(bool(check())))
            if stale is not None:
                fields["stale_rounds"] = sum(self.agree(int(stale())))
        except Exception as e:  # noqa: BLE001
            fields["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            torch.cuda.synchronize()
        return self.record(what, size, label, **fields)

    def wall_ms(self, fn):
        """Host wall time of fn (which must end with the device idle), all
        ranks starting together."""
        self.sync()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3


def env_flag(name):
    return os.environ.get(name, "") not in ("", "0")
