#!/bin/bash
# SPDX-License-Identifier: MIT
# tools/trace_merge.py and trace_render.py, by the system's python3.
# $1: tools/trace_merge.py (its folder holds trace_render.py), $2: the test.
set -euo pipefail
exec python3 "$2" "$1"
