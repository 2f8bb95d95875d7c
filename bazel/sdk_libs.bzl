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
    "//shmem:local_plugins",
    "//teams",
    "//tools/info",
    "//transport/p2p",
    "//transport/rdma",
    "//transport/sdma",
]
