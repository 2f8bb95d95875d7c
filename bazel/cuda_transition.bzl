# SPDX-License-Identifier: MIT
"""Builds a target for the cuda platform whatever --config the command line
chose: the torch backend is a CUDA extension (the torch found here is a CUDA
build), so `bazel build //torch_backend:mori` needs no --config."""

def _to_cuda_impl(settings, attr):
    # The suffix of --config=cuda (.bazelrc): cuda outputs never share a
    # directory with host or rocm ones.
    return {
        "//bazel:platform": "cuda",
        "//command_line_option:platform_suffix": "-cuda",
    }

_to_cuda = transition(
    implementation = _to_cuda_impl,
    inputs = [],
    outputs = [
        "//bazel:platform",
        "//command_line_option:platform_suffix",
    ],
)

def _cuda_files_impl(ctx):
    files = depset(transitive = [t[DefaultInfo].files for t in ctx.attr.srcs])
    return [DefaultInfo(files = files)]

cuda_files = rule(
    implementation = _cuda_files_impl,
    attrs = {
        "srcs": attr.label_list(cfg = _to_cuda),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)
