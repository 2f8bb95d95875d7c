# SPDX-License-Identifier: MIT
"""The static libraries that make up the SDK: what //:libmori.so links and
whose public headers the install tree ships. One list, so the shared library
and the installed headers cannot disagree."""

MORI_SDK_LIBS = [
    "//collectives",
    "//core",
    "//handles/fabric",
    "//handles/legacy_ipc",
    "//handles/posix_fd",
    "//shmem",
    "//shmem:all_plugins",
    "//shmem:local_plugins",
    "//teams",
    "//tools/info",
    "//transport/p2p",
    "//transport/rdma",
    "//transport/sdma",
]

# The plug-ins' public headers alone, for code that links //:libmori.so
# (//:mori_shared) or names its plug-ins (the torch backend's lists).
MORI_PLUGIN_APIS = [
    "//handles/fabric:api",
    "//handles/legacy_ipc:api",
    "//handles/posix_fd:api",
    "//transport/p2p:api",
    "//transport/rdma:api",
]
