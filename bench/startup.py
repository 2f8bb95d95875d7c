# SPDX-License-Identifier: MIT
"""Start-up cost of a job of many CPU ranks: `mori_launch -n N hello_window`
of two (or more) builds, run interleaved (a, b, a, b, ...) so that both see
the same machine, recording the job's wall time and its processes' user and
system CPU time (every rank is the launcher's child, so the launcher's
wait4 usage holds them all).

    python3 bench/startup.py run old=DIR new=DIR [--ranks 64 128 256]
        [--rounds 3] [--timeout 300] --out docs/perf/startup_<date>.jsonl
    python3 bench/startup.py syscalls old=DIR new=DIR [--ranks 64] --out FILE
    python3 bench/startup.py phases old=DIR new=DIR [--ranks 64] --out FILE
    python3 bench/startup.py table FILE [--syscalls FILE] [--phases FILE]
        [--doc docs/performance.md]

DIR is a build's bazel-bin (or any folder) holding tools/launch/mori_launch
and examples/hello_window, or both side by side. A run counts as correct
when the job exits 0 and every rank reports 0 wrong greetings. `table`
prints the section of docs/performance.md made from the records, or with
--doc puts it there in place of the section it made before.
"""
import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import doc_section

TITLE = "## Start-up at many CPU ranks (`bench/startup.py`)"


def binaries(folder):
    def find(*names):
        for n in names:
            p = os.path.join(folder, n)
            if os.access(p, os.X_OK):
                return p
        sys.exit(f"startup: no {names[-1]} in {folder}")
    return (find("tools/launch/mori_launch", "mori_launch"), find("examples/hello_window", "hello_window"))


def builds(specs):
    out = []
    for s in specs:
        label, sep, folder = s.partition("=")
        if not sep:
            sys.exit(f"startup: '{s}' is not LABEL=DIR")
        out.append((label, binaries(folder)))
    return out


def run_once(launch, program, ranks, timeout, prefix=()):
    """(wall_s, user_s, sys_s, correct) of one job."""
    argv = list(prefix) + [launch, "-n", str(ranks), "-t", str(timeout), program]
    with tempfile.TemporaryFile() as out:
        start = time.monotonic()
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.monotonic() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    good = len(re.findall(r"greetings received, 0 wrong", text))
    return wall, usage.ru_utime, usage.ru_stime, p.returncode == 0 and good == ranks, text


def cmd_run(a):
    bs = builds(a.builds)
    with open(a.out, "a") as f:
        for ranks in a.ranks:
            for rnd in range(1, a.rounds + 1):
                for label, (launch, program) in bs:
                    wall, user, system, ok, text = run_once(launch, program, ranks, a.timeout)
                    rec = {"what": "startup_hello_window", "version": label, "ranks": ranks, "round": rnd,
                           "wall_s": round(wall, 3), "user_s": round(user, 3), "sys_s": round(system, 3), "correct": ok}
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    print(json.dumps(rec), flush=True)
                    if not ok:
                        print(text[-2000:], file=sys.stderr)


def traced_jobs(a, bs, *strace_opts):
    """One job per build and size under `strace -f STRACE_OPTS`: yields
    (label, ranks, program, correct, the lines strace wrote) per job."""
    for ranks in a.ranks:
        for label, (launch, program) in bs:
            with tempfile.NamedTemporaryFile(suffix=".strace") as st:
                ok = run_once(launch, program, ranks, a.timeout, ("strace", "-f", *strace_opts, "-o", st.name))[3]
                with open(st.name) as trace:
                    lines = trace.readlines()
            yield label, ranks, program, ok, lines


def cmd_syscalls(a):
    """One job per build and size under `strace -f -c`: calls per syscall."""
    bs = builds(a.builds)
    with open(a.out, "a") as f:
        for label, ranks, _, ok, trace in traced_jobs(a, bs, "-c"):
            counts = {}
            for line in trace:
                cells = line.split()
                if len(cells) >= 5 and cells[0][0].isdigit() and cells[-1] != "total":
                    counts[cells[-1]] = int(cells[3])
            rec = {"what": "startup_syscalls", "version": label, "ranks": ranks, "correct": ok,
                   "total": sum(counts.values()), "calls": dict(sorted(counts.items(), key=lambda kv: -kv[1]))}
            f.write(json.dumps(rec) + "\n")
            print(json.dumps(rec)[:300], flush=True)


PHASES = [("exec", r'^execve\('), ("bootstrap", r'^connect\('), ("node_channel", r'^openat\(.*"/dev/shm/mori-node'),
          ("first_import", r'^openat\(.*"/dev/shm/mori\.'), ("last_import", r'^openat\(.*"/dev/shm/mori\.'),
          ("exit", r'^exit_group\(')]


