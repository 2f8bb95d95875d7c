#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/report_test.py with the system's python3 (Debian has no `python`
# for py_test's stub), the runfiles tree as the repository.
set -eu
exec python3 "$1" .
