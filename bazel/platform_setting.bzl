# SPDX-License-Identifier: MIT
"""The platform a build targets (host, cuda, rocm): a Starlark build setting,
so that a configuration transition can switch it (--define cannot be)."""

def _platform_setting_impl(ctx):
    allowed = ["host", "cuda", "rocm"]
    if ctx.build_setting_value not in allowed:
        fail("//bazel:platform must be one of %s, not '%s'" % (allowed, ctx.build_setting_value))
    return []

platform_setting = rule(
    implementation = _platform_setting_impl,
    build_setting = config.string(flag = True),
)
