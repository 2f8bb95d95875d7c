#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A traced run of the MORI torch backend on GPUs, for docs/tracing.md: each
rank allocates a MORI symmetric tensor, rendezvouses, runs barriers,
torch's one_shot_all_reduce and mori.ops.all_reduce, under torch.profiler
and MORI_TRACE=file:...; then the traces are merged onto one timeline
(tools/trace_merge.py) and, when matplotlib is installed, drawn as a PNG
(tools/trace_render.py).

    python3 tools/trace_demo.py --ranks 2 --out /tmp/mori-trace-demo

writes, in --out: mori-rank<R>.json (mori's events), torch-rank<R>.json
(torch.profiler), merged.json (open it in Perfetto) and timeline.png. The
ranks are started here (one process per rank, over a local TCP store);
`import mori` must work (an installed wheel, or PYTHONPATH). Ranks beyond
the GPUs share them over gloo, as the backend's tests do.
"""
import argparse
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(out_dir, iters, numel):
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if not torch.cuda.is_available():
        print(f"rank {rank}: no GPU: the MORI torch backend needs one", file=sys.stderr)
        return 2
    ngpu = torch.cuda.device_count()
    dev = torch.device("cuda", rank % ngpu)
    torch.cuda.set_device(dev)
    if world > ngpu:
        os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1"
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("nccl", device_id=dev)
    import mori.ops
    import torch.distributed._symmetric_memory as symm_mem

    symm_mem.set_backend("MORI")
    group = dist.group.WORLD.group_name
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        # The clock sync marker (tools/trace_merge.py): CLOCK_MONOTONIC, read
        # just before the marker begins.
        with torch.profiler.record_function(f"mori_clock_sync monotonic_ns={time.monotonic_ns()}"):
            pass
        with torch.profiler.record_function("demo: symmetric tensor + rendezvous"):
            t = symm_mem.empty(numel, dtype=torch.bfloat16, device=dev)
            hdl = symm_mem.rendezvous(t, group)
            out = torch.empty_like(t)
        for i in range(iters):
            with torch.profiler.record_function(f"demo: step {i}"):
                t.fill_(float(rank + 1))
                hdl.barrier(channel=0)
                reduced = torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group)
                mori.ops.all_reduce(t, out, "sum", group)
        torch.cuda.synchronize()
    want = float(world * (world + 1) // 2)
    ok = bool((reduced == want).all().item()) and bool((out == want).all().item())
    prof.export_chrome_trace(os.path.join(out_dir, f"torch-rank{rank}.json"))
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: {'results right' if ok else 'WRONG RESULTS'}; torch trace written")
    return 0 if ok else 1  # mori's file is written at the process's exit


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--out", default="mori-trace-demo")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--numel", type=int, default=1 << 16)
    p.add_argument("--timeout", type=int, default=300, help="seconds the ranks may take")
    p.add_argument("--nvtx", action="store_true", help="NVTX ranges too (MORI_TRACE=nvtx,file:...), for nsys")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    out = os.path.abspath(args.out)
    if args.worker:
        return worker(out, args.iters, args.numel)

    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        if name.endswith(".json") and name.startswith(("mori-rank", "torch-rank", "merged")):
            os.unlink(os.path.join(out, name))
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(args.ranks),
               MORI_TRACE=("nvtx," if args.nvtx else "") + f"file:{out}/mori-rank%r.json")
    procs = []
    for r in range(args.ranks):
        e = dict(env, RANK=str(r), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(args.ranks))
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--out", out, "--iters", str(args.iters),
               "--numel", str(args.numel)]
        procs.append(subprocess.Popen(cmd, env=e))
    failed = []
    deadline = time.monotonic() + args.timeout
    for r, proc in enumerate(procs):
        try:
            rc = proc.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "timed out"
        if rc != 0:
            failed.append(f"rank {r}: {rc}")
    if failed:
        print("trace_demo: " + "; ".join(failed), file=sys.stderr)
        return 1
    mori_files = [os.path.join(out, f"mori-rank{r}.json") for r in range(args.ranks)]
    torch_files = [os.path.join(out, f"torch-rank{r}.json") for r in range(args.ranks)]
    missing = [f for f in mori_files + torch_files if not os.path.exists(f)]
    if missing:
        print(f"trace_demo: missing {', '.join(missing)}", file=sys.stderr)
        return 1
    sys.path.insert(0, HERE)
    import trace_merge

    merged = os.path.join(out, "merged.json")
    rc = trace_merge.main(["-o", merged] + [a for f in torch_files for a in ("--torch", f)] + mori_files)
    if rc:
        return rc
    import trace_render

    png = os.path.join(out, "timeline.png")
    if trace_render.main([merged, png]) == 3:
        print("trace_demo: no PNG (matplotlib missing); open merged.json in Perfetto")
    print(f"trace_demo: open {merged} in Perfetto (ui.perfetto.dev) or chrome://tracing")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
