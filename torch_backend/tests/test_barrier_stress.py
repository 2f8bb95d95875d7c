# SPDX-License-Identifier: MIT
"""Stress of torch's barrier on MORI windows (torchrun --nproc_per_node=N;
written for two ranks sharing one GPU, where each rank's kernels are
time-sliced against the other's): many runs of the pattern that once hung —
a Triton push and barrier on one window, then rounds of a store into the
next rank's buffer, hdl.barrier(channel=it % 4), a check, and
hdl.barrier(channel=(it + 1) % 4) on a second window — with barriers on
several windows and channels interleaved, windows made and dropped between
runs (so signal-pad slots are released and reused), each rank in turn
running ahead (rank 0's GPU delayed by sleep kernels, rank 1's host by
pauses), and every other run with a timeout, so a lost wake-up names who
waited for whom instead of hanging. MORI_STRESS_RUNS sets the number of
runs (default 100).

A stall is named within seconds on every rank, timed or not: each rank logs
the barriers and Triton pushes its host launched (window, channel, run,
round, and an event after each), and a watchdog thread, after
MORI_STRESS_STALL_S seconds without host progress, prints lines starting
"STALL rank R:" with where the host is, the first logged kernel the GPU has
not finished, for every live window and channel this rank's barrier area
read on a stream of its own (torch.ops.mori.barrier_area): the epoch the
waiting kernel waits for and each peer's epoch seen in its slot, and the
Triton barrier's signal words. Stacks of every thread follow; a
run that takes MORI_STRESS_STACKS_AFTER_S seconds dumps them from C (even
with the interpreter lock held) and exits, so a hang ends the job."""
import collections
import faulthandler
import gc
import os
import random
import sys
import threading
import time

import torch
import torch.distributed as dist
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, rank, setup_job, summary, world  # noqa: E402

dev = setup_job()
group = dist.group.WORLD
import mori.allocator  # noqa: E402,F401
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402
from mori import triton as mt  # noqa: E402
from mori.address_map import address_map  # noqa: E402

symm_mem.set_backend("MORI")
# A window's signal pad and barrier area are a slot of its comm's 2 MiB
# signal arenas; released slots are reused only once 8 arenas are taken. With
# torch's default pad (9 KiB) that takes about 430 runs of 4 windows; with a
# pad of 640 KiB an arena holds 3 windows and reuse starts within the first
# 7 runs, so the default 100 runs do reuse slots (MORI_STRESS_PAD_BYTES).
_pad = os.environ.get("MORI_STRESS_PAD_BYTES", "640K").strip().upper().rstrip("B").rstrip("I")
symm_mem.set_signal_pad_size(int(_pad[:-1]) << {"K": 10, "M": 20}[_pad[-1]] if _pad[-1] in "KM" else int(_pad))
RUNS = int(os.environ.get("MORI_STRESS_RUNS", "100"))
STALL_S = int(os.environ.get("MORI_STRESS_STALL_S", "20"))
STACKS_AFTER_S = int(os.environ.get("MORI_STRESS_STACKS_AFTER_S", "60"))
TIMEOUT_MS = 5000  # the timed runs' waits: a lost wake-up raises, named, after this
ROUNDS = 20
N = 1 << 16
GROUP_NAME = group.group_name
rng = random.Random(11 + rank)


def out_of_step():
    """Now and then rank 0's GPU falls behind (a sleep kernel) and rank 1's
    host pauses: each rank in turn runs ahead into the next barrier of a
    channel before its peer has left the last one."""
    if rank == 0 and rng.random() < 0.1:
        torch.cuda._sleep(rng.randrange(1, 200000))
    if rank == 1 and rng.random() < 0.05:
        time.sleep(rng.random() * 0.002)


