# SPDX-License-Identifier: MIT
"""The targets of mori's plug-ins, one way for every one of them.

mori_plugin: a handle library or transport (handles/*, transport/*), built
into //:libmori.so, plus `:api`, its public header alone.
mori_provider_library: an rdma provider that only some programs ask for,
as a shared library of its own."""

load("//bazel:copts.bzl", "MORI_COPTS", "platform_select")

def mori_plugin(name, srcs, header, deps = [], api = True):
    """`name`: the plug-in, linked whole into //:libmori.so (which exports
    the public API that nothing inside it calls), on core's plug-in kit.
    With `api`, `:api`: the public header alone, for code that links
    //:libmori.so instead. header: its public header, under include/
    ("include/mori/transport_p2p.h"); deps: what it needs besides core's
    API, its provider contract and its plug-in kit."""
    if api:
        native.cc_library(
            name = "api",
            hdrs = [header],
            includes = ["include"],
            visibility = ["//visibility:public"],
            deps = [
                "//core:api",
                "//core:plugin_api",
            ],
        )
    native.cc_library(
        name = name,
        alwayslink = True,
        srcs = srcs,
        hdrs = [header],
        copts = MORI_COPTS,
        includes = ["include"],
        visibility = ["//visibility:public"],
        deps = deps + [
            "//core:api",
            "//core:plugin_api",
            "//core:plugin_kit",
        ],
    )

def mori_provider_library(name, entry, deps, visibility):
    """lib<...>.so (`name`): an rdma provider for programs that use
    //:libmori.so (Python, the torch backend): they dlopen it and hand
    `entry`'s provider to libmori.so's mori_rdma_use_provider. The entry
    pulls the rest in from the static library in `deps`; the library
    carries its own copy of the platform layer, and only MORI_API names
    leave it."""
    native.cc_binary(
        name = name,
        linkopts = [
            "-Wl,-soname," + name,
            "-Wl,--undefined=" + entry,
        ] + platform_select(
            host = [],
            cuda = ["-Wl,--exclude-libs,libcudart_static.a"],
            rocm = [],
        ),
        linkshared = True,
        visibility = visibility,
        deps = deps,
    )
