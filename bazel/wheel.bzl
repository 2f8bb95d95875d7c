# SPDX-License-Identifier: MIT
"""mori_wheel: a Python wheel of files Bazel built (bazel/wheel.py writes it).

The files are built for a GPU platform whatever --config the command line
chose: rocm under --config=rocm, cuda otherwise (a wheel of the host
platform would run CPU ranks only, which torch's CUDA device cannot use)."""

def _gpu_platform_impl(settings, attr):
    platform = settings["//bazel:platform"]
    return {"//bazel:platform": platform if platform == "rocm" else "cuda"}

_to_gpu = transition(
    implementation = _gpu_platform_impl,
    inputs = ["//bazel:platform"],
    outputs = ["//bazel:platform"],
)

def _mori_wheel_impl(ctx):
    # The GPU platform is the version's local label (as torch's +cu130), so
    # the cuda and rocm wheels of one version have different names.
    version = "%s+%s" % (ctx.attr.version, ctx.attr.platform)
    name = "%s-%s-%s-none-%s.whl" % (ctx.attr.distribution, version, ctx.attr.python_tag, ctx.attr.platform_tag)
    out = ctx.actions.declare_file(name)
    args = ctx.actions.args()
    args.add("--out", out)
    args.add("--name", ctx.attr.distribution)
    args.add("--version", version)
    args.add("--tag", "%s-none-%s" % (ctx.attr.python_tag, ctx.attr.platform_tag))
    args.add("--platform", ctx.attr.platform)
    args.add("--summary", ctx.attr.summary)
    headers = ctx.files.torch_version_headers
    args.add_all(headers, before_each = "--torch-header")
    inputs = list(headers)
    for target, dest in ctx.attr.files.items():
        for f in target[DefaultInfo].files.to_list():
            # "dir/" puts each file of the target in dir/ under its own name.
            path = dest + f.basename if dest.endswith("/") else dest
            args.add("--file", "%s=%s" % (f.path, path))
            inputs.append(f)
    ctx.actions.run(
        executable = ctx.executable._builder,
        arguments = [args],
        inputs = inputs,
        outputs = [out],
        mnemonic = "MoriWheel",
        progress_message = "Writing %s" % name,
    )
    return [DefaultInfo(files = depset([out]))]

mori_wheel = rule(
    implementation = _mori_wheel_impl,
    attrs = {
        "distribution": attr.string(mandatory = True),
        "version": attr.string(mandatory = True),
        "summary": attr.string(default = ""),
        # The libraries do not use Python's C API: any Python 3, one OS/CPU.
        "python_tag": attr.string(default = "py3"),
        "platform_tag": attr.string(default = "linux_x86_64"),
        # The GPU platform the files were built for (recorded in the wheel
        # and in its version: 0.1.0+cuda).
        "platform": attr.string(mandatory = True),
        # label -> path in the wheel ("dir/": each file under its basename).
        "files": attr.label_keyed_string_dict(allow_files = True, cfg = _to_gpu),
        # torch's version header(s): the version is read from them.
        "torch_version_headers": attr.label(allow_files = True, mandatory = True),
        "_builder": attr.label(
            default = "//bazel:wheel.py",
            allow_single_file = True,
            executable = True,
            cfg = "host",
        ),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)
