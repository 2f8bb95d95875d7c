# SPDX-License-Identifier: MIT
"""Runs the quick-starts as a user would: every command in an example's
header (a comment line `*   $ COMMAND` in examples/*.c) and every code block
of README.md and docs/*.md marked runnable, on the host platform, in a
clean environment (no MORI_* variable set), each in a fresh directory that
holds a copy of examples/ (as if at the repository's root).

A runnable block is marked by an HTML comment on the line before its fence:

    <!-- runnable -->            the block runs once
    <!-- runnable ranks=N -->    the block runs under `mori_launch -n N`

Languages: sh/bash/console/shell (a bash script, `set -e`), python (run by
python3), c (compiled against the install tree with pkg-config, linked to
libmori.so). A marker that precedes no fence, or a language with no runner,
fails. Any snippet that fails, fails the run.

    run_snippets.py --root DIR --bin NAME=PATH ... [--python-path DIR]
                    [--libmori PATH] [--prefix INSTALL_TREE]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^<!--\s*runnable(?P<opts>[^>]*)-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[A-Za-z0-9_+-]*)\s*$")
HEADER_COMMAND = re.compile(r"^\s*\*\s+\$ (?P<cmd>.+?)\s*$")
SHELLS = {"sh", "bash", "console", "shell"}
TIMEOUT_S = 120


class Snippet:
    def __init__(self, where, lang, code, ranks):
        self.where, self.lang, self.code, self.ranks = where, lang, code, ranks


def markdown_snippets(path, rel):
    """The runnable blocks of one Markdown file; raises on a broken marker."""
    lines = open(path, encoding="utf-8").read().split("\n")
    found = []
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        opts = dict(kv.split("=", 1) for kv in m.group("opts").split() if "=" in kv)
        unknown = set(opts) - {"ranks"}
        if unknown:
            raise SystemExit(f"{rel}:{i + 1}: unknown option(s) {sorted(unknown)} in the runnable marker")
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        f = FENCE.match(lines[j]) if j < len(lines) else None
        if not f:
            raise SystemExit(f"{rel}:{i + 1}: a runnable marker not followed by a ``` code block")
        end = j + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end >= len(lines):
            raise SystemExit(f"{rel}:{j + 1}: the code block never ends")
        lang = f.group("lang").lower()
        if lang not in SHELLS | {"python", "c"}:
            raise SystemExit(f"{rel}:{j + 1}: no runner for a '{lang}' block marked runnable")
        found.append(Snippet(f"{rel}:{j + 1}", lang, "\n".join(lines[j + 1:end]) + "\n", int(opts.get("ranks", 0))))
        i = end + 1
    return found


def example_commands(path, rel):
    """`$ COMMAND` lines of an example's leading comment."""
    text = open(path, encoding="utf-8").read()
    head = text.split("*/", 1)[0]
    return [Snippet(f"{rel}:{n + 1}", "sh", m.group("cmd") + "\n", 0)
            for n, line in enumerate(head.split("\n")) if (m := HEADER_COMMAND.match(line))]


def clean_env(args, bin_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MORI_")}
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    if args.python_path:
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in args.python_path)
    if args.libmori:
        # Where an installed wheel finds libmori.so by itself; the tree's
        # package does not hold it.
        env["MORI_LIB"] = os.path.abspath(args.libmori)
    if args.prefix:
        prefix = os.path.abspath(args.prefix)
        env["PKG_CONFIG_PATH"] = os.path.join(prefix, "lib", "pkgconfig")
    if args.preload:
        # Programs that load an ASan-built libmori.so without being built
        # with ASan (python3, a snippet compiled against the tree).
        env["LD_PRELOAD"] = args.preload
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    return env


def run_one(s, args, env, bin_dir):
    work = tempfile.mkdtemp(prefix="snippet_")
    examples = os.path.join(args.root, "examples")
    if os.path.isdir(examples):
        shutil.copytree(examples, os.path.join(work, "examples"), ignore=shutil.ignore_patterns("BUILD*"))
    launch = [os.path.join(bin_dir, "mori_launch"), "-n", str(s.ranks), "-t", str(TIMEOUT_S - 10)] if s.ranks else []
    if s.lang in SHELLS:
        path = os.path.join(work, "snippet.sh")
        open(path, "w").write("set -e\n" + s.code)
        cmd = launch + ["bash", path]
    elif s.lang == "python":
        path = os.path.join(work, "snippet.py")
        open(path, "w").write(s.code)
        cmd = launch + [sys.executable, path]
    else:  # c: built against the install tree as docs/install.md says
        if not args.prefix:
            return False, "a C block needs the install tree (--prefix)"
        path = os.path.join(work, "snippet.c")
        open(path, "w").write(s.code)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "mori"], env=env, capture_output=True, text=True)
        if flags.returncode:
            return False, "pkg-config --cflags --libs mori: " + flags.stderr
        build = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", "-o", os.path.join(work, "snippet"), path]
                               + flags.stdout.split(), env=env, cwd=work, capture_output=True, text=True)
        if build.returncode:
            return False, "compile:\n" + build.stdout + build.stderr
        cmd = launch + [os.path.join(work, "snippet")]
    try:
        p = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"did not finish in {TIMEOUT_S} s"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = (p.stdout + p.stderr).strip()
    if p.returncode:
        return False, f"exit status {p.returncode}:\n{out}"
    return True, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True, help="the repository (or runfiles) root")
    ap.add_argument("--bin", action="append", default=[], help="NAME=PATH: a program snippets call by NAME")
    ap.add_argument("--python-path", action="append", default=[])
    ap.add_argument("--libmori")
    ap.add_argument("--prefix", help="an install tree (C blocks)")
    ap.add_argument("--preload", help="LD_PRELOAD for every snippet (the ASan runtime of an ASan-built libmori.so)")
    ap.add_argument("--min", type=int, default=1, help="fewer runnable snippets than this fails")
    args = ap.parse_args()

    bin_dir = tempfile.mkdtemp(prefix="snippet_bin_")
    for b in args.bin:
        name, path = b.split("=", 1)
        os.symlink(os.path.abspath(path), os.path.join(bin_dir, name))
    root = args.root
    snippets = []
    for path in sorted(glob.glob(os.path.join(root, "examples", "*.c"))):
        snippets += example_commands(path, os.path.relpath(path, root))
    for path in [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        if os.path.exists(path):
            snippets += markdown_snippets(path, os.path.relpath(path, root))
    env = clean_env(args, bin_dir)
    failed = 0
    for s in snippets:
        ok, out = run_one(s, args, env, bin_dir)
        print(f"== {s.where} ({s.lang}{f', {s.ranks} ranks' if s.ranks else ''}): {'ok' if ok else 'FAILED'}")
        print("\n".join("   " + line for line in s.code.rstrip().split("\n")))
        if out:
            print("\n".join("   | " + line for line in out.split("\n")[-40:]))
        failed += not ok
    print(f"{len(snippets) - failed} snippets ran as written, {failed} failed")
    if len(snippets) < args.min:
        print(f"FAIL: {len(snippets)} runnable snippets found, expected at least {args.min}")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
