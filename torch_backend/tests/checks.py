"""What the backend's GPU test files share: the job's set-up and `check`,
which runs one check on every rank and prints "PASS name" or "FAIL name:
why" on rank 0 (any rank's failure counts)."""
import os
import traceback

import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
results = []


class Skip(Exception):
    """Raised by a check that cannot run here (e.g. it needs two ranks):
    printed as SKIP with the reason, counted neither passed nor failed."""


def refused(fn, words):
    """fn() must raise a RuntimeError whose text holds `words`."""
    try:
        fn()
    except RuntimeError as e:
        assert words in str(e), f"the error does not say '{words}': {e}"
        return
    raise AssertionError(f"no error (expected one saying '{words}')")


def needs_ranks(n):
    if world < n:
        raise Skip(f"needs {n} ranks, the job has {world}")


def check(name):
    def wrap(fn):
        try:
            fn()
            ok, why = True, ""
        except Skip as e:
            if rank == 0:
                print(f"SKIP {name}: {e}", flush=True)
            dist.barrier()
            return fn
        except Exception as e:  # noqa: BLE001
            ok, why = False, f"{type(e).__name__}: {str(e)[:300]}"
            traceback.print_exc()
        try:
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            ok, why = False, why or f"synchronize: {e}"
        dist.barrier()
        outcomes = [None] * world
        dist.all_gather_object(outcomes, (ok, why))
        bad = [(r, w) for r, (o, w) in enumerate(outcomes) if not o]
        if rank == 0:
            print(f"PASS {name}" if not bad else f"FAIL {name}: " + "; ".join(f"rank {r}: {w}" for r, w in bad), flush=True)
        results.append(not bad)
        return fn

    return wrap


def summary():
    if rank == 0:
        print(f"SUMMARY {sum(results)} passed, {len(results) - sum(results)} failed", flush=True)
    return all(results)
