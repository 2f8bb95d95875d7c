# SPDX-License-Identifier: MIT
"""Finds Open MPI (mpirun and libmpi.so.40) for the shmem MPI-init tests.

mori loads libmpi at run time, so nothing builds against it; the repository
only says whether the tests can run here. With no Open MPI, MPI_FOUND is
False, the tests are incompatible (Bazel reports them SKIPPED) and
MPI_MISSING says why."""

def _local_openmpi_impl(ctx):
    mpirun = ctx.which("mpirun")
    lib = ""
    for d in ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]:
        if ctx.path(d + "/libmpi.so.40").exists:
            lib = d + "/libmpi.so.40"
            break
    missing = ""
    if not mpirun:
        missing = "no mpirun on PATH (Debian: apt-get install openmpi-bin libopenmpi3)"
    elif not lib:
        missing = "no Open MPI libmpi.so.40 (Debian: apt-get install libopenmpi3)"
    if missing:
        print("Open MPI not found: %s; the shmem MPI-init tests will be SKIPPED" % missing)
    ctx.file("BUILD.bazel", "")
    ctx.file("defs.bzl", "MPI_FOUND = %s\nMPI_MISSING = %r\n" % (not missing, missing))

local_openmpi = repository_rule(
    implementation = _local_openmpi_impl,
    environ = ["PATH"],
    local = True,
)
