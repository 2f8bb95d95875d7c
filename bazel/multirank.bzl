# SPDX-License-Identifier: MIT
"""mori_multirank_test: one cc_test per rank count (name_2ranks, …) plus a
test_suite(name) that holds them all."""

load("//bazel:copts.bzl", "GTEST_LINKOPTS", "MORI_CXXOPTS")

def _mori_gtest(name, srcs, deps, size, linkopts = [], **kwargs):
    # Static: symbols are hidden (-fvisibility=hidden) outside MORI_API.
    native.cc_test(
        name = name,
        srcs = srcs,
        copts = MORI_CXXOPTS,
        linkopts = GTEST_LINKOPTS + linkopts,
        deps = deps + ["//tests/support:harness"],
        linkstatic = True,
        size = size,
        **kwargs
    )

def mori_multirank_test(name, srcs, deps = [], ranks = [2, 4, 8], size = "medium", tags = [], env = {}, **kwargs):
    tests = []
    for n in ranks:
        test = "%s_%dranks" % (name, n)
        e = dict(env)
        e["MORI_TEST_RANKS"] = str(n)
        _mori_gtest(name = test, srcs = srcs, deps = deps, size = size, env = e, tags = tags, **kwargs)
        tests.append(":" + test)
    native.test_suite(name = name, tests = tests, tags = tags)

def mori_test(name, srcs, deps = [], size = "small", **kwargs):
    """A plain GoogleTest test with the project's flags."""
    _mori_gtest(name = name, srcs = srcs, deps = deps, size = size, **kwargs)
