#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fails when code reads a MORI_* environment variable that mori's table of
variables (core/base/env_table.c) lacks, or when the table lists one that
nothing reads or sets any more.

The whole tree is scanned (every C, C++, CUDA, Python, shell and Bazel file
outside docs/ and build outputs), not fixed folders, so files that move keep
being checked. A name counts as a variable where the code reads or sets it:
 - C, C++, CUDA: any string literal that is exactly "MORI_X" (getenv,
   secure_getenv, setenv and every helper that takes a variable's name);
 - Python: a literal "MORI_X" (os.environ, os.getenv, helpers), or MORI_X=
   in a call (dict(os.environ, MORI_X="..."));
 - shell and Bazel: $MORI_X, ${MORI_X...}, MORI_X=..., environ.get("MORI_X").
Names that are C or Python constants (enum members, #defines, error-code
names, module constants) are not variables, nor is a name on a line marked
"env-check: ignore" (tests of unknown names; say why on the line).

Usage: tools/check_env_vars.py [ROOT]   (ROOT: the repository; default: this script's)
"""
import os
import re
import sys

C_EXT = (".c", ".h", ".cc", ".cpp", ".cu", ".cuh", ".hpp")
PY_EXT = (".py",)
SH_EXT = (".sh", ".bzl", ".bash")
SKIP_DIRS = {".git", ".deps", "docs", "node_modules", "__pycache__"}
TABLE = os.path.join("core", "base", "env_table.c")

NAME = r"MORI_[A-Z0-9_]*[A-Z0-9]"
C_LITERAL = re.compile(r'"(' + NAME + r')"')
PY_LITERAL = re.compile(r"""["'](""" + NAME + r""")["']""")
PY_KEYWORD = re.compile(r"[(,]\s*(" + NAME + r")\s*=\s*[^=]")
SH_USE = re.compile(r"\$\{?(" + NAME + r")\b|(?:^|[\s;(])(?:export\s+)?(" + NAME + r")=|environ\.get\(\s*[\"'](" + NAME + r")")
TABLE_ENTRY = re.compile(r'^\s*\{"(' + NAME + r')"', re.M)
C_CONSTANT = re.compile(r"^\s*#\s*define\s+(" + NAME + r")\b|^\s*(" + NAME + r")\s*(?:=\s*[^,;=]+)?,?\s*(?:/[/*].*)?$", re.M)
C_ENUM = re.compile(r"\benum\s*\w*\s*\{([^}]*)\}")
ERRNO_ENTRY = re.compile(r"X\(\s*([A-Z0-9_]+)\s*,")
PY_CONSTANT = re.compile(r"^(" + NAME + r")\s*=[^=]", re.M)


def files(root):
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("bazel-")]
        for n in names:
            if n.endswith(C_EXT + PY_EXT + SH_EXT) or n in ("BUILD", "BUILD.bazel", "WORKSPACE"):
                yield os.path.join(top, n)


def scan(root):
    """(names read or set -> first place, names that are constants)"""
    used, constants = {}, set()
    for path in files(root):
        rel = os.path.relpath(path, root)
        if rel == TABLE or os.path.basename(rel).startswith("check_env_vars"):
            continue  # the table itself; this check and its test (made-up names)
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        found = []
        text = "\n".join(line for line in text.split("\n") if "env-check: ignore" not in line)
        if path.endswith(C_EXT):
            found = C_LITERAL.findall(text)
            for a, b in C_CONSTANT.findall(text):
                constants.add(a or b)
            for body in C_ENUM.findall(text):
                body = re.sub(r"/\*.*?\*/|//[^\n]*", "", body, flags=re.S)  # names in comments are not members
                constants.update(re.findall(r"\b(" + NAME + r")\b", body))
            if "MORI_ERRNO_MAP" in text:
                constants.update("MORI_" + e for e in ERRNO_ENTRY.findall(text))
                constants.add("MORI_E_UNKNOWN")
        elif path.endswith(PY_EXT):
            found = PY_LITERAL.findall(text) + PY_KEYWORD.findall(text)
            constants.update(PY_CONSTANT.findall(text))
        else:
            found = [a or b or c for a, b, c in SH_USE.findall(text)]
        for name in found:
            used.setdefault(name, rel)
    return used, constants


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    try:
        table = set(TABLE_ENTRY.findall(open(os.path.join(root, TABLE), encoding="utf-8").read()))
    except OSError as e:
        print(f"check_env_vars: cannot read the table: {e}", file=sys.stderr)
        return 2
    used, constants = scan(root)
    variables = {n: where for n, where in used.items() if n not in constants}
    missing = sorted(n for n in variables if n not in table)
    unused = sorted(n for n in table if n not in used)
    for n in missing:
        print(f"{variables[n]}: reads {n}, which {TABLE} does not list (add it: name, type, default, meaning, reader)")
    for n in unused:
        print(f"{TABLE}: lists {n}, which nothing reads or sets any more (remove it)")
    if missing or unused:
        print("then regenerate the page: bazel run //core/base:env_doc > docs/environment.md", file=sys.stderr)
        return 1
    print(f"check_env_vars: {len(variables)} variables in the code, all {len(table)} in the table")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
