# SPDX-License-Identifier: MIT
"""The Shmem Guide's unique-ID hand-over through a file, for the Python
shmem suites: PE 0 makes the ID and writes it (atomically, by rename) in a
file only this user may read (the ID is a secret); the others wait for the
file, 30 s at most."""
import os
import time


def share_unique_id(shmem, rank, uid_path):
    if rank == 0:
        uid = shmem.shmem_get_unique_id()
        part = uid_path + ".part"
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an older file of that name may have another mode
        with os.fdopen(fd, "wb") as f:
            f.write(uid)
        os.rename(uid_path + ".part", uid_path)
        return uid
    deadline = time.time() + 30
    while not os.path.exists(uid_path) and time.time() < deadline:
        time.sleep(0.01)
    with open(uid_path, "rb") as f:
        return f.read()
