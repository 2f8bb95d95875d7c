#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a wheel (PEP 427) from files Bazel built, with no network and no
packaging tools: the files at their paths in the wheel, a generated
mori/_build_info.py (the torch version read from torch's headers, the GPU
platform), and the .dist-info files (METADATA with the licence,
requires-python and classifiers; LICENSE; WHEEL; RECORD with sha256).
The archive is reproducible: sorted entries, fixed timestamps.

    wheel.py --out W.whl --name mori --version V --tag py3-none-manylinux_2_28_x86_64
             --platform cuda --torch-header H [--torch-header H2 ...]
             --summary TEXT --license MIT --license-file LICENSE
             --requires-python '>=3.9' [--classifier C ...]
             --file SRC=DEST [--file ...]
"""
import argparse
import base64
import hashlib
import re
import sys
import zipfile

EPOCH = (1980, 1, 1, 0, 0, 0)


def torch_version(headers):
    """MAJOR.MINOR.PATCH from torch's version header (its location moved
    between torch versions: the first header that defines all three)."""
    for path in headers:
        with open(path) as f:
            text = f.read()
        parts = [re.search(rf"#define\s+TORCH_VERSION_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
        if all(parts):
            return ".".join(m.group(1) for m in parts)
    sys.exit(f"wheel.py: no TORCH_VERSION_MAJOR/MINOR/PATCH in {headers}")


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--platform", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--license", required=True)
    ap.add_argument("--license-file", required=True)
    ap.add_argument("--requires-python", required=True)
    ap.add_argument("--classifier", action="append", default=[])
    ap.add_argument("--torch-header", action="append", default=[])
    ap.add_argument("--file", action="append", default=[])
    a = ap.parse_args()

    torch = torch_version(a.torch_header)
    torch_minor = ".".join(torch.split(".")[:2])
    package = a.name
    entries = {}  # path in the wheel -> (bytes, mode)

    def add(dest, data, mode=0o644):
        if dest in entries:
            sys.exit(f"wheel.py: two files for {dest}")
        entries[dest] = (data, mode)

    for spec in a.file:
        src, dest = spec.split("=", 1)
        with open(src, "rb") as f:
            data = f.read()
        add(dest, data, 0o755 if dest.endswith(".so") else 0o644)
    if f"{package}/_version.py" not in entries:
        sys.exit(f"wheel.py: no {package}/_version.py among the files (mori.__version__ comes from it)")

    add(f"{package}/_build_info.py", (
        '"""Written when the wheel was built (bazel/wheel.py): what this build\n'
        'of mori was built for. mori._torch_backend checks it before loading torch."""\n'
        f"VERSION = {a.version!r}\n"
        f"TORCH_VERSION = {torch!r}  # from the torch headers the backend was compiled against\n"
        f"PLATFORM = {a.platform!r}\n").encode())

    dist_info = f"{a.name}-{a.version}.dist-info"
    with open(a.license_file, "rb") as f:
        add(f"{dist_info}/LICENSE", f.read())
    add(f"{dist_info}/METADATA", (
        "Metadata-Version: 2.1\n"
        f"Name: {a.name}\n"
        f"Version: {a.version}\n"
        f"Summary: {a.summary}\n"
        f"License: {a.license}\n"
        "License-File: LICENSE\n"
        + "".join(f"Classifier: {c}\n" for c in a.classifier) +
        f"Requires-Python: {a.requires_python}\n"
        "Provides-Extra: torch\n"
        f'Requires-Dist: torch=={torch_minor}.*; extra == "torch"\n').encode())
    add(f"{dist_info}/WHEEL", (
        "Wheel-Version: 1.0\n"
        "Generator: mori bazel/wheel.py\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {a.tag}\n").encode())
    add(f"{dist_info}/top_level.txt", f"{package}\n".encode())

    record = f"{dist_info}/RECORD"
    lines = [record_line(p, entries[p][0]) for p in sorted(entries)] + [f"{record},,"]
    add(record, ("\n".join(lines) + "\n").encode())

    # dist-info last, as installers expect; RECORD at the very end.
    order = sorted(p for p in entries if not p.startswith(dist_info)) + \
        sorted(p for p in entries if p.startswith(dist_info) and p != record) + [record]
    with zipfile.ZipFile(a.out, "w", zipfile.ZIP_DEFLATED) as z:
        for path in order:
            data, mode = entries[path]
            info = zipfile.ZipInfo(path, date_time=EPOCH)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)


if __name__ == "__main__":
    main()
