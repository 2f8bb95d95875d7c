# SPDX-License-Identifier: MIT
"""mori_wheel: a Python wheel of files Bazel built (bazel/wheel.py writes it).

`files` are built for a GPU platform whatever --config the command line
chose: rocm under --config=rocm, cuda otherwise (the torch backend needs
one). `host_files` are built for the host platform, so the same wheel runs
mori.shmem on a machine without a GPU (mori/_lib.py picks at import).
`package` is the Python package, each file at its path under
`package_root`."""

def _gpu_platform_impl(settings, attr):
    platform = settings["//bazel:platform"]
    return {"//bazel:platform": platform if platform == "rocm" else "cuda"}

_to_gpu = transition(
    implementation = _gpu_platform_impl,
    inputs = ["//bazel:platform"],
    outputs = ["//bazel:platform"],
)

def _host_platform_impl(settings, attr):
    return {"//bazel:platform": "host"}

_to_host = transition(
    implementation = _host_platform_impl,
    inputs = [],
    outputs = ["//bazel:platform"],
)

def _add_files(args, inputs, files):
    for target, dest in files.items():
        for f in target[DefaultInfo].files.to_list():
            # "dir/" puts each file of the target in dir/ under its own name.
            path = dest + f.basename if dest.endswith("/") else dest
            args.add("--file", "%s=%s" % (f.path, path))
            inputs.append(f)

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
    args.add("--license", ctx.attr.license)
    args.add("--license-file", ctx.file.license_file)
    args.add("--requires-python", ctx.attr.requires_python)
    args.add_all(ctx.attr.classifiers, before_each = "--classifier")
    headers = ctx.files.torch_version_headers
    args.add_all(headers, before_each = "--torch-header")
    inputs = list(headers) + [ctx.file.license_file]
    for f in ctx.files.package:
        if not f.short_path.startswith(ctx.attr.package_root):
            fail("%s is not under package_root %s" % (f.short_path, ctx.attr.package_root))
        args.add("--file", "%s=%s" % (f.path, f.short_path[len(ctx.attr.package_root):]))
        inputs.append(f)
    _add_files(args, inputs, ctx.attr.files)
    _add_files(args, inputs, ctx.attr.host_files)
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
        # The licence (an SPDX expression) and its text (dist-info/LICENSE).
        "license": attr.string(mandatory = True),
        "license_file": attr.label(allow_single_file = True, mandatory = True),
        "requires_python": attr.string(mandatory = True),
        "classifiers": attr.string_list(),
        # The libraries do not use Python's C API: any Python 3, one OS/CPU.
        "python_tag": attr.string(default = "py3"),
        # The manylinux tag: the oldest glibc every library of the wheel
        # runs with (auditwheel checks it; README states it).
        "platform_tag": attr.string(mandatory = True),
        # The GPU platform the files were built for (recorded in the wheel
        # and in its version: 0.2.0+cuda).
        "platform": attr.string(mandatory = True),
        # label -> path in the wheel ("dir/": each file under its basename).
        "files": attr.label_keyed_string_dict(allow_files = True, cfg = _to_gpu),
        # The same, built for the host platform.
        "host_files": attr.label_keyed_string_dict(allow_files = True, cfg = _to_host),
        # The Python package: each file at its path below package_root.
        "package": attr.label(allow_files = True, mandatory = True),
        "package_root": attr.string(mandatory = True),
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
