# SPDX-License-Identifier: MIT
"""Forwards rules_cc's names to Bazel's built-in rules.

Debian's bazel-rules-cc is too new for Bazel 4.2.3, and the real one would be
downloaded; Bazel's own tools only need these names to exist."""

def cc_library(**kwargs):
    native.cc_library(**kwargs)

def cc_binary(**kwargs):
    native.cc_binary(**kwargs)

def cc_test(**kwargs):
    native.cc_test(**kwargs)

def cc_import(**kwargs):
    native.cc_import(**kwargs)

def cc_toolchain(**kwargs):
    native.cc_toolchain(**kwargs)

def cc_toolchain_suite(**kwargs):
    native.cc_toolchain_suite(**kwargs)

def objc_library(**kwargs):
    native.objc_library(**kwargs)
