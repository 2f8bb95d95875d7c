#!/bin/bash
# SPDX-License-Identifier: MIT
# Installs a mori wheel into a new virtual environment, with no network and
# no dependencies.
#   tools/venv_wheel.sh <mori-*.whl> <venv dir> [--system-site-packages]
# --system-site-packages: the venv sees the machine's torch. Where python3
# has no ensurepip (Debian/Ubuntu without python3-venv), the venv is made
# without pip and the system's pip installs into it.
set -euo pipefail
whl=$1 venv=$2
shift 2
rm -rf "$venv"
flags=(install -q --no-deps --no-index --disable-pip-version-check "$whl")
if python3 -m venv "$@" "$venv" 2>/dev/null; then
  "$venv/bin/python3" -m pip "${flags[@]}"
else
  rm -rf "$venv"
  python3 -m venv --without-pip "$@" "$venv"
  python3 -m pip --python "$venv/bin/python3" "${flags[@]}"
fi
# When python3 is itself a venv's (torch installed there, not system-wide), a
# new venv's "system site packages" are the base interpreter's, without that
# torch: the parent venv's site-packages join through a .pth file.
if [ "${1:-}" = --system-site-packages ]; then
  parent=$(python3 -c 'import site, sys; print(site.getsitepackages()[0] if sys.prefix != sys.base_prefix else "")')
  if [ -n "$parent" ]; then
    mine=$("$venv/bin/python3" -c 'import site; print(site.getsitepackages()[0])')
    echo "$parent" > "$mine/_mori_parent_env.pth"
  fi
fi
