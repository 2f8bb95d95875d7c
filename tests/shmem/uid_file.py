# SPDX-License-Identifier: MIT
"""The Shmem Guide's unique-ID hand-over through a file, for the Python
shmem suites: PE 0 makes the ID and writes it (atomically, by rename); the
others wait for the file, 30 s at most."""
import os
import time


def share_unique_id(shmem, rank, uid_path):
    if rank == 0:
        uid = shmem.shmem_get_unique_id()
        with open(uid_path + ".part", "wb") as f:
            f.write(uid)
        os.rename(uid_path + ".part", uid_path)
        return uid
    deadline = time.time() + 30
    while not os.path.exists(uid_path) and time.time() < deadline:
        time.sleep(0.01)
    with open(uid_path, "rb") as f:
        return f.read()