class LaunchLog:
    """What this rank's host has launched, for the watchdog: where it is,
    when it last got somewhere, the barriers launched per live window and
    channel (a new window's epochs start at 0), and an event after each
    barrier whose completion has not been seen yet."""

    def __init__(self):
        self.lock = threading.Lock()
        self.where = "start"
        self.progress = time.monotonic()
        self.windows = {}  # name -> [tensor, barriers launched per channel]
        self.pending = collections.deque()  # (label, event)
        self.triton = None  # (sig, epoch) of the last Triton barrier launched

    def at(self, where):
        with self.lock:
            self.where = where
            self.progress = time.monotonic()

    def window(self, name, tensor):
        with self.lock:
            self.windows[name] = [tensor, [0] * 8]

    def drop_windows(self):
        with self.lock:
            self.windows.clear()
            self.pending.clear()
            self.triton = None

    def kernel(self, label, sig, epoch):
        """After a Triton kernel whose mt.barrier waits until sig[r] >= epoch."""
        done = torch.cuda.Event()
        done.record()
        with self.lock:
            self.pending.append((label, done))
            self.triton = (sig, epoch)
            self.progress = time.monotonic()

    def barrier(self, name, hdl, channel, timeout_ms, where):
        with self.lock:
            launched = self.windows[name][1]
            launched[channel] += 1
            label = f"{where}: {name}.barrier(channel={channel}) epoch {launched[channel]}"
            self.where = "in " + label
            self.progress = time.monotonic()
        try:
            hdl.barrier(channel=channel, timeout_ms=timeout_ms)
        except RuntimeError as e:
            raise RuntimeError(f"rank {rank}, {label}: {e}") from None
        done = torch.cuda.Event()
        done.record()
        with self.lock:
            self.pending.append((label, done))
            while len(self.pending) > 64 and self.pending[0][1].query():
                self.pending.popleft()


log = LaunchLog()


def stall_report(idle):
    """Every line starts "STALL rank R:"; the device is read last (on a
    stream of its own, so the waiting kernel does not hold it up)."""

    def say(text):
        print(f"STALL rank {rank}: {text}", file=sys.stderr, flush=True)

    with log.lock:
        where, pending, triton_barrier = log.where, list(log.pending), log.triton
        windows = {name: (t, list(launched)) for name, (t, launched) in log.windows.items()}
    say(f"no host progress for {idle:.0f} s; the host is {where}")
    first = next((label for label, ev in pending if not ev.query()), None)
    say(f"the first logged kernel the GPU has not finished: {first}" if first else
        "every logged kernel has finished on the GPU (the host is stuck elsewhere: see the stacks)")
    # The allocator's lock guards the window lookup: a host stuck in a
    # window's destruction (it waits for the device) holds it, and this
    # read then waits too (the stacks of the C-level dump show it).
    say(f"reading the barrier areas of windows {', '.join(windows) or '(none live)'}")
    side = torch.cuda.Stream()
    for name, (t, launched) in windows.items():
        with torch.cuda.stream(side):
            words = torch.ops.mori.barrier_area(t, GROUP_NAME).to("cpu").tolist()
        # One node: LSA index == rank, lsa_size == world (barrier_area's layout).
        for ch in range(8):
            done = words[8 * world + ch]
            if launched[ch] == done:
                continue
            say(f"window {name} channel {ch}: {launched[ch]} barriers launched, {done} finished")
            epoch = done + 1
            for p in range(world):
                if p != rank and words[ch * world + p] < epoch:
                    say(f"window {name} channel {ch}: its next barrier needs epoch {epoch} from rank {p}; its "
                        f"slot (word {ch * world + p} of this rank's barrier area) holds {words[ch * world + p]}")
    if triton_barrier is not None:
        sig, epoch = triton_barrier
        with torch.cuda.stream(side):
            seen = sig.to("cpu").tolist()
        say(f"the Triton barrier waits until every rank's word of sig is >= {epoch}: sig holds {seen}")
    faulthandler.dump_traceback(all_threads=True)


