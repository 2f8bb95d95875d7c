# SPDX-License-Identifier: MIT
# mori's version, defined here once. Everything else derives from it: the C
# header mori/version.h (MORI_VERSION_* and mori_version()), the wheel's
# metadata and mori.__version__, the install tree's pkg-config and CMake files.
MORI_VERSION_MAJOR = 0
MORI_VERSION_MINOR = 2
MORI_VERSION_PATCH = 0
MORI_VERSION = "%d.%d.%d" % (MORI_VERSION_MAJOR, MORI_VERSION_MINOR, MORI_VERSION_PATCH)
