# SPDX-License-Identifier: MIT
"""Runs the benchmark: every backend in its own processes, interleaved
round by round (A B C D A B C D ...), records appended to one JSON-lines
file; then prints a one-screen summary (per backend: median, min and max
over rounds; per round: the ratio to torch's default backend).

    python3 bench/run.py --rounds 3 --out results.jsonl
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import summary  # noqa: E402

BACKENDS = ["MORI", "default", "NVSHMEM", "NCCL-symm", "NCCL"]


def gpus():
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001
        return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--out", required=True)
    p.add_argument("--nproc", type=int, default=0, help="ranks (default: every GPU)")
    p.add_argument("--timeout", type=int, default=300, help="seconds per backend and round")
    p.add_argument("--log", default="", help="worker output goes here (default: next to --out)")
    a = p.parse_args()
    nproc = a.nproc or gpus()
    if nproc < 2:
        sys.exit("bench: needs at least 2 GPUs")
    log = a.log or os.path.splitext(a.out)[0] + ".log"
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1",
               PYTHONUNBUFFERED="1")
    for r in range(a.rounds):
        for b in a.backends.split(","):
            t0 = time.time()
            # torchrun of this interpreter (a venv's, where mori is installed).
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                   worker, b, str(r), a.out]
            with open(log, "a") as f:
                f.write(f"\n===== round {r} backend {b}: {' '.join(cmd)}\n")
                f.flush()
                try:
                    rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=a.timeout).returncode
                except subprocess.TimeoutExpired:
                    rc = "timeout"
            print(f"bench: round {r} {b}: exit {rc} in {time.time() - t0:.0f} s", flush=True)
    summary.print_summary(a.out)


if __name__ == "__main__":
    main()