def watchdog():
    reported = 0.0
    while True:
        time.sleep(1)
        with log.lock:
            since = log.progress
        idle = time.monotonic() - since
        if idle >= STALL_S and reported != since:
            reported = since
            try:
                stall_report(idle)
            except Exception as e:  # noqa: BLE001  (a report that fails must not hide the stall)
                print(f"STALL rank {rank}: the report failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)


threading.Thread(target=watchdog, name="stall watchdog", daemon=True).start()


@triton.jit
def push_kernel(data, data_bases, sig, sig_bases, my_rank, world, epoch, max_spins, n, BLOCK: tl.constexpr):
    # This rank's row of every peer's buffer, then a Triton barrier.
    offs = tl.arange(0, BLOCK)
    value = tl.zeros((BLOCK,), dtype=tl.int32) + epoch * 100 + my_rank
    for peer in range(0, world):
        for start in range(0, n, BLOCK):
            mt.store(data + my_rank * n + start + offs, value, peer, data_bases, my_rank, mask=start + offs < n)
    mt.barrier(sig, epoch, world, sig_bases, my_rank, max_spins)


def run_once(run, timeout_ms):
    log.at(f"run {run}: making window 1")
    # Window 1: a Triton push and barrier, then torch's barrier on it.
    data = symm_mem.empty(world * N, dtype=torch.int32, device=dev)
    sig = symm_mem.empty(world, dtype=torch.int64, device=dev)
    sig.zero_()
    h1 = symm_mem.rendezvous(data, group)
    dm, sm = address_map(data, group), address_map(sig, group)
    log.window("h1", data)
    log.barrier("h1", h1, 0, timeout_ms, f"run {run}")  # sig zeroed everywhere before anyone signals
    log.at(f"run {run}: Triton push")
    push_kernel[(1,)](data, dm.peer_bases, sig, sm.peer_bases, rank, world, run + 1, 1 << 30, N, BLOCK=1024)
    log.kernel(f"run {run}: Triton push and mt.barrier(epoch {run + 1})", sig, run + 1)
    log.barrier("h1", h1, 0, timeout_ms, f"run {run} after the push")
    log.at(f"run {run}: checking the push")
    for src in range(world):
        got = data[src * N:(src + 1) * N]
        assert bool((got == (run + 1) * 100 + src).all()), f"run {run}: row of rank {src} after the push"
    # Window 2: the rounds; window 3 interleaved on other channels.
    log.at(f"run {run}: making windows 2 and 3")
    t = symm_mem.empty(N, dtype=torch.int32, device=dev)
    h2 = symm_mem.rendezvous(t, group)
    u = symm_mem.empty(N, dtype=torch.int32, device=dev)
    h3 = symm_mem.rendezvous(u, group)
    log.window("h2", t)
    log.window("h3", u)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    remote = h2.get_buffer(nxt, (N,), torch.int32)
    for it in range(ROUNDS):
        where = f"run {run} round {it}"
        remote.fill_(run * 1000 + it * 10 + rank)
        out_of_step()
        log.barrier("h2", h2, it % 4, timeout_ms, where)
        log.at(f"{where}: checking rank {prv}'s data")
        assert bool((t == run * 1000 + it * 10 + prv).all()), f"{where}: stale data from rank {prv}"
        if it % 3 == 0:
            log.barrier("h3", h3, (it // 3) % 4, timeout_ms, where)
        out_of_step()
        log.barrier("h2", h2, (it + 1) % 4, timeout_ms, where)
    log.barrier("h1", h1, 1, timeout_ms, f"run {run} last")
    log.at(f"run {run}: synchronize")
    torch.cuda.synchronize()
    log.drop_windows()


@check(f"barrier stress: {RUNS} runs x {ROUNDS} rounds, windows made and dropped, timeouts on every other run")
def _():
    for run in range(RUNS):
        # From C, whatever holds the interpreter: a run this long is a hang
        # (the first also compiles the Triton kernel).
        faulthandler.dump_traceback_later(STACKS_AFTER_S * (3 if run == 0 else 1), exit=True)
        run_once(run, TIMEOUT_MS if run % 2 else 0)
        if run % 10 == 9:
            gc.collect()  # the dropped windows go now, at different moments on each rank
        if rank == 0 and run % 25 == 24:
            print(f"  {run + 1} runs done", flush=True)


faulthandler.cancel_dump_traceback_later()
log.at("done")
ok = summary()
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
