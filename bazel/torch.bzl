# SPDX-License-Identifier: MIT
"""Finds an installed torch (headers + libraries) for the torch backend.

Looks at $MORI_TORCH_DIR, else asks python3 where torch lives. With no torch
the repository still exists, TORCH_FOUND is False, and //torch_backend:mori
builds a note saying it was skipped instead of failing."""

def _local_torch_impl(ctx):
    torch_dir = ctx.os.environ.get("MORI_TORCH_DIR", "")
    if not torch_dir:
        python = ctx.which("python3")
        if python:
            r = ctx.execute([python, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"], timeout = 120)
            if r.return_code == 0:
                torch_dir = r.stdout.strip()
    found = bool(torch_dir) and ctx.path(torch_dir + "/include/torch").exists
    version = ""
    if found:
        ctx.symlink(torch_dir + "/include", "include")
        ctx.symlink(torch_dir + "/lib", "lib")
        vf = ctx.path(torch_dir + "/version.py")
        if vf.exists:
            for line in ctx.read(vf).splitlines():
                if line.startswith("__version__"):
                    version = line.split("=")[1].strip().strip("'\"")
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
# torch's headers alone: what the wheel's libraries compile against. They
# name no torch library (no DT_NEEDED: a wheel may not depend on libraries
# it does not carry); torch's symbols resolve in the process that imported
# torch (mori/_torch_backend.py makes torch's libraries global first).
cc_library(
    name = "headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh"]),
    includes = ["include", "include/torch/csrc/api/include"],
    defines = ["_GLIBCXX_USE_CXX11_ABI=1"],
)
# Device-generic torch: its headers and libraries (no CUDA or HIP).
cc_library(
    name = "torch",
    srcs = ["lib/libc10.so", "lib/libtorch_cpu.so", "lib/libtorch.so"],
    deps = [":headers"],
)
# The header that holds TORCH_VERSION_MAJOR/MINOR/PATCH (it moved between
# torch versions): the wheel records the version from it.
filegroup(
    name = "version_headers",
    srcs = glob(["include/torch/headeronly/version.h", "include/torch/csrc/api/include/torch/version.h"]),
)
# torch's device library: only the MemPool shim needs it.
cc_library(
    name = "torch_cuda",
    srcs = ["lib/libc10_cuda.so", "lib/libtorch_cuda.so"],
    deps = [":torch"],
)
""")
    else:
        ctx.file("BUILD.bazel", "package(default_visibility = [\"//visibility:public\"])\n")
    ctx.file("defs.bzl", "TORCH_FOUND = %s\nTORCH_DIR = %r\nTORCH_VERSION = %r\n" % (found, torch_dir, version))

local_torch = repository_rule(
    implementation = _local_torch_impl,
    environ = ["MORI_TORCH_DIR", "PATH"],
    local = True,
)
