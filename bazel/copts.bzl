# SPDX-License-Identifier: MIT
"""Compiler options shared by every mori package."""

# C11 for the SDK, warnings as errors, only MORI_API symbols exported.
MORI_COPTS = [
    "-std=gnu11",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",
    # Messages are cut to fit their buffers on purpose.
    "-Wno-format-truncation",
    "-fvisibility=hidden",
    "-D_GNU_SOURCE",
]

# C++17 for GoogleTest tests and the torch backend.
MORI_CXXOPTS = [
    "-std=c++17",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",
    "-Wno-missing-field-initializers",
]

# System GoogleTest from libgtest-dev.
GTEST_LINKOPTS = ["-lgtest", "-lgtest_main", "-lpthread"]

def platform_select(host, cuda, rocm):
    """Picks a value by the platform configuration."""
    return select({
        "//bazel:cuda": cuda,
        "//bazel:rocm": rocm,
        "//conditions:default": host,
    })

# Targets that need a GPU platform (kernels): skipped under --config=host.
GPU_ONLY = select({
    "//bazel:cuda": [],
    "//bazel:rocm": [],
    "//conditions:default": ["@platforms//:incompatible"],
})

# Targets of the host platform alone (its shared-memory internals): skipped
# under --config=cuda and --config=rocm.
HOST_ONLY = select({
    "//bazel:cuda": ["@platforms//:incompatible"],
    "//bazel:rocm": ["@platforms//:incompatible"],
    "//conditions:default": [],
})
