#!/bin/bash
# Runs a Python unittest file with the system's python3.
set -eu
exec python3 "$1" -v
