# SPDX-License-Identifier: MIT
"""One rule for device code: .cu sources compiled by nvcc (--config=cuda) or
clang-22 as HIP (--config=rocm). Under --config=host the target is incompatible and
skipped: CPU ranks use the device headers directly from C."""

load("//bazel:copts.bzl", "GPU_ONLY", "platform_select")

DEVICE_LINKOPTS = platform_select(
    host = [],
    cuda = ["-L/usr/local/cuda/lib64", "-lcudart_static", "-ldl", "-lrt", "-lpthread"],
    rocm = ["-lamdhip64"],
)

def mori_device_library(name, srcs, hdrs = [], includes = [], deps = [], copts = [], visibility = None, testonly = False, tags = []):
    """Compiles each source in `srcs` to an object and wraps them in a cc_library.

    hdrs: header files (labels) the sources include; includes: include
    directories relative to the workspace root."""
    objs = []
    flags = " ".join(["-I" + d for d in includes] + copts)
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").rsplit(".", 1)[0] + ".o"
        native.genrule(
            name = obj + "_compile",
            srcs = [src] + hdrs,
            outs = [obj],
            tools = ["//bazel:device_compile.sh"],
            cmd = "$(location //bazel:device_compile.sh) " +
                  platform_select(host = "host", cuda = "cuda", rocm = "rocm") +
                  " $@ $(location " + src + ") -I. -I$(GENDIR) " + flags,
            target_compatible_with = GPU_ONLY,
            testonly = testonly,
            tags = tags,
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        deps = deps,
        linkopts = DEVICE_LINKOPTS,
        target_compatible_with = GPU_ONLY,
        visibility = visibility,
        testonly = testonly,
        tags = tags,
        alwayslink = True,
    )

def mori_device_headers(hdrs = None, deps = []):
    """A package's device side, header-only (read by nvcc, hipcc and cc):
    `:device`, the library kernels build against, and `:headers`, every
    header under include/mori/ as files, for device compiles
    (mori_device_library). hdrs: :device's headers, when not all of them."""
    headers = native.glob(["include/mori/**/*.h"])
    native.cc_library(
        name = "device",
        hdrs = headers if hdrs == None else hdrs,
        includes = ["include"],
        visibility = ["//visibility:public"],
        deps = deps,
    )
    native.filegroup(
        name = "headers",
        srcs = headers,
        visibility = ["//visibility:public"],
    )