def cmd_phases(a):
    """One job per build and size under `strace -f -ttt` (a few calls only):
    per rank, when it was exec'd, first dialled the bootstrap, opened the
    node channel, opened its first and last shared-memory object (its own
    heap chunk, then the peers' chunks and signal arenas) and exited, in
    seconds from the launcher's start; the median and the last rank."""
    bs = builds(a.builds)
    with open(a.out, "a") as f:
        for label, ranks, program, ok, trace in traced_jobs(a, bs, "-ttt", "-e",
                                                            "trace=execve,connect,openat,exit_group"):
            lines = [cells for cells in (l.split(None, 2) for l in trace) if len(cells) == 3]
            t0 = float(lines[0][1])
            per = collections.defaultdict(list)
            for pid, ts, call in lines:
                per[pid].append((float(ts) - t0, call))
            marks = collections.defaultdict(list)
            for pid, calls in per.items():
                if not any(c.startswith(f'execve("{program}"') for _, c in calls):  # a rank, not the launcher
                    continue
                for name, pattern in PHASES:
                    hits = [t for t, c in calls if re.search(pattern, c)]
                    if hits:
                        marks[name].append(hits[-1] if name in ("last_import", "exit") else hits[0])
            rec = {"what": "startup_phases", "version": label, "ranks": ranks, "correct": ok,
                   "ranks_seen": len(marks["exec"])}
            for name, _ in PHASES:
                if marks[name]:
                    rec[name + "_median_s"] = round(statistics.median(marks[name]), 3)
                    rec[name + "_last_s"] = round(max(marks[name]), 3)
            f.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def section(records, path, syscalls=None, syscalls_path="", phases=None, phases_path=""):
    runs = collections.defaultdict(list)
    order = []
    for r in records:
        if r.get("what") != "startup_hello_window":
            continue
        if r["version"] not in order:
            order.append(r["version"])
        runs[(r["ranks"], r["version"])].append(r)
    out = [TITLE, "",
           f"`mori_launch -n N hello_window` of each build, run interleaved in the same rounds on one machine "
           f"(records: `{path}`). Wall time of the whole job and the CPU time of all its processes, in seconds: "
           "median and range over the rounds; `correct` counts the rounds in which every rank got every greeting.", "",
           "| ranks | build | rounds | correct | wall (median) | wall (range) | user (median) | sys (median) | user+sys (range) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for ranks in sorted({k[0] for k in runs}):
        for v in order:
            rs = runs.get((ranks, v))
            if not rs:
                continue
            wall = [r["wall_s"] for r in rs]
            cpu = [r["user_s"] + r["sys_s"] for r in rs]
            out.append(f"| {ranks} | {v} | {len(rs)} | {sum(1 for r in rs if r.get('correct'))} | "
                       f"{statistics.median(wall):.2f} | {min(wall):.2f}–{max(wall):.2f} | "
                       f"{statistics.median(r['user_s'] for r in rs):.2f} | {statistics.median(r['sys_s'] for r in rs):.2f} | "
                       f"{min(cpu):.2f}–{max(cpu):.2f} |")
    if syscalls:
        recs = [r for r in syscalls if r.get("what") == "startup_syscalls"]
        names = []
        for r in recs:
            for n in list(r["calls"])[:8]:
                if n not in names:
                    names.append(n)
        out += ["", f"System calls of the whole job under `strace -f -c` (records: `{syscalls_path}`):", "",
                "| ranks | build | total | " + " | ".join(names) + " |",
                "|---|---|---|" + "---|" * len(names)]
        for r in sorted(recs, key=lambda r: (r["ranks"], order.index(r["version"]) if r["version"] in order else 99)):
            out.append(f"| {r['ranks']} | {r['version']} | {r['total']} | " +
                       " | ".join(str(r["calls"].get(n, 0)) for n in names) + " |")
    if phases:
        recs = [r for r in phases if r.get("what") == "startup_phases"]
        out += ["", "Where a job's time goes, from one job per build under `strace -f -ttt` (which slows it: compare "
                "builds, not absolute times; records: `" + phases_path + "`). Seconds from the launcher's start "
                "to each rank's exec, first bootstrap dial, node channel, first and last shared-memory object "
                "opened (its own heap chunk, then each peer's chunk and signal arena) and exit: median rank / last rank.", "",
                "| ranks | build | " + " | ".join(n.replace("_", " ") for n, _ in PHASES) + " |",
                "|---|---|" + "---|" * len(PHASES)]
        for r in sorted(recs, key=lambda r: (r["ranks"], order.index(r["version"]) if r["version"] in order else 99)):
            cells = [f"{r[n + '_median_s']:.2f} / {r[n + '_last_s']:.2f}" if n + "_median_s" in r else "–" for n, _ in PHASES]
            out.append(f"| {r['ranks']} | {r['version']} | " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)


def cmd_table(a):
    text = section(load(a.records), a.records, load(a.syscalls) if a.syscalls else None, a.syscalls,
                   load(a.phases) if a.phases else None, a.phases)
    if not a.doc:
        print(text)
        return
    doc_section.put_section(a.doc, TITLE, text)
    print(f"startup: wrote the section to {a.doc}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("run", "syscalls", "phases"):
        s = sub.add_parser(name)
        s.add_argument("builds", nargs="+", help="LABEL=DIR, in the order they run in each round")
        s.add_argument("--ranks", type=int, nargs="+", default=[64, 128, 256])
        s.add_argument("--rounds", type=int, default=3)
        s.add_argument("--timeout", type=int, default=300, help="mori_launch -t")
        s.add_argument("--out", required=True)
    t = sub.add_parser("table")
    t.add_argument("records")
    t.add_argument("--syscalls", default="")
    t.add_argument("--phases", default="")
    t.add_argument("--doc", default="")
    a = p.parse_args()
    {"run": cmd_run, "syscalls": cmd_syscalls, "phases": cmd_phases, "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    main()
